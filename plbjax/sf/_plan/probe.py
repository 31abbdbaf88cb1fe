"""What a PLB round finds in a state before any search (the replay's probe): replicas to place or
drop, replicas in violation, the metrics' balance."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import numpy as np

from plbjax.sf._model import assessed, violating_by_kind
from plbjax.sf._phases import (
    Encoded,
    MetricBalance,
    balances,
    everywhere,
    frozen_masks,
    governed_encoding,
    priorities_of,
    surplus_replicas,
)
from plbjax.sf._state import ClusterState


@dataclasses.dataclass(frozen=True)
class Findings:
    """What a PLB round finds in a state, before any search (the replay's probe)."""

    unplaced: int  # replicas to place or drop, outside frozen partitions
    violations: int  # placed replicas breaking a hard constraint, outside frozen partitions
    balance: list[MetricBalance]  # per metric (and node type when balancing per node type)
    avg_std_dev: float
    node_loads: dict[str, dict[str, float]]
    violations_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)  # replicas per constraint kind
    soft_violations: int = 0  # placed replicas breaking only soft constraints (priority above 0), outside frozen ones


def findings(state: ClusterState, frozen: Collection[tuple[str, str]] = ()) -> Findings:
    """What placement, the constraint check and balancing would find to do in `state` now."""
    return findings_encoded(governed_encoding(state), frozen)


def findings_encoded(encoded: Encoded, frozen: Collection[tuple[str, str]] = ()) -> Findings:
    """`findings` of a state already governed and encoded (a `Session`'s)."""
    state, _, problem, index = encoded
    priorities = priorities_of(state)
    now = assessed(problem, index.initial_node, index.initial_primary)
    free, free_partitions = frozen_masks(index, problem, frozen)
    unplaced = int((now.report.violations.unplaced & free).sum())
    on_every_node = everywhere(state, index)
    surplus = int(surplus_replicas(state, problem, index)[free_partitions[: index.n_partitions]].sum())
    surplus += int((now.report.violations.placement & on_every_node & free).sum())  # -1: dropped
    hard = np.where(priorities == 0, 0, -1)
    counted = free & ~on_every_node
    by_kind = {kind: replicas & counted for kind, replicas in violating_by_kind(index, now, hard).items()}
    violating = np.zeros(counted.shape[0], bool)
    for replicas in by_kind.values():
        violating |= replicas
    soft = np.zeros(counted.shape[0], bool)
    for replicas in violating_by_kind(index, now, np.where(priorities > 0, priorities, -1)).values():
        soft |= replicas & counted & ~violating
    loads = now.report.loads[: index.n_nodes, : len(index.metrics)].tolist()
    return Findings(
        unplaced + surplus,
        int(violating.sum()),
        balances(state, problem, index, now),
        float(now.report.avg),
        {name: dict(zip(index.metrics, row)) for name, row in zip(index.nodes, loads)},
        {kind: int(replicas.sum()) for kind, replicas in by_kind.items() if replicas.any()},
        int(soft.sum()),
    )
