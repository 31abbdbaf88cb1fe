"""Cluster state -> dense, padded arrays (`Problem`) plus the host-side index back to names.

Everything the search reads lives in one immutable equinox Module shared by all chains.
Sizes are rounded up to buckets so that clusters of similar size reuse one compiled search.
Entities are sorted by name, so the encoding does not depend on the order of input lists.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from itertools import chain, repeat
from operator import attrgetter

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from plbjax import expressions
from plbjax.state import ClusterState, gc_paused

CAPACITY, PLACEMENT, FAULT_DOMAIN, UPGRADE_DOMAIN, AFFINITY, PREFERRED, THRESHOLD, UNPLACED = range(8)
CONSTRAINTS = 8
THRESHOLD_PRIORITY = 1  # ResourceThresholds: utilisation every node should end below, a soft goal
UNDO_SHARE = 0.0         # replica moves that cancel an earlier one (1 in the minimal-movement pass)
PRIORITY_SETTINGS = ("CapacityConstraintPriority", "PlacementConstraintPriority",
                     "FaultDomainConstraintPriority", "UpgradeDomainConstraintPriority",
                     "AffinityConstraintPriority", "PreferredLocationConstraintPriority")
PRIORITY_WEIGHT = {0: 100.0, 1: 10.0, 2: 1.0}  # violation penalty per priority, in AvgStdDev units
UNPLACED_WEIGHT = 1000.0                        # a replica left unplaced, in AvgStdDev units
SWAP_COST = 0.1             # SF's SwapCost, used with UseMoveCostReports
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

    affinity: bool = False      # some service has an affinity correlation
    defrag: bool = False        # some metric is a defragmentation metric
    thresholds: bool = False    # ResourceThresholds are set
    preferred: bool = False     # PreferPrimaryDomain or upgrade snapshot nodes
    history: bool = False       # anti-ping-pong History applies (balancing)


class Problem(eqx.Module):
    """The cluster, as arrays. N nodes, R replicas, P partitions, S services, M metrics (all padded)."""

    features: Features = eqx.field(static=True)

    # nodes
    node_up: Bool[Array, " N"]              # Up and real: counted in deviations, may receive replicas
    node_open: Bool[Array, " N"]            # may receive replicas in this phase
    capacity: Float[Array, "N M"]           # capacity in force (buffered unless told otherwise), inf if unlimited
    threshold_load: Float[Array, "N M"]     # ResourceThresholds x capacity, inf where none
    metric_nodes: Bool[Array, "M N"]        # nodes counted in a metric's global deviation
    metric_node_count: Float[Array, " M"]
    metric_defrag: Bool[Array, " M"]        # defragmentation metric: pack instead of spread
    fd_leaf_up: Bool[Array, " Df"]          # leaf fault domains (by domain id) holding Up nodes
    ud_up: Bool[Array, " Du"]               # upgrade domains (by domain id) holding Up nodes
    fd_tree: Int[Array, "N Lf"]             # column 0 is the root, then one fault-domain level per column
    ud_tree: Int[Array, "N 2"]              # root, upgrade domain
    # replicas
    replica_partition: Int[Array, " R"]
    replica_service: Int[Array, " R"]
    replica_parent: Int[Array, " R"]        # partition of the service it has affinity to (-1: none)
    replica_aligned: Bool[Array, " R"]      # aligned affinity: primary with primary, secondary with secondary
    children_of: Int[Array, "P Kc"]         # child replicas of each (parent) partition, -1 padded
    replica_home: Int[Array, " R"]          # upgrade snapshot node to return to (PreferredLocation; -1: none)
    replica_upgraded: Bool[Array, " R"]     # a new replica that prefers an upgraded domain (PreferUpgradedUDs)
    node_upgraded: Bool[Array, " N"]        # in an upgrade domain the running upgrade is done with
    load_primary: Float[Array, "R M"]       # load of the replica when it is (or becomes) the primary
    load_secondary: Float[Array, "R M"]     # load as a secondary; instances use load_primary for both
    move_cost: Float[Array, " R"]
    node_move_factor: Float[Array, " N"]    # moving onto a node costs move_cost x this: higher-priority nodes
                                            # cost up to 1.5x, so lower-priority targets are preferred
    # partitions
    partition_replicas: Int[Array, "P K"]   # replica indices, -1 padded
    partition_service: Int[Array, " P"]
    # services
    service_class: Int[Array, " S"]         # placement class (allowed node set)
    service_metrics: Int[Array, "S Ms"]     # metric index of each local-domain slot, -1 padded
    service_nonpacking: Bool[Array, " S"]   # RequireDomainDistribution: one replica per fault domain
    primary_preferred: Bool[Array, "S N"]   # PreferPrimaryDomain: where the primary should be
    # placement classes
    class_nodes: Int[Array, "C N"]          # allowed Up nodes of the class, padded
    class_node_count: Int[Array, " C"]
    class_allowed: Bool[Array, "C N"]       # the same set as a mask: nodes counted in a service's local deviation
    fd_children: Int[Array, "C Df"]         # eligible child domains under each fault domain, per class
    ud_children: Int[Array, "C Du"]
    # energy weights: AvgStdDev = sum(global_weight * dev) + sum(local_weight * dev)
    global_weight: Float[Array, " M"]
    local_weight: Float[Array, "S Ms"]
    # initial placement
    initial_node: Int[Array, " R"]          # -1: unplaced or padding
    initial_primary: Int[Array, " P"]       # -1: none
    swap_cost: Float[Array, ""]
    # what the search may touch
    movable: Int[Array, " R"]               # replica indices that may move, padded
    n_movable: Int[Array, ""]
    swappable: Int[Array, " P"]             # partitions whose primary may swap, padded
    n_swappable: Int[Array, ""]
    # constraints, indexed by CAPACITY ... UNPLACED
    enforce: Bool[Array, " 8"]              # a move may not make this constraint worse
    penalty: Float[Array, " 8"]             # energy per unit of violation (by SF priority; 0: off)
    move_penalty: Float[Array, ""]          # energy per unit of movement cost, on top of SF's (a phase's)
    move_budget: Int[Array, ""]             # most movements (moves and swaps) a phase may make: throttles
    partition_budget: Int[Array, ""]        # most moved replicas per partition
    history: Int[Array, "R H"]              # nodes a replica was balanced away from (-1 padded)
    # scalars
    replica_count: Float[Array, ""]         # SF's movement factor adds this (and 1000) to the move cost
    # set by `scope`
    start_node: Int[Array, " R"] | None = None      # where the search starts (default: the initial placement)
    start_primary: Int[Array, " P"] | None = None
    by_node: Int[Array, " R"] | None = None         # movable replicas ordered by initial node, padded
    node_first: Int[Array, " N+1"] | None = None    # by_node[node_first[n]:node_first[n+1]] started on node n
    undo_share: Float[Array, ""] | None = None      # share of replica moves that go back to the initial node

    @property
    def shape(self) -> dict[str, int]:
        r, m = self.load_primary.shape
        p, k = self.partition_replicas.shape
        return dict(N=self.node_up.shape[0], R=r, M=m, P=p, K=k, S=self.service_class.shape[0],
                    Ms=self.service_metrics.shape[1], C=self.class_nodes.shape[0])


@dataclasses.dataclass(frozen=True)
class Index:
    """Host-side names and initial placement, to decode arrays back into the document's terms."""

    nodes: tuple[str, ...]
    metrics: tuple[str, ...]
    services: tuple[str, ...]
    partitions: tuple[tuple[str, object], ...]     # (service name, PartitionId as given)
    replica_ids: tuple[object, ...]                 # ReplicaId as given; None for replicas to create
    replica_roles: tuple[str, ...]                  # role in the input (or the role a new one gets)
    partition_rows: tuple[tuple[int, ...], ...]     # replica indices of each partition
    input_node: np.ndarray                          # int32[R] node in the input (-1: none or padding)
    node_of: np.ndarray                             # int32[R] node the search starts from (-1: unplaced)
    primary_of: np.ndarray                          # int32[P] primary replica in the input (-1: none)
    stateful: np.ndarray                            # bool[P]
    node_status: tuple[str, ...]                    # Up / Down / Disabled
    node_types: tuple[str | None, ...]
    n_nodes: int
    n_replicas: int
    n_partitions: int


def _domain_tree(paths: list[tuple[str, ...]], n_pad: int) -> tuple[np.ndarray, list[tuple[str, ...]]]:
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
    return tree, list(ids)


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


@dataclasses.dataclass(frozen=True)
class _NewReplica:
    """A replica the input lacks (fewer replicas than the target): created by placement."""

    role: str
    replica_id: None = None
    node: None = None
    loads: dict = dataclasses.field(default_factory=dict)
    move_cost: None = None


_ROLE_CODES = {"Primary": 0, "Secondary": 1, "Instance": 2}    # any other role: 3


@dataclasses.dataclass(frozen=True)
class _Rows:
    """The replicas as encoded, partition by partition: each partition's replicas in order of
    str(ReplicaId), then the ones it lacks (to create). Arrays over replicas [n] or partitions [p]."""

    ids: list                    # ReplicaId as given; None for a replica to create
    roles: list                  # role in the input, or the role a new one gets
    partition: np.ndarray        # int32[n]
    slot: np.ndarray             # int[n] position within its partition
    service: np.ndarray          # int32[n]
    node: np.ndarray             # int32[n] node in the input (-1: none)
    start: np.ndarray            # int32[n] node the search starts from (-1: unplaced or its node not Up)
    move_cost: np.ndarray        # float32[n]
    load_primary: np.ndarray     # float32[n, metrics]
    load_secondary: np.ndarray   # float32[n, metrics]
    sizes: np.ndarray            # int[p] replicas, those to create included
    everywhere: np.ndarray       # bool[p] of a service with one instance per node
    partition_service: np.ndarray  # int32[p]
    stateful: np.ndarray         # bool[p]
    primary_of: np.ndarray       # int32[p] its (last) primary's row, -1: none
    partition_rows: tuple        # replica rows of each partition
    n_replicas: int

    def named(self, by_id: dict) -> Iterator[tuple[int, object]]:
        """(row, ReplicaId) of the replicas whose str(ReplicaId) is a key of `by_id`, in row order."""
        if by_id:
            for row, rid in enumerate(self.ids):
                if rid is not None and str(rid) in by_id:
                    yield row, rid


def _order_within(texts: list[str], part: np.ndarray) -> np.ndarray | None:
    """The stable order that sorts `texts` within each run of equal `part` (non-decreasing), as
    sorted() would; None when they already are."""
    if not texts:
        return None
    longest = max(map(len, texts))
    if longest <= 64 and "\0" not in "".join(texts):    # NumPy's strings compare as Python's but for NULs
        u = np.array(texts, dtype=f"<U{longest}")
        if not ((part[1:] == part[:-1]) & (u[1:] < u[:-1])).any():
            return None
        return np.lexsort((u, part))
    keys = list(zip(part.tolist(), texts))
    order = sorted(range(len(texts)), key=keys.__getitem__)
    return None if order == list(range(len(texts))) else np.array(order, np.int64)


def _replica_rows(partitions: list, services: list, service_ix: dict[str, int], allowed: list[np.ndarray],
                  node_ix: dict[str, int], up: np.ndarray, metric_ix: dict[str, int], n_metrics: int,
                  use_costs: bool) -> _Rows:
    """The replica rows of `partitions` (sorted), column by column. `allowed[s]`: nodes service s may use."""
    n_part = len(partitions)
    part_service = np.fromiter(map(service_ix.__getitem__, map(attrgetter("service"), partitions)), np.int64, n_part)
    lists = [p.replicas for p in partitions]
    counts = np.fromiter(map(len, lists), np.int64, n_part)
    given = list(chain.from_iterable(lists))
    n_given = len(given)
    given_part = np.repeat(np.arange(n_part), counts)
    ids = list(map(attrgetter("replica_id"), given))
    order = _order_within(list(map(str, ids)), given_part)
    if order is not None:
        given = list(map(given.__getitem__, order.tolist()))
        ids = list(map(attrgetter("replica_id"), given))
    roles = list(map(attrgetter("role"), given))
    code = np.fromiter(map(_ROLE_CODES.get, roles, repeat(3)), np.int8, n_given)

    # the replicas each partition lacks, after its own
    stateful_of = np.array([s.stateful for s in services] + [False], bool)
    target_of = np.array([int(allowed[si].sum()) if s.target < 0 else s.target for si, s in enumerate(services)]
                         + [0], np.int64)
    everywhere_of = np.array([s.target < 0 for s in services] + [False], bool)
    missing = np.maximum(target_of[part_service] - counts, 0)
    sizes = counts + missing
    starts = np.cumsum(sizes) - sizes
    n_rep = int(sizes.sum())
    given_rows = starts[given_part] + np.arange(n_given) - (np.cumsum(counts) - counts)[given_part]
    new_part = np.repeat(np.arange(n_part), missing)
    new_k = np.arange(new_part.size) - (np.cumsum(missing) - missing)[new_part]
    new_rows = starts[new_part] + counts[new_part] + new_k
    has_primary = np.bincount(given_part[code == 0], minlength=n_part) > 0
    new_code = np.where(~stateful_of[part_service[new_part]], 2,
                        np.where((new_k == 0) & ~has_primary[new_part], 0, 1)).astype(np.int8)

    def scatter(given_values: list, new_values: list) -> list:
        if not new_rows.size:
            return given_values
        out = [None] * n_rep
        for row, value in zip(given_rows.tolist(), given_values):
            out[row] = value
        for row, value in zip(new_rows.tolist(), new_values):
            out[row] = value
        return out

    names = ("Primary", "Secondary", "Instance")
    all_ids = scatter(ids, [None] * new_rows.size)
    all_roles = scatter(roles, [names[c] for c in new_code.tolist()])
    all_code = np.empty(n_rep, np.int8)
    all_code[given_rows], all_code[new_rows] = code, new_code
    partition = np.repeat(np.arange(n_part), sizes).astype(np.int32)
    service = part_service[partition].astype(np.int32)

    position = dict(node_ix)
    position[None] = -1
    node = np.full(n_rep, -1, np.int32)
    node[given_rows] = np.fromiter(map(position.__getitem__, map(attrgetter("node"), given)), np.int32, n_given)
    start = np.where(np.append(up, False)[node], node, -1).astype(np.int32)

    move_cost = np.ones(n_rep, np.float32)
    if use_costs:
        defaults = np.array([MOVE_COST_VALUES[s.default_move_cost] for s in services] + [0.0])
        own = np.full(n_rep, -1.0)
        own[given_rows] = [MOVE_COST_VALUES[c] if c else -1.0 for c in map(attrgetter("move_cost"), given)]
        move_cost = np.where(own >= 0, own, defaults[service]).astype(np.float32)

    # loads: the service's default loads, then the loads replicas report for the service's metrics
    default_primary = np.zeros((len(services) + 1, n_metrics), np.float32)
    default_secondary = np.zeros((len(services) + 1, n_metrics), np.float32)
    has_metric = np.zeros((len(services) + 1, n_metrics), bool)
    for si, svc in enumerate(services):
        for metric in svc.metrics:
            m = metric_ix[metric.name]
            default_primary[si, m], default_secondary[si, m] = metric.primary_load, metric.secondary_load
            has_metric[si, m] = True
    load_primary, load_secondary = default_primary[service], default_secondary[service]
    loads = list(map(attrgetter("loads"), given))
    keys = list(chain.from_iterable(loads))
    if keys:
        values = list(chain.from_iterable(map(dict.values, loads)))
        row = np.repeat(given_rows, np.fromiter(map(len, loads), np.int64, n_given))
        metric = np.fromiter(map(metric_ix.get, keys, repeat(-1)), np.int64, len(keys))
        reported = metric >= 0
        reported[reported] = has_metric[service[row[reported]], metric[reported]]
        if None in values:      # no load reported
            reported &= np.array([v is not None for v in values], bool)
            values = [0.0 if v is None else v for v in values]
        value = np.array(values, np.float64).reshape(-1)
        as_primary = reported & (all_code[row] != 1) & (all_code[row] != 3)
        as_secondary = reported & (all_code[row] == 1)
        load_primary[row[as_primary], metric[as_primary]] = value[as_primary]
        load_secondary[row[as_secondary], metric[as_secondary]] = value[as_secondary]
    instance = all_code == 2
    load_secondary[instance] = load_primary[instance]

    primaries = np.flatnonzero(all_code == 0)
    primary_of = np.full(n_part, -1, np.int64)
    np.maximum.at(primary_of, partition[primaries], primaries)
    ends = starts + sizes
    return _Rows(
        ids=all_ids, roles=all_roles, partition=partition, slot=np.arange(n_rep) - starts[partition],
        service=service, node=node, start=start, move_cost=move_cost,
        load_primary=load_primary.reshape(n_rep, n_metrics), load_secondary=load_secondary.reshape(n_rep, n_metrics),
        sizes=sizes, everywhere=everywhere_of[part_service], partition_service=part_service.astype(np.int32),
        stateful=stateful_of[part_service], primary_of=primary_of.astype(np.int32),
        partition_rows=tuple(map(tuple, map(range, starts.tolist(), ends.tolist()))), n_replicas=n_rep)


def _pad(a: np.ndarray, shape: tuple[int, ...], fill) -> np.ndarray:
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


def encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None = None) -> tuple[Problem, Index]:
    """Encode `state`, with the replicas it lacks added (unplaced) and those on nodes that are not Up
    unplaced. No replica moves until `scope` says which may, per phase. A child of a service with one
    instance per node may go where its parent may, or only to the nodes `parent_hosts` names for it.

    Capacities are buffered (less NodeBufferPercentage) in normal operation; during an upgrade SF
    may fill nodes up to their full capacity.
    """
    with gc_paused():       # a million replicas make millions of objects, none of them garbage
        return _encode(state, parent_hosts)


def _encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None) -> tuple[Problem, Index]:
    buffered = not (state.upgrade or {}).get("InProgress", False)
    settings = state.settings
    # SF's (and reference 004's) deterministic order: priority descending, then name
    nodes = sorted(state.nodes, key=lambda n: (-n.priority, n.name))
    services = sorted(state.services, key=lambda s: (-s.priority, s.name))
    rank = {s.name: i for i, s in enumerate(services)}
    keys = list(zip(map(rank.__getitem__, map(attrgetter("service"), state.partitions)),
                    map(str, map(attrgetter("partition_id"), state.partitions))))
    partitions = list(map(state.partitions.__getitem__, sorted(range(len(keys)), key=keys.__getitem__)))
    metrics = list(state.metric_names())
    node_ix = {n.name: i for i, n in enumerate(nodes)}
    service_ix = {s.name: i for i, s in enumerate(services)}
    metric_ix = {m: i for i, m in enumerate(metrics)}

    n_nodes, n_metrics = len(nodes), max(len(metrics), 1)
    N, M, S = bucket(n_nodes, 8), bucket(n_metrics), bucket(len(services))

    # ---- nodes
    up = np.array([n.status == "Up" for n in nodes], bool)
    capacity = np.full((n_nodes, n_metrics), np.inf, np.float32)
    threshold_load = np.full((n_nodes, n_metrics), np.inf, np.float32)
    for i, node in enumerate(nodes):
        for name, value in node.capacities.items():
            if name in metric_ix:
                buffer = state.node_buffer_percentage.get(name, 0.0) if buffered else 0.0
                capacity[i, metric_ix[name]] = np.floor(value * (1.0 - buffer)) if buffer else value
                if name in state.resource_thresholds:
                    threshold_load[i, metric_ix[name]] = value * state.resource_thresholds[name]
    fd_tree, _ = _domain_tree([n.fault_domain for n in nodes], N)
    ud_tree, _ = _domain_tree([(n.upgrade_domain,) for n in nodes], N)

    # ---- placement classes: distinct allowed node sets
    props = [n.properties for n in nodes]
    class_of_mask: dict[bytes, int] = {}
    masks: list[np.ndarray] = []
    service_class = np.zeros(S, np.int32)
    blocked: dict[str, set[str]] = {}     # ServiceTypeName -> nodes blocklisted for it
    for entry in state.block_list:
        blocked.setdefault(entry["ServiceTypeName"], set()).add(entry["NodeName"])
    # services share constraints, block lists and domains: each mask is computed once
    selected, open_to, in_domain = {}, {}, {}
    allowed_of = {}
    for svc in services:
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
    everywhere = {s.name for s in services if s.target < 0}
    for si, svc in enumerate(services):
        mask = allowed_of[svc.name]
        for corr in svc.correlations:      # a parent on every node: the child goes where the parent is
            if corr["ServiceName"] in everywhere:
                hosts = (parent_hosts or {}).get(corr["ServiceName"])
                mask = mask & (allowed_of[corr["ServiceName"]] if hosts is None
                               else np.array([n.name in hosts for n in nodes], bool))
        service_class[si] = class_of_mask.setdefault(mask.tobytes(), len(masks))
        if service_class[si] == len(masks):
            masks.append(mask)
    C = bucket(len(masks), 4)
    class_nodes = np.zeros((C, N), np.int32)
    class_count = np.zeros(C, np.int32)
    fd_children = np.zeros((C, int(fd_tree.max()) + 1), np.int32)
    ud_children = np.zeros((C, int(ud_tree.max()) + 1), np.int32)
    for c, mask in enumerate(masks):
        allowed = np.flatnonzero(mask)
        class_nodes[c, : len(allowed)] = allowed
        class_count[c] = len(allowed)
        fd_children[c] = _eligible_children(fd_tree[:n_nodes], mask)
        ud_children[c] = _eligible_children(ud_tree[:n_nodes], mask)

    # ---- energy weights (SF: domain score = sum(w * dev) / sum(w); AvgStdDev = 0.25 * mean of the
    # local domains + 0.75 * global). A local domain exists for services with two or more partitions.
    partitions_of = {s.name: 0 for s in services}
    for part in partitions:
        partitions_of[part.service] += 1
    ms = max([len(s.metrics) for s in services] + [1])
    service_metrics = np.full((S, ms), -1, np.int32)
    local_w = np.zeros((S, ms), np.float32)
    weight_sum = np.zeros(M, np.float64)
    weight_n = np.zeros(M, np.float64)
    metric_nodes = np.zeros((M, N), bool)
    for si, svc in enumerate(services):
        w = np.array([m.weight for m in svc.metrics], np.float64)
        for k, metric in enumerate(svc.metrics):
            m = metric_ix[metric.name]
            service_metrics[si, k] = m
            weight_sum[m] += metric.weight
            weight_n[m] += 1
            metric_nodes[m, :n_nodes] |= masks[service_class[si]]
        if partitions_of[svc.name] >= 2 and w.sum() > 1e-7:
            local_w[si, : len(w)] = w / w.sum()
    global_w = np.zeros(M, np.float64)
    for m, name in enumerate(metrics):
        global_w[m] = state.global_metric_weights.get(name, weight_sum[m] / max(weight_n[m], 1))
    global_w = global_w / global_w.sum() if global_w.sum() > 1e-7 else global_w * 0
    n_local = int((local_w.sum(axis=1) > 0).sum())
    local_domain = float(settings["LocalDomainWeight"])   # SF: 0.25 to the per-service domains' mean
    global_w *= 1.0 - local_domain
    local_w *= local_domain / max(n_local, 1)

    # ---- replicas and partitions
    use_costs = bool(settings.get("UseMoveCostReports", False))
    rows = _replica_rows(partitions, services, service_ix, [masks[c] for c in service_class[: len(services)]],
                         node_ix, up, metric_ix, n_metrics, use_costs)
    n_rep, n_part = rows.n_replicas, len(partitions)
    rep_ids, rep_roles, part_rows = rows.ids, rows.roles, rows.partition_rows
    R, P = bucket(n_rep, 8), bucket(n_part, 8)
    # partitions placed on every node never move; they are left out of the partition table
    on_every_node = rows.everywhere
    K = bucket(int(rows.sizes[~on_every_node].max(initial=1)))
    partition_replicas = np.full((P, K), -1, np.int32)
    table = ~on_every_node[rows.partition]
    partition_replicas[rows.partition[table], rows.slot[table]] = np.flatnonzero(table)
    rep_node_a, rep_start_a = rows.node, rows.start
    rep_part_a, rep_svc_a = rows.partition, rows.service
    lp_a, ls_a, primary_a = rows.load_primary, rows.load_secondary, rows.primary_of
    rep_cost, part_svc, stateful = rows.move_cost, rows.partition_service, rows.stateful

    # affinity: a child replica belongs with its parent's replicas (the parent has one partition)
    first_partition = {}
    for pi, part in enumerate(partitions):
        first_partition.setdefault(part.service, pi)
    parent_of_service, aligned_of_service = np.full(S, -1, np.int32), np.zeros(S, bool)
    nonpacking, preferred = np.zeros(S, bool), np.ones((S, N), bool)
    for si, svc in enumerate(services):
        for corr in (c for c in svc.correlations if c["ServiceName"] not in everywhere):
            parent_of_service[si] = first_partition.get(corr["ServiceName"], -1)
            aligned_of_service[si] = corr["Scheme"] == "AlignedAffinity" and svc.stateful
        for policy in svc.placement_policies:
            if policy["Type"] == "RequireDomainDistribution":
                nonpacking[si] = True
            elif policy["Type"] == "PreferPrimaryDomain":
                preferred[si, :n_nodes] = _in_domain(nodes, policy["DomainName"])

    # upgrades: replicas go back to their snapshot node once its upgrade domain is done
    upgrade = state.upgrade or {}
    done = set(upgrade.get("UpgradeDomainsDone", [])) if upgrade.get("InProgress") else set()
    snapshot = {str(k): v for k, v in (upgrade.get("Snapshot") or {}).items()}
    ud_of = {n.name: n.upgrade_domain for n in nodes}
    home = np.full(n_rep, -1, np.int32)
    for ri, rid in rows.named(snapshot if done else {}):
        if ud_of[snapshot[str(rid)]] in done:
            home[ri] = node_ix[snapshot[str(rid)]]
    # PreferUpgradedUDs: replicas to place prefer the upgrade domains already done (SF: a soft
    # PreferredLocation, so priority 2 by default)
    upgraded = np.array([n.upgrade_domain in done for n in nodes], bool)
    prefers = (rep_start_a < 0) & bool(settings.get("PreferUpgradedUDs") and upgraded.any())

    # anti-ping-pong: nodes each replica left in earlier balancing runs
    left = {ri: [node_ix[n] for n in state.history[str(rid)] if n in node_ix] for ri, rid in rows.named(state.history)}
    history = np.full((R, bucket(max([len(h) for h in left.values()] + [1]))), -1, np.int32)
    for ri, nodes_left in left.items():
        history[ri, : len(nodes_left)] = nodes_left

    priorities = [int(settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY]
    scale = n_rep + 1000.0  # SF's energy multiplies AvgStdDev by (cost + replicas + 1000)
    penalty = [PRIORITY_WEIGHT.get(p, 0.0) * scale for p in priorities] + [UNPLACED_WEIGHT * scale]
    problem = Problem(
        features=Features(affinity=bool((parent_of_service >= 0).any()),
                          defrag=any(state.defragmentation_metrics.get(m) for m in metrics),
                          thresholds=bool(np.isfinite(threshold_load).any()),
                          preferred=bool((home >= 0).any() or prefers.any() or not preferred.all())),
        node_up=jnp.asarray(_pad(up, (N,), False)),
        node_open=jnp.asarray(_pad(up, (N,), False)),
        capacity=jnp.asarray(_pad(capacity, (N, M), np.float32(np.inf))),
        threshold_load=jnp.asarray(_pad(threshold_load, (N, M), np.float32(np.inf))),
        metric_nodes=jnp.asarray(metric_nodes),
        metric_node_count=jnp.asarray(metric_nodes.sum(axis=1).astype(np.float32)),
        metric_defrag=jnp.asarray(_pad(np.array([bool(state.defragmentation_metrics.get(m)) for m in metrics]
                                                + [False] * (n_metrics - len(metrics))), (M,), False)),
        fd_leaf_up=jnp.asarray(np.isin(np.arange(fd_children.shape[1]), fd_tree[:n_nodes][up, -1])),
        ud_up=jnp.asarray(np.isin(np.arange(ud_children.shape[1]), ud_tree[:n_nodes][up, -1])),
        fd_tree=jnp.asarray(fd_tree),
        ud_tree=jnp.asarray(ud_tree),
        replica_partition=jnp.asarray(_pad(rep_part_a, (R,), 0)),
        replica_service=jnp.asarray(_pad(rep_svc_a, (R,), 0)),
        replica_parent=jnp.asarray(_pad(parent_of_service[rep_svc_a], (R,), -1)),
        children_of=jnp.asarray(_children_of(parent_of_service[rep_svc_a], P)),
        replica_aligned=jnp.asarray(_pad(aligned_of_service[rep_svc_a], (R,), False)),
        replica_home=jnp.asarray(_pad(home, (R,), -1)),
        replica_upgraded=jnp.asarray(_pad(prefers, (R,), False)),
        node_upgraded=jnp.asarray(_pad(upgraded, (N,), False)),
        load_primary=jnp.asarray(_pad(lp_a, (R, M), np.float32(0))),
        load_secondary=jnp.asarray(_pad(ls_a, (R, M), np.float32(0))),
        move_cost=jnp.asarray(_pad(np.array(rep_cost, np.float32).reshape(-1), (R,), np.float32(0))),
        node_move_factor=jnp.asarray(_pad(_priority_factor([n.priority for n in nodes]), (N,), np.float32(1))),
        partition_replicas=jnp.asarray(partition_replicas),
        partition_service=jnp.asarray(_pad(np.array(part_svc, np.int32).reshape(-1), (P,), 0)),
        service_class=jnp.asarray(service_class),
        service_metrics=jnp.asarray(service_metrics),
        service_nonpacking=jnp.asarray(nonpacking),
        primary_preferred=jnp.asarray(preferred),
        class_nodes=jnp.asarray(class_nodes),
        class_node_count=jnp.asarray(class_count),
        class_allowed=jnp.asarray(np.stack([_pad(m, (N,), False) for m in masks]
                                           + [np.zeros(N, bool)] * (C - len(masks)))),
        fd_children=jnp.asarray(fd_children),
        ud_children=jnp.asarray(ud_children),
        global_weight=jnp.asarray(global_w.astype(np.float32)),
        local_weight=jnp.asarray(local_w.astype(np.float32)),
        initial_node=jnp.asarray(_pad(rep_start_a, (R,), -1)),
        initial_primary=jnp.asarray(_pad(primary_a, (P,), -1)),
        swap_cost=jnp.asarray(SWAP_COST if use_costs else 1.0, jnp.float32),
        movable=jnp.zeros(R, jnp.int32),
        n_movable=jnp.asarray(0, jnp.int32),
        swappable=jnp.zeros(P, jnp.int32),
        n_swappable=jnp.asarray(0, jnp.int32),
        enforce=jnp.asarray([p >= 0 for p in priorities] + [False]),
        penalty=jnp.asarray(penalty, jnp.float32),
        move_penalty=jnp.asarray(0.0, jnp.float32),
        move_budget=jnp.asarray(np.iinfo(np.int32).max, jnp.int32),
        partition_budget=jnp.asarray(np.iinfo(np.int32).max, jnp.int32),
        history=jnp.asarray(history),
        replica_count=jnp.asarray(float(n_rep), jnp.float32),
    )
    index = Index(
        nodes=tuple(n.name for n in nodes), metrics=tuple(metrics),
        services=tuple(s.name for s in services),
        partitions=tuple(zip(map(attrgetter("service"), partitions), map(attrgetter("partition_id"), partitions))),
        replica_ids=tuple(rep_ids), replica_roles=tuple(rep_roles),
        partition_rows=part_rows,
        input_node=_pad(rep_node_a, (R,), -1), node_of=_pad(rep_start_a, (R,), -1),
        primary_of=_pad(primary_a, (P,), -1),
        stateful=_pad(np.array(stateful, bool).reshape(-1), (P,), False),
        node_status=tuple(n.status for n in nodes),
        node_types=tuple(n.node_type for n in nodes),
        n_nodes=n_nodes, n_replicas=n_rep, n_partitions=n_part,
    )
    return problem, index


def scope(problem: Problem, node_of: np.ndarray, primary_of: np.ndarray, movable: np.ndarray,
          swappable: np.ndarray, enforce: np.ndarray, move_weight: float = 0.0,
          open_nodes: np.ndarray | None = None, budget: int | None = None,
          partition_budget: int | None = None, history: bool = False,
          start: tuple[np.ndarray, np.ndarray] | None = None, undo_share: float = UNDO_SHARE,
          partners: np.ndarray | None = None) -> Problem:
    """The problem for one phase: it starts from (node_of, primary_of), moves the replicas in the
    bool mask `movable` [R], swaps primaries of the partitions in `swappable` [P], may not make the
    constraints in `enforce` [CONSTRAINTS] worse, and charges `move_weight` AvgStdDev units per move
    on top of SF's energy (constraint checks: as few moves as possible); only `open_nodes` [N] (default:
    every Up node) receive replicas; at most `budget` movements in all and `partition_budget` moved
    replicas per partition (throttles); with `history`, no replica returns to a node it left. The
    search starts from `start` (node_of, primary_of) when given, counting movements from (node_of,
    primary_of) all the same; an `undo_share` of replica moves go back to where they started. A
    movable replica may trade nodes with one of `partners` [R] (default: the movable ones)."""
    r, p = movable.shape[0], swappable.shape[0]
    moving = np.flatnonzero(movable).astype(np.int32)
    swapping = np.flatnonzero(swappable).astype(np.int32)
    pool = np.flatnonzero(movable if partners is None else partners).astype(np.int32)
    placed = pool[node_of[pool] >= 0]
    by_node = placed[np.argsort(node_of[placed], kind="stable")]
    node_first = np.searchsorted(node_of[by_node], np.arange(problem.node_up.shape[0] + 1)).astype(np.int32)
    start_node, start_primary = start if start is not None else (node_of, primary_of)
    return dataclasses.replace(
        problem,
        initial_node=jnp.asarray(node_of, jnp.int32), initial_primary=jnp.asarray(primary_of, jnp.int32),
        start_node=jnp.asarray(start_node, jnp.int32), start_primary=jnp.asarray(start_primary, jnp.int32),
        by_node=jnp.asarray(_pad(by_node.astype(np.int32), (r,), 0)), node_first=jnp.asarray(node_first),
        undo_share=jnp.asarray(undo_share, jnp.float32),
        movable=jnp.asarray(_pad(moving, (r,), 0)), n_movable=jnp.asarray(len(moving), jnp.int32),
        swappable=jnp.asarray(_pad(swapping, (p,), 0)), n_swappable=jnp.asarray(len(swapping), jnp.int32),
        enforce=jnp.asarray(enforce, bool),
        node_open=problem.node_up if open_nodes is None else problem.node_up & jnp.asarray(open_nodes),
        move_budget=jnp.asarray(min(budget if budget is not None else 2**31 - 1, 2**31 - 1), jnp.int32),
        partition_budget=jnp.asarray(min(partition_budget or 2**31 - 1, 2**31 - 1), jnp.int32),
        history=problem.history if history else jnp.full_like(problem.history, -1),
        features=dataclasses.replace(problem.features, history=history and bool((problem.history >= 0).any())),
        move_penalty=jnp.asarray(move_weight * float(problem.replica_count + 1000.0), jnp.float32))
