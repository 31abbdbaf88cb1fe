"""SF's placement: the missing replicas placed (replicas of lower-priority services may make room),
with moves of existing replicas where some fit nowhere (MoveExistingReplicaForPlacement), and the
placement handed on as SF's Failover Manager builds it (primaries promoted where they were lost)."""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.anneal import Schedule
from plbjax.sf._encoding import AFFINITY, CONSTRAINTS
from plbjax.sf._model import Placement, Scope, movements, no_worse
from plbjax.sf._phases.new_replica_targets import barred_primaries, held_to_targets
from plbjax.sf._phases.on_every_node import everywhere, everywhere_partitions, place_everywhere
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
    transient,
)
from plbjax.sf._phases.primaries import built_from_primaries, elect_primaries, promotions
from plbjax.sf._state import ClusterState

_AFFINITY = np.arange(CONSTRAINTS) == AFFINITY
_WAITING = (
    "{} replica(s) of affinity children wait for a later refresh"
    " (their parent has no replica; PlaceChildWithoutParent is false)"
)


def placement_phase(run: Run, reached: Reached, schedule: Schedule) -> PhaseResult:
    """Place the missing replicas (`_placed`), then hand on the placement as SF's Failover Manager
    builds it: no new replica where SF's placement would not put it (`held_to_targets`), lost
    primaries replaced by promotions (`elect_primaries`; never of a new replica outside its primary
    domain), and no replica placed in a partition still without a primary (`built_from_primaries`)."""
    (state, _, problem, index), now = run.encoded, reached.now
    result = _placed(run, now, schedule)
    held = held_to_targets(problem, index, now, result.placement, run.priorities, everywhere_partitions(state, index))
    unplaced = int((result.placement.node_of >= 0).sum() - (held.node_of >= 0).sum())
    barred = barred_primaries(problem, now, held)
    placed = elect_primaries(problem, index, held, run.priorities, barred)
    placed = built_from_primaries(problem, index, now, placed)
    promoted = promotions(index, placed)
    reason = result.reason
    if unplaced:
        reason += f"; {unplaced} new replica(s) unplaced again: SF places none there (domains, primary domain)"
    if not promoted:
        return dataclasses.replace(result, reason=reason, placement=placed)
    reason += f"; {promoted} secondary(ies) promoted where the primary was gone"
    return dataclasses.replace(result, ran=True, reason=reason, placement=placed)


def _placed(run: Run, now: Placement, schedule: Schedule) -> PhaseResult:
    """Place the missing replicas (replicas of lower-priority services may make room); where some
    still fit nowhere, SF's placement with moves (MoveExistingReplicaForPlacement) moves existing
    replicas away, within MaxPercentageToMoveForPlacement and the placement throttles, and is kept
    only when it places more. Under a seconds budget the first search takes what its replicas to
    place need and goes on only while some are unplaced (`search_until_fixed`)."""
    (state, _, problem, index), priorities = run.encoded, run.priorities
    now, added = place_everywhere(problem, index, state, now, priorities)
    todo = np.zeros_like(now.node_of, dtype=bool)
    todo[: index.n_replicas] = now.node_of[: index.n_replicas] < 0
    todo &= ~everywhere(state, index)
    waiting = _waiting_children(run, now) & todo
    todo &= ~waiting
    if not todo.any():
        reason = "no replica is missing" if not added else f"{added} instance(s) added on every node with room"
        if waiting.any():
            reason = f"{reason}; {_WAITING.format(int(waiting.sum()))}"
        return PhaseResult(Phase.PLACEMENT, bool(added), reason, now)
    # replicas of lower priority than one waiting for a node may be migrated to make room for it
    priority = {s.name: s.priority for s in state.services}
    of_replica = np.array([priority[index.partitions[p][0]] for p in np.asarray(problem.replica_partition)])
    placed = (now.node_of >= 0) & ~everywhere(state, index)
    evictable = placed & (of_replica < of_replica[todo].max())
    headless = np.zeros(now.primary_of.shape[0], bool)
    for p in range(index.n_partitions):
        headless[p] = (
            index.stateful[p]
            and now.primary_of[p] >= 0
            and now.node_of[now.primary_of[p]] < 0
            and len(index.partition_rows[p]) >= 2
        )
    budget = movement_budget(state, Phase.PLACEMENT, int(placed.sum()))
    what = Scope(
        todo | evictable,
        headless,
        priorities == 0,
        move_weight=CHECK_MOVE_WEIGHT,
        budget=budget,
        transient=transient(state.settings),
    )
    placed_all = lambda placement: bool((placement.node_of[todo] >= 0).all())
    result, search = search_until_fixed(run, now, what, schedule, int(todo.sum()), placed_all)
    left = int(result.report.violations.unplaced.sum())
    reason = f"{int(todo.sum())} replica(s) to place"
    used = movements(index, now.node_of, now.primary_of, result)
    if left and state.settings["MoveExistingReplicaForPlacement"] and budget > used:
        still = todo & (result.node_of < 0)
        rest = schedule if schedule.seconds is None else spent(schedule, search.seconds)
        moved, more = scoped_search(
            run, result, dataclasses.replace(what, movable=still | placed, budget=budget - used), rest
        )
        search = dataclasses.replace(search, steps=search.steps + more.steps, seconds=search.seconds + more.seconds)
        if int(moved.report.violations.unplaced.sum()) < left and no_worse(
            result.report.violations, moved.report.violations, np.where(priorities == 0, 0, -1)
        ):
            result, left = moved, int(moved.report.violations.unplaced.sum())
            reason += "; existing replicas moved to make room"
    if left and _affinity_relaxed(state, todo, result):
        relaxed = dataclasses.replace(what, movable=todo & (result.node_of < 0), enforce=what.enforce & ~_AFFINITY)
        rest = schedule if schedule.seconds is None else spent(schedule, search.seconds)
        placed, more = scoped_search(run, result, relaxed, rest)
        search = dataclasses.replace(search, steps=search.steps + more.steps, seconds=search.seconds + more.seconds)
        if int(placed.report.violations.unplaced.sum()) < left:
            result, left = placed, int(placed.report.violations.unplaced.sum())
            reason += "; placed with affinity relaxed during the cluster upgrade"
    left -= int(waiting.sum())
    if left:
        reason += f"; {left} could not be placed (see Unplaced)"
    if waiting.any():
        reason += "; " + _WAITING.format(int(waiting.sum()))
    return PhaseResult(Phase.PLACEMENT, True, reason, result, search)


def _affinity_relaxed(state: ClusterState, todo: np.ndarray, result: Placement) -> bool:
    """Whether placement runs again without affinity: during a cluster upgrade (SF's PLB has
    balancing off), with RelaxAffinityConstraintDuringUpgrade, when no replica could be placed
    (Searcher::SearchForPlacement: `!balancingEnabled_ && !solution.IsAnyReplicaPlaced()`, then
    RandomWalkPlacement with relaxAffinity, which leaves the affinity constraint out)."""
    upgrade = state.upgrade
    cluster = upgrade is not None and upgrade.in_progress and upgrade.scope == "Cluster"
    relax = state.settings["RelaxAffinityConstraintDuringUpgrade"]
    return bool(cluster and relax and not (result.node_of[todo] >= 0).any())


def _waiting_children(run: Run, now: Placement) -> np.ndarray:
    """[R] replicas not placed when PlaceChildWithoutParent is false: those of affinity children
    whose parent service has no partition (in any refresh), or, in one refresh, whose parent
    partition has no replica yet (SF's AffinitySubspace::GetTargetNodes: no candidate node while
    the parent's PartitionCount is not 1 or its ExistingReplicaCount is 0)."""
    state, _, problem, index = run.encoded
    parent = np.asarray(problem.replica_parent)
    if state.settings["PlaceChildWithoutParent"]:
        return np.zeros(parent.shape[0], bool)
    with_partitions = {p.service for p in state.partitions}
    orphans = [
        i for i, s in enumerate(state.services) if s.correlations and s.correlations[0].service not in with_partitions
    ]
    orphan = np.isin(
        np.asarray(problem.replica_service), [index.services.index(state.services[i].name) for i in orphans]
    )
    orphan[index.n_replicas :] = False
    if not run.one_refresh or not (parent >= 0).any():
        return orphan
    partition = np.asarray(problem.replica_partition)
    placed = np.bincount(partition[now.node_of >= 0], minlength=now.primary_of.shape[0])
    return orphan | ((parent >= 0) & (placed[np.maximum(parent, 0)] == 0))
