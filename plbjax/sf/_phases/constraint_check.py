"""SF's constraint check: the replicas in violation move (and trade with any replica), kept when the
violations, ranked by priority, went down. Under a seconds budget it searches what its violations
need and goes on only while some are left (`search_until_fixed`), leaving the rest to balancing."""

from __future__ import annotations

import numpy as np

from plbjax.anneal import Schedule
from plbjax.sf._encoding import AFFINITY, CAPACITY, Index, Problem
from plbjax.sf._model import Placement, Scope, violating, violation_rank
from plbjax.sf._phases.on_every_node import everywhere
from plbjax.sf._phases.phase import (
    CHECK_MOVE_WEIGHT,
    Phase,
    PhaseResult,
    Reached,
    Run,
    movement_budget,
    search_until_fixed,
    swappable,
)


def _swaps_that_fix(problem: Problem, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[P] the partitions whose primary the constraint check may swap: those whose primary is on a
    node over capacity, and affinity children in violation. SF's constraint check swaps a primary
    only to fix a violation a role change can fix; a swap moves no replica, so it fixes no domain
    spread or placement constraint, and only lightens a node its primary leaves. A parent's primary
    never swaps to fix its child: the child's goes to it (AffinityConstraint::CorrectViolations swaps
    an aligned child's replica onto its parent's; GetInvalidReplicas lists only child replicas)."""
    v = now.report.violations
    partitions = np.zeros(now.primary_of.shape[0], bool)
    if priorities[CAPACITY] >= 0:
        over = v.capacity.sum(axis=1) > 0
        primary = now.primary_of
        where = np.where(primary >= 0, now.node_of[np.maximum(primary, 0)], -1)
        partitions |= (where >= 0) & over[np.maximum(where, 0)]
    if priorities[AFFINITY] >= 0:
        partitions[np.asarray(problem.replica_partition)[np.flatnonzero(v.affinity)]] = True
    return partitions


def _parents_of_strays(problem: Problem, index: Index, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[R] the replicas of the parents of child replicas in affinity violation. SF fixes affinity by
    moving the child (AffinitySubspace::GetTargetNodes: the child's targets are its parent's nodes),
    then balances the fix with no more movements (Searcher::SearchForConstraintCheck), where a
    parent replica moves with the child replica beside it: so a parent replica may move onto the
    node of a stray child replica when that balances better (never a swap of its primary)."""
    out = np.zeros(now.node_of.shape[0], bool)
    if priorities[AFFINITY] < 0:
        return out
    parents = np.asarray(problem.replica_parent)[np.flatnonzero(now.report.violations.affinity)]
    for p in np.unique(parents[parents >= 0]):
        out[list(index.partition_rows[p])] = True
    return out & (now.node_of >= 0)


def constraint_phase(run: Run, reached: Reached, schedule: Schedule) -> PhaseResult:
    """Fix violations: the replicas involved move (and trade with any replica, SF's repair), kept when
    violations, ranked by priority, went down."""
    (state, _, problem, index), priorities = run.encoded, run.priorities
    now = reached.now
    elsewhere = ~everywhere(state, index)
    bad = violating(index, now, priorities) & elsewhere
    if not bad.any():
        return PhaseResult(Phase.CONSTRAINT_CHECK, False, "no constraint violation", now)
    what = Scope(
        bad | (_parents_of_strays(problem, index, now, priorities) & elsewhere),
        swappable(index, now, _swaps_that_fix(problem, now, priorities)),
        priorities == 0,
        move_weight=CHECK_MOVE_WEIGHT,
        budget=movement_budget(state, Phase.CONSTRAINT_CHECK, int((now.node_of >= 0).sum())),
        partners=(now.node_of >= 0) & elsewhere,
    )
    fixed = lambda placement: not (violating(index, placement, priorities) & elsewhere).any()
    result, search = search_until_fixed(run, now, what, schedule, int(bad.sum()), fixed)
    before = violation_rank(priorities, now.report.measures)
    after = violation_rank(priorities, result.report.measures)
    reason = f"{int(bad.sum())} replica(s) in violation"
    if after < before:
        return PhaseResult(Phase.CONSTRAINT_CHECK, True, reason + "; violations reduced", result, search)
    return PhaseResult(Phase.CONSTRAINT_CHECK, True, reason + "; no fix found", now, search)
