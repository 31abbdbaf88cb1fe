"""What every phase shares: its name (`Phase`), what it reads (`Run`, and where the plan stands:
`Reached`), the result it hands on (`PhaseResult`; a phase is a `PhaseSearch` from one to the
other), its throttle budget and its search, one `anneal` call scoped by a `Scope` then a
zero-temperature descent."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import NamedTuple, Protocol

import numpy as np

from plbjax.anneal import STOP, AnnealResult, KernelConfig, Model, Schedule, anneal
from plbjax.sf._encoding import Index, settle
from plbjax.sf._model import UNLIMITED, Placement, Scope, assessed, movements, scope
from plbjax.sf._phases.preparation import Encoded
from plbjax.sf._state import ClusterState

CHECK_MOVE_WEIGHT = 0.5  # placement and constraint check: a move costs half an optimization-priority violation
QUENCH_BLOCKS = 1  # blocks of the zero-temperature descent after each phase's search
NEEDED_PROPOSALS = 500  # under a seconds budget, proposals per replica a phase must fix (the CPU's auto steps' rate)
NEEDED_BLOCKS = 2  # and at least the probe block and one that cools


class Phase(StrEnum):
    """A phase by the name the plan document and the replay give it (a `str`: it is written as is)."""

    PLACEMENT = "Placement"
    CONSTRAINT_CHECK = "ConstraintCheck"
    BALANCING = "Balancing"
    FEWEST_MOVEMENTS = "FewestMovements"  # plbjax's own last pass, not one of SF's


PHASES = (Phase.PLACEMENT, Phase.CONSTRAINT_CHECK, Phase.BALANCING)  # SF's phases, in SF's order


@dataclasses.dataclass(frozen=True)
class Run:
    """What every phase of one plan reads: the prepared state and its encoding, SF's constraint
    priorities, and how the searches run."""

    encoded: Encoded
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
    placement it hands on and its search (None: none ran); `finished` false where the search
    stopped short of what the phase set out to do (the minimal-movement pass: `Search.Minimal`)."""

    phase: Phase
    ran: bool
    reason: str
    placement: Placement
    search: AnnealResult | None = None
    finished: bool = True


class Reached(NamedTuple):
    """Where a plan stands when a phase begins: its initial placement, where the phases started, and
    the results of those that came before, in order."""

    initial: Placement
    results: tuple[PhaseResult, ...] = ()

    @property
    def now(self) -> Placement:
        """The placement the last phase handed on."""
        return self.results[-1].placement if self.results else self.initial

    def then(self, result: PhaseResult) -> Reached:
        """Where the plan stands after `result`."""
        return Reached(self.initial, (*self.results, result))

    def result(self, phase: Phase) -> PhaseResult:
        """`phase`'s result (it has come)."""
        return self.results[self._position(phase)]

    def before(self, phase: Phase) -> Placement:
        """The placement `phase` started from (it has come)."""
        k = self._position(phase)
        return self.results[k - 1].placement if k else self.initial

    def movements(self, index: Index, phase: Phase) -> int:
        """Movements `phase` made, as the search and SF's throttles count them (`movements`); 0 if
        it has not come."""
        if phase not in (r.phase for r in self.results):
            return 0
        before = self.before(phase)
        return movements(index, before.node_of, before.primary_of, self.result(phase).placement)

    def _position(self, phase: Phase) -> int:
        return [r.phase for r in self.results].index(phase)


class PhaseSearch(Protocol):
    """A phase: from where the plan stands, within `schedule`, its result."""

    def __call__(self, run: Run, reached: Reached, schedule: Schedule) -> PhaseResult: ...


def interrupted(phase: Phase, now: Placement) -> PhaseResult:
    """`phase` not run: the run was stopped before it."""
    return PhaseResult(phase, False, "the run was interrupted before this phase", now)


def throttle_limits(settings: dict, phase: Phase, replicas: int) -> dict[str, int]:
    """{setting: most movements it allows} for a phase with `replicas` placed (SF's
    GetAllowedMovements: MaxPercentageToMove(ForPlacement), 0 = none; the global throttles and
    their per-phase pairs, 0 = no limit; percentages rounded up). The constraint check has none."""
    if phase == Phase.CONSTRAINT_CHECK:
        return {}
    share = "MaxPercentageToMove" if phase == Phase.BALANCING else "MaxPercentageToMoveForPlacement"
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


def movement_budget(state: ClusterState, phase: Phase, replicas: int) -> int:
    """Most movements a phase may make under SF's throttles. Balancing, and placement when it moves
    existing replicas, count against GlobalMovementThrottleThreshold(Percentage) and their own
    ...For{phase} pair (0: no limit; a percentage counts existing replicas, rounded up) and against
    MaxPercentageToMove / MaxPercentageToMoveForPlacement (0: no movement at all). The constraint
    check is not throttled (SF's GetAllowedMovements)."""
    return min(throttle_limits(state.settings, phase, replicas).values(), default=UNLIMITED)


def transient(settings: Mapping) -> bool:
    """SF's PreventTransientOvercommit (or its deprecated name PreventIntermediateOvercommit): a
    node's capacity holds the load moving away from it until those movements finish, in placement
    and balancing; never in the constraint check (NodeCapacityConstraint.cpp:405)."""
    return bool(settings["PreventTransientOvercommit"] or settings["PreventIntermediateOvercommit"])


def scoped_search(run: Run, now: Placement, what: Scope, schedule: Schedule) -> tuple[Placement, AnnealResult]:
    """Anneal one phase from `now` within `what`; returns the best placement found (rotations
    settled) and the search. An affinity parent's replica moves with the child replica beside it,
    its primary swaps with its aligned child's (`moves`)."""
    swappable = what.swappable & run.free_partitions
    partners = None if what.partners is None else what.partners & run.free
    what = dataclasses.replace(what, movable=what.movable & run.free, swappable=swappable, partners=partners)
    scoped = scope(run.encoded.problem, now.node_of, now.primary_of, what)
    result = _quench(run, now, what, anneal(run.model, scoped, run.kernel, schedule, run.progress), schedule)
    node_of, primary_of = settle(run.encoded.index, *result.solution)
    return assessed(run.encoded.problem, node_of, primary_of), result


def needed(schedule: Schedule, kernel: KernelConfig, replicas: int) -> Schedule:
    """The search a phase with `replicas` replicas to fix needs: `NEEDED_PROPOSALS` proposals a
    replica in whole blocks (at least `NEEDED_BLOCKS`), within `schedule`'s steps and seconds;
    `schedule` itself when that is all of it."""
    blocks = max(NEEDED_BLOCKS, math.ceil(NEEDED_PROPOSALS * replicas / (kernel.tries * kernel.block_steps)))
    steps = blocks * kernel.block_steps
    if schedule.steps is not None and steps >= schedule.steps:
        return schedule
    return dataclasses.replace(schedule, steps=steps)


def search_until_fixed(
    run: Run, now: Placement, what: Scope, schedule: Schedule, replicas: int, fixed: Callable[[Placement], bool]
) -> tuple[Placement, AnnealResult]:
    """`scoped_search` of a phase whose work is `replicas` replicas to fix: first the search that
    work `needed`; only when the result is not `fixed` does it go on from there with the rest of
    `schedule`'s steps or seconds. A fix of a few violations costs in proportion to them, not to the
    cluster, and leaves the budget to the next phase (its search `Stopped`: "fixed")."""
    first = needed(schedule, run.kernel, replicas)
    placement, search = scoped_search(run, now, what, first)
    if first is schedule or STOP.is_set():
        return placement, search
    if fixed(placement):
        return placement, dataclasses.replace(search, stopped="fixed")
    start = (placement.node_of, placement.primary_of)
    placement, more = scoped_search(run, now, dataclasses.replace(what, start=start), _rest(schedule, first, search))
    return placement, dataclasses.replace(
        more,
        initial_energy=search.initial_energy,
        steps=search.steps + more.steps,
        seconds=search.seconds + more.seconds,
        compile_seconds=search.compile_seconds + more.compile_seconds,
        accepted=search.accepted + more.accepted,
        blocks=search.blocks + more.blocks,
    )


def _rest(schedule: Schedule, first: Schedule, search: AnnealResult) -> Schedule:
    """`schedule` less the `first` search's steps (by what it asked) and seconds (by what it took)."""
    steps = None if schedule.steps is None else max(schedule.steps - (first.steps or 0), 1)
    seconds = None if schedule.seconds is None else max(schedule.seconds - search.seconds, 1e-3)
    return dataclasses.replace(schedule, steps=steps, seconds=seconds)


def _quench(run: Run, now: Placement, what: Scope, result: AnnealResult, schedule: Schedule) -> AnnealResult:
    """`result` continued by a descent at zero temperature (SF's search ends accepting only moves
    that lower the energy): the annealing's last temperature follows its largest energy changes (a
    replica placed), too hot to settle what an optimization-priority violation or a movement is
    worth; the descent takes every move, swap or undo that still lowers the energy."""
    start = tuple(np.asarray(x) for x in result.solution)
    scoped = scope(run.encoded.problem, now.node_of, now.primary_of, dataclasses.replace(what, start=start))
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
        blocks=result.blocks + descent.blocks,
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
