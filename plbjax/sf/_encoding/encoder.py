"""Cluster state -> dense, padded arrays (`Problem`) plus the host-side index back to names.

Everything the search reads lives in one immutable equinox Module shared by all chains. The
pipeline: the stages that do not depend on the replicas (`_cluster_stages`), the replica rows
(`_replica_rows`), then the replica stages here (affinity and domain policies, upgrade homes,
History, replicas in transition), the constraint penalties and the `Index`. Entities are sorted by
name, so the encoding does not depend on the order of input lists.
"""

from __future__ import annotations

import dataclasses
from itertools import chain
from operator import attrgetter

import jax
import numpy as np

from plbjax.sf._encoding.arrays import bucket, on_device, pad
from plbjax.sf._encoding.problem import (
    HISTORY_WIDTH,
    PRIORITY_SETTINGS,
    PRIORITY_WEIGHT,
    SWAP_COST,
    THRESHOLD_PRIORITY,
    UNPLACED_WEIGHT,
    Features,
    Index,
    Problem,
)
from plbjax.sf._encoding.rows import Rows, replica_rows
from plbjax.sf._encoding.stages import (
    Entities,
    Stages,
    encoded_nodes,
    energy_weights,
    entities,
    nodes_in_domain,
    placement_classes,
)
from plbjax.sf._state import ClusterState, gc_paused


def encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None = None) -> tuple[Problem, Index]:
    """Encode `state`, with the replicas it lacks added (unplaced) and those on nodes that are neither
    Up nor kept unplaced. What a phase may move is its scope (`_scope.scope`). A child of a service with one
    instance per node may go where its parent may, or only to the nodes `parent_hosts` names for it.

    Capacities are buffered (less NodeBufferPercentage) in normal operation; during an upgrade SF
    may fill nodes up to their full capacity.
    """
    with gc_paused():  # a million replicas make millions of objects, none of them garbage
        return _encode(state, parent_hosts)


def _encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None) -> tuple[Problem, Index]:
    """The pipeline: each stage reads the state and earlier stages, and gives its share of `Problem`."""
    cluster = entities(state)
    nodes = encoded_nodes(state, cluster)
    classes = placement_classes(state, cluster, nodes, parent_hosts)
    return assemble(state, Stages(cluster, nodes, classes, energy_weights(state, cluster, classes)))


# The fields of the stages that do not depend on the replicas (`Nodes`, `Classes`, `Weights`).
STAGE_FIELDS = (
    *("node_up", "node_kept", "capacity", "threshold_load", "fd_leaf_up", "ud_up", "fd_tree", "ud_tree"),
    *("node_move_factor", "service_class", "class_nodes", "class_node_count", "class_allowed", "fd_children"),
    *("ud_children", "fd_usable", "ud_usable", "service_metrics", "local_weight", "global_weight"),
    *("metric_nodes", "metric_node_count", "metric_defrag"),
)


def assemble(
    state: ClusterState, stages: Stages, rows: Rows | None = None, held: Problem | None = None
) -> tuple[Problem, Index]:
    """The replica stages (rows, loads, policies, upgrade homes, history) on top of `stages`; the
    rows given, or derived from the partitions. `held`: a problem encoded with `stages`' nodes,
    classes and weights (an update), whose device arrays of them (`STAGE_FIELDS`) are taken."""
    cluster, nodes, classes, weights = stages.cluster, stages.nodes, stages.classes, stages.weights
    use_costs = bool(state.settings.get("UseMoveCostReports", False))
    if rows is None:
        rows = replica_rows(cluster, stages.allowed(), nodes, use_costs)
    policies = _service_policies(cluster)
    upgrade = _upgrade_homes(state, cluster, rows)
    R, P = bucket(rows.n_replicas, 8), bucket(len(cluster.partitions), 8)
    problem = Problem(
        features=Features(
            affinity=bool((policies.parent >= 0).any()),
            defrag=bool(weights.defrag.any()),
            thresholds=bool(np.isfinite(nodes.threshold_load).any()),
            preferred=bool((upgrade.home >= 0).any() or upgrade.prefers.any() or not policies.preferred.all()),
        ),
        **(
            {name: getattr(held, name) for name in STAGE_FIELDS}
            if held is not None
            else nodes.fields(cluster) | classes.fields(cluster.N) | weights.fields()
        ),
        **rows.fields(R, P, cluster.M),
        **policies.fields(rows, R, P),
        **upgrade.fields(R, cluster.N),
        history=history_field(state, cluster, rows),
        replica_stays=on_device(pad(_in_transition(state, cluster, rows), (R,), False)),
        **_constraint_fields(state.settings, rows.n_replicas, use_costs),
    )
    return problem, dataclasses.replace(_index(cluster, rows, R, P), stages=stages, rows=rows)


def _children_of(parent: np.ndarray, n_partitions: int) -> np.ndarray:
    """[P, Kc] the replicas whose parent partition is each partition (-1 padded)."""
    children = np.flatnonzero(parent >= 0)
    counts = np.bincount(parent[children], minlength=n_partitions)
    table = np.full((n_partitions, bucket(int(counts.max(initial=1)))), -1, np.int32)
    order = children[np.argsort(parent[children], kind="stable")]
    slot = np.arange(order.size) - np.repeat(np.cumsum(counts) - counts, counts)
    table[parent[order], slot] = order
    return table


# ---------------------------------------------------------------------------------- affinity and policies


@dataclasses.dataclass(frozen=True)
class _Policies:
    """Each service's affinity and domain policies."""

    parent: np.ndarray  # int32[S] the partition of the service it has affinity to (-1: none)
    aligned: np.ndarray  # bool[S] aligned affinity
    nonpacking: np.ndarray  # bool[S] RequireDomainDistribution
    preferred: np.ndarray  # bool[S, N] PreferPrimaryDomain: where the primary should be

    def fields(self, rows: Rows, R: int, P: int) -> dict:
        parent = self.parent[rows.service]
        return dict(
            replica_parent=on_device(pad(parent, (R,), -1)),
            children_of=on_device(_children_of(parent, P)),
            replica_aligned=on_device(pad(self.aligned[rows.service], (R,), False)),
            service_nonpacking=on_device(self.nonpacking),
            primary_preferred=on_device(self.preferred),
        )


def _service_policies(cluster: Entities) -> _Policies:
    """Affinity: a child replica belongs with its parent's replicas (the parent has one partition; a
    parent on every node is the placement classes' matter). Aligned: primary with primary, secondary
    with secondary, for stateful children."""
    first_partition = {}
    for pi, part in enumerate(cluster.partitions):
        first_partition.setdefault(part.service, pi)
    S = cluster.S
    parent, aligned = np.full(S, -1, np.int32), np.zeros(S, bool)
    nonpacking, preferred = np.zeros(S, bool), np.ones((S, cluster.N), bool)
    for si, svc in enumerate(cluster.services):
        for corr in (c for c in svc.correlations if c["ServiceName"] not in cluster.everywhere):
            parent[si] = first_partition.get(corr["ServiceName"], -1)
            aligned[si] = corr["Scheme"] == "AlignedAffinity" and svc.stateful
        for policy in svc.placement_policies:
            if policy["Type"] == "RequireDomainDistribution":
                nonpacking[si] = True
            elif policy["Type"] == "PreferPrimaryDomain":
                preferred[si, : cluster.n_nodes] = nodes_in_domain(cluster.nodes, policy["DomainName"])
    return _Policies(parent=parent, aligned=aligned, nonpacking=nonpacking, preferred=preferred)


# ---------------------------------------------------------------------------------- upgrades and history


@dataclasses.dataclass(frozen=True)
class _Upgrade:
    """During an upgrade replicas go back to their snapshot node once its upgrade domain is done; with
    PreferUpgradedUDs replicas to place prefer the done domains (SF: a soft PreferredLocation)."""

    home: np.ndarray  # int32[rows] snapshot node to return to (-1: none)
    prefers: np.ndarray  # bool[rows] a replica to place that prefers an upgraded domain
    upgraded: np.ndarray  # bool[nodes] in an upgrade domain the upgrade is done with

    def fields(self, R: int, N: int) -> dict:
        return dict(
            replica_home=on_device(pad(self.home, (R,), -1)),
            replica_upgraded=on_device(pad(self.prefers, (R,), False)),
            node_upgraded=on_device(pad(self.upgraded, (N,), False)),
        )


def _upgrade_homes(state: ClusterState, cluster: Entities, rows: Rows) -> _Upgrade:
    upgrade = state.upgrade or {}
    done = set(upgrade.get("UpgradeDomainsDone", [])) if upgrade.get("InProgress") else set()
    snapshot = {str(k): v for k, v in (upgrade.get("Snapshot") or {}).items()}
    ud_of = {n.name: n.upgrade_domain for n in cluster.nodes}
    home = np.full(rows.n_replicas, -1, np.int32)
    for ri, rid in rows.named(snapshot if done else {}):
        if ud_of[snapshot[str(rid)]] in done:
            home[ri] = cluster.node_ix[snapshot[str(rid)]]
    upgraded = np.array([n.upgrade_domain in done for n in cluster.nodes], bool)
    prefers = (rows.initial_node < 0) & bool(state.settings.get("PreferUpgradedUDs") and upgraded.any())
    return _Upgrade(home=home, prefers=prefers, upgraded=upgraded)


def history_field(state: ClusterState, cluster: Entities, rows: Rows) -> jax.Array:
    """The problem's `history` (`_history`) on the device."""
    return on_device(_history(state, cluster, rows, bucket(rows.n_replicas, 8)))


def _history(state: ClusterState, cluster: Entities, rows: Rows, R: int) -> np.ndarray:
    """[R, H] anti-ping-pong: the nodes each replica left in earlier balancing runs, -1 padded; at
    least `HISTORY_WIDTH` wide, so a History that grows between rounds keeps the search's shapes."""
    node_ix = cluster.node_ix
    named = rows.named(state.history)
    left = [(ri, [node_ix[n] for n in state.history[str(rid)] if n in node_ix]) for ri, rid in named]
    lengths = np.fromiter((len(nodes_left) for _, nodes_left in left), np.int64, len(left))
    history = np.full((R, bucket(int(lengths.max(initial=1)), HISTORY_WIDTH)), -1, np.int32)
    at = np.repeat(np.fromiter((ri for ri, _ in left), np.int64, len(left)), lengths)
    history[at, np.arange(at.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = list(
        chain.from_iterable(nodes_left for _, nodes_left in left)
    )
    return history


def _in_transition(state: ClusterState, cluster: Entities, rows: Rows) -> np.ndarray:
    """[rows] replicas running on a node blocklisted for their service type: SF marks them in
    transition (PlacementCreator::CreatePlacement), so they stay where they are; a service with one
    instance per node drops them instead (`drops`)."""
    if not state.block_list:
        return np.zeros(rows.n_replicas, bool)
    blocked = np.zeros((len(cluster.services) + 1, cluster.n_nodes + 1), bool)  # [S+1, N+1]: the last, none
    for entry in state.block_list:
        for si, svc in enumerate(cluster.services):
            if svc.type_name == entry["ServiceTypeName"] and svc.target >= 0:
                blocked[si, cluster.node_ix[entry["NodeName"]]] = True
    return blocked[rows.service, rows.initial_node]


# ---------------------------------------------------------------------------------- penalties and the index


def _constraint_fields(settings: dict, n_rep: int, use_costs: bool) -> dict:
    """A unit of violation costs its priority's weight in SF's energy (which multiplies AvgStdDev by
    cost + replicas + 1000); which constraints a search enforces is its scope's."""
    priorities = [int(settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY]
    scale = n_rep + 1000.0
    penalty = [PRIORITY_WEIGHT.get(p, 0.0) * scale for p in priorities] + [UNPLACED_WEIGHT * scale]
    return dict(
        penalty=on_device(penalty, np.float32),
        swap_cost=on_device(SWAP_COST if use_costs else 1.0, np.float32),
    )


def _index(cluster: Entities, rows: Rows, R: int, P: int) -> Index:
    partitions = cluster.partitions
    return Index(
        nodes=tuple(n.name for n in cluster.nodes),
        metrics=tuple(cluster.metrics),
        services=tuple(s.name for s in cluster.services),
        partitions=tuple(zip(map(attrgetter("service"), partitions), map(attrgetter("partition_id"), partitions))),
        replica_ids=tuple(rows.ids),
        replica_roles=tuple(rows.roles),
        partition_rows=rows.partition_rows,
        input_node=pad(rows.input_node, (R,), -1),
        initial_node=pad(rows.initial_node, (R,), -1),
        initial_primary=pad(rows.initial_primary, (P,), -1),
        stateful=pad(rows.stateful, (P,), False),
        node_status=tuple(n.status for n in cluster.nodes),
        node_intent=tuple(n.deactivation_intent for n in cluster.nodes),
        node_types=tuple(n.node_type for n in cluster.nodes),
        n_nodes=cluster.n_nodes,
        n_replicas=rows.n_replicas,
        n_partitions=len(partitions),
    )
