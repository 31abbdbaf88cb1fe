"""When to balance: SF's per-metric trigger (inverted for defragmentation metrics), and which services
a balancing run may move.

A metric is imbalanced when its largest node load exceeds the activity threshold and the ratio of
largest to smallest load exceeds the balancing threshold — both strict, as in SF's source. A gap of
at most one load unit is balanced; a smallest load of 0 with a larger gap is imbalanced. A threshold
of 0 or a metric weight of 0 means the metric never triggers balancing.

SF also checks each service with two or more partitions on its own (its local balancing domain,
BalanceCheckerCreator::CreateLoadBalancingDomainEntries): the service's own node loads of each
metric against LocalBalancingThreshold (default 0: never), the activity threshold against the
cluster's largest load (LoadBalancingDomainEntry::RefreshIsBalanced). One imbalanced local domain
makes its metric need balancing (BalanceChecker: any imbalanced domain).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from plbjax.sf._state import ClusterState


def is_balanced(max_load: float, min_load: float, threshold: float, activity: float, weight: float = 1.0) -> bool:
    """SF's balance check for one metric's node loads."""
    if weight <= 0 or threshold <= 0:
        return True
    if max_load <= min_load + 1:
        return True
    if activity > 0 and max_load <= activity:
        return True
    return threshold > 1 and min_load > 0 and max_load / min_load <= threshold


def needs_defragmentation(max_load: float, min_load: float, threshold: float, weight: float = 1.0) -> bool:
    """SF's inverted trigger for a defragmentation metric: pack when loads are spread out, i.e. the
    threshold is 1 (always) or no node is empty and largest/smallest is within the threshold."""
    if weight <= 0 or threshold <= 0 or max_load <= 0:
        return False
    return threshold == 1 or (min_load > 0 and max_load / min_load <= threshold)


@dataclasses.dataclass(frozen=True)
class MetricBalance:
    metric: str
    node_type: str | None  # set when balancing per node type
    max_load: float
    min_load: float
    threshold: float
    activity: float
    balanced: bool  # the metric's loads and every service's own (local) loads
    deviation: float
    local: tuple[str, ...] = ()  # services whose own loads of the metric are imbalanced


class LocalLoads(NamedTuple):
    """Each service's own node loads, for SF's local balancing domains."""

    services: tuple[str, ...]
    loads: np.ndarray  # [S, N, Ms] load per service, node and metric slot
    nodes: np.ndarray  # [S, N] nodes counted for each service
    slots: np.ndarray  # [S, Ms] metric index of each slot, -1 padded
    weights: np.ndarray  # [S, Ms] > 0 where the service has a local domain of that metric


def _imbalanced_services(
    local: LocalLoads | None, m: int, members: np.ndarray, threshold: float, activity: float, hi: float
) -> tuple[str, ...]:
    """Services whose own loads of metric `m` on `members` break LocalBalancingThreshold."""
    if local is None or threshold <= 0 or (activity > 0 and hi <= activity):
        return ()
    out = []
    for s, k in zip(*np.nonzero((local.slots == m) & (local.weights > 0))):
        values = local.loads[s, : members.shape[0], k][local.nodes[s, : members.shape[0]] & members]
        if values.size and not is_balanced(float(values.max()), float(values.min()), threshold, 0.0):
            out.append(local.services[s])
    return tuple(out)


def thresholds(state: ClusterState, metric: str, node_type: str | None) -> tuple[float, float]:
    """(balancing, activity) threshold of a metric, for a node type when given: node type -> global
    -> SF's defaults 1 and 0."""
    balancing = state.balancing_thresholds.get(metric, 1.0)
    activity = state.activity_thresholds.get(metric, 0.0)
    for entry in state.node_types:
        if entry.name == node_type:
            balancing = entry.balancing_thresholds.get(metric, balancing)
            activity = entry.activity_thresholds.get(metric, activity)
    return float(balancing), float(activity)


def metric_balance(
    state: ClusterState,
    metrics: tuple[str, ...],
    node_types: tuple[str | None, ...],
    loads: np.ndarray,
    counted: np.ndarray,
    weights: np.ndarray,
    local: LocalLoads | None = None,
) -> list[MetricBalance]:
    """Balance of every metric — and node type, with SeparateBalancingStrategyPerNodeType — from node
    loads [N, M] over the nodes `counted` [M, N] for each metric, and each service's `local` loads
    (None: LocalBalancingThreshold is off)."""
    n = len(node_types)
    kinds = np.array(node_types, dtype=object)
    groups: list[tuple[str | None, np.ndarray]] = [(None, np.ones(n, bool))]
    if state.settings.get("SeparateBalancingStrategyPerNodeType"):
        groups = [(t, kinds == t) for t in sorted({t for t in node_types if t is not None})]
    out = []
    for m, name in enumerate(metrics):
        for node_type, members in groups:
            values = loads[:n, m][counted[m, :n] & members]
            hi, lo = (float(values.max()), float(values.min())) if values.size else (0.0, 0.0)
            mean = float(values.mean()) if values.size else 0.0
            threshold, activity = thresholds(state, name, node_type)
            services: tuple[str, ...] = ()
            if state.defragmentation_metrics.get(name):
                balanced = not needs_defragmentation(hi, lo, threshold, float(weights[m]))
            else:
                balanced = is_balanced(hi, lo, threshold, activity, float(weights[m]))
                local_threshold = float(state.settings["LocalBalancingThreshold"])
                services = _imbalanced_services(local, m, members & counted[m, :n], local_threshold, activity, hi)
            out.append(
                MetricBalance(
                    name,
                    node_type,
                    hi,
                    lo,
                    threshold,
                    activity,
                    balanced and not services,
                    float(values.std() / mean) if mean > 0 else 0.0,
                    services,
                )
            )
    return out


def service_domains(state: ClusterState) -> list[set[str]]:
    """Connected components of services that share a metric (SF balances each one on its own)."""
    parent = {s.name: s.name for s in state.services}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[str, str] = {}
    for svc in state.services:
        for metric in svc.metrics:
            if metric.name in owner:
                parent[find(svc.name)] = find(owner[metric.name])
            else:
                owner[metric.name] = svc.name
    groups: dict[str, set[str]] = {}
    for name in parent:
        groups.setdefault(find(name), set()).add(name)
    return sorted(groups.values(), key=lambda g: min(g))
