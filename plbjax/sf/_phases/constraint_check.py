"""SF's constraint check: the replicas in violation move (and trade with any replica), kept when the
violations, ranked by priority, went down. Under a seconds budget it searches what its violations
need and goes on only while some are left (`search_until_fixed`), leaving the rest to balancing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from plbjax.anneal import AnnealResult, Schedule
from plbjax.sf._encoding import AFFINITY, CAPACITY, Index, Problem
from plbjax.sf._model import (
    Placement,
    Scope,
    assessed,
    movements,
    violating,
    violating_by_kind,
    violation_rank,
)
from plbjax.sf._phases.domain_replicas import held_in_transition
from plbjax.sf._phases.on_every_node import everywhere
from plbjax.sf._phases.phase import (
    CHECK_MOVE_WEIGHT,
    Phase,
    PhaseResult,
    Reached,
    Run,
    movement_budget,
    scoped_search,
    search_until_fixed,
    spent,
    swappable,
)


def _swaps_that_fix(problem: Problem, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[P] the partitions whose primary the constraint check may swap: those whose primary is on a
    node over capacity, and affinity children in violation that can swap to their parent. SF's
    constraint check swaps a primary only to fix a violation a role change can fix; a swap moves no
    replica, so it fixes no domain spread or placement constraint, and only lightens a node its
    primary leaves. A parent's primary
    never swaps to fix its child (GetInvalidReplicas lists only child replicas): the child's swaps
    to it (`_swaps_to_parents`)."""
    v = now.report.violations
    partitions = np.zeros(now.primary_of.shape[0], bool)
    if priorities[CAPACITY] >= 0:
        over = v.capacity.sum(axis=1) > 0
        primary = now.primary_of
        where = np.where(primary >= 0, now.node_of[np.maximum(primary, 0)], -1)
        partitions |= (where >= 0) & over[np.maximum(where, 0)]
    if priorities[AFFINITY] >= 0:
        partitions[_swaps_to_parents(problem, now)] = True
    return partitions


def _swaps_to_parents(problem: Problem, now: Placement) -> np.ndarray:
    """The child partitions in affinity violation with a replica on their parent's primary's node:
    SF swaps an aligned child's primary there (AffinityConstraint::CorrectViolations tries
    TrySwapMovement onto the parent's primary's node, AffinitySubspace::GetTargetNodes' one target),
    else moves its replicas (no swap then: a swap and a move are no fix SF makes)."""
    strays = np.flatnonzero(now.report.violations.affinity)
    child = np.asarray(problem.replica_partition)[strays]
    parent = np.asarray(problem.replica_parent)[strays]
    head = now.primary_of[parent]
    target = np.where(head >= 0, now.node_of[np.maximum(head, 0)], -1)
    rows = np.asarray(problem.partition_replicas)[child]
    there = (rows >= 0) & (now.node_of[np.maximum(rows, 0)] == target[:, None]) & (target[:, None] >= 0)
    return child[there.any(axis=1)]


def _parents_of_strays(problem: Problem, index: Index, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[R] the replicas of the parents of child replicas in affinity violation: SF's fix moves only
    the children (AffinityConstraint::GetInvalidReplicas; AffinitySubspace::GetTargetNodes: their
    targets are the parent's nodes), its balancing (`_balanced`) the parents too."""
    out = np.zeros(now.node_of.shape[0], bool)
    if priorities[AFFINITY] < 0:
        return out
    parents = np.asarray(problem.replica_parent)[np.flatnonzero(now.report.violations.affinity)]
    for p in np.unique(parents[parents >= 0]):
        out[list(index.partition_rows[p])] = True
    return out & (now.node_of >= 0)


def _parents_move(settings: dict) -> bool:
    """MoveParentToFixAffinityViolation, or its deprecated name IsAffinityBidirectional."""
    return bool(settings["MoveParentToFixAffinityViolation"] or settings["IsAffinityBidirectional"])


def _parents_moved(
    run: Run,
    now: Placement,
    wider: Scope,
    found: tuple[Placement, AnnealResult],
    schedule: Schedule,
    fixed: Callable[[Placement], bool],
) -> tuple[Placement, AnnealResult]:
    """SF's MoveParentToFixAffinityViolation: where moving the children `found` no fix, the search
    goes on with the parents' replicas movable too (`wider`), as SF's last transitions do
    (Checker.cpp: AffinityConstraint.AllowParentToMove for the last
    MoveParentToFixAffinityViolationTransitionPercentage of them; AffinityConstraint.cpp:485, the
    parent's replicas among the invalid ones); kept when its violations rank lower."""
    fix, search = found
    rest = schedule if schedule.seconds is None else spent(schedule, search.seconds)
    moved, more = search_until_fixed(run, now, wider, rest, int(wider.movable.sum()), fixed)
    more = dataclasses.replace(more, steps=search.steps + more.steps, seconds=search.seconds + more.seconds)
    priorities = run.priorities
    better = violation_rank(priorities, moved.report.measures) < violation_rank(priorities, fix.report.measures)
    return (moved if better else fix), more


def _balanced(
    run: Run, now: Placement, what: Scope, fix: Placement, search: AnnealResult, schedule: Schedule
) -> tuple[Placement, AnnealResult]:
    """The fix balanced as SF balances it (Searcher::SearchForConstraintCheck: an annealing from
    the fix, kept when it makes no more movements, no worse violations and an AvgStdDev no higher;
    here also better in one of them, fewer movements or a lower AvgStdDev):
    `what`'s replicas may move from where the fix left them, a parent replica with the child
    replica beside it, within the fix's movements."""
    used = movements(run.encoded.index, now.node_of, now.primary_of, fix)
    wider = dataclasses.replace(what, budget=used, start=(fix.node_of, fix.primary_of))
    rest = schedule if schedule.seconds is None else spent(schedule, search.seconds)
    balanced, more = scoped_search(run, now, wider, rest)
    search = dataclasses.replace(search, steps=search.steps + more.steps, seconds=search.seconds + more.seconds)
    return (balanced if _kept(run, now, fix, balanced) else fix), search


def _kept(run: Run, now: Placement, fix: Placement, balanced: Placement) -> bool:
    """Whether `balanced` replaces `fix` (SF: no more movements, no worse violations, an AvgStdDev
    no higher; here also fewer movements or a lower AvgStdDev)."""
    index, priorities = run.encoded.index, run.priorities
    used = movements(index, now.node_of, now.primary_of, fix)
    moved, avg = movements(index, now.node_of, now.primary_of, balanced), float(balanced.report.avg)
    return (
        violation_rank(priorities, balanced.report.measures) <= violation_rank(priorities, fix.report.measures)
        and moved <= used
        and avg <= float(fix.report.avg) + 1e-9
        and (moved < used or avg < float(fix.report.avg) - 1e-9)
    )


def _parents_carry_children(run: Run, now: Placement, parents: np.ndarray, fix: Placement) -> Placement:
    """SF's balancing of the fix moves a parent replica together with every child replica beside it
    (AffinitySubspace::GetTargetNodesForReplicas; the search's compound move carries one): each of
    the `parents` [R] replicas moved with the child replicas on its node to where one of them
    started, kept as `_kept` keeps a balanced fix (ConstraintCheckAffinityViolationsNonPrimaryAlignmentTest2:
    the parent goes to its children instead of both children to it)."""
    problem, index = run.encoded.problem, run.encoded.index
    parent_of, partition = np.asarray(problem.replica_parent), np.asarray(problem.replica_partition)
    movable = run.free & ~np.asarray(problem.replica_stays)
    best = fix
    for q in np.flatnonzero(parents & movable).tolist():
        here = best.node_of[q]
        group = np.append(np.flatnonzero((parent_of == partition[q]) & (best.node_of == here)), q)
        for there in sorted({int(now.node_of[c]) for c in group} - {int(here), -1}):
            if movable[group].all() and _open(problem, best.node_of, group, there):
                node_of = best.node_of.copy()
                node_of[group] = there
                candidate = _as_swaps(problem, index, now, node_of, best.primary_of)
                best = candidate if _kept(run, now, best, candidate) else best
    return best


def _open(problem: Problem, node_of: np.ndarray, group: np.ndarray, there: int) -> bool:
    """Whether node `there` is Up and holds no other replica of the partitions of `group` [rows]."""
    partition = np.asarray(problem.replica_partition)
    others = np.isin(partition, partition[group]) & (node_of == there)
    others[group] = False
    return bool(np.asarray(problem.node_up)[there]) and not others.any()


def _as_swaps(problem: Problem, index: Index, now: Placement, node_of: np.ndarray, primary_of: np.ndarray) -> Placement:
    """The placement with each primary and replica of a partition that traded nodes written as the
    primary's swap (both back where they started, the other one the primary): one movement, not two."""
    node_of, primary_of = node_of.copy(), primary_of.copy()
    for p in range(index.n_partitions):
        head = int(primary_of[p])
        if head < 0 or node_of[head] == now.node_of[head]:
            continue
        for r in index.partition_rows[p]:
            if r != head and node_of[r] == now.node_of[head] and node_of[head] == now.node_of[r]:
                node_of[[r, head]] = now.node_of[[r, head]]
                primary_of[p] = r
                break
    return assessed(problem, node_of, primary_of)


def _to_fix(run: Run, now: Placement) -> np.ndarray:
    """[R] the replicas in violation the constraint check moves: not those of a service on every
    node, nor those of a partition whose domain violation SF fixes by moving replicas that stay
    (`held_in_transition`)."""
    (state, _, problem, index), priorities = run.encoded, run.priorities
    kinds = violating_by_kind(index, now, priorities)
    for name, kind in (("FaultDomain", 0), ("UpgradeDomain", 1)):
        if name in kinds and kinds[name].any():
            kinds[name] = kinds[name] & ~held_in_transition(problem, index, now, kind)
    bad = np.zeros(now.node_of.shape[0], bool)
    for replicas in kinds.values():
        bad |= replicas
    return bad & ~everywhere(state, index)


def constraint_phase(run: Run, reached: Reached, schedule: Schedule) -> PhaseResult:
    """Fix violations: the replicas involved move (and trade with any replica, SF's repair), kept when
    violations, ranked by priority, went down; with ConstraintCheckSearchTimeout 0 none is searched
    (SF's searcher has no time: the violations stand, and balancing may not make them worse)."""
    (state, _, problem, index), priorities = run.encoded, run.priorities
    now = reached.now
    elsewhere = ~everywhere(state, index)
    standing = violating(index, now, priorities) & elsewhere
    if not standing.any():
        return PhaseResult(Phase.CONSTRAINT_CHECK, False, "no constraint violation", now)
    bad = _to_fix(run, now)
    if not bad.any():
        reason = f"{int(standing.sum())} replica(s) in violation; those to move are in transition: no fix"
        return PhaseResult(Phase.CONSTRAINT_CHECK, True, reason, now)
    if state.settings["ConstraintCheckSearchTimeout"] <= 0:  # SF's searcher gets no time: nothing is fixed
        reason = f"{int(bad.sum())} replica(s) in violation; ConstraintCheckSearchTimeout is 0: no search"
        return PhaseResult(Phase.CONSTRAINT_CHECK, True, reason, now)
    what = Scope(
        bad,
        swappable(index, now, _swaps_that_fix(problem, now, priorities)),
        priorities == 0,
        move_weight=CHECK_MOVE_WEIGHT,
        budget=movement_budget(state, Phase.CONSTRAINT_CHECK, int((now.node_of >= 0).sum())),
        partners=(now.node_of >= 0) & elsewhere,
    )
    fixed = lambda placement: not _to_fix(run, placement).any()
    result, search = search_until_fixed(run, now, what, schedule, int(bad.sum()), fixed)
    parents = _parents_of_strays(problem, index, now, priorities) & elsewhere
    if parents.any() and _parents_move(state.settings) and not fixed(result):
        wider = dataclasses.replace(what, movable=bad | parents)
        result, search = _parents_moved(run, now, wider, (result, search), schedule, fixed)
    if parents.any():
        result, search = _balanced(run, now, dataclasses.replace(what, movable=bad | parents), result, search, schedule)
        result = _parents_carry_children(run, now, parents, result)
    before = violation_rank(priorities, now.report.measures)
    after = violation_rank(priorities, result.report.measures)
    reason = f"{int(bad.sum())} replica(s) in violation"
    if after < before:
        return PhaseResult(Phase.CONSTRAINT_CHECK, True, reason + "; violations reduced", result, search)
    return PhaseResult(Phase.CONSTRAINT_CHECK, True, reason + "; no fix found", now, search)
