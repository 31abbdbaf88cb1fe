"""What every phase shares: the run it reads (`Run`), the result it hands on (`PhaseResult`), its
throttle budget and its search, one `anneal` call scoped by a `Scope` then a zero-temperature
descent."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from plbjax.anneal import STOP, AnnealResult, KernelConfig, Model, Schedule, anneal
from plbjax.sf._encoding import Index, Problem, settle
from plbjax.sf._model import Placement, Scope, assessed, scope
from plbjax.sf._state import ClusterState

CHECK_MOVE_WEIGHT = 0.5  # placement and constraint check: a move costs half an optimization-priority violation
UNLIMITED = 2**31 - 1
QUENCH_BLOCKS = 1  # blocks of the zero-temperature descent after each phase's search
NEEDED_PROPOSALS = 500  # under a seconds budget, proposals per replica a phase must fix (the CPU's auto steps' rate)
NEEDED_BLOCKS = 2  # and at least the probe block and one that cools


@dataclasses.dataclass(frozen=True)
class Run:
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


@dataclasses.dataclass(frozen=True)
class PhaseResult:
    """A phase's outcome: its name, whether it ran and why (its entry in the plan's `Phases`), the
    placement it leaves and its search (None: none ran)."""

    phase: str
    ran: bool
    reason: str
    placement: Placement
    search: AnnealResult | None = None


def interrupted(phase: str, now: Placement) -> PhaseResult:
    """`phase` not run: the run was stopped before it."""
    return PhaseResult(phase, False, "the run was interrupted before this phase", now)


def throttle_limits(settings: dict, phase: str, replicas: int) -> dict[str, int]:
    """{setting: most movements it allows} for a phase with `replicas` placed (SF's
    GetAllowedMovements: MaxPercentageToMove(ForPlacement), 0 = none; the global throttles and
    their per-phase pairs, 0 = no limit; percentages rounded up). The constraint check has none."""
    if phase == "ConstraintCheck":
        return {}
    share = "MaxPercentageToMove" if phase == "Balancing" else "MaxPercentageToMoveForPlacement"
    limits = {share: math.ceil(settings[share] * replicas)}
    for absolute, percentage in (
        ("GlobalMovementThrottleThreshold", "GlobalMovementThrottleThresholdPercentage"),
        (f"GlobalMovementThrottleThresholdFor{phase}", f"GlobalMovementThrottleThresholdPercentageFor{phase}"),
    ):
        if settings[absolute] > 0:
            limits[absolute] = int(settings[absolute])
        if settings[percentage] > 0:
            limits[percentage] = math.ceil(settings[percentage] * replicas)
    return limits


def movement_budget(state: ClusterState, phase: str, replicas: int) -> int:
    """Most movements a phase may make under SF's throttles. Balancing, and placement when it moves
    existing replicas, count against GlobalMovementThrottleThreshold(Percentage) and their own
    ...For{phase} pair (0: no limit; a percentage counts existing replicas, rounded up) and against
    MaxPercentageToMove / MaxPercentageToMoveForPlacement (0: no movement at all). The constraint
    check is not throttled (SF's GetAllowedMovements)."""
    return min(throttle_limits(state.settings, phase, replicas).values(), default=UNLIMITED)


def scoped_search(run: Run, now: Placement, what: Scope, schedule: Schedule) -> tuple[Placement, AnnealResult]:
    """Anneal one phase from `now` within `what`; returns the best placement found (rotations
    settled) and the search. An affinity parent's replica moves with the child replica beside it,
    its primary swaps with its aligned child's (`moves`)."""
    swappable = what.swappable & run.free_partitions
    partners = None if what.partners is None else what.partners & run.free
    what = dataclasses.replace(what, movable=what.movable & run.free, swappable=swappable, partners=partners)
    scoped = scope(run.problem, now.node_of, now.primary_of, what)
    result = _quench(run, now, what, anneal(run.model, scoped, run.kernel, schedule, run.progress), schedule)
    node_of, primary_of = settle(run.index, *result.solution)
    return assessed(run.problem, node_of, primary_of), result


def needed(schedule: Schedule, kernel: KernelConfig, replicas: int) -> Schedule:
    """The search a phase with `replicas` replicas to fix needs, under a seconds budget with no step
    bound: `NEEDED_PROPOSALS` proposals a replica in whole blocks (at least `NEEDED_BLOCKS`), its
    seconds still the cap. A step-bounded schedule is returned as it is."""
    if schedule.seconds is None or schedule.steps is not None:
        return schedule
    blocks = max(NEEDED_BLOCKS, math.ceil(NEEDED_PROPOSALS * replicas / (kernel.tries * kernel.block_steps)))
    return dataclasses.replace(schedule, steps=blocks * kernel.block_steps)


def search_until_fixed(
    run: Run, now: Placement, what: Scope, schedule: Schedule, replicas: int, fixed: Callable[[Placement], bool]
) -> tuple[Placement, AnnealResult]:
    """`scoped_search` of a phase whose work is `replicas` replicas to fix. Under a seconds budget
    with no step bound it first searches what that work `needed`; only when the result is not
    `fixed` does it go on from there for the rest of `schedule.seconds` (a phase with little to do
    leaves the budget to the next). A step-bounded schedule runs as given, in one search."""
    first = needed(schedule, run.kernel, replicas)
    placement, search = scoped_search(run, now, what, first)
    if first is schedule or fixed(placement) or STOP.is_set():
        return placement, search
    start = (placement.node_of, placement.primary_of)
    placement, more = scoped_search(run, now, dataclasses.replace(what, start=start), spent(schedule, search.seconds))
    return placement, dataclasses.replace(
        more,
        initial_energy=search.initial_energy,
        steps=search.steps + more.steps,
        seconds=search.seconds + more.seconds,
        compile_seconds=search.compile_seconds + more.compile_seconds,
        accepted=search.accepted + more.accepted,
    )


def _quench(run: Run, now: Placement, what: Scope, result: AnnealResult, schedule: Schedule) -> AnnealResult:
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


def swappable(index: Index, now: Placement, partitions: np.ndarray) -> np.ndarray:
    """Stateful partitions among `partitions` [P] whose primary can hand over to a placed secondary."""
    rows, partition = index.row_partition
    primary = now.primary_of
    handing = (now.node_of[rows] >= 0) & (rows != primary[partition])
    others = np.bincount(partition[handing], minlength=primary.shape[0])
    return (partitions & index.stateful & (primary >= 0) & (others > 0)).astype(partitions.dtype)


def spent(schedule: Schedule, seconds: float) -> Schedule:
    """`schedule` with `seconds` of its time budget gone."""
    assert schedule.seconds is not None
    return dataclasses.replace(schedule, seconds=max(schedule.seconds - seconds, 1e-3))
