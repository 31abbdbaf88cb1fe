"""The encoding stages that do not depend on the replicas, on the host: the entities in encoding
order, the nodes (status, capacities, domain trees), the placement classes and the energy weights.
An update of the replicas (`updates`) reuses them (`Stages`).
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter

import numpy as np

from plbjax.sf._encoding.arrays import pad, padded
from plbjax.sf._encoding.energy_terms import energy_terms
from plbjax.sf._state import ClusterState, NodeStatus, node_mask


@dataclasses.dataclass(frozen=True)
class Stages:
    """The stages that do not depend on the replicas (entities, nodes, placement classes, energy
    weights): an update of the replicas reuses them."""

    cluster: Entities
    nodes: Nodes
    classes: Classes
    weights: Weights

    def allowed(self) -> list[np.ndarray]:
        """[S] the node mask of each service's placement class."""
        classes = self.classes
        return [classes.masks[c] for c in classes.service_class[: len(self.cluster.services)]]


# ---------------------------------------------------------------------------------- entities


@dataclasses.dataclass(frozen=True)
class Entities:
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
    default_load_everywhere: bool = False  # UseDefaultLoadForServiceOnEveryNode
    higher_child: bool = True  # AllowHigherChildTargetReplicaCountForAffinity
    move_costs: tuple[tuple[str, float], ...] = ()  # SF's MoveCost<Cost>Value settings, by cost
    separate_secondary_costs: bool = True  # UseSeparateSecondaryMoveCost: each secondary its own move cost

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_metrics(self) -> int:
        return max(len(self.metrics), 1)

    @property
    def N(self) -> int:  # the padded sizes, named as in Problem
        return padded("N", self.n_nodes)

    @property
    def M(self) -> int:
        return padded("M", self.n_metrics)

    @property
    def S(self) -> int:
        return padded("S", len(self.services))


_MOVE_COST_SETTINGS = (
    ("Zero", "MoveCostZeroValue"),
    ("Low", "MoveCostLowValue"),
    ("Medium", "MoveCostMediumValue"),
    ("High", "MoveCostHighValue"),
)


def entities(state: ClusterState) -> Entities:
    """SF's (and reference 004's) deterministic order: priority descending, then name; partitions by
    service, then str(PartitionId)."""
    nodes = sorted(state.nodes, key=lambda n: (-n.priority, n.name))
    services = sorted(state.services, key=lambda s: (-s.priority, s.name))
    service_ix = {s.name: i for i, s in enumerate(services)}
    order = partition_order(state, service_ix)
    metrics = list(state.metric_names())
    return Entities(
        nodes=nodes,
        services=services,
        partitions=in_order(state, order),
        metrics=metrics,
        node_ix={n.name: i for i, n in enumerate(nodes)},
        service_ix=service_ix,
        metric_ix={m: i for i, m in enumerate(metrics)},
        everywhere=frozenset(s.name for s in services if s.target < 0),
        order=order,
        default_load_everywhere=bool(state.settings["UseDefaultLoadForServiceOnEveryNode"]),
        higher_child=bool(state.settings["AllowHigherChildTargetReplicaCountForAffinity"]),
        move_costs=tuple((cost, float(state.settings[name])) for cost, name in _MOVE_COST_SETTINGS),
        separate_secondary_costs=bool(state.settings["UseSeparateSecondaryMoveCost"]),
    )


def partition_order(state: ClusterState, service_ix: dict[str, int]) -> np.ndarray:
    """The positions in `state.partitions` of its partitions by service (in encoding order), then
    str(PartitionId)."""
    keys = list(
        zip(
            map(service_ix.__getitem__, map(attrgetter("service"), state.partitions)),
            map(str, map(attrgetter("partition_id"), state.partitions)),
        )
    )
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), np.int64).reshape(-1)


def in_order(state: ClusterState, order: np.ndarray) -> list:
    return list(map(state.partitions.__getitem__, order.tolist()))


# ---------------------------------------------------------------------------------- nodes


@dataclasses.dataclass(frozen=True)
class Nodes:
    """Node status, capacities [nodes, metrics] and domain trees (padded to N rows)."""

    up: np.ndarray  # bool[nodes]
    kept: np.ndarray  # bool[nodes] deactivated with Pause or Restart: keeps its replicas, takes none
    capacity: np.ndarray  # float32[nodes, metrics] capacity in force, inf if unlimited
    threshold_load: np.ndarray  # float32[nodes, metrics] ResourceThresholds x capacity, inf where none
    fd_tree: np.ndarray  # int32[N, Lf]
    ud_tree: np.ndarray  # int32[N, 2]
    move_factor: np.ndarray  # float32[nodes] moving onto the node costs move_cost x this (`_priority_factor`)

    @property
    def Df(self) -> int:  # fault domain ids (every level), padded
        return padded("D", int(self.fd_tree.max()) + 1)

    @property
    def Du(self) -> int:  # upgrade domain ids (and the root), padded
        return padded("D", int(self.ud_tree.max()) + 1)


def encoded_nodes(state: ClusterState, cluster: Entities) -> Nodes:
    capacity, threshold_load = _capacities(state, cluster)
    return Nodes(
        up=np.array([n.status is NodeStatus.UP for n in cluster.nodes], bool),
        kept=np.array([n.keeps_replicas for n in cluster.nodes], bool),
        capacity=capacity,
        threshold_load=threshold_load,
        fd_tree=_domain_tree([n.fault_domain for n in cluster.nodes], cluster.N),
        ud_tree=_domain_tree([(n.upgrade_domain,) for n in cluster.nodes], cluster.N),
        move_factor=_priority_factor([n.priority for n in cluster.nodes]),
    )


def _capacities(state: ClusterState, cluster: Entities) -> tuple[np.ndarray, np.ndarray]:
    """Capacity in force, buffered unless an upgrade is in progress, and ResourceThresholds load."""
    buffered = state.upgrade is None or not state.upgrade.in_progress
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
class Classes:
    """Placement classes: the distinct sets of allowed Up nodes, shared by the services that have them."""

    service_class: np.ndarray  # int32[S]
    masks: list[np.ndarray]  # bool[nodes] of each class
    nodes: np.ndarray  # int32[C, N] the allowed nodes, padded
    count: np.ndarray  # int32[C]
    fd_children: np.ndarray  # int32[C, Df]
    ud_children: np.ndarray  # int32[C, Du]
    fd_usable: np.ndarray  # bool[C, Df]
    ud_usable: np.ndarray  # bool[C, Du]
    quorum: np.ndarray  # int32[S, 2] most replicas per fault / upgrade domain under the quorum rule (0: none)
    quorum_level: np.ndarray  # int32[S, 2] the domain-tree level it holds at (the first with 2+ domains)


def placement_classes(
    state: ClusterState, cluster: Entities, nodes: Nodes, parent_hosts: dict[str, set[str]] | None
) -> Classes:
    """Each class's nodes, and how many eligible child domains each fault and upgrade domain has."""
    service_class, masks = _class_masks(cluster, _allowed_nodes(state, cluster, nodes.up), parent_hosts)
    C, N, n = padded("C", len(masks)), cluster.N, cluster.n_nodes
    class_nodes = np.zeros((C, N), np.int32)
    class_count = np.zeros(C, np.int32)
    fd_children = np.zeros((C, nodes.Df), np.int32)
    ud_children = np.zeros((C, nodes.Du), np.int32)
    fd_usable, ud_usable = np.zeros(fd_children.shape, bool), np.zeros(ud_children.shape, bool)
    for c, mask in enumerate(masks):
        allowed = np.flatnonzero(mask)
        class_nodes[c, : len(allowed)] = allowed
        class_count[c] = len(allowed)
        fd_children[c] = _eligible_children(nodes.fd_tree[:n], mask, nodes.Df)
        ud_children[c] = _eligible_children(nodes.ud_tree[:n], mask, nodes.Du)
        fd_usable[c, nodes.fd_tree[:n][mask[:n]]] = True
        ud_usable[c, nodes.ud_tree[:n][mask[:n]]] = True
    # the auto-switch counts the service's nodes and domains whatever their status, so a node going
    # down or coming back does not switch the rule (issue 57); the rule itself counts Up domains
    every = _class_masks(cluster, _allowed_nodes(state, cluster, np.ones_like(nodes.up)), parent_hosts)
    quorum, quorum_level = _quorum_rules(state, cluster, nodes, service_class, masks, every)
    return Classes(
        service_class=service_class,
        masks=masks,
        nodes=class_nodes,
        count=class_count,
        fd_children=fd_children,
        ud_children=ud_children,
        fd_usable=fd_usable,
        ud_usable=ud_usable,
        quorum=quorum,
        quorum_level=quorum_level,
    )


def _branching(tree: np.ndarray, mask: np.ndarray) -> tuple[int, int]:
    """(level, domains): the first level of the domain tree where the nodes in `mask` lie in two or
    more domains, and how many; (0, 0) where they never do."""
    for level in range(1, tree.shape[1]):
        domains = np.unique(tree[mask, level]).size
        if domains > 1:
            return level, domains
    return 0, 0


def _quorum_rules(
    state: ClusterState,
    cluster: Entities,
    nodes: Nodes,
    service_class: np.ndarray,
    masks: list[np.ndarray],
    switch: tuple[np.ndarray, list[np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """SF's quorum-based replica distribution per service (`FaultDomainConstraint`'s
    HasQuorumDomainViolation): where it holds, a domain at the first level with two or more domains
    may hold at most max(T - (T / 2 + 1), 1) of a partition's T replicas, one more when the domains
    could not take T so. It holds per fault or upgrade domains by `QuorumBasedReplicaDistributionPer*`,
    and for both where `QuorumBasedLogicAutoSwitch` finds the spread too strict for the nodes
    (PlacementCreator: T divisible by the fault and the upgrade domains' counts, and no more of the
    service's nodes than their product; counted on `switch`'s classes, every node of the service
    whatever its status, when given). RequireDomainDistribution keeps its own fault-domain rule."""
    settings, n = state.settings, cluster.n_nodes
    S = service_class.shape[0]
    quorum, level = np.zeros((S, 2), np.int32), np.zeros((S, 2), np.int32)
    given = (
        bool(settings["QuorumBasedReplicaDistributionPerFaultDomains"]),
        bool(settings["QuorumBasedReplicaDistributionPerUpgradeDomains"]),
    )
    # each class's (level, domains) in the fault and the upgrade domain trees, and its node count
    shape = lambda m: ((_branching(nodes.fd_tree[:n], m[:n]), _branching(nodes.ud_tree[:n], m[:n])), int(m[:n].sum()))
    shapes = [shape(m) for m in masks]
    switch_class, switch_shapes = (
        (service_class, shapes) if switch is None else (switch[0], list(map(shape, switch[1])))
    )
    for s, svc in enumerate(cluster.services):
        branches, count = shapes[service_class[s]]
        target = svc.target
        if target <= 0 or not count:
            continue
        ((_, fds), (_, uds)), nodes_all = switch_shapes[switch_class[s]]
        auto = (
            bool(settings["QuorumBasedLogicAutoSwitch"])
            and fds > 0
            and uds > 0
            and target % fds == 0
            and target % uds == 0
            and nodes_all <= fds * uds
        )
        nonpacking = any(p.kind == "RequireDomainDistribution" for p in svc.placement_policies)
        for d, (at, domains) in enumerate(branches):
            if (auto or given[d]) and domains > 0 and not (d == 0 and nonpacking):
                limit = max(target - (target // 2 + 1), 1)
                quorum[s, d], level[s, d] = limit + (domains * limit < target), at
    return quorum, level


def _allowed_nodes(state: ClusterState, cluster: Entities, up: np.ndarray) -> dict[str, np.ndarray]:
    """Each service's allowed Up nodes: its placement constraints, the block list, Required and Invalid
    domains. Services share constraints, block lists and domains: each mask is computed once."""
    nodes = cluster.nodes
    props = [n.properties for n in nodes]
    blocked: dict[str, set[str]] = {}  # ServiceTypeName -> nodes blocklisted for it
    for entry in state.block_list:
        blocked.setdefault(entry.service_type, set()).add(entry.node)
    selected, open_to, in_domain = {}, {}, {}
    allowed_of = {}
    for svc in cluster.services:
        if svc.placement_constraints not in selected:
            selected[svc.placement_constraints] = node_mask(svc.placement_constraints, props)
        mask = selected[svc.placement_constraints] & up
        if svc.type_name in blocked:
            if svc.type_name not in open_to:
                open_to[svc.type_name] = np.array([n.name not in blocked[svc.type_name] for n in nodes], bool)
            mask &= open_to[svc.type_name]
        for policy in svc.placement_policies:
            if policy.kind in ("RequiredDomain", "InvalidDomain") and policy.domain is not None:
                if policy.domain not in in_domain:
                    in_domain[policy.domain] = nodes_in_domain(nodes, policy.domain)
                inside = in_domain[policy.domain]
                mask &= inside if policy.kind == "RequiredDomain" else ~inside
        allowed_of[svc.name] = mask
    return allowed_of


def _class_masks(
    cluster: Entities, allowed_of: dict[str, np.ndarray], parent_hosts: dict[str, set[str]] | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The class of each service [S] and the node mask of each class, in order of first use. A child
    of a service with one instance per node goes where its parent may, or where `parent_hosts` says."""
    class_of_mask: dict[bytes, int] = {}
    masks: list[np.ndarray] = []
    service_class = np.zeros(cluster.S, np.int32)
    for si, svc in enumerate(cluster.services):
        mask = allowed_of[svc.name]
        for corr in svc.correlations:
            if corr.service in cluster.everywhere:
                hosts = (parent_hosts or {}).get(corr.service)
                mask = mask & (
                    allowed_of[corr.service]
                    if hosts is None
                    else np.array([n.name in hosts for n in cluster.nodes], bool)
                )
        service_class[si] = class_of_mask.setdefault(mask.tobytes(), len(masks))
        if service_class[si] == len(masks):
            masks.append(mask)
    return service_class, masks


# ---------------------------------------------------------------------------------- energy weights


@dataclasses.dataclass(frozen=True)
class Weights:
    """SF's energy weights: domain score = sum(w * dev) / sum(w); AvgStdDev = LocalDomainWeight (0.25) x
    the mean of the local domains + the rest x the global one. Services with two or more partitions
    have a local domain."""

    service_metrics: np.ndarray  # int32[S, Ms] metric of each local-domain slot, -1 padded
    local: np.ndarray  # float[S, Ms]
    global_: np.ndarray  # float[M]
    metric_nodes: np.ndarray  # bool[M, N] nodes counted in a metric's global deviation
    defrag: np.ndarray  # bool[M] defragmentation metrics
    terms: np.ndarray  # float32[5] the energy's settings (`energy_terms`)


def energy_weights(state: ClusterState, cluster: Entities, classes: Classes) -> Weights:
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
    defrag = pad(np.array(defrag + [False] * (cluster.n_metrics - len(cluster.metrics))), (cluster.M,), False)
    return Weights(
        service_metrics=service_metrics,
        local=local_w,
        global_=global_w,
        metric_nodes=metric_nodes,
        defrag=defrag,
        terms=energy_terms(state.settings),
    )


def _service_weights(cluster: Entities, classes: Classes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each service's metrics and local weights (unscaled), each metric's nodes and mean service weight.
    A metric's nodes are those its services may use, but for services on every node, which SF leaves
    out where the metric has others (ServiceDomainMetric::GetBlockNodeList: a node every service of
    the metric that affects balancing blocks is out of its balancing; IsServiceAffectingBalancing)."""
    services, M = cluster.services, cluster.M
    partitions_of = {s.name: 0 for s in services}
    for part in cluster.partitions:
        partitions_of[part.service] += 1
    ms = padded("Ms", max([len(s.metrics) for s in services] + [1]))
    service_metrics = np.full((cluster.S, ms), -1, np.int32)
    local_w = np.zeros((cluster.S, ms), np.float32)
    weight_sum = np.zeros(M, np.float64)
    weight_n = np.zeros(M, np.float64)
    metric_nodes = np.zeros((2, M, cluster.N), bool)  # by services on every node, by the others
    for si, svc in enumerate(services):
        w = np.array([m.weight for m in svc.metrics], np.float64)
        for k, metric in enumerate(svc.metrics):
            m = cluster.metric_ix[metric.name]
            service_metrics[si, k] = m
            weight_sum[m] += metric.weight
            weight_n[m] += 1
            metric_nodes[int(svc.target >= 0), m, : cluster.n_nodes] |= classes.masks[classes.service_class[si]]
        if partitions_of[svc.name] >= 2 and w.sum() > 1e-7:
            local_w[si, : len(w)] = w / w.sum()
    movable = metric_nodes[1].any(axis=1, keepdims=True)
    nodes = np.where(movable, metric_nodes[1], metric_nodes[0])
    return service_metrics, local_w, nodes, weight_sum / np.maximum(weight_n, 1)


# ---------------------------------------------------------------------------------- domains


def top_fault_domain(fd_tree: np.ndarray) -> np.ndarray:
    """[N] each node's top-level fault domain id (the root's, 0, when there are none)."""
    return fd_tree[:, min(1, fd_tree.shape[1] - 1)]


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


def _eligible_children(tree: np.ndarray, eligible: np.ndarray, n_domains: int) -> np.ndarray:
    """For each domain id (of `n_domains`), how many distinct child domains hold at least one eligible node."""
    counts = np.zeros(n_domains, np.int32)
    for level in range(1, tree.shape[1]):
        pairs = np.unique(tree[eligible, level - 1].astype(np.int64) * n_domains + tree[eligible, level])
        np.add.at(counts, pairs // n_domains, 1)
    return counts


def _priority_factor(priorities: list[int]) -> np.ndarray:
    """1 for the lowest node priority up to 1.5 for the highest (all 1 when priorities are equal)."""
    levels = sorted(set(priorities))
    step = 0.5 / max(len(levels) - 1, 1)
    return np.array([1.0 + step * levels.index(p) for p in priorities], np.float32).reshape(-1)


def nodes_in_domain(nodes, domain: str) -> np.ndarray:
    """Nodes whose fault domain lies in `domain` ("fd:/dc0" holds fd:/dc0 and fd:/dc0/r1)."""
    path = tuple(x for x in domain.removeprefix("fd:").split("/") if x)
    return np.array([n.fault_domain[: len(path)] == path for n in nodes], bool)
