"""What the plan knows of one placement: its score, node loads and violations (`Assessment`), and
the comparisons the phases make between two placements (no enforced constraint worse, violations
ranked by priority, movements counted as SF's throttles count them)."""

from __future__ import annotations

import dataclasses
from typing import Generic, NamedTuple, cast

import jax
import numpy as np

from plbjax.anneal import stored
from plbjax.sf._encoding import AFFINITY, CAPACITY, FAULT_DOMAIN, PLACEMENT, PREFERRED, UPGRADE_DOMAIN, Index, Problem
from plbjax.sf._model import energy as E
from plbjax.sf._model.constraints import measures, violations
from plbjax.sf._model.violation_record import A, Violations


class Assessment(NamedTuple, Generic[A]):
    """One placement's AvgStdDev, node loads [N, M], violations and their measures [CONSTRAINTS]."""

    avg: A  # []
    loads: A  # [N, M]
    violations: Violations[A]
    measures: A  # [CONSTRAINTS]


@stored
def _assess(problem: Problem, node_of, primary_of) -> Assessment[jax.Array]:
    """Everything the plan reports about one placement, in one compiled call."""
    loads = E.node_loads(problem, node_of, primary_of)
    report = violations(problem, node_of, primary_of, loads)
    return Assessment(E.avg_std_dev(problem, node_of, primary_of), loads, report, measures(report))


def assess(problem: Problem, node_of: np.ndarray, primary_of: np.ndarray) -> Assessment[np.ndarray]:
    """`_assess` on the host: numpy arrays."""
    return cast(Assessment[np.ndarray], jax.tree.map(np.asarray, _assess(problem, node_of, primary_of)))


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the plan stands between phases."""

    node_of: np.ndarray
    primary_of: np.ndarray
    report: Assessment[np.ndarray]


def assessed(problem: Problem, node_of: np.ndarray, primary_of: np.ndarray) -> Placement:
    """The placement `node_of`, `primary_of` with its assessment."""
    return Placement(node_of, primary_of, assess(problem, node_of, primary_of))


def no_worse(before: Violations[np.ndarray], after: Violations[np.ndarray], priorities: np.ndarray) -> bool:
    """No enforced constraint measure grew anywhere."""
    kinds = zip(priorities, before.by_kind(), after.by_kind())
    return all(bool(np.all(a <= b + 1e-6)) for priority, was, now in kinds if priority >= 0 for b, a in zip(was, now))


def violation_rank(priorities: np.ndarray, totals: np.ndarray) -> tuple:
    """Violations compared by priority: unplaced replicas first, then hard, soft, optimization."""
    return tuple(float(totals[priorities == p].sum()) for p in (-2, 0, 1, 2))


def movements(index: Index, node_of: np.ndarray, primary_of: np.ndarray, after: Placement) -> int:
    """Movements from `node_of`, `primary_of` to `after`, the one count of the plan, its throttles
    and the search (`energy.movements` on the device): one per replica placed before that moved,
    one per primary swap. Adds are free, and so is a new primary where the old one had no node
    (nothing ran there to swap with: SF's Failover Manager promotes a secondary)."""
    n = index.n_partitions
    running = (primary_of >= 0) & (node_of[np.maximum(primary_of, 0)] >= 0)
    return int(
        ((after.node_of != node_of) & (node_of >= 0)).sum() + ((after.primary_of != primary_of) & running)[:n].sum()
    )


def pad_to(mask: np.ndarray, n: int) -> np.ndarray:
    """`mask` padded with False to `n`."""
    out = np.zeros(n, bool)
    out[: mask.shape[0]] = mask
    return out


def headless(index: Index, now: Placement) -> np.ndarray:
    """[P] stateful partitions whose primary has no node."""
    primary = now.primary_of
    on_node = (primary >= 0) & (now.node_of[np.maximum(primary, 0)] >= 0)
    return pad_to(index.stateful[: index.n_partitions], primary.shape[0]) & ~on_node


def violating(index: Index, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[R] replicas involved in a violation of an enabled constraint."""
    bad = np.zeros(now.node_of.shape[0], bool)
    for replicas in violating_by_kind(index, now, priorities).values():
        bad |= replicas
    return bad


def violating_by_kind(index: Index, now: Placement, priorities: np.ndarray) -> dict[str, np.ndarray]:
    """{constraint kind (the plan's names): [R] placed replicas involved in a violation of it}, for
    each enabled constraint."""
    v, placed = now.report.violations, now.node_of >= 0
    kinds = []
    if priorities[CAPACITY] >= 0:
        over = v.capacity.sum(axis=1) + (0 if v.apps is None else v.apps.reserved.sum(axis=1))
        kinds.append(("NodeCapacity", np.isin(now.node_of, np.flatnonzero(over > 0)) & placed))
    if v.apps is not None:  # SF's names: ScaleoutCount, ApplicationCapacity (IConstraint::Enum)
        for replicas, c, kind in (
            (v.apps.scaleout_replicas, PLACEMENT, "ScaleoutCount"),
            (v.apps.capacity_replicas, CAPACITY, "ApplicationCapacity"),
        ):
            if priorities[c] >= 0:
                kinds.append((kind, np.asarray(replicas, bool) & placed))
    for replicas, c, kind in (
        (v.placement, PLACEMENT, "PlacementConstraint"),
        (v.affinity, AFFINITY, "Affinity"),
        (v.away, PREFERRED, "PreferredLocation"),
    ):
        if priorities[c] >= 0:
            kinds.append((kind, np.asarray(replicas, bool) & placed))
    for partitions, c, kind in (
        (v.fault_domain, FAULT_DOMAIN, "FaultDomain"),
        (v.upgrade_domain, UPGRADE_DOMAIN, "UpgradeDomain"),
    ):
        if priorities[c] >= 0:
            bad = np.zeros(now.node_of.shape[0], bool)
            for p in np.flatnonzero(partitions[: index.n_partitions]):
                bad[list(index.partition_rows[p])] = True
            kinds.append((kind, bad & placed))
    return dict(kinds)
