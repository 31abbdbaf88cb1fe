"""When to balance: SF's per-metric trigger, and which services a balancing run may move.

A metric is imbalanced when its largest node load exceeds the activity threshold and the ratio of
largest to smallest load exceeds the balancing threshold — both strict, as in SF's source. A gap of
at most one load unit is balanced; a smallest load of 0 with a larger gap is imbalanced. A threshold
of 0 or a metric weight of 0 means the metric never triggers balancing.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.state import ClusterState


def is_balanced(max_load: float, min_load: float, threshold: float, activity: float,
                weight: float = 1.0) -> bool:
    """SF's balance check for one metric's node loads."""
    if weight <= 0 or threshold <= 0:
        return True
    if max_load <= min_load + 1:
        return True
    if activity > 0 and max_load <= activity:
        return True
    return threshold > 1 and min_load > 0 and max_load / min_load <= threshold


@dataclasses.dataclass(frozen=True)
class MetricBalance:
    metric: str
    max_load: float
    min_load: float
    threshold: float
    activity: float
    balanced: bool
    deviation: float


def metric_balance(state: ClusterState, metrics: tuple[str, ...], loads: np.ndarray,
                   counted: np.ndarray, weights: np.ndarray, deviations: np.ndarray) -> list[MetricBalance]:
    """Balance of every metric from node loads [N, M] over the nodes `counted` [M, N] for each metric."""
    out = []
    for m, name in enumerate(metrics):
        values = loads[counted[m], m]
        hi, lo = (float(values.max()), float(values.min())) if values.size else (0.0, 0.0)
        threshold = float(state.balancing_thresholds.get(name, 1.0))
        activity = float(state.activity_thresholds.get(name, 0.0))
        out.append(MetricBalance(name, hi, lo, threshold, activity,
                                 is_balanced(hi, lo, threshold, activity, float(weights[m])),
                                 float(deviations[m])))
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
