"""Synthetic Service Fabric clusters: a state document (spec section 1) from a few knobs.

In the spirit of Jumanji's generator modules: a frozen :class:`ClusterSpec` describes the
cluster's shape and :func:`generate` turns a seed and a spec into a plain, JSON-serialisable state
document (``SchemaVersion``, ``NodeTypes``, ``Nodes``, ``Services``, ``Partitions``), the same for
the same seed: a :class:`plbjax.generators.Generator`.  ``plbjax-generate`` (`plbjax.generate_cli`)
is the command-line front end. The spec and the cluster's drawn shape are `spec`, the
initial placement `placement`; this module writes the document.

Layout
    * nodes ``Node000``..; node types ``NodeType0``.. assigned in contiguous blocks;
    * top-level fault domains ``fd:/dc{k}`` (``fd:/dc{k}/r{j}`` when racks_per_fault_domain > 1)
      and upgrade domains ``UD{k}``, both round-robin over the nodes, so every domain has nodes
      and consecutive nodes sit in different domains;
    * every node carries ``PlacementProperties: {"NodeColor": ...}``;
    * with custom metrics and ``capacity_headroom > 0`` every node gets ``Capacities``
      ``ceil(headroom * max(total load / nodes, largest replica load))`` per metric (the same
      on all nodes; the second term only matters for clusters with fewer replicas than nodes).

Services ``fabric:/App/Svc{i}``; a ``stateless_fraction`` of them stateless with
``InstanceCount = replicas_per_partition``, the rest stateful with
``TargetReplicaSetSize = replicas_per_partition``.  With ``metrics > 0`` every service reports
all custom metrics ``Metric0``.. (Weight cycling High/Medium/Low by metric index; stateful:
``PrimaryDefaultLoad > SecondaryDefaultLoad``; stateless: ``DefaultLoad``) and every replica
carries ``Loads`` drawn log-normally around its service's default load (primaries heavier).
Loads and capacities are integers (as SF reports them) when ``load_scale >= 5``, else floats
rounded to one decimal.  With ``metrics == 0`` services have no ``Metrics`` key (SF's default
metrics apply), replicas no ``Loads`` and nodes no ``Capacities``.

Identifiers: ``PartitionId`` is a GUID-shaped string that encodes the indices
(``"{service:08x}-0000-0000-0000-{partition:012x}"``), ``ReplicaId`` is ``"R{s}-{p}-{k}"``;
the primary is listed first.

Initial placement (every replica placed) respects the hard rules:
    * no two replicas of a partition on one node;
    * capacities (no ``NodeBufferPercentage`` is emitted, so buffered = raw capacity);
    * placement constraints (``NodeType == NodeTypeK`` on a ``placement_constraint_fraction``
      of the services, only when ``node_types > 1``);
    * fault domains: the replicas of a partition are spread evenly over the top-level fault
      domains among its eligible nodes (per-domain counts differ by at most one, so they are
      on distinct domains whenever replicas <= eligible domains);
    * upgrade domains: the same even spread when it can be achieved (relaxed for a partition
      only if no placement satisfying it is found).
``skew`` concentrates replicas on a few nodes (Zipf-like node weights on a random node order,
exponent ``3 * skew``) within those rules.  Placement is a weighted greedy, one partition at a
time (constrained services first, then the partitions heaviest relative to capacity; primary
first): candidate nodes for a block of partitions are drawn in one vectorised call from the
weights of the nodes that still have room for a typical replica, a node-wide vectorised
weighted pick is the fallback when no candidate fits, and a partition whose greedy dead-ends is
retried (fresh noise, then worst-fit).  If one still fails, the whole placement is redone
worst-fit (ignoring skew; tight capacities), then both passes again allowing a partition to
give up the upgrade-domain spread, before :class:`~plbjax.errors.BadInput` (a ``ValueError``)
is raised.  Very tight capacities (headroom near 1 with several metrics and large
partitions) can still end there: the placement is greedy, not an exact packing.  The Python work per replica is
O(1) amortised: 100,000 replicas on 1,000 nodes take one to three seconds.
"""

from __future__ import annotations

import numpy as np

from plbjax.sf._generator.placement import initial_placement
from plbjax.sf._generator.spec import (
    ClusterSpec,
    DrawnLoads,
    DrawnServices,
    NodeLayout,
    draw_loads,
    draw_services,
    node_capacity,
    node_layout,
    validate,
)
from plbjax.sf._state import Role

_WEIGHTS = ("High", "Medium", "Low")
_COLORS = ("Blue", "Green", "Red")


def generate(seed: int, spec: ClusterSpec) -> dict:
    """A cluster state document (plain dict, JSON-serialisable) for ``spec``, the same for the same
    ``seed``: a :class:`plbjax.generators.Generator`.

    Raises :class:`plbjax.errors.BadInput` (a ``ValueError``) for an invalid seed or spec or when
    the hard rules leave no room for some partition.
    """
    validate(seed, spec)
    rng = np.random.default_rng(int(seed))
    nodes = node_layout(spec)
    services = draw_services(rng, spec)
    loads = draw_loads(rng, spec, services)
    capacity = node_capacity(spec, loads)
    assign = initial_placement(rng, spec, nodes, services, loads, capacity)
    return _document(spec, nodes, services, loads, capacity, assign)


# --------------------------------------------------------------------------------------------
# the document


def _document(
    spec: ClusterSpec,
    nodes: NodeLayout,
    services: DrawnServices,
    loads: DrawnLoads,
    capacity: np.ndarray | None,
    assign: np.ndarray,
) -> dict:
    metric_names = [f"Metric{j}" for j in range(int(spec.metrics))]
    return {
        "SchemaVersion": 1,
        "Settings": {},
        "NodeTypes": [{"Name": f"NodeType{t}"} for t in range(int(spec.node_types))],
        "Nodes": _node_docs(spec, nodes, loads, capacity, metric_names),
        "Services": _service_docs(spec, services, loads, metric_names),
        "Partitions": _partition_docs(spec, nodes, services, loads, assign, metric_names),
    }


def _node_docs(
    spec: ClusterSpec, nodes: NodeLayout, loads: DrawnLoads, capacity: np.ndarray | None, metric_names: list[str]
) -> list[dict]:
    racks = int(spec.racks_per_fault_domain) > 1
    cap_dict = None if capacity is None else {m: loads.number(v) for m, v in zip(metric_names, capacity)}
    docs = []
    for i, name in enumerate(nodes.names):
        fd = f"fd:/dc{nodes.fd[i]}" + (f"/r{nodes.rack[i]}" if racks else "")
        nd: dict = {
            "NodeName": name,
            "NodeType": f"NodeType{nodes.type[i]}",
            "FaultDomain": fd,
            "UpgradeDomain": f"UD{nodes.ud[i]}",
        }
        if cap_dict is not None:
            nd["Capacities"] = dict(cap_dict)
        nd["PlacementProperties"] = {"NodeColor": _COLORS[i % len(_COLORS)]}
        docs.append(nd)
    return docs


def _service_docs(spec: ClusterSpec, services: DrawnServices, loads: DrawnLoads, metric_names: list[str]) -> list[dict]:
    R = int(spec.replicas_per_partition)
    docs = []
    for s in range(int(spec.services)):
        sv: dict = {"ServiceName": f"fabric:/App/Svc{s}", "ServiceTypeName": f"Svc{s}Type"}
        if services.stateless[s]:
            sv["ServiceKind"] = "Stateless"
            sv["InstanceCount"] = R
        else:
            sv["ServiceKind"] = "Stateful"
            sv["TargetReplicaSetSize"] = R
        if services.constraint[s] >= 0:
            sv["PlacementConstraints"] = f"NodeType == NodeType{services.constraint[s]}"
        if metric_names:
            sv["Metrics"] = [_metric_doc(services.stateless[s], loads, s, j, m) for j, m in enumerate(metric_names)]
        docs.append(sv)
    return docs


def _metric_doc(stateless: bool, loads: DrawnLoads, s: int, j: int, name: str) -> dict:
    """Service s's metric j: Weight cycling High/Medium/Low by metric index, and its default loads."""
    md: dict = {"Name": name, "Weight": _WEIGHTS[j % 3]}
    if stateless:
        assert loads.instance is not None  # metrics come with default loads
        md["DefaultLoad"] = loads.number(loads.instance[s, j])
    else:
        assert loads.primary is not None and loads.secondary is not None  # as above
        md["PrimaryDefaultLoad"] = loads.number(loads.primary[s, j])
        md["SecondaryDefaultLoad"] = loads.number(loads.secondary[s, j])
    return md


def _partition_docs(
    spec: ClusterSpec,
    nodes: NodeLayout,
    services: DrawnServices,
    loads: DrawnLoads,
    assign: np.ndarray,
    metric_names: list[str],
) -> list[dict]:
    PPS, R = int(spec.partitions_per_service), int(spec.replicas_per_partition)
    assign_l = assign.tolist()
    loads_l = None
    if loads.replicas is not None:
        loads_l = (
            loads.replicas.astype(np.int64) if loads.as_int else np.round(loads.replicas / loads.unit, 1)
        ).tolist()
    parts = []
    for p in range(int(spec.services) * PPS):
        s, k = divmod(p, PPS)
        role0, role = (Role.INSTANCE, Role.INSTANCE) if services.stateless[s] else (Role.PRIMARY, Role.SECONDARY)
        reps = []
        for q in range(R):
            rp = {
                "ReplicaId": f"R{s}-{k}-{q}",
                "Role": (role0 if q == 0 else role).value,  # the word: YAML writes plain strings
                "NodeName": nodes.names[assign_l[p][q]],
            }
            if loads_l is not None:
                rp["Loads"] = dict(zip(metric_names, loads_l[p][q]))
            reps.append(rp)
        parts.append(
            {"ServiceName": f"fabric:/App/Svc{s}", "PartitionId": f"{s:08x}-0000-0000-0000-{k:012x}", "Replicas": reps}
        )
    return parts
