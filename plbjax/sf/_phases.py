"""SF's three kinds of work, in its order — placement, constraint check, balancing — to a plan.

Every phase runs the same annealer on the same encoded problem (one compilation), scoped by
`_scope.scope`: which replicas may move, which primaries may swap, which constraints may not get
worse. Violations enter the energy weighted by SF's constraint priorities (hard 0, soft 1,
optimization 2, off -1), so placement and constraint checks trade them the way SF does: a hard
constraint that held is never broken, a soft one may give way to fix a hard one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Collection, Iterator
from itertools import repeat
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.anneal import STOP, AnnealResult, KernelConfig, Model, Schedule, anneal, enable_compilation_cache
from plbjax.sf import _energy as E
from plbjax.sf._balance import LocalLoads, MetricBalance, metric_balance, service_domains
from plbjax.sf._constraints import measures, violations
from plbjax.sf._decoding import diff, settle
from plbjax.sf._diagnostics import elimination_sequence, health_reports
from plbjax.sf._drops import drop_surplus
from plbjax.sf._encoding import encode
from plbjax.sf._encoding_updates import with_parent_hosts, without_dropped
from plbjax.sf._explain import Stages, drop_reasons, explain, throttle_limits
from plbjax.sf._governance import apply_resource_governance
from plbjax.sf._model import model
from plbjax.sf._problem import (
    AFFINITY,
    CAPACITY,
    FAULT_DOMAIN,
    PLACEMENT,
    PREFERRED,
    PRIORITY_SETTINGS,
    THRESHOLD,
    THRESHOLD_PRIORITY,
    UPGRADE_DOMAIN,
    Index,
    Problem,
)
from plbjax.sf._scope import Scope, scope
from plbjax.sf._search import SearchConfig
from plbjax.sf._settings import PLB_SETTINGS
from plbjax.sf._state import ClusterState
from plbjax.version import VERSION

SCHEMA_VERSION = 1
CHECK_MOVE_WEIGHT = 0.5  # placement and constraint check: a move costs half an optimization-priority violation
_KEYS = {
    "capacity": CAPACITY,
    "placement": PLACEMENT,
    "fault_domain": FAULT_DOMAIN,
    "upgrade_domain": UPGRADE_DOMAIN,
    "affinity": AFFINITY,
    "preferred": PREFERRED,
    "away": PREFERRED,
    "threshold": THRESHOLD,
}


@eqx.filter_jit
def _assess(problem: Problem, node_of, primary_of):
    """Everything the plan reports about one placement, in one compiled call."""
    loads = E.node_loads(problem, node_of, primary_of)
    report = violations(problem, node_of, primary_of, loads)
    return dict(
        avg=E.avg_std_dev(problem, node_of, primary_of), loads=loads, violations=report, measures=measures(report)
    )


def assess(problem: Problem, node_of: np.ndarray, primary_of: np.ndarray) -> dict:
    return jax.tree.map(np.asarray, _assess(problem, node_of, primary_of))


@dataclasses.dataclass
class Placement:
    """Where the plan stands between phases."""

    node_of: np.ndarray
    primary_of: np.ndarray
    report: dict


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every phase of one plan reads: the state and its encoding, SF's constraint priorities,
    and how the searches run."""

    state: ClusterState
    problem: Problem
    index: Index
    priorities: np.ndarray
    model: Model
    kernel: KernelConfig
    progress: Callable[[int, int, float, float], None] | None
    free: np.ndarray  # [R] replicas outside frozen partitions that may move (what any search may touch)
    free_partitions: np.ndarray  # [P]
    node_type: str | None = None  # balancing moves only replicas on this node type's nodes
    one_refresh: bool = False  # one SF refresh runs one stage: children wait for parents placed before it
    balancing_model: Model | None = None  # balancing's search when SwapPrimaryProbability is set (else `model`)


class _Phase(NamedTuple):
    """A phase's outcome: the placement it leaves, its entry in the plan's `Phases`, its search (None: none ran)."""

    placement: Placement
    entry: dict
    search: AnnealResult | None


def _priorities(state: ClusterState) -> np.ndarray:
    """SF priority of each constraint kind (UNPLACED ranks above everything)."""
    return np.array([int(state.settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY, -2])


def _violation_rank(priorities: np.ndarray, totals: np.ndarray) -> tuple:
    """Violations compared by priority: unplaced replicas first, then hard, soft, optimization."""
    return tuple(float(totals[priorities == p].sum()) for p in (-2, 0, 1, 2))


def _no_worse(before: dict, after: dict, priorities: np.ndarray) -> bool:
    """No enforced constraint measure grew anywhere."""
    return all(bool(np.all(after[k] <= before[k] + 1e-6)) for k, c in _KEYS.items() if priorities[c] >= 0)


def _pad_to(mask: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out[: mask.shape[0]] = mask
    return out


UNLIMITED = 2**31 - 1


def movement_budget(state: ClusterState, phase: str, replicas: int) -> int:
    """Most movements a phase may make under SF's throttles. Balancing, and placement when it moves
    existing replicas, count against GlobalMovementThrottleThreshold(Percentage) and their own
    ...For{phase} pair (0: no limit; a percentage counts existing replicas, rounded up) and against
    MaxPercentageToMove / MaxPercentageToMoveForPlacement (0: no movement at all). The constraint
    check is not throttled (SF's GetAllowedMovements)."""
    return min(throttle_limits(state.settings, phase, replicas).values(), default=UNLIMITED)


def _movements(index: Index, before: Placement, after: Placement) -> int:
    """Movements from `before` to `after` as the search and SF's throttles count them: replicas
    placed before that moved, and changed primaries that were running (`energy.movements`; adds,
    and which of them is the primary, are free)."""
    n = index.n_partitions
    running = (before.primary_of >= 0) & (before.node_of[np.maximum(before.primary_of, 0)] >= 0)
    return int(
        ((after.node_of != before.node_of) & (before.node_of >= 0)).sum()
        + ((after.primary_of != before.primary_of) & running)[:n].sum()
    )


def _search(run: _Run, now: Placement, what: Scope, schedule: Schedule) -> tuple[Placement, AnnealResult]:
    """Anneal one phase from `now` within `what`; returns the best placement found (rotations
    settled) and the search. An affinity parent's replica moves with the child replica beside it,
    its primary swaps with its aligned child's (`moves`)."""
    swappable = what.swappable & run.free_partitions
    partners = None if what.partners is None else what.partners & run.free
    what = dataclasses.replace(what, movable=what.movable & run.free, swappable=swappable, partners=partners)
    scoped = scope(run.problem, now.node_of, now.primary_of, what)
    result = _quench(run, now, what, anneal(run.model, scoped, run.kernel, schedule, run.progress), schedule)
    node_of, primary_of = settle(run.index, *result.solution)
    return Placement(node_of, primary_of, assess(run.problem, node_of, primary_of)), result


QUENCH_BLOCKS = 1  # blocks of the zero-temperature descent after each phase's search


def _quench(run: _Run, now: Placement, what: Scope, result: AnnealResult, schedule: Schedule) -> AnnealResult:
    """`result` continued by a descent at zero temperature (SF's search ends accepting only moves
    that lower the energy): the annealing's last temperature follows its largest energy changes (a
    replica placed), too hot to settle what an optimization-priority violation or a movement is
    worth; the descent takes every move, swap or undo that still lowers the energy."""
    start = tuple(np.asarray(x) for x in result.solution)
    scoped = scope(run.problem, now.node_of, now.primary_of, dataclasses.replace(what, start=start))
    cold = dataclasses.replace(
        schedule, steps=QUENCH_BLOCKS * run.kernel.block_steps, seconds=None, initial_temperature=1e-9, final_ratio=1.0
    )
    descent = anneal(run.model, scoped, run.kernel, cold, run.progress)
    better = descent.energy < result.energy
    return dataclasses.replace(
        result,
        solution=descent.solution if better else result.solution,
        energy=min(descent.energy, result.energy),
        steps=result.steps + descent.steps,
        seconds=result.seconds + descent.seconds,
        compile_seconds=result.compile_seconds + descent.compile_seconds,
        accepted=result.accepted + descent.accepted,
    )


def _swappable(index: Index, now: Placement, partitions: np.ndarray) -> np.ndarray:
    """Stateful partitions among `partitions` [P] whose primary can hand over to a placed secondary."""
    rows, partition = index.row_partition
    primary = now.primary_of
    handing = (now.node_of[rows] >= 0) & (rows != primary[partition])
    others = np.bincount(partition[handing], minlength=primary.shape[0])
    return (partitions & index.stateful & (primary >= 0) & (others > 0)).astype(partitions.dtype)


def _everywhere_partitions(state: ClusterState, index: Index) -> np.ndarray:
    """[P] partitions of services with one instance per node (InstanceCount -1)."""
    services = {s.name: s for s in state.services}
    return np.array([services[service].target < 0 for service, _ in index.partitions], bool)


def _everywhere(state: ClusterState, index: Index) -> np.ndarray:
    """[R] replicas of services with one instance per node (never moved by the search)."""
    out = np.zeros(index.input_node.shape[0], bool)
    for p in np.flatnonzero(_everywhere_partitions(state, index)):
        out[list(index.partition_rows[p])] = True
    return out


def _capacity(problem: Problem, priorities: np.ndarray) -> np.ndarray:
    """[N, M] capacity in force, inf where unlimited or where capacity is not enforced."""
    capacity = np.asarray(problem.capacity)
    return capacity if priorities[CAPACITY] >= 0 else np.full_like(capacity, np.inf)


def _service_nodes(problem: Problem) -> np.ndarray:
    """[S, N] the Up nodes each service may use."""
    return np.asarray(problem.class_allowed)[np.asarray(problem.service_class)]


def _place_everywhere(
    problem: Problem, index: Index, state: ClusterState, now: Placement, priorities: np.ndarray
) -> tuple[Placement, int]:
    """`now` with the missing instances of one-per-node services (InstanceCount -1) added on every
    allowed node that has none yet and has room for one (SF places them only where they fit);
    how many were added. The rest stay unplaced and are reported."""
    node_of, loads = now.node_of.copy(), now.report["loads"].copy()
    capacity = _capacity(problem, priorities)
    allowed = _service_nodes(problem)
    load, parent = np.asarray(problem.load_primary), np.asarray(problem.replica_parent)
    added = 0
    for p in np.flatnonzero(_everywhere_partitions(state, index)):
        rows = list(index.partition_rows[p])
        free = allowed[int(problem.partition_service[p])].copy()
        free[node_of[rows][node_of[rows] >= 0]] = False
        if rows and parent[rows[0]] >= 0 and priorities[AFFINITY] >= 0:  # only beside a replica of its parent
            beside = np.zeros_like(free)
            hosts = node_of[list(index.partition_rows[parent[rows[0]]])]
            beside[hosts[hosts >= 0]] = True
            free &= beside
        for r in (r for r in rows if node_of[r] < 0):
            fits = free & np.all((load[r] <= 0) | (loads + load[r] <= capacity), axis=1)
            if not fits.any():
                break
            n = int(np.argmax(fits))
            node_of[r], free[n] = n, False
            loads[n] += load[r]
            added += 1
    if not added:
        return now, 0
    return Placement(node_of, now.primary_of, assess(problem, node_of, now.primary_of)), added


def _parent_hosts(
    problem: Problem, index: Index, state: ClusterState, start: Placement, priorities: np.ndarray
) -> dict[str, set[str]]:
    """{parent: nodes} for each one-per-node service that has affinity children: the nodes its
    instances will be on once placed where they fit."""
    parents = {c["ServiceName"] for s in state.services for c in s.correlations}
    parents &= {s.name for s in state.services if s.target < 0}
    if not parents:
        return {}
    node_of = _place_everywhere(problem, index, state, start, priorities)[0].node_of
    hosts: dict[str, set[str]] = {name: set() for name in parents}
    for p, (service, _) in enumerate(index.partitions):
        if service in parents:
            hosts[service] |= {index.nodes[node_of[r]] for r in index.partition_rows[p] if node_of[r] >= 0}
    return hosts


def elect_primaries(problem: Problem, index: Index, now: Placement, priorities: np.ndarray) -> Placement:
    """`now` with a placed secondary promoted in every stateful partition whose primary has no node
    (SF's Failover Manager promotes rather than builds a new primary), or is on a node deactivated
    with Intent Restart (swapped out, as SF's Failover Manager does before the restart): the one on
    the least loaded node that has room for the primary's load and breaks no hard constraint that
    held; none if none can.

    Partitions are decided in order, as one at a time, but in rounds: every candidate of a round is
    tried in one batch (`_promotion_trials`) from the round's placement, and a partition whose
    reading (its candidates' node loads, its own and its affinity relatives' primaries) an earlier
    partition of the round may have changed waits for the next round."""
    enforced = [k for k in _PROMOTION_KEYS if priorities[_KEYS[k]] == 0]
    primary = now.primary_of[: index.n_partitions]
    node = np.where(primary >= 0, now.node_of[primary], -1)
    restart = np.array([intent == "Restart" for intent in index.node_intent] + [False])  # [-1]: no node
    due = index.stateful[: index.n_partitions] & ((node < 0) | restart[node])
    waiting = [p for p in np.flatnonzero(due).tolist() if _candidates(index, now, p)]
    while waiting:
        order = {p: _candidates(index, now, p) for p in waiting}
        worse = _promotion_trials(problem, now, [(p, r) for p in waiting for r in order[p]], enforced)
        primary_of, later = now.primary_of.copy(), []
        busy_nodes: set[int] = set()
        busy_partitions: set[int] = set()
        for p in waiting:
            nodes, relatives = {int(now.node_of[r]) for r in order[p]}, _relatives(problem, index, p)
            if nodes & busy_nodes or p in busy_partitions:
                later.append(p)
                busy_nodes |= nodes
                busy_partitions |= relatives
                continue
            chosen = next((r for r in order[p] if not worse[p, r]), None)
            if chosen is not None:
                primary_of[p] = chosen
                busy_nodes.add(int(now.node_of[chosen]))
                busy_partitions |= relatives
        if not np.array_equal(primary_of, now.primary_of):
            now = Placement(now.node_of, primary_of, assess(problem, now.node_of, primary_of))
        waiting = later
    return now


def _headless(index: Index, now: Placement) -> np.ndarray:
    """[P] stateful partitions whose primary has no node."""
    primary = now.primary_of
    on_node = (primary >= 0) & (now.node_of[np.maximum(primary, 0)] >= 0)
    return _pad_to(index.stateful[: index.n_partitions], primary.shape[0]) & ~on_node


def built_from_primaries(problem: Problem, index: Index, start: Placement, now: Placement) -> Placement:
    """`now` without the replicas placed since `start` in stateful partitions left with no primary
    (none fits, none can be promoted): SF's Failover Manager builds a partition from its primary
    and places no secondary without one. They stay unplaced and are listed in `Unplaced`."""
    partition = np.asarray(problem.replica_partition)
    undo = (start.node_of < 0) & (now.node_of >= 0) & _headless(index, now)[partition]
    if not undo.any():
        return now
    node_of = np.where(undo, -1, now.node_of)
    return Placement(node_of, now.primary_of, assess(problem, node_of, now.primary_of))


_PROMOTION_KEYS = ("capacity", "affinity", "preferred", "threshold")  # the constraints a role change can alter


def _candidates(index: Index, now: Placement, p: int) -> list[int]:
    """The placed secondaries that may take over partition p's primary, least loaded node first,
    none on a node deactivated with Restart; none when p needs no promotion."""
    primary = int(now.primary_of[p])
    restart = lambda r: now.node_of[r] >= 0 and index.node_intent[now.node_of[r]] == "Restart"
    if not index.stateful[p] or (primary >= 0 and now.node_of[primary] >= 0 and not restart(primary)):
        return []
    placed = [r for r in index.partition_rows[p] if r != primary and now.node_of[r] >= 0 and not restart(r)]
    return sorted(placed, key=lambda r: (now.report["loads"][now.node_of[r]].sum(), r))


def _relatives(problem: Problem, index: Index, p: int) -> set[int]:
    """Partition p, its affinity parent and its children: those whose affinity reads p's primary."""
    parents = np.asarray(problem.replica_parent)[list(index.partition_rows[p])]
    children = np.asarray(problem.children_of)[p]
    children = np.asarray(problem.replica_partition)[children[children >= 0]]
    return {p, *parents[parents >= 0].tolist(), *children.tolist()}


TRIAL_BATCH = 64  # promotion trials per compiled call (one size per problem shape: one compilation)
TRIAL_ROWS = 1 << 22  # replica rows one batch of promotion trials may cover


def _promotion_trials(
    problem: Problem, now: Placement, trials: list[tuple[int, int]], keys: list[str]
) -> dict[tuple[int, int], bool]:
    """{(partition, replica): whether promoting the replica from `now` makes one of `keys` worse
    somewhere}, as `assess` and `_no_worse` would find, in batches of one compiled call."""
    if not trials or not keys:
        return {t: False for t in trials}
    rows = problem.load_primary.shape[0]
    batch = min(TRIAL_BATCH, max(TRIAL_ROWS // rows, 1))
    padded = np.array(trials + trials[:1] * (-len(trials) % batch), np.int32)
    before = {k: now.report["violations"][k] for k in keys}
    worse = [
        np.asarray(_worse(problem, now.node_of, now.primary_of, before, padded[i : i + batch]))
        for i in range(0, len(padded), batch)
    ]
    return dict(zip(trials, np.concatenate(worse)[: len(trials)].tolist()))


@eqx.filter_jit
def _worse(problem: Problem, node_of, primary_of, before: dict, trials):
    """[B] whether each (partition, replica) promotion in `trials` [B, 2] makes a `before` measure worse."""

    def one(trial):
        promoted = primary_of.at[trial[0]].set(trial[1])
        after = violations(problem, node_of, promoted, E.node_loads(problem, node_of, promoted))
        return jnp.any(jnp.stack([jnp.any(~(after[k] <= v + 1e-6)) for k, v in before.items()]))

    return jax.vmap(one)(trials)


def _placement_phase(run: _Run, now: Placement, schedule: Schedule) -> _Phase:
    """Place the missing replicas (replicas of lower-priority services may make room); where some
    still fit nowhere, SF's placement with moves (MoveExistingReplicaForPlacement) moves existing
    replicas away, within MaxPercentageToMoveForPlacement and the placement throttles, and is kept
    only when it places more."""
    problem, index, state, priorities = run.problem, run.index, run.state, run.priorities
    now, added = _place_everywhere(problem, index, state, now, priorities)
    todo = np.zeros_like(now.node_of, dtype=bool)
    todo[: index.n_replicas] = now.node_of[: index.n_replicas] < 0
    todo &= ~_everywhere(state, index)
    waiting = _waiting_children(run, now) & todo
    todo &= ~waiting
    if not todo.any():
        reason = "no replica is missing" if not added else f"{added} instance(s) added on every node with room"
        if waiting.any():
            reason = f"{reason}; {_WAITING.format(int(waiting.sum()))}"
        return _Phase(now, {"Phase": "Placement", "Ran": bool(added), "Reason": reason}, None)
    # replicas of lower priority than one waiting for a node may be migrated to make room for it
    priority = {s.name: s.priority for s in state.services}
    of_replica = np.array([priority[index.partitions[p][0]] for p in np.asarray(problem.replica_partition)])
    placed = (now.node_of >= 0) & ~_everywhere(state, index)
    evictable = placed & (of_replica < of_replica[todo].max())
    headless = np.zeros(now.primary_of.shape[0], bool)
    for p in range(index.n_partitions):
        headless[p] = (
            index.stateful[p]
            and now.primary_of[p] >= 0
            and now.node_of[now.primary_of[p]] < 0
            and len(index.partition_rows[p]) >= 2
        )
    budget = movement_budget(state, "Placement", int(placed.sum()))
    what = Scope(todo | evictable, headless, priorities == 0, move_weight=CHECK_MOVE_WEIGHT, budget=budget)
    result, search = _search(run, now, what, schedule)
    left = int(result.report["violations"]["unplaced"].sum())
    reason = f"{int(todo.sum())} replica(s) to place"
    spent = _movements(index, now, result)
    if left and state.settings["MoveExistingReplicaForPlacement"] and budget > spent:
        still = todo & (result.node_of < 0)
        rest = schedule if schedule.seconds is None else _spent(schedule, search.seconds)
        moved, more = _search(
            run, result, dataclasses.replace(what, movable=still | placed, budget=budget - spent), rest
        )
        search = dataclasses.replace(search, steps=search.steps + more.steps, seconds=search.seconds + more.seconds)
        if int(moved.report["violations"]["unplaced"].sum()) < left and _no_worse(
            result.report["violations"], moved.report["violations"], np.where(priorities == 0, 0, -1)
        ):
            result, left = moved, int(moved.report["violations"]["unplaced"].sum())
            reason += "; existing replicas moved to make room"
    left -= int(waiting.sum())
    if left:
        reason += f"; {left} could not be placed (see Unplaced)"
    if waiting.any():
        reason += "; " + _WAITING.format(int(waiting.sum()))
    return _Phase(result, {"Phase": "Placement", "Ran": True, "Reason": reason}, search)


_WAITING = (
    "{} replica(s) of affinity children wait for a later refresh"
    " (their parent has no replica; PlaceChildWithoutParent is false)"
)


def _waiting_children(run: _Run, now: Placement) -> np.ndarray:
    """[R] replicas one refresh does not place when PlaceChildWithoutParent is false: those of
    affinity children whose parent partition has no replica yet (SF's AffinitySubspace::
    GetTargetNodes: no candidate node while the parent's ExistingReplicaCount is 0)."""
    parent = np.asarray(run.problem.replica_parent)
    if not run.one_refresh or run.state.settings["PlaceChildWithoutParent"] or not (parent >= 0).any():
        return np.zeros(parent.shape[0], bool)
    partition = np.asarray(run.problem.replica_partition)
    placed = np.bincount(partition[now.node_of >= 0], minlength=now.primary_of.shape[0])
    return (parent >= 0) & (placed[np.maximum(parent, 0)] == 0)


def _violating(index: Index, problem: Problem, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[R] replicas involved in a violation of an enabled constraint."""
    bad = np.zeros(now.node_of.shape[0], bool)
    for replicas in _violating_by_kind(index, now, priorities).values():
        bad |= replicas
    return bad


def _violating_by_kind(index: Index, now: Placement, priorities: np.ndarray) -> dict[str, np.ndarray]:
    """{constraint kind (the plan's names): [R] placed replicas involved in a violation of it}, for
    each enabled constraint."""
    v, placed = now.report["violations"], now.node_of >= 0
    kinds = {}
    if priorities[CAPACITY] >= 0:
        kinds["NodeCapacity"] = np.isin(now.node_of, np.flatnonzero(v["capacity"].sum(axis=1) > 0)) & placed
    for key, c, kind in (
        ("placement", PLACEMENT, "PlacementConstraint"),
        ("affinity", AFFINITY, "Affinity"),
        ("away", PREFERRED, "PreferredLocation"),
    ):
        if priorities[c] >= 0:
            kinds[kind] = np.asarray(v[key], bool) & placed
    for key, c, kind in (
        ("fault_domain", FAULT_DOMAIN, "FaultDomain"),
        ("upgrade_domain", UPGRADE_DOMAIN, "UpgradeDomain"),
    ):
        if priorities[c] >= 0:
            bad = np.zeros(now.node_of.shape[0], bool)
            for p in np.flatnonzero(v[key][: index.n_partitions]):
                bad[list(index.partition_rows[p])] = True
            kinds[kind] = bad & placed
    return kinds


def _swaps_that_fix(problem: Problem, now: Placement, priorities: np.ndarray) -> np.ndarray:
    """[P] the partitions whose primary the constraint check may swap: those whose primary is on a
    node over capacity, those with an affinity violation and their parents. SF's constraint check
    swaps a primary only to fix a violation a role change can fix; a swap moves no replica, so it
    fixes no domain spread or placement constraint, and only lightens a node its primary leaves."""
    v = now.report["violations"]
    partitions = np.zeros(now.primary_of.shape[0], bool)
    if priorities[CAPACITY] >= 0:
        over = v["capacity"].sum(axis=1) > 0
        primary = now.primary_of
        where = np.where(primary >= 0, now.node_of[np.maximum(primary, 0)], -1)
        partitions |= (where >= 0) & over[np.maximum(where, 0)]
    if priorities[AFFINITY] >= 0:
        replicas = np.flatnonzero(v["affinity"])
        partitions[np.asarray(problem.replica_partition)[replicas]] = True
        parents = np.asarray(problem.replica_parent)[replicas]
        partitions[parents[parents >= 0]] = True
    return partitions


def _constraint_phase(run: _Run, now: Placement, schedule: Schedule) -> _Phase:
    """Fix violations: the replicas involved move (and trade with any replica, SF's repair), kept when
    violations, ranked by priority, went down."""
    problem, index, state, priorities = run.problem, run.index, run.state, run.priorities
    bad = _violating(index, problem, now, priorities) & ~_everywhere(state, index)
    if not bad.any():
        return _Phase(now, {"Phase": "ConstraintCheck", "Ran": False, "Reason": "no constraint violation"}, None)
    what = Scope(
        bad,
        _swappable(index, now, _swaps_that_fix(problem, now, priorities)),
        priorities == 0,
        move_weight=CHECK_MOVE_WEIGHT,
        budget=movement_budget(state, "ConstraintCheck", int((now.node_of >= 0).sum())),
        partners=(now.node_of >= 0) & ~_everywhere(state, index),
    )
    result, search = _search(run, now, what, schedule)
    before = _violation_rank(priorities, now.report["measures"])
    after = _violation_rank(priorities, result.report["measures"])
    reason = f"{int(bad.sum())} replica(s) in violation"
    if after < before:
        return _Phase(
            result, {"Phase": "ConstraintCheck", "Ran": True, "Reason": reason + "; violations reduced"}, search
        )
    return _Phase(now, {"Phase": "ConstraintCheck", "Ran": True, "Reason": reason + "; no fix found"}, search)


def _balances(state: ClusterState, problem: Problem, index: Index, now: Placement) -> list[MetricBalance]:
    """Balance of each metric at `now`, each service's own loads included when LocalBalancingThreshold is on."""
    m = len(index.metrics)
    weights = np.asarray(problem.global_weight)[:m]
    local = None
    if float(state.settings["LocalBalancingThreshold"]) > 0:
        loads = np.asarray(E.local_loads(problem, jnp.asarray(now.node_of), jnp.asarray(now.primary_of)))
        local = LocalLoads(
            tuple(index.services),
            loads,
            np.asarray(E.local_masks(problem)),
            np.asarray(problem.service_metrics),
            np.asarray(problem.local_weight),
        )
    return metric_balance(
        state,
        index.metrics,
        index.node_types,
        now.report["loads"][:, :m],
        np.asarray(problem.metric_nodes)[:m],
        weights,
        local,
    )


def _balancing_scope(state: ClusterState, imbalanced: set[str]) -> tuple[set[str], str]:
    """Services a balancing run may move, and why (SF: whole imbalanced service domains)."""
    upgrade = state.upgrade or {}
    frozen: set[str] = set()
    if upgrade.get("InProgress"):
        if upgrade.get("Scope", "Cluster") == "Cluster":
            return set(), "a cluster upgrade is in progress: balancing is off"
        frozen = {s.name for s in state.services if s.application == upgrade.get("ApplicationName")}
    if not imbalanced:
        return set(), "every metric is balanced"
    movable, domains = set(), []
    for domain in service_domains(state):
        metrics = sorted({m.name for name in domain for m in state.service(name).metrics} & imbalanced)
        if metrics:
            movable |= domain
            domains.append(f"[{', '.join(sorted(domain))}] for {', '.join(metrics)}")
    movable -= {s.name for s in state.services if not s.balancing_enabled} | frozen
    if not movable:
        return set(), "the imbalanced services may not move (upgrading or balancing disabled)"
    return movable, "service domains to balance or defragment: " + "; ".join(domains)


def _throttled_partitions(state: ClusterState, index: Index, problem: Problem) -> np.ndarray:
    """[P] partitions balancing may not move: as many recent balancing movements (their replicas'
    History entries) as MovementPerPartitionThrottleThreshold, or more (SF counts only partitions
    that moved, so 0 freezes every partition with a recent movement)."""
    counts = np.zeros(problem.partition_service.shape[0], int)
    if not state.history:
        return counts > 0
    n = index.n_replicas
    moved = np.fromiter(map(len, map(state.history.get, map(str, index.replica_ids), repeat(()))), np.int64, n)
    np.add.at(counts, np.asarray(problem.replica_partition)[:n], moved)
    return (counts > 0) & (counts >= state.settings["MovementPerPartitionThrottleThreshold"])


def _balancing_model(state: ClusterState, search: SearchConfig) -> Model | None:
    """Balancing's search with the state's SwapPrimaryProbability (SF's Searcher: a primary swap with
    that probability, else a move) when its Settings give one other than SF's default; None: the
    search's `swap_probability`, which every other phase uses."""
    given = float(state.settings["SwapPrimaryProbability"])
    return None if given == PLB_SETTINGS["SwapPrimaryProbability"] else model(given)


def _balancing_phase(run: _Run, now: Placement, schedule: Schedule, balance: list[MetricBalance], spent: int) -> _Phase:
    """Balance the imbalanced service domains; `spent`: movements placement made that count against
    the same throttles."""
    problem, index, state, priorities = run.problem, run.index, run.state, run.priorities
    run = dataclasses.replace(run, model=run.balancing_model or run.model)
    over = now.report["violations"]["threshold"][: index.n_nodes, : len(index.metrics)] > 0
    imbalanced = {b.metric for b in balance if not b.balanced} | {index.metrics[m] for m in np.flatnonzero(over.any(0))}
    services, reason = _balancing_scope(state, imbalanced)
    if services and state.settings.get("MaxPercentageToMove", 0.3) == 0:  # SF's scheduler skips balancing
        services, reason = set(), "MaxPercentageToMove is 0: balancing may move nothing"
    phase = {"Phase": "Balancing", "Ran": bool(services), "Reason": reason}
    if not services:
        return _Phase(now, phase, None)
    open_nodes = None
    if any(b.node_type is not None for b in balance) or run.node_type is not None:  # only these types move
        types = {b.node_type for b in balance if not b.balanced} if run.node_type is None else {run.node_type}
        open_nodes = _pad_to(np.array([t in types for t in index.node_types]), problem.node_up.shape[0])
        phase["Reason"] += " on node types " + ", ".join(sorted(str(t) for t in types))
    of_service = np.array(
        [index.partitions[p][0] in services for p in range(index.n_partitions)]
        + [False] * (now.primary_of.shape[0] - index.n_partitions)
    )
    of_service &= ~_throttled_partitions(state, index, problem)
    replica_partition = np.asarray(problem.replica_partition)
    movable = of_service[replica_partition] & (now.node_of >= 0) & ~_everywhere(state, index)
    movable[index.n_replicas :] = False
    if open_nodes is not None:
        movable &= open_nodes[np.maximum(now.node_of, 0)]
    budget = max(movement_budget(state, "Balancing", int((now.node_of >= 0).sum())) - spent, 0)
    per_partition = state.settings["MovementPerPartitionThrottleThreshold"] or None
    what = Scope(
        movable,
        _swappable(index, now, of_service),
        priorities >= 0,
        open_nodes=open_nodes,
        budget=budget,
        history=True,
        partition_budget=per_partition,
    )
    result, search = _search(run, now, what, schedule)
    gain = now.report["avg"] - result.report["avg"]
    if (
        search.energy < search.initial_energy
        and gain > 0
        and gain >= state.settings["ScoreImprovementThreshold"]
        and _no_worse(now.report["violations"], result.report["violations"], priorities)
    ):
        return _Phase(result, phase, search)
    phase["Reason"] += "; no better placement was found"
    return _Phase(now, phase, search)


TIDY_PROPOSALS = 64  # proposals per movement the minimal-movement pass makes


def _tidy(run: _Run, final: Placement, schedule: Schedule) -> tuple[Placement, int, AnnealResult | None, bool]:
    """The fewest movements for the result: from the final placement, undo movements and collapse
    chains of moves (an exchange of two moved replicas sends one home) while neither SF's energy,
    which charges every movement, nor any constraint gets worse. Returns the placement, how many
    movements went, the search, and whether it ran to its end. It runs after a stop too, for
    `AFTER_STOP_SECONDS` at most."""
    problem, index, priorities = run.problem, run.index, run.priorities
    n = index.n_partitions
    moved = (final.node_of != index.initial_node) & (index.initial_node >= 0) & (final.node_of >= 0)
    swapped = np.zeros_like(moved, shape=final.primary_of.shape)
    head = index.initial_primary[:n]  # swaps back only to a primary that was running
    swapped[:n] = (final.primary_of[:n] != head) & (head >= 0) & index.stateful[:n]
    swapped[:n] &= index.initial_node[np.maximum(head, 0)] >= 0
    count = int(moved.sum() + swapped.sum())
    if not count:
        return final, 0, None, True
    origin = Placement(index.initial_node, index.initial_primary, {})
    before = _movements(index, origin, final)
    what = Scope(
        moved & run.free,
        swapped & run.free_partitions,
        priorities >= 0,
        budget=before,
        history=True,
        start=(final.node_of, final.primary_of),
        undo_share=1.0,
    )
    scoped = scope(problem, index.initial_node, index.initial_primary, what)
    blocks = math.ceil(TIDY_PROPOSALS * count / (run.kernel.tries * run.kernel.block_steps))
    steps = blocks * run.kernel.block_steps
    schedule = dataclasses.replace(schedule, steps=steps, initial_temperature=1e-9, final_ratio=1.0)
    result = anneal(run.model, scoped, run.kernel, schedule, run.progress, finish=True)
    node_of, primary_of = settle(index, *result.solution)
    tidied = Placement(node_of, primary_of, assess(problem, node_of, primary_of))
    removed = before - _movements(index, origin, tidied)
    finished = result.steps >= steps
    if removed > 0 and _no_worse(final.report["violations"], tidied.report["violations"], priorities):
        return tidied, removed, result, finished
    return final, 0, result, finished


def _history(state: ClusterState, index: Index, before: Placement, after: Placement) -> dict:
    """The input's History with every replica moved by balancing remembering the node it left."""
    history = {k: list(v) for k, v in state.history.items()}
    for r in np.flatnonzero((before.node_of != after.node_of) & (before.node_of >= 0) & (after.node_of >= 0)):
        if index.replica_ids[r] is not None:
            history.setdefault(str(index.replica_ids[r]), []).append(index.nodes[before.node_of[r]])
    return history


def _balance_entries(before: list[MetricBalance], after: list[MetricBalance]) -> list[dict]:
    """The plan's `Balance`; `LocallyImbalanced` only where a service's own loads break LocalBalancingThreshold."""
    return [
        _local_entry(b, a)
        | {
            "Metric": b.metric,
            "NodeType": b.node_type,
            "MaxLoad": b.max_load,
            "MinLoad": b.min_load,
            "BalancingThreshold": b.threshold,
            "ActivityThreshold": b.activity,
            "IsBalancedBefore": b.balanced,
            "IsBalancedAfter": a.balanced,
            "DeviationBefore": b.deviation,
            "DeviationAfter": a.deviation,
        }
        for b, a in zip(before, after)
    ]


def _local_entry(before: MetricBalance, after: MetricBalance) -> dict:
    if not (before.local or after.local):
        return {}
    return {"LocallyImbalanced": {"Before": list(before.local), "After": list(after.local)}}


_NO_PRIMARY = "its partition's primary fits nowhere: secondaries are placed only with a primary (SF's Failover Manager)"


def _unplaced(index: Index, problem: Problem, final: Placement) -> list[dict]:
    out, headless = [], _headless(index, final)
    for r in np.flatnonzero(final.report["violations"]["unplaced"]):
        p = int(problem.replica_partition[r])
        service, pid = index.partitions[p]
        role = ("Primary" if final.primary_of[p] == r else "Secondary") if index.stateful[p] else "Instance"
        out.append(
            {
                "ServiceName": service,
                "PartitionId": pid,
                "Role": role,
                "ConstraintEliminationSequence": elimination_sequence(
                    index, problem, final.node_of, final.primary_of, final.report["loads"], int(r)
                ),
            }
            | ({"Reason": _NO_PRIMARY} if role == "Secondary" and headless[p] else {})
        )
    return out


def _spent(schedule: Schedule, seconds: float) -> Schedule:
    """`schedule` with `seconds` of its time budget gone."""
    assert schedule.seconds is not None
    return dataclasses.replace(schedule, seconds=max(schedule.seconds - seconds, 1e-3))


class _Budget:
    """`search.seconds` bounds the whole run: a phase that searches gets a share of the time left
    (placement a third, the constraint check half of what is left, balancing the rest but a block,
    the minimal-movement pass what remains; a phase with nothing to do takes nothing). Each phase's
    search leaves time for its zero-temperature block, balancing's also for the minimal-movement
    pass's first block (a search runs one block at least), so the run does not overrun its budget by
    more than a block's misestimate. Compilation is not counted."""

    def __init__(self, schedule: Schedule):
        self.schedule, self.left = schedule, schedule.seconds

    def next(self, share: float, reserve_blocks: int = QUENCH_BLOCKS) -> Schedule:
        if self.left is None:
            return self.schedule
        return dataclasses.replace(self.schedule, seconds=max(self.left * share, 1e-3), reserve_blocks=reserve_blocks)

    def spend(self, search) -> None:
        if search is not None and self.left is not None:
            self.left -= search.seconds


def _interrupted(phase: str) -> dict:
    return {"Phase": phase, "Ran": False, "Reason": "the run was interrupted before this phase"}


class _Prepared(NamedTuple):
    """The state as the phases see it: governed, surplus replicas dropped, encoded, primaries elected."""

    state: ClusterState
    problem: Problem
    index: Index
    input: Placement  # the input's placement as it runs now (replicas on Down nodes count as lost)
    initial: Placement  # the plan's initial placement: where placement starts
    drops: list[dict]
    health: list[dict]  # resource governance's reports


class Encoded(NamedTuple):
    """A state under resource governance, its reports and its encoding."""

    state: ClusterState
    health: list[dict]
    problem: Problem
    index: Index


def governed_encoding(state: ClusterState) -> Encoded:
    """Resource governance and the encoding of `state`."""
    governed, health = apply_resource_governance(state)
    return Encoded(governed, health, *encode(governed))


class _UsableNodes(dict):
    """Each service's Up allowed nodes by name, found when first asked for (surplus drops ask for
    few services, and a million-replica cluster has thousands)."""

    def __init__(self, index: Index, allowed: np.ndarray):
        super().__init__()
        self.index, self.allowed = index, allowed

    def __missing__(self, service: str) -> list[str]:
        s = self.index.services.index(service)
        self[service] = [self.index.nodes[n] for n in np.flatnonzero(self.allowed[s])]
        return self[service]


def _prepare(encoded: Encoded, priorities: np.ndarray) -> _Prepared:
    """Surplus drops (the phases plan partitions without them), children of one-per-node parents
    confined to where a parent instance will be, and elected primaries."""
    state, governance_health, problem, index = encoded
    running = np.array([status != "Down" for status in index.node_status] + [False], bool)
    input_node = np.where(running[index.input_node], index.input_node, -1)  # -1 indexes the last, False
    given = Placement(input_node, index.initial_primary, assess(problem, input_node, index.initial_primary))
    usable = _UsableNodes(index, _service_nodes(problem)[:, : index.n_nodes])
    state, drops = drop_surplus(
        state,
        index,
        given.report["loads"],
        _capacity(problem, priorities),
        _violating(index, problem, given, priorities),
        usable,
        (int(priorities[FAULT_DOMAIN]), int(priorities[UPGRADE_DOMAIN]), int(priorities[AFFINITY])),
    )
    if drops:
        problem, index = without_dropped(state, index)
    initial = given
    if drops or not np.array_equal(index.initial_node, input_node):
        initial = Placement(
            index.initial_node, index.initial_primary, assess(problem, index.initial_node, index.initial_primary)
        )
    hosts = _parent_hosts(problem, index, state, initial, priorities)
    if hosts:
        problem, index = with_parent_hosts(state, problem, index, hosts)
        initial = Placement(
            index.initial_node, index.initial_primary, assess(problem, index.initial_node, index.initial_primary)
        )
    initial = elect_primaries(problem, index, initial, priorities)
    return _Prepared(state, problem, index, given, initial, drops, governance_health)


class _Clock:
    """Wall seconds by part of a plan (the plan's `Search.PhaseSeconds`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] = round(self.seconds.get(part, 0.0) + time.perf_counter() - start, 3)


class _Outcome(NamedTuple):
    """The phases' results, in SF's order, and the minimal-movement pass's."""

    placement: _Phase
    placed: Placement  # after placement, lost primaries replaced by promotions
    check: _Phase
    balancing: _Phase
    balance_before: list[MetricBalance]
    final: Placement
    removed: int
    searches: list[AnnealResult]
    minimal: bool  # the minimal-movement pass ran to its end (or had nothing to do)


def _skipped(name: str, now: Placement, only: str) -> _Phase:
    reason = "one refresh: no stage has work" if only == NO_STAGE else f"one refresh runs one stage: {only}"
    return _Phase(now, {"Phase": name, "Ran": False, "Reason": reason}, None)


def _run_phases(run: _Run, start: Placement, schedule: Schedule, clock: _Clock, only: str | None = None) -> _Outcome:
    """Placement, constraint check, balancing (or `only` one of them) and the minimal-movement pass,
    each from where the last left off, sharing `search.seconds`; an interrupted run stops after the
    current phase, then the minimal-movement pass runs on what it has. `clock` times each."""
    budget = _Budget(schedule)
    wanted = lambda name: only is None or only == name
    with clock("Placement"):
        placement = _Phase(start, _interrupted("Placement"), None)
        if not STOP.is_set():
            placement = (
                _placement_phase(run, start, budget.next(1 / 3))
                if wanted("Placement")
                else _skipped("Placement", start, str(only))
            )
        budget.spend(placement.search)
        placed = elect_primaries(run.problem, run.index, placement.placement, run.priorities)
        placed = built_from_primaries(run.problem, run.index, start, placed)
    check = _Phase(placed, _interrupted("ConstraintCheck"), None)
    if not STOP.is_set():
        with clock("ConstraintCheck"):
            check = (
                _constraint_phase(run, placed, budget.next(1 / 2))
                if wanted("ConstraintCheck")
                else _skipped("ConstraintCheck", placed, str(only))
            )
        budget.spend(check.search)
    balance_before = _balances(run.state, run.problem, run.index, check.placement)
    balancing = _Phase(check.placement, _interrupted("Balancing"), None)
    if not STOP.is_set():
        with clock("Balancing"):
            balancing = (
                _balancing_phase(
                    run,
                    check.placement,
                    budget.next(1.0, QUENCH_BLOCKS + 1),
                    balance_before,
                    _movements(run.index, start, placed),
                )
                if wanted("Balancing")
                else _skipped("Balancing", check.placement, str(only))
            )
        budget.spend(balancing.search)
    with clock("FewestMovements"):
        final, removed, tidy, minimal = _tidy(run, balancing.placement, budget.next(1.0, 0))
    searches = [s for s in (placement.search, check.search, balancing.search, tidy) if s is not None]
    return _Outcome(placement, placed, check, balancing, balance_before, final, removed, searches, minimal)


def _search_entry(search: SearchConfig, out: _Outcome, clock: _Clock) -> dict:
    """The plan's `Search`."""
    searches = out.searches
    entry = {
        "Version": VERSION,
        "Backend": jax.default_backend(),
        "Chains": min((s.chains for s in searches), default=0),
        "Steps": sum(s.steps for s in searches),
        "Seconds": round(sum(s.seconds for s in searches), 3),
        "Seed": search.seed,
        "Budget": search.budget,
        "Interrupted": STOP.is_set(),
        "Minimal": out.minimal,
        "MovementsRemoved": out.removed,
        "CompileSeconds": round(sum(s.compile_seconds for s in searches), 3),
        "PhaseSeconds": clock.seconds,
    }
    shrunk = [s.shrunk for s in searches if s.shrunk]
    if shrunk:
        entry["DeviceMemory"] = shrunk[-1]
    return entry


def _node_entries(index: Index, problem: Problem, before: Placement, after: Placement) -> list[dict]:
    """The plan's `Nodes`: capacities in force and loads before and after."""
    metrics, capacity = index.metrics, np.asarray(problem.capacity)
    return [
        {
            "NodeName": name,
            "Capacities": {m: float(capacity[n, k]) for k, m in enumerate(metrics) if np.isfinite(capacity[n, k])},
            "LoadsBefore": {m: float(before.report["loads"][n, k]) for k, m in enumerate(metrics)},
            "LoadsAfter": {m: float(after.report["loads"][n, k]) for k, m in enumerate(metrics)},
        }
        for n, name in enumerate(index.nodes)
    ]


def _frozen_masks(index: Index, problem: Problem, frozen: Collection[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """[R] replicas and [P] partitions outside the `frozen` (ServiceName, PartitionId) partitions,
    less the replicas on a node deactivated with Pause or Restart (SF's PlacementCreator: a
    deactivated node's replicas are in transition, not movable; nor may its primaries swap)."""
    free_partitions = np.ones(problem.partition_service.shape[0], bool)
    if frozen:
        keys = {(service, str(pid)) for service, pid in frozen}
        free_partitions[: index.n_partitions] = [(s, str(pid)) not in keys for s, pid in index.partitions]
    kept = np.append(np.asarray(problem.node_kept), False)[index.initial_node]  # [R]; -1 (no node) -> False
    return free_partitions[np.asarray(problem.replica_partition)] & ~kept, free_partitions


def plan(
    state: ClusterState,
    search: SearchConfig | None = None,
    progress: Callable[[int, int, float, float], None] | None = None,
    *,
    phase: str | None = None,
    node_type: str | None = None,
    frozen: Collection[tuple[str, str]] = (),
    unsearched: Callable[[Callable[[], dict] | None], None] | None = None,
    refresh: bool = False,
) -> dict:
    """Run the phases on `state` and return the plan document. `search`'s `auto` values are chosen
    for this backend and cluster size. One PLB round (the replay): `phase` runs only that phase,
    `node_type` balances only that node type's nodes, nothing in the `frozen` (ServiceName,
    PartitionId) partitions moves, swaps or is placed. `unsearched`, for a caller that may have to
    stop before the search ends (a compilation cannot be interrupted), receives a function that
    builds the plan of the prepared state with nothing searched, then None once the search is over.
    `refresh`: one SF refresh, the first stage that has work (`refresh_stage`)."""
    clock = _Clock()
    with clock("Prepare"):
        encoded = governed_encoding(state)
    return plan_encoded(
        encoded,
        search,
        progress,
        phase=phase,
        node_type=node_type,
        frozen=frozen,
        clock=clock,
        unsearched=unsearched,
        refresh=refresh,
    )


NO_STAGE = "none"  # `refresh_stage` when no stage has work


def refresh_stage(encoded: Encoded, frozen: Collection[tuple[str, str]] = ()) -> str:
    """The stage one SF refresh runs (PLBScheduler::RefreshAction, every timer expired): the first
    of placement (replicas to place or drop), the constraint check (a hard violation; unless
    ConstraintCheckEnabled is false) and balancing (unless LoadBalancingEnabled is false; the
    phase itself finds whether a metric is imbalanced), or NO_STAGE."""
    found, settings = findings_encoded(encoded, frozen), encoded.state.settings
    if found.unplaced:
        return "Placement"
    if found.violations and settings["ConstraintCheckEnabled"]:
        return "ConstraintCheck"
    return "Balancing" if settings["LoadBalancingEnabled"] else NO_STAGE


def _first_refresh(encoded: Encoded) -> Encoded:
    """`encoded` as SF's first refresh sees it: placement is NewReplicaPlacement, which moves no
    existing replica (NewReplicaPlacementWithMove comes after PLBActionRetryTimes refreshes)."""
    settings = dict(encoded.state.settings, MoveExistingReplicaForPlacement=False)
    return encoded._replace(state=dataclasses.replace(encoded.state, settings=settings))


def plan_encoded(
    encoded: Encoded,
    search: SearchConfig | None = None,
    progress: Callable[[int, int, float, float], None] | None = None,
    *,
    phase: str | None = None,
    node_type: str | None = None,
    frozen: Collection[tuple[str, str]] = (),
    clock: _Clock | None = None,
    unsearched: Callable[[Callable[[], dict] | None], None] | None = None,
    refresh: bool = False,
) -> dict:
    """`plan` of a state already governed and encoded (a `Session`'s)."""
    enable_compilation_cache(only_if_unset=True)
    clock = clock or _Clock()
    if refresh and phase is None:
        with clock("Prepare"):
            phase = refresh_stage(encoded, frozen)
        encoded = _first_refresh(encoded)
    search = (search or SearchConfig()).resolved(jax.default_backend(), encoded.state.replica_count())
    priorities = _priorities(encoded.state)
    with clock("Prepare"):
        ready = _prepare(encoded, priorities)
    problem, index = ready.problem, ready.index
    free, free_partitions = _frozen_masks(index, problem, frozen)
    free &= ~np.asarray(problem.replica_stays)  # in transition on a node that blocks its type
    run = _Run(
        ready.state,
        problem,
        index,
        priorities,
        model(search.swap_probability),
        search.kernel,
        progress,
        free,
        free_partitions,
        node_type,
        phase is not None,
        _balancing_model(ready.state, search),
    )
    if unsearched is not None:
        unsearched(lambda: _unsearched_plan(run, ready, search))
    out = _run_phases(run, ready.initial, search.schedule, clock, phase)
    if unsearched is not None:
        unsearched(None)
    with clock("Decode"):
        document = _document(run, ready, out)
    document["Search"] = _search_entry(search, out, clock)
    return document


def _unsearched_plan(run: _Run, ready: _Prepared, search: SearchConfig) -> dict:
    """The plan of a run stopped before its first search: the prepared state as it is."""
    start = ready.initial
    phases = [_Phase(start, _interrupted(name), None) for name in ("Placement", "ConstraintCheck", "Balancing")]
    balance = _balances(run.state, run.problem, run.index, start)
    out = _Outcome(phases[0], start, phases[1], phases[2], balance, start, 0, [], True)
    return {**_document(run, ready, out), "Search": _search_entry(search, out, _Clock())}


def _document(run: _Run, ready: _Prepared, out: _Outcome) -> dict:
    """The plan document but its `Search`."""
    problem, index = run.problem, run.index
    placement = out.placement.entry
    if ready.drops:
        dropped = sum(a["Action"].startswith("Drop") for a in ready.drops)
        placement = dict(placement, Ran=True, Reason=f"{dropped} surplus replica(s) dropped; {placement['Reason']}")
    final = out.final
    balance_after = _balances(run.state, problem, index, final)
    told = explain(
        run.state,
        index,
        problem,
        Stages(ready.initial, out.placed, out.check.placement, out.balancing.placement, final),
        [placement, out.check.entry, out.balancing.entry],
        (out.balance_before, balance_after),
        run.priorities,
        int(((ready.initial.node_of >= 0) & ~_everywhere(run.state, index)).sum()),
    )
    return {
        "SchemaVersion": SCHEMA_VERSION,
        "Phases": told.phases,
        "Balance": _balance_entries(out.balance_before, balance_after),
        "Score": {"Before": float(ready.input.report["avg"]), "After": float(final.report["avg"])},
        "Actions": drop_reasons(run.state, ready.drops) + diff(index, final.node_of, final.primary_of, told.why),
        "Nodes": _node_entries(index, problem, ready.input, final),
        "Health": ready.health + health_reports(index, problem, final.node_of, final.report),
        "Unplaced": _unplaced(index, problem, final),
        "History": _history(run.state, index, out.check.placement, final),
        "Remaining": told.remaining,
    }


@dataclasses.dataclass(frozen=True)
class Findings:
    """What a PLB round finds in a state, before any search (the replay's probe)."""

    unplaced: int  # replicas to place or drop, outside frozen partitions
    violations: int  # placed replicas breaking a hard constraint, outside frozen partitions
    balance: list[MetricBalance]  # per metric (and node type when balancing per node type)
    avg_std_dev: float
    node_loads: dict[str, dict[str, float]]
    violations_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)  # replicas per constraint kind


def findings(state: ClusterState, frozen: Collection[tuple[str, str]] = ()) -> Findings:
    """What placement, the constraint check and balancing would find to do in `state` now."""
    return findings_encoded(governed_encoding(state), frozen)


def findings_encoded(encoded: Encoded, frozen: Collection[tuple[str, str]] = ()) -> Findings:
    """`findings` of a state already governed and encoded (a `Session`'s)."""
    state, _, problem, index = encoded
    priorities = _priorities(state)
    now = Placement(
        index.initial_node, index.initial_primary, assess(problem, index.initial_node, index.initial_primary)
    )
    free, free_partitions = _frozen_masks(index, problem, frozen)
    unplaced = int((now.report["violations"]["unplaced"] & free).sum())
    targets = {s.name: s.target for s in state.services}
    surplus = sum(
        max(0, len(rows) - targets[service])
        for p, ((service, _), rows) in enumerate(zip(index.partitions, index.partition_rows))
        if free_partitions[p] and targets[service] >= 0
    )
    surplus += int((now.report["violations"]["placement"] & _everywhere(state, index) & free).sum())  # -1: dropped
    hard = np.where(priorities == 0, 0, -1)
    counted = free & ~_everywhere(state, index)
    by_kind = {kind: replicas & counted for kind, replicas in _violating_by_kind(index, now, hard).items()}
    violating = np.zeros(counted.shape[0], bool)
    for replicas in by_kind.values():
        violating |= replicas
    loads = now.report["loads"]
    return Findings(
        unplaced + surplus,
        int(violating.sum()),
        _balances(state, problem, index, now),
        float(now.report["avg"]),
        {name: {m: float(loads[n, k]) for k, m in enumerate(index.metrics)} for n, name in enumerate(index.nodes)},
        {kind: int(replicas.sum()) for kind, replicas in by_kind.items() if replicas.any()},
    )
