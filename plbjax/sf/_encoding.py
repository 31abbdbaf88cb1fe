"""Cluster state -> dense, padded arrays (`Problem`) plus the host-side index back to names.

Everything the search reads lives in one immutable equinox Module shared by all chains.
Sizes are rounded up to buckets so that clusters of similar size reuse one compiled search.
Entities are sorted by name, so the encoding does not depend on the order of input lists.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from itertools import chain, repeat
from operator import attrgetter
from typing import NamedTuple, cast

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from plbjax.sf import _expressions as expressions
from plbjax.sf._reading import gc_paused
from plbjax.sf._state import ClusterState

CAPACITY, PLACEMENT, FAULT_DOMAIN, UPGRADE_DOMAIN, AFFINITY, PREFERRED, THRESHOLD, UNPLACED = range(8)
CONSTRAINTS = 8
THRESHOLD_PRIORITY = 1  # ResourceThresholds: utilisation every node should end below, a soft goal
UNDO_SHARE = 0.0  # replica moves that cancel an earlier one (1 in the minimal-movement pass)
PRIORITY_SETTINGS = (
    "CapacityConstraintPriority",
    "PlacementConstraintPriority",
    "FaultDomainConstraintPriority",
    "UpgradeDomainConstraintPriority",
    "AffinityConstraintPriority",
    "PreferredLocationConstraintPriority",
)
PRIORITY_WEIGHT = {0: 100.0, 1: 10.0, 2: 1.0}  # violation penalty per priority, in AvgStdDev units
UNPLACED_WEIGHT = 1000.0  # a replica left unplaced, in AvgStdDev units
SWAP_COST = 0.1  # SF's SwapCost, used with UseMoveCostReports
HISTORY_WIDTH = 8  # nodes a replica's History holds before its array widens (and the search recompiles)
MOVE_COST_VALUES = {"Zero": 0.0, "Low": 1.0, "Medium": 15.0, "High": 40.0, "VeryHigh": 200.0}


def bucket(n: int, minimum: int = 1) -> int:
    """Round n up to a power of two up to 8, then to one of four sizes per octave (10, 12, 14, 16, 20...)."""
    n = max(int(n), minimum, 1)
    if n <= 8:
        return 1 << (n - 1).bit_length()
    e = math.floor(math.log2(n)) - 3
    return next(m << e for m in (8, 10, 12, 14, 16) if m << e >= n)


@dataclasses.dataclass(frozen=True)
class Features:
    """Which optional rules the cluster uses. Static: the search compiles only the rules in use."""

    affinity: bool = False  # some service has an affinity correlation
    defrag: bool = False  # some metric is a defragmentation metric
    thresholds: bool = False  # ResourceThresholds are set
    preferred: bool = False  # PreferPrimaryDomain or upgrade snapshot nodes
    history: bool = False  # anti-ping-pong History applies (balancing)


class Problem(eqx.Module):
    """The cluster, as arrays. N nodes, R replicas, P partitions, S services, M metrics (all padded)."""

    features: Features = eqx.field(static=True)

    # nodes
    node_up: Bool[Array, " N"]  # Up and real: counted in deviations, may receive replicas
    node_open: Bool[Array, " N"]  # may receive replicas in this phase
    node_kept: Bool[Array, " N"]  # deactivated with Pause or Restart: its replicas may stay, none come
    capacity: Float[Array, "N M"]  # capacity in force (buffered unless told otherwise), inf if unlimited
    threshold_load: Float[Array, "N M"]  # ResourceThresholds x capacity, inf where none
    metric_nodes: Bool[Array, "M N"]  # nodes counted in a metric's global deviation
    metric_node_count: Float[Array, " M"]
    metric_defrag: Bool[Array, " M"]  # defragmentation metric: pack instead of spread
    fd_leaf_up: Bool[Array, " Df"]  # leaf fault domains (by domain id) holding Up nodes
    ud_up: Bool[Array, " Du"]  # upgrade domains (by domain id) holding Up nodes
    fd_tree: Int[Array, "N Lf"]  # column 0 is the root, then one fault-domain level per column
    ud_tree: Int[Array, "N 2"]  # root, upgrade domain
    # replicas
    replica_partition: Int[Array, " R"]
    replica_service: Int[Array, " R"]
    replica_parent: Int[Array, " R"]  # partition of the service it has affinity to (-1: none)
    replica_aligned: Bool[Array, " R"]  # aligned affinity: primary with primary, secondary with secondary
    children_of: Int[Array, "P Kc"]  # child replicas of each (parent) partition, -1 padded
    replica_home: Int[Array, " R"]  # upgrade snapshot node to return to (PreferredLocation; -1: none)
    replica_upgraded: Bool[Array, " R"]  # a new replica that prefers an upgraded domain (PreferUpgradedUDs)
    replica_stays: Bool[Array, " R"]  # on a node that blocks its service type: in transition, it stays (no
    # constraint counts it, it neither moves nor swaps; SF's PlacementCreator, IsInBlockList)
    node_upgraded: Bool[Array, " N"]  # in an upgrade domain the running upgrade is done with
    load_primary: Float[Array, "R M"]  # load of the replica when it is (or becomes) the primary
    load_secondary: Float[Array, "R M"]  # load as a secondary; instances use load_primary for both
    move_cost: Float[Array, " R"]
    node_move_factor: Float[Array, " N"]  # moving onto a node costs move_cost x this: higher-priority nodes
    # cost up to 1.5x, so lower-priority targets are preferred
    # partitions
    partition_replicas: Int[Array, "P K"]  # replica indices, -1 padded
    partition_service: Int[Array, " P"]
    # services
    service_class: Int[Array, " S"]  # placement class (allowed node set)
    service_metrics: Int[Array, "S Ms"]  # metric index of each local-domain slot, -1 padded
    service_nonpacking: Bool[Array, " S"]  # RequireDomainDistribution: one replica per fault domain
    primary_preferred: Bool[Array, "S N"]  # PreferPrimaryDomain: where the primary should be
    # placement classes
    class_nodes: Int[Array, "C N"]  # allowed Up nodes of the class, padded
    class_node_count: Int[Array, " C"]
    class_allowed: Bool[Array, "C N"]  # the same set as a mask: nodes counted in a service's local deviation
    fd_children: Int[Array, "C Df"]  # eligible child domains under each fault domain, per class
    ud_children: Int[Array, "C Du"]
    fd_usable: Bool[Array, "C Df"]  # fault domains (any level) holding a node of the class
    ud_usable: Bool[Array, "C Du"]
    # energy weights: AvgStdDev = sum(global_weight * dev) + sum(local_weight * dev)
    global_weight: Float[Array, " M"]
    local_weight: Float[Array, "S Ms"]
    # initial placement
    initial_node: Int[Array, " R"]  # -1: unplaced or padding
    initial_primary: Int[Array, " P"]  # -1: none
    swap_cost: Float[Array, ""]
    # what the search may touch
    movable: Int[Array, " R"]  # replica indices that may move, padded
    n_movable: Int[Array, ""]
    swappable: Int[Array, " P"]  # partitions whose primary may swap, padded
    n_swappable: Int[Array, ""]
    # constraints, indexed by CAPACITY ... UNPLACED
    enforce: Bool[Array, " 8"]  # a move may not make this constraint worse
    penalty: Float[Array, " 8"]  # energy per unit of violation (by SF priority; 0: off)
    move_penalty: Float[Array, ""]  # energy per unit of movement cost, on top of SF's (a phase's)
    move_budget: Int[Array, ""]  # most movements (moves and swaps) a phase may make: throttles
    partition_budget: Int[Array, ""]  # most moved replicas per partition
    history: Int[Array, "R H"]  # nodes a replica was balanced away from (-1 padded)
    # scalars
    replica_count: Float[Array, ""]  # SF's movement factor adds this (and 1000) to the move cost
    # set by `scope`
    start_node: Int[Array, " R"] | None = None  # where the search starts (default: the initial placement)
    start_primary: Int[Array, " P"] | None = None
    by_node: Int[Array, " R"] | None = None  # movable replicas ordered by initial node, padded
    node_first: Int[Array, " N+1"] | None = None  # by_node[node_first[n]:node_first[n+1]] started on node n
    undo_share: Float[Array, ""] | None = None  # share of replica moves that go back to the initial node

    @property
    def shape(self) -> dict[str, int]:
        r, m = self.load_primary.shape
        p, k = self.partition_replicas.shape
        return dict(
            N=self.node_up.shape[0],
            R=r,
            M=m,
            P=p,
            K=k,
            S=self.service_class.shape[0],
            Ms=self.service_metrics.shape[1],
            C=self.class_nodes.shape[0],
        )


@dataclasses.dataclass(frozen=True)
class Index:
    """Host-side names and initial placement, to decode arrays back into the document's terms."""

    nodes: tuple[str, ...]
    metrics: tuple[str, ...]
    services: tuple[str, ...]
    partitions: tuple[tuple[str, object], ...]  # (service name, PartitionId as given)
    replica_ids: tuple[object, ...]  # ReplicaId as given; None for replicas to create
    replica_roles: tuple[str, ...]  # role in the input (or the role a new one gets)
    partition_rows: tuple[tuple[int, ...], ...]  # replica indices of each partition
    input_node: np.ndarray  # int32[R] node in the input (-1: none or padding)
    node_of: np.ndarray  # int32[R] node the search starts from (-1: unplaced)
    primary_of: np.ndarray  # int32[P] primary replica in the input (-1: none)
    stateful: np.ndarray  # bool[P]
    node_status: tuple[str, ...]  # Up / Down / Disabled
    node_intent: tuple[str | None, ...]  # a Disabled node's DeactivationIntent
    node_types: tuple[str | None, ...]
    n_nodes: int
    n_replicas: int
    n_partitions: int
    stages: _Stages | None = dataclasses.field(default=None, compare=False, repr=False)  # for updates
    rows: _Rows | None = dataclasses.field(default=None, compare=False, repr=False)  # for updates

    @functools.cached_property
    def row_partition(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, partition): every partition's replica rows, flat in partition order, and the
        partition of each, so that per-replica work on the host is vectorised."""
        sizes = np.fromiter(map(len, self.partition_rows), np.int64, len(self.partition_rows))
        rows = np.fromiter(chain.from_iterable(self.partition_rows), np.int64, int(sizes.sum()))
        return rows, np.repeat(np.arange(len(sizes)), sizes)


def _domain_tree(paths: list[tuple[str, ...]], n_pad: int) -> np.ndarray:
    """Ids of every prefix of every path: column 0 is the root (id 0), column l the depth-l prefix.

    Shorter paths are padded with '' so that a leaf domain has a single child at deeper levels.
    """
    depth = max((len(p) for p in paths), default=0)
    ids: dict[tuple[str, ...], int] = {(): 0}
    tree = np.zeros((n_pad, depth + 1), np.int32)
    for i, path in enumerate(paths):
        full = tuple(path) + ("",) * (depth - len(path))
        for level in range(1, depth + 1):
            tree[i, level] = ids.setdefault(full[:level], len(ids))
    return tree


def _eligible_children(tree: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """For each domain id, how many distinct child domains hold at least one eligible node."""
    n_domains = int(tree.max()) + 1 if tree.size else 1
    counts = np.zeros(n_domains, np.int32)
    for level in range(1, tree.shape[1]):
        pairs = np.unique(tree[eligible, level - 1].astype(np.int64) * n_domains + tree[eligible, level])
        np.add.at(counts, pairs // n_domains, 1)
    return counts


def _children_of(parent: np.ndarray, n_partitions: int) -> np.ndarray:
    """[P, Kc] the replicas whose parent partition is each partition (-1 padded)."""
    children = np.flatnonzero(parent >= 0)
    counts = np.bincount(parent[children], minlength=n_partitions)
    table = np.full((n_partitions, bucket(int(counts.max(initial=1)))), -1, np.int32)
    order = children[np.argsort(parent[children], kind="stable")]
    slot = np.arange(order.size) - np.repeat(np.cumsum(counts) - counts, counts)
    table[parent[order], slot] = order
    return table


def _priority_factor(priorities: list[int]) -> np.ndarray:
    """1 for the lowest node priority up to 1.5 for the highest (all 1 when priorities are equal)."""
    levels = sorted(set(priorities))
    step = 0.5 / max(len(levels) - 1, 1)
    return np.array([1.0 + step * levels.index(p) for p in priorities], np.float32).reshape(-1)


def _in_domain(nodes, domain: str) -> np.ndarray:
    """Nodes whose fault domain lies in `domain` ("fd:/dc0" holds fd:/dc0 and fd:/dc0/r1)."""
    path = tuple(x for x in domain.removeprefix("fd:").split("/") if x)
    return np.array([n.fault_domain[: len(path)] == path for n in nodes], bool)


_ROLE_CODES = {"Primary": 0, "Secondary": 1, "Instance": 2}  # any other role: 3


@dataclasses.dataclass(frozen=True)
class _Rows:
    """The replicas as encoded, partition by partition: each partition's replicas in order of
    str(ReplicaId), then the ones it lacks (to create). Arrays over replicas [n] or partitions [p]."""

    ids: list  # ReplicaId as given; None for a replica to create
    roles: list  # role in the input, or the role a new one gets
    partition: np.ndarray  # int32[n]
    slot: np.ndarray  # int[n] position within its partition
    service: np.ndarray  # int32[n]
    node: np.ndarray  # int32[n] node in the input (-1: none)
    start: np.ndarray  # int32[n] node the search starts from (-1: unplaced or its node not Up)
    move_cost: np.ndarray  # float32[n]
    load_primary: np.ndarray  # float32[n, metrics]
    load_secondary: np.ndarray  # float32[n, metrics]
    sizes: np.ndarray  # int[p] replicas, those to create included
    everywhere: np.ndarray  # bool[p] of a service with one instance per node
    partition_service: np.ndarray  # int32[p]
    stateful: np.ndarray  # bool[p]
    primary_of: np.ndarray  # int32[p] its (last) primary's row, -1: none
    partition_rows: tuple  # replica rows of each partition
    n_replicas: int

    def named(self, by_id: dict) -> Iterator[tuple[int, object]]:
        """(row, ReplicaId) of the replicas whose str(ReplicaId) is a key of `by_id`, in row order."""
        if by_id:
            for row, rid in enumerate(self.ids):
                if rid is not None and str(rid) in by_id:
                    yield row, rid

    def fields(self, R: int, P: int, M: int) -> dict:
        return dict(
            replica_partition=_on_device(_pad(self.partition, (R,), 0)),
            replica_service=_on_device(_pad(self.service, (R,), 0)),
            load_primary=_on_device(_pad(self.load_primary, (R, M), np.float32(0))),
            load_secondary=_on_device(_pad(self.load_secondary, (R, M), np.float32(0))),
            move_cost=_on_device(_pad(self.move_cost, (R,), np.float32(0))),
            partition_replicas=_on_device(_partition_table(self, P)),
            partition_service=_on_device(_pad(self.partition_service, (P,), 0)),
            initial_node=_on_device(_pad(self.start, (R,), -1)),
            initial_primary=_on_device(_pad(self.primary_of, (P,), -1)),
            replica_count=_on_device(float(self.n_replicas), np.float32),
        )


def _order_within(texts: list[str], part: np.ndarray) -> np.ndarray | None:
    """The stable order that sorts `texts` within each run of equal `part` (non-decreasing), as
    sorted() would; None when they already are."""
    if not texts:
        return None
    longest = max(map(len, texts))
    if longest <= 64 and "\0" not in "".join(texts):  # NumPy's strings compare as Python's but for NULs
        u = np.array(texts, dtype=f"<U{longest}")
        if not ((part[1:] == part[:-1]) & (u[1:] < u[:-1])).any():
            return None
        return np.lexsort((u, part))
    keys = list(zip(part.tolist(), texts))
    order = sorted(range(len(texts)), key=keys.__getitem__)
    return None if order == list(range(len(texts))) else np.array(order, np.int64)


def encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None = None) -> tuple[Problem, Index]:
    """Encode `state`, with the replicas it lacks added (unplaced) and those on nodes that are not Up
    unplaced. No replica moves until `scope` says which may, per phase. A child of a service with one
    instance per node may go where its parent may, or only to the nodes `parent_hosts` names for it.

    Capacities are buffered (less NodeBufferPercentage) in normal operation; during an upgrade SF
    may fill nodes up to their full capacity.
    """
    with gc_paused():  # a million replicas make millions of objects, none of them garbage
        return _encode(state, parent_hosts)


def _encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None) -> tuple[Problem, Index]:
    """The pipeline: each stage reads the state and earlier stages, and gives its share of `Problem`."""
    cluster = _entities(state)
    nodes = _nodes(state, cluster)
    classes = _placement_classes(state, cluster, nodes, parent_hosts)
    return _assemble(state, _Stages(cluster, nodes, classes, _energy_weights(state, cluster, classes)))


@dataclasses.dataclass(frozen=True)
class _Stages:
    """The stages that do not depend on the replicas (entities, nodes, placement classes, energy
    weights): an update of the replicas reuses them."""

    cluster: _Entities
    nodes: _Nodes
    classes: _Classes
    weights: _Weights

    def allowed(self) -> list[np.ndarray]:
        """[S] the node mask of each service's placement class."""
        classes = self.classes
        return [classes.masks[c] for c in classes.service_class[: len(self.cluster.services)]]


def _assemble(state: ClusterState, stages: _Stages, rows: _Rows | None = None) -> tuple[Problem, Index]:
    """The replica stages (rows, loads, policies, upgrade homes, history) on top of `stages`; the
    rows given, or derived from the partitions."""
    cluster, nodes, classes, weights = stages.cluster, stages.nodes, stages.classes, stages.weights
    use_costs = bool(state.settings.get("UseMoveCostReports", False))
    if rows is None:
        rows = _replica_rows(cluster, stages.allowed(), nodes, use_costs)
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
        **nodes.fields(cluster),
        **classes.fields(cluster.N),
        **weights.fields(),
        **rows.fields(R, P, cluster.M),
        **policies.fields(rows, R, P),
        **upgrade.fields(R, cluster.N),
        history=_on_device(_history(state, cluster, rows, R)),
        replica_stays=_on_device(_pad(_in_transition(state, cluster, rows), (R,), False)),
        **_constraint_fields(state.settings, rows.n_replicas, use_costs),
        **_unscoped_fields(R, P),
    )
    return problem, dataclasses.replace(_index(cluster, rows, R, P), stages=stages, rows=rows)


def without_dropped(state: ClusterState, index: Index) -> tuple[Problem, Index]:
    """The encoding of `state`, the encoded state less some replicas (surplus drops): only the
    replica stages run again, on the encoded cluster's entities, nodes, classes and weights."""
    stages = _staged(index)
    order = _partition_order(state, stages.cluster.service_ix)
    cluster = dataclasses.replace(stages.cluster, partitions=_in_order(state, order), order=order)
    with gc_paused():
        return _assemble(state, dataclasses.replace(stages, cluster=cluster))


def with_partitions(state: ClusterState, index: Index, changed: list[int]) -> tuple[Problem, Index] | None:
    """The encoding of `state`, a state whose nodes, services and settings are those encoded in
    `index` and whose partitions are the encoded ones, in the same order, but for those at positions
    `changed` of `state.partitions` (loads reported, actions completed; History may differ too):
    only those partitions' replica rows are derived again, and the replica stages that read the
    rows (policies, upgrade homes, history) run on them. None when a changed partition is another
    one or its number of rows changed (a drop below a surplus): then `without_dropped`."""
    stages, rows = _staged(index), index.rows
    if rows is None:
        raise ValueError("the index carries no replica rows (it was not made by `encode`)")
    order = stages.cluster.order
    if len(state.partitions) != order.size:
        return None
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    at = np.sort(rank[np.asarray(changed, np.int64)])
    partitions = _in_order(state, order)
    before = stages.cluster.partitions
    if any(
        (partitions[k].service, partitions[k].partition_id) != (before[k].service, before[k].partition_id) for k in at
    ):
        return None
    cluster = dataclasses.replace(stages.cluster, partitions=partitions)
    if at.size:
        use_costs = bool(state.settings.get("UseMoveCostReports", False))
        sub = dataclasses.replace(cluster, partitions=[partitions[k] for k in at.tolist()])
        fresh = _replica_rows(sub, stages.allowed(), stages.nodes, use_costs)
        if not np.array_equal(fresh.sizes, rows.sizes[at]):
            return None
        rows = _spliced(rows, fresh, at)
    with gc_paused():
        return _assemble(state, dataclasses.replace(stages, cluster=cluster), rows)


def _spliced(rows: _Rows, fresh: _Rows, at: np.ndarray) -> _Rows:
    """`rows` with the rows of partitions `at` (as many rows each) taken from `fresh`, their rows."""
    dest = (np.cumsum(rows.sizes) - rows.sizes)[at][fresh.partition] + fresh.slot
    ids, roles = list(rows.ids), list(rows.roles)
    for row, rid, role in zip(dest.tolist(), fresh.ids, fresh.roles):
        ids[row], roles[row] = rid, role

    def put(column: np.ndarray, values: np.ndarray, where: np.ndarray = dest) -> np.ndarray:
        column = column.copy()
        column[where] = values
        return column

    primary = np.where(fresh.primary_of >= 0, dest[fresh.primary_of], -1)
    return dataclasses.replace(
        rows,
        ids=ids,
        roles=roles,
        node=put(rows.node, fresh.node),
        start=put(rows.start, fresh.start),
        move_cost=put(rows.move_cost, fresh.move_cost),
        load_primary=put(rows.load_primary, fresh.load_primary),
        load_secondary=put(rows.load_secondary, fresh.load_secondary),
        primary_of=put(rows.primary_of, primary.astype(rows.primary_of.dtype), at),
    )


def with_parent_hosts(
    state: ClusterState, problem: Problem, index: Index, parent_hosts: dict[str, set[str]]
) -> tuple[Problem, Index]:
    """The encoding of `state` with `parent_hosts` (see `encode`): only the placement classes, and
    the energy weights' node sets they scope, are derived again and replaced; the replica rows only
    when a one-per-node service's class, and so its instance count, changed."""
    stages = _staged(index)
    classes = _placement_classes(state, stages.cluster, stages.nodes, parent_hosts)
    updated = dataclasses.replace(stages, classes=classes, weights=_energy_weights(state, stages.cluster, classes))
    everywhere = np.array([s.target < 0 for s in stages.cluster.services], bool)
    counts = lambda s: np.array([int(m.sum()) for m in s.allowed()])[everywhere]
    if not np.array_equal(counts(stages), counts(updated)):
        return _assemble(state, updated)
    fields = classes.fields(stages.cluster.N) | updated.weights.fields()
    return dataclasses.replace(problem, **fields), dataclasses.replace(index, stages=updated)


def _staged(index: Index) -> _Stages:
    if index.stages is None:
        raise ValueError("the index carries no encoding stages (it was not made by `encode`)")
    return index.stages


def _on_device(value, dtype=None) -> jax.Array:
    """`value` on the device, as `jnp.asarray` puts it, but without compiling a conversion program
    for every new shape (about 10 ms each, every process)."""
    if isinstance(value, jax.Array):
        return value if dtype is None else value.astype(dtype)
    return jax.device_put(np.asarray(value, dtype))


def _pad(a: np.ndarray, shape: tuple[int, ...], fill) -> np.ndarray:
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


# ---------------------------------------------------------------------------------- entities


@dataclasses.dataclass(frozen=True)
class _Entities:
    """The state's nodes, services, partitions and metrics in encoding order, with their positions."""

    nodes: list
    services: list
    partitions: list
    metrics: list
    node_ix: dict[str, int]
    service_ix: dict[str, int]
    metric_ix: dict[str, int]
    everywhere: frozenset[str]  # services with one instance per node
    order: np.ndarray  # int64[partitions] the position in state.partitions of each partition

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_metrics(self) -> int:
        return max(len(self.metrics), 1)

    @property
    def N(self) -> int:  # the padded sizes, named as in Problem
        return bucket(self.n_nodes, 8)

    @property
    def M(self) -> int:
        return bucket(self.n_metrics)

    @property
    def S(self) -> int:
        return bucket(len(self.services))


def _entities(state: ClusterState) -> _Entities:
    """SF's (and reference 004's) deterministic order: priority descending, then name; partitions by
    service, then str(PartitionId)."""
    nodes = sorted(state.nodes, key=lambda n: (-n.priority, n.name))
    services = sorted(state.services, key=lambda s: (-s.priority, s.name))
    service_ix = {s.name: i for i, s in enumerate(services)}
    order = _partition_order(state, service_ix)
    metrics = list(state.metric_names())
    return _Entities(
        nodes=nodes,
        services=services,
        partitions=_in_order(state, order),
        metrics=metrics,
        node_ix={n.name: i for i, n in enumerate(nodes)},
        service_ix=service_ix,
        metric_ix={m: i for i, m in enumerate(metrics)},
        everywhere=frozenset(s.name for s in services if s.target < 0),
        order=order,
    )


def _partition_order(state: ClusterState, service_ix: dict[str, int]) -> np.ndarray:
    """The positions in `state.partitions` of its partitions by service (in encoding order), then
    str(PartitionId)."""
    keys = list(
        zip(
            map(service_ix.__getitem__, map(attrgetter("service"), state.partitions)),
            map(str, map(attrgetter("partition_id"), state.partitions)),
        )
    )
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), np.int64).reshape(-1)


def _in_order(state: ClusterState, order: np.ndarray) -> list:
    return list(map(state.partitions.__getitem__, order.tolist()))


# ---------------------------------------------------------------------------------- nodes


@dataclasses.dataclass(frozen=True)
class _Nodes:
    """Node status, capacities [nodes, metrics] and domain trees (padded to N rows)."""

    up: np.ndarray  # bool[nodes]
    kept: np.ndarray  # bool[nodes] deactivated with Pause or Restart: keeps its replicas, takes none
    capacity: np.ndarray  # float32[nodes, metrics] capacity in force, inf if unlimited
    threshold_load: np.ndarray  # float32[nodes, metrics] ResourceThresholds x capacity, inf where none
    fd_tree: np.ndarray  # int32[N, Lf]
    ud_tree: np.ndarray  # int32[N, 2]

    def fields(self, cluster: _Entities) -> dict:
        N, M, n = cluster.N, cluster.M, cluster.n_nodes
        return dict(
            node_up=_on_device(_pad(self.up, (N,), False)),
            node_open=_on_device(_pad(self.up, (N,), False)),
            node_kept=_on_device(_pad(self.kept, (N,), False)),
            capacity=_on_device(_pad(self.capacity, (N, M), np.float32(np.inf))),
            threshold_load=_on_device(_pad(self.threshold_load, (N, M), np.float32(np.inf))),
            fd_leaf_up=_on_device(np.isin(np.arange(int(self.fd_tree.max()) + 1), self.fd_tree[:n][self.up, -1])),
            ud_up=_on_device(np.isin(np.arange(int(self.ud_tree.max()) + 1), self.ud_tree[:n][self.up, -1])),
            fd_tree=_on_device(self.fd_tree),
            ud_tree=_on_device(self.ud_tree),
            node_move_factor=_on_device(
                _pad(_priority_factor([n.priority for n in cluster.nodes]), (N,), np.float32(1))
            ),
        )


def _nodes(state: ClusterState, cluster: _Entities) -> _Nodes:
    capacity, threshold_load = _capacities(state, cluster)
    return _Nodes(
        up=np.array([n.status == "Up" for n in cluster.nodes], bool),
        kept=np.array([n.keeps_replicas for n in cluster.nodes], bool),
        capacity=capacity,
        threshold_load=threshold_load,
        fd_tree=_domain_tree([n.fault_domain for n in cluster.nodes], cluster.N),
        ud_tree=_domain_tree([(n.upgrade_domain,) for n in cluster.nodes], cluster.N),
    )


def _capacities(state: ClusterState, cluster: _Entities) -> tuple[np.ndarray, np.ndarray]:
    """Capacity in force, buffered unless an upgrade is in progress, and ResourceThresholds load."""
    buffered = not (state.upgrade or {}).get("InProgress", False)
    capacity = np.full((cluster.n_nodes, cluster.n_metrics), np.inf, np.float32)
    threshold_load = np.full((cluster.n_nodes, cluster.n_metrics), np.inf, np.float32)
    for i, node in enumerate(cluster.nodes):
        for name, value in node.capacities.items():
            if name in cluster.metric_ix:
                m = cluster.metric_ix[name]
                buffer = state.node_buffer_percentage.get(name, 0.0) if buffered else 0.0
                capacity[i, m] = np.floor(value * (1.0 - buffer)) if buffer else value
                if name in state.resource_thresholds:
                    threshold_load[i, m] = value * state.resource_thresholds[name]
    return capacity, threshold_load


# ---------------------------------------------------------------------------------- placement classes


@dataclasses.dataclass(frozen=True)
class _Classes:
    """Placement classes: the distinct sets of allowed Up nodes, shared by the services that have them."""

    service_class: np.ndarray  # int32[S]
    masks: list[np.ndarray]  # bool[nodes] of each class
    nodes: np.ndarray  # int32[C, N] the allowed nodes, padded
    count: np.ndarray  # int32[C]
    fd_children: np.ndarray  # int32[C, Df]
    ud_children: np.ndarray  # int32[C, Du]
    fd_usable: np.ndarray  # bool[C, Df]
    ud_usable: np.ndarray  # bool[C, Du]

    def fields(self, N: int) -> dict:
        padding = [np.zeros(N, bool)] * (self.nodes.shape[0] - len(self.masks))
        return dict(
            service_class=_on_device(self.service_class),
            class_nodes=_on_device(self.nodes),
            class_node_count=_on_device(self.count),
            class_allowed=_on_device(np.stack([_pad(m, (N,), False) for m in self.masks] + padding)),
            fd_children=_on_device(self.fd_children),
            ud_children=_on_device(self.ud_children),
            fd_usable=_on_device(self.fd_usable),
            ud_usable=_on_device(self.ud_usable),
        )


def _placement_classes(
    state: ClusterState, cluster: _Entities, nodes: _Nodes, parent_hosts: dict[str, set[str]] | None
) -> _Classes:
    """Each class's nodes, and how many eligible child domains each fault and upgrade domain has."""
    service_class, masks = _class_masks(cluster, _allowed_nodes(state, cluster, nodes.up), parent_hosts)
    C, N, n = bucket(len(masks), 4), cluster.N, cluster.n_nodes
    class_nodes = np.zeros((C, N), np.int32)
    class_count = np.zeros(C, np.int32)
    fd_children = np.zeros((C, int(nodes.fd_tree.max()) + 1), np.int32)
    ud_children = np.zeros((C, int(nodes.ud_tree.max()) + 1), np.int32)
    fd_usable, ud_usable = np.zeros(fd_children.shape, bool), np.zeros(ud_children.shape, bool)
    for c, mask in enumerate(masks):
        allowed = np.flatnonzero(mask)
        class_nodes[c, : len(allowed)] = allowed
        class_count[c] = len(allowed)
        fd_children[c] = _eligible_children(nodes.fd_tree[:n], mask)
        ud_children[c] = _eligible_children(nodes.ud_tree[:n], mask)
        fd_usable[c, nodes.fd_tree[:n][mask[:n]]] = True
        ud_usable[c, nodes.ud_tree[:n][mask[:n]]] = True
    return _Classes(
        service_class=service_class,
        masks=masks,
        nodes=class_nodes,
        count=class_count,
        fd_children=fd_children,
        ud_children=ud_children,
        fd_usable=fd_usable,
        ud_usable=ud_usable,
    )


def _allowed_nodes(state: ClusterState, cluster: _Entities, up: np.ndarray) -> dict[str, np.ndarray]:
    """Each service's allowed Up nodes: its placement constraints, the block list, Required and Invalid
    domains. Services share constraints, block lists and domains: each mask is computed once."""
    nodes = cluster.nodes
    props = [n.properties for n in nodes]
    blocked: dict[str, set[str]] = {}  # ServiceTypeName -> nodes blocklisted for it
    for entry in state.block_list:
        blocked.setdefault(entry["ServiceTypeName"], set()).add(entry["NodeName"])
    selected, open_to, in_domain = {}, {}, {}
    allowed_of = {}
    for svc in cluster.services:
        if svc.placement_constraints not in selected:
            selected[svc.placement_constraints] = expressions.node_mask(svc.placement_constraints, props)
        mask = selected[svc.placement_constraints] & up
        if svc.type_name in blocked:
            if svc.type_name not in open_to:
                open_to[svc.type_name] = np.array([n.name not in blocked[svc.type_name] for n in nodes], bool)
            mask &= open_to[svc.type_name]
        for policy in svc.placement_policies:
            if policy["Type"] in ("RequiredDomain", "InvalidDomain"):
                if policy["DomainName"] not in in_domain:
                    in_domain[policy["DomainName"]] = _in_domain(nodes, policy["DomainName"])
                inside = in_domain[policy["DomainName"]]
                mask &= inside if policy["Type"] == "RequiredDomain" else ~inside
        allowed_of[svc.name] = mask
    return allowed_of


def _class_masks(
    cluster: _Entities, allowed_of: dict[str, np.ndarray], parent_hosts: dict[str, set[str]] | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The class of each service [S] and the node mask of each class, in order of first use. A child
    of a service with one instance per node goes where its parent may, or where `parent_hosts` says."""
    class_of_mask: dict[bytes, int] = {}
    masks: list[np.ndarray] = []
    service_class = np.zeros(cluster.S, np.int32)
    for si, svc in enumerate(cluster.services):
        mask = allowed_of[svc.name]
        for corr in svc.correlations:
            if corr["ServiceName"] in cluster.everywhere:
                hosts = (parent_hosts or {}).get(corr["ServiceName"])
                mask = mask & (
                    allowed_of[corr["ServiceName"]]
                    if hosts is None
                    else np.array([n.name in hosts for n in cluster.nodes], bool)
                )
        service_class[si] = class_of_mask.setdefault(mask.tobytes(), len(masks))
        if service_class[si] == len(masks):
            masks.append(mask)
    return service_class, masks


# ---------------------------------------------------------------------------------- energy weights


@dataclasses.dataclass(frozen=True)
class _Weights:
    """SF's energy weights: domain score = sum(w * dev) / sum(w); AvgStdDev = LocalDomainWeight (0.25) x
    the mean of the local domains + the rest x the global one. Services with two or more partitions
    have a local domain."""

    service_metrics: np.ndarray  # int32[S, Ms] metric of each local-domain slot, -1 padded
    local: np.ndarray  # float[S, Ms]
    global_: np.ndarray  # float[M]
    metric_nodes: np.ndarray  # bool[M, N] nodes counted in a metric's global deviation
    defrag: np.ndarray  # bool[M] defragmentation metrics

    def fields(self) -> dict:
        return dict(
            service_metrics=_on_device(self.service_metrics),
            local_weight=_on_device(self.local.astype(np.float32)),
            global_weight=_on_device(self.global_.astype(np.float32)),
            metric_nodes=_on_device(self.metric_nodes),
            metric_node_count=_on_device(self.metric_nodes.sum(axis=1).astype(np.float32)),
            metric_defrag=_on_device(self.defrag),
        )


def _energy_weights(state: ClusterState, cluster: _Entities, classes: _Classes) -> _Weights:
    service_metrics, local_w, metric_nodes, mean_weight = _service_weights(cluster, classes)
    global_w = np.zeros(cluster.M, np.float64)
    for m, name in enumerate(cluster.metrics):
        global_w[m] = state.global_metric_weights.get(name, mean_weight[m])
    global_w = global_w / global_w.sum() if global_w.sum() > 1e-7 else global_w * 0
    n_local = int((local_w.sum(axis=1) > 0).sum())
    local_domain = float(state.settings["LocalDomainWeight"])
    global_w *= 1.0 - local_domain
    local_w *= local_domain / max(n_local, 1)
    defrag = [bool(state.defragmentation_metrics.get(m)) for m in cluster.metrics]
    defrag = _pad(np.array(defrag + [False] * (cluster.n_metrics - len(cluster.metrics))), (cluster.M,), False)
    return _Weights(
        service_metrics=service_metrics, local=local_w, global_=global_w, metric_nodes=metric_nodes, defrag=defrag
    )


def _service_weights(cluster: _Entities, classes: _Classes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each service's metrics and local weights (unscaled), each metric's nodes and mean service weight."""
    services, M = cluster.services, cluster.M
    partitions_of = {s.name: 0 for s in services}
    for part in cluster.partitions:
        partitions_of[part.service] += 1
    ms = max([len(s.metrics) for s in services] + [1])
    service_metrics = np.full((cluster.S, ms), -1, np.int32)
    local_w = np.zeros((cluster.S, ms), np.float32)
    weight_sum = np.zeros(M, np.float64)
    weight_n = np.zeros(M, np.float64)
    metric_nodes = np.zeros((M, cluster.N), bool)
    for si, svc in enumerate(services):
        w = np.array([m.weight for m in svc.metrics], np.float64)
        for k, metric in enumerate(svc.metrics):
            m = cluster.metric_ix[metric.name]
            service_metrics[si, k] = m
            weight_sum[m] += metric.weight
            weight_n[m] += 1
            metric_nodes[m, : cluster.n_nodes] |= classes.masks[classes.service_class[si]]
        if partitions_of[svc.name] >= 2 and w.sum() > 1e-7:
            local_w[si, : len(w)] = w / w.sum()
    return service_metrics, local_w, metric_nodes, weight_sum / np.maximum(weight_n, 1)


# ---------------------------------------------------------------------------------- replicas


class _Given(NamedTuple):
    """The replicas the input lists, partition after partition, each partition's in order of str(ReplicaId)."""

    replicas: list
    ids: list
    roles: list
    code: np.ndarray  # int8 role code (_ROLE_CODES)
    partition: np.ndarray  # int[given] its partition
    counts: np.ndarray  # int64[p] replicas listed per partition


class _Layout(NamedTuple):
    """The rows: each partition's given replicas, then the ones it lacks (to create)."""

    sizes: np.ndarray  # int64[p] replicas, those to create included
    starts: np.ndarray  # int64[p] first row of each partition
    given_rows: np.ndarray  # row of each given replica
    new_rows: np.ndarray  # row of each replica to create
    new_code: np.ndarray  # int8 role code of each replica to create
    n_rep: int


def _replica_rows(cluster: _Entities, allowed: list[np.ndarray], nodes: _Nodes, use_costs: bool) -> _Rows:
    """The replica rows of the partitions, column by column. `allowed[s]`: nodes service s may use.
    A replica stays on an Up node or on one deactivated with Pause or Restart (`nodes.kept`); a
    service with one instance per node keeps, beyond its allowed nodes, its instances on kept ones."""
    services, n_part = cluster.services, len(cluster.partitions)
    part_service = np.fromiter(
        map(cluster.service_ix.__getitem__, map(attrgetter("service"), cluster.partitions)), np.int64, n_part
    )
    stateful_of = np.array([s.stateful for s in services] + [False], bool)
    target_of = np.array(
        [int(allowed[si].sum()) if s.target < 0 else s.target for si, s in enumerate(services)] + [0], np.int64
    )
    everywhere_of = np.array([s.target < 0 for s in services] + [False], bool)
    given = _given_replicas(cluster.partitions)
    given_node = _given_nodes(given, cluster.node_ix)
    on_kept = everywhere_of[part_service[given.partition]] & np.append(nodes.kept, False)[given_node]
    target = target_of[part_service] + np.bincount(given.partition[on_kept], minlength=n_part)
    layout = _layout(given, target, stateful_of[part_service])
    code = np.empty(layout.n_rep, np.int8)
    code[layout.given_rows], code[layout.new_rows] = given.code, layout.new_code
    partition = np.repeat(np.arange(n_part), layout.sizes).astype(np.int32)
    service = part_service[partition].astype(np.int32)
    node = np.full(layout.n_rep, -1, np.int32)
    node[layout.given_rows] = given_node
    start = np.where(np.append(nodes.up | nodes.kept, False)[node], node, -1).astype(np.int32)
    load_primary, load_secondary = _replica_loads(given, layout, code, service, cluster, start >= 0)
    primaries = np.flatnonzero(code == 0)
    primary_of = np.full(n_part, -1, np.int64)
    np.maximum.at(primary_of, partition[primaries], primaries)
    names = ("Primary", "Secondary", "Instance")
    ends = layout.starts + layout.sizes
    return _Rows(
        ids=_scatter(layout, given.ids, [None] * layout.new_rows.size),
        roles=_scatter(layout, given.roles, [names[c] for c in layout.new_code.tolist()]),
        partition=partition,
        slot=np.arange(layout.n_rep) - layout.starts[partition],
        service=service,
        node=node,
        start=start,
        move_cost=_move_costs(given, layout, services, service, use_costs),
        load_primary=load_primary,
        load_secondary=load_secondary,
        sizes=layout.sizes,
        everywhere=everywhere_of[part_service],
        partition_service=part_service.astype(np.int32),
        stateful=stateful_of[part_service],
        primary_of=primary_of.astype(np.int32),
        partition_rows=tuple(map(tuple, map(range, layout.starts.tolist(), ends.tolist()))),
        n_replicas=layout.n_rep,
    )


def _given_replicas(partitions: list) -> _Given:
    n_part = len(partitions)
    lists = [p.replicas for p in partitions]
    counts = np.fromiter(map(len, lists), np.int64, n_part)
    given = list(chain.from_iterable(lists))
    given_part = np.repeat(np.arange(n_part), counts)
    ids = list(map(attrgetter("replica_id"), given))
    order = _order_within(list(map(str, ids)), given_part)
    if order is not None:
        given = list(map(given.__getitem__, order.tolist()))
        ids = list(map(attrgetter("replica_id"), given))
    roles = list(map(attrgetter("role"), given))
    code = np.fromiter(map(_ROLE_CODES.get, roles, repeat(3)), np.int8, len(given))
    return _Given(replicas=given, ids=ids, roles=roles, code=code, partition=given_part, counts=counts)


def _layout(given: _Given, target: np.ndarray, stateful: np.ndarray) -> _Layout:
    """Rows for the given replicas and for those each partition lacks of its `target` [p]. A new replica
    is an instance (stateless), else the primary if it is its partition's first new one and the
    partition has none, else a secondary."""
    counts, n_part = given.counts, len(given.counts)
    missing = np.maximum(target - counts, 0)
    sizes = counts + missing
    starts = np.cumsum(sizes) - sizes
    given_rows = starts[given.partition] + np.arange(len(given.ids)) - (np.cumsum(counts) - counts)[given.partition]
    new_part = np.repeat(np.arange(n_part), missing)
    new_k = np.arange(new_part.size) - (np.cumsum(missing) - missing)[new_part]
    has_primary = np.bincount(given.partition[given.code == 0], minlength=n_part) > 0
    new_code = np.where(~stateful[new_part], 2, np.where((new_k == 0) & ~has_primary[new_part], 0, 1)).astype(np.int8)
    return _Layout(
        sizes=sizes,
        starts=starts,
        given_rows=given_rows,
        new_rows=starts[new_part] + counts[new_part] + new_k,
        new_code=new_code,
        n_rep=int(sizes.sum()),
    )


def _scatter(layout: _Layout, given_values: list, new_values: list) -> list:
    """One list over the rows from the given replicas' values and the new ones'."""
    if not layout.new_rows.size:
        return given_values
    out = [None] * layout.n_rep
    for row, value in zip(layout.given_rows.tolist(), given_values):
        out[row] = value
    for row, value in zip(layout.new_rows.tolist(), new_values):
        out[row] = value
    return out


def _given_nodes(given: _Given, node_ix: dict[str, int]) -> np.ndarray:
    """Each given replica's node in the input (-1: none)."""
    position = cast("dict[str | None, int]", dict(node_ix))  # None: not placed
    position[None] = -1
    nodes = map(position.__getitem__, map(attrgetter("node"), given.replicas))
    return np.fromiter(nodes, np.int32, len(given.replicas))


def _move_costs(given: _Given, layout: _Layout, services: list, service: np.ndarray, use_costs: bool) -> np.ndarray:
    """Each row's move cost: its own MoveCost, else its service's default (1 unless UseMoveCostReports)."""
    if not use_costs:
        return np.ones(layout.n_rep, np.float32)
    defaults = np.array([MOVE_COST_VALUES[s.default_move_cost] for s in services] + [0.0])
    own = np.full(layout.n_rep, -1.0)
    own[layout.given_rows] = [MOVE_COST_VALUES[c] if c else -1.0 for c in map(attrgetter("move_cost"), given.replicas)]
    return np.where(own >= 0, own, defaults[service]).astype(np.float32)


def _replica_loads(
    given: _Given, layout: _Layout, code: np.ndarray, service: np.ndarray, cluster: _Entities, running: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Loads as primary and as secondary [rows, metrics]: the service's default loads, then the loads
    replicas report for the service's metrics, the load following the role (`_loads_follow_role`;
    `running` [rows]: on an Up node in the input). An instance's load is both."""
    default_primary, default_secondary, has_metric = _default_loads(cluster)
    load_primary, load_secondary = default_primary[service], default_secondary[service]
    loads = list(map(attrgetter("loads"), given.replicas))
    keys = list(chain.from_iterable(loads))
    if keys:
        values = list(chain.from_iterable(map(dict.values, loads)))
        row = np.repeat(layout.given_rows, np.fromiter(map(len, loads), np.int64, len(loads)))
        metric = np.fromiter(map(cluster.metric_ix.get, keys, repeat(-1)), np.int64, len(keys))
        reported = metric >= 0
        reported[reported] = has_metric[service[row[reported]], metric[reported]]
        if None in values:  # no load reported
            reported &= np.array([v is not None for v in values], bool)
            values = [0.0 if v is None else v for v in values]
        value = np.array(values, np.float64).reshape(-1)
        as_primary = reported & (code[row] != 1) & (code[row] != 3)
        as_secondary = reported & (code[row] == 1)
        load_primary[row[as_primary], metric[as_primary]] = value[as_primary]
        load_secondary[row[as_secondary], metric[as_secondary]] = value[as_secondary]
    _loads_follow_role(layout, code, running, load_primary, load_secondary)
    instance = code == 2
    load_secondary[instance] = load_primary[instance]
    shape = (layout.n_rep, cluster.n_metrics)
    return load_primary.reshape(shape), load_secondary.reshape(shape)


def _loads_follow_role(
    layout: _Layout, code: np.ndarray, running: np.ndarray, load_primary: np.ndarray, load_secondary: np.ndarray
) -> None:
    """The load follows the role (SF's FailoverUnit: one primary load per partition, whichever
    replica is primary; a primary handing its role over gets the average of the secondaries' loads,
    UpdateSecondaryLoadMap): each replica's load as primary is its primary's, a running primary's
    load as secondary the average of the partition's listed secondaries (in place). A primary lost
    with its node comes back as a new replica, with the defaults of new replicas."""
    n_part = layout.sizes.size
    partition = np.repeat(np.arange(n_part), layout.sizes)
    primary_row = np.full(n_part, -1, np.int64)
    primary_row[partition[code == 0]] = np.flatnonzero(code == 0)
    led = (code != 0) & (primary_row[partition] >= 0)
    load_primary[led] = load_primary[primary_row[partition[led]]]
    listed = np.zeros(code.shape[0], bool)
    listed[layout.given_rows] = True
    secondary = listed & (code == 1)
    count = np.bincount(partition[secondary], minlength=n_part)
    sums = np.zeros((n_part, load_secondary.shape[1]), np.float64)
    np.add.at(sums, partition[secondary], load_secondary[secondary])
    primary = (code == 0) & running & (count[partition] > 0)
    load_secondary[primary] = sums[partition[primary]] / count[partition[primary], None]


def _default_loads(cluster: _Entities) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each service's default primary and secondary loads [S+1, metrics], and which metrics it has."""
    shape = (len(cluster.services) + 1, cluster.n_metrics)
    primary, secondary, has_metric = np.zeros(shape, np.float32), np.zeros(shape, np.float32), np.zeros(shape, bool)
    for si, svc in enumerate(cluster.services):
        for metric in svc.metrics:
            m = cluster.metric_ix[metric.name]
            primary[si, m], secondary[si, m] = metric.primary_load, metric.secondary_load
            has_metric[si, m] = True
    return primary, secondary, has_metric


def _partition_table(rows: _Rows, P: int) -> np.ndarray:
    """[P, K] the replica rows of each partition, -1 padded. Partitions placed on every node never
    move: they are left out."""
    on_every_node = rows.everywhere
    K = bucket(int(rows.sizes[~on_every_node].max(initial=1)))
    table = np.full((P, K), -1, np.int32)
    listed = ~on_every_node[rows.partition]
    table[rows.partition[listed], rows.slot[listed]] = np.flatnonzero(listed)
    return table


# ---------------------------------------------------------------------------------- affinity and policies


@dataclasses.dataclass(frozen=True)
class _Policies:
    """Each service's affinity and domain policies."""

    parent: np.ndarray  # int32[S] the partition of the service it has affinity to (-1: none)
    aligned: np.ndarray  # bool[S] aligned affinity
    nonpacking: np.ndarray  # bool[S] RequireDomainDistribution
    preferred: np.ndarray  # bool[S, N] PreferPrimaryDomain: where the primary should be

    def fields(self, rows: _Rows, R: int, P: int) -> dict:
        parent = self.parent[rows.service]
        return dict(
            replica_parent=_on_device(_pad(parent, (R,), -1)),
            children_of=_on_device(_children_of(parent, P)),
            replica_aligned=_on_device(_pad(self.aligned[rows.service], (R,), False)),
            service_nonpacking=_on_device(self.nonpacking),
            primary_preferred=_on_device(self.preferred),
        )


def _service_policies(cluster: _Entities) -> _Policies:
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
                preferred[si, : cluster.n_nodes] = _in_domain(cluster.nodes, policy["DomainName"])
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
            replica_home=_on_device(_pad(self.home, (R,), -1)),
            replica_upgraded=_on_device(_pad(self.prefers, (R,), False)),
            node_upgraded=_on_device(_pad(self.upgraded, (N,), False)),
        )


def _upgrade_homes(state: ClusterState, cluster: _Entities, rows: _Rows) -> _Upgrade:
    upgrade = state.upgrade or {}
    done = set(upgrade.get("UpgradeDomainsDone", [])) if upgrade.get("InProgress") else set()
    snapshot = {str(k): v for k, v in (upgrade.get("Snapshot") or {}).items()}
    ud_of = {n.name: n.upgrade_domain for n in cluster.nodes}
    home = np.full(rows.n_replicas, -1, np.int32)
    for ri, rid in rows.named(snapshot if done else {}):
        if ud_of[snapshot[str(rid)]] in done:
            home[ri] = cluster.node_ix[snapshot[str(rid)]]
    upgraded = np.array([n.upgrade_domain in done for n in cluster.nodes], bool)
    prefers = (rows.start < 0) & bool(state.settings.get("PreferUpgradedUDs") and upgraded.any())
    return _Upgrade(home=home, prefers=prefers, upgraded=upgraded)


def _history(state: ClusterState, cluster: _Entities, rows: _Rows, R: int) -> np.ndarray:
    """[R, H] anti-ping-pong: the nodes each replica left in earlier balancing runs, -1 padded; at
    least `HISTORY_WIDTH` wide, so a History that grows between rounds keeps the search's shapes."""
    node_ix = cluster.node_ix
    left = {ri: [node_ix[n] for n in state.history[str(rid)] if n in node_ix] for ri, rid in rows.named(state.history)}
    history = np.full((R, bucket(max([len(h) for h in left.values()] + [1]), HISTORY_WIDTH)), -1, np.int32)
    for ri, nodes_left in left.items():
        history[ri, : len(nodes_left)] = nodes_left
    return history


def _in_transition(state: ClusterState, cluster: _Entities, rows: _Rows) -> np.ndarray:
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
    return blocked[rows.service, rows.start]


# ---------------------------------------------------------------------------------- penalties and the index


def _constraint_fields(settings: dict, n_rep: int, use_costs: bool) -> dict:
    """Constraints with a priority (>= 0) are enforced; a unit of violation costs its priority's weight
    in SF's energy (which multiplies AvgStdDev by cost + replicas + 1000)."""
    priorities = [int(settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY]
    scale = n_rep + 1000.0
    penalty = [PRIORITY_WEIGHT.get(p, 0.0) * scale for p in priorities] + [UNPLACED_WEIGHT * scale]
    return dict(
        enforce=_on_device([p >= 0 for p in priorities] + [False]),
        penalty=_on_device(penalty, np.float32),
        swap_cost=_on_device(SWAP_COST if use_costs else 1.0, np.float32),
    )


def _unscoped_fields(R: int, P: int) -> dict:
    """Until `scope` says otherwise: nothing may move, with no movement limits."""
    unlimited = np.iinfo(np.int32).max
    return dict(
        movable=_on_device(np.zeros(R, np.int32)),
        n_movable=_on_device(0, np.int32),
        swappable=_on_device(np.zeros(P, np.int32)),
        n_swappable=_on_device(0, np.int32),
        move_penalty=_on_device(0.0, np.float32),
        move_budget=_on_device(unlimited, np.int32),
        partition_budget=_on_device(unlimited, np.int32),
    )


def _index(cluster: _Entities, rows: _Rows, R: int, P: int) -> Index:
    partitions = cluster.partitions
    return Index(
        nodes=tuple(n.name for n in cluster.nodes),
        metrics=tuple(cluster.metrics),
        services=tuple(s.name for s in cluster.services),
        partitions=tuple(zip(map(attrgetter("service"), partitions), map(attrgetter("partition_id"), partitions))),
        replica_ids=tuple(rows.ids),
        replica_roles=tuple(rows.roles),
        partition_rows=rows.partition_rows,
        input_node=_pad(rows.node, (R,), -1),
        node_of=_pad(rows.start, (R,), -1),
        primary_of=_pad(rows.primary_of, (P,), -1),
        stateful=_pad(rows.stateful, (P,), False),
        node_status=tuple(n.status for n in cluster.nodes),
        node_intent=tuple(n.deactivation_intent for n in cluster.nodes),
        node_types=tuple(n.node_type for n in cluster.nodes),
        n_nodes=cluster.n_nodes,
        n_replicas=rows.n_replicas,
        n_partitions=len(partitions),
    )


@dataclasses.dataclass(frozen=True)
class Scope:
    """What one phase's search may do: move the replicas in the bool mask `movable` [R], swap primaries
    of the partitions in `swappable` [P], never make the constraints in `enforce` [CONSTRAINTS] worse;
    charge `move_weight` AvgStdDev units per move on top of SF's energy (constraint checks: as few
    moves as possible); place replicas only on `open_nodes` [N] (None: every Up node); make at most
    `budget` movements in all and `partition_budget` moved replicas per partition (throttles); with
    `history`, never return a replica to a node it left. The search starts from `start` (node_of,
    primary_of) when given, counting movements from the phase's placement all the same; an
    `undo_share` of replica moves go back to where they started; a movable replica may trade nodes
    with one of `partners` [R] (None: the movable ones)."""

    movable: np.ndarray
    swappable: np.ndarray
    enforce: np.ndarray
    move_weight: float = 0.0
    open_nodes: np.ndarray | None = None
    budget: int | None = None
    partition_budget: int | None = None
    history: bool = False
    start: tuple[np.ndarray, np.ndarray] | None = None
    undo_share: float = UNDO_SHARE
    partners: np.ndarray | None = None


def scope(problem: Problem, node_of: np.ndarray, primary_of: np.ndarray, what: Scope) -> Problem:
    """The problem for one phase that starts from (node_of, primary_of) and may do `what`."""
    r, p = what.movable.shape[0], what.swappable.shape[0]
    moving = np.flatnonzero(what.movable).astype(np.int32)
    swapping = np.flatnonzero(what.swappable).astype(np.int32)
    pool = np.flatnonzero(what.movable if what.partners is None else what.partners).astype(np.int32)
    placed = pool[node_of[pool] >= 0]
    by_node = placed[np.argsort(node_of[placed], kind="stable")]
    node_first = np.searchsorted(node_of[by_node], np.arange(problem.node_up.shape[0] + 1)).astype(np.int32)
    start_node, start_primary = what.start if what.start is not None else (node_of, primary_of)
    unlimited = 2**31 - 1
    return dataclasses.replace(
        problem,
        initial_node=_on_device(node_of, np.int32),
        initial_primary=_on_device(primary_of, np.int32),
        start_node=_on_device(start_node, np.int32),
        start_primary=_on_device(start_primary, np.int32),
        by_node=_on_device(_pad(by_node.astype(np.int32), (r,), 0)),
        node_first=_on_device(node_first),
        undo_share=_on_device(what.undo_share, np.float32),
        movable=_on_device(_pad(moving, (r,), 0)),
        n_movable=_on_device(len(moving), np.int32),
        swappable=_on_device(_pad(swapping, (p,), 0)),
        n_swappable=_on_device(len(swapping), np.int32),
        enforce=_on_device(what.enforce, bool),
        node_open=problem.node_up if what.open_nodes is None else problem.node_up & _on_device(what.open_nodes),
        move_budget=_on_device(min(what.budget if what.budget is not None else unlimited, unlimited), np.int32),
        partition_budget=_on_device(min(what.partition_budget or unlimited, unlimited), np.int32),
        history=problem.history if what.history else _on_device(np.full(problem.history.shape, -1, np.int32)),
        features=dataclasses.replace(problem.features, history=what.history and bool((problem.history >= 0).any())),
        move_penalty=_on_device(what.move_weight * float(problem.replica_count + 1000.0), np.float32),
    )
