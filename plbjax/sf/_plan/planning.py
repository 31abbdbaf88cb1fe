"""SF's three kinds of work, in its order — placement, constraint check, balancing — then the
minimal-movement pass, to a `Plan`: one loop over the phases (`STEPS`), each a `PhaseSearch` from
where the last left the plan (`Reached`) to its `PhaseResult`.

Every phase runs the same annealer on the same encoded cluster (one compilation), scoped by
`search_scope.scope` (a `Search`: the cluster and what the phase may do): which replicas may move, which
primaries may swap, which constraints may not get worse. Violations enter the energy weighted by
SF's constraint priorities (hard 0, soft 1, optimization 2, off -1), so placement and constraint
checks trade them the way SF does: a hard constraint that held is never broken, a soft one may give
way to fix a hard one. The plan holds its actions and History; its document is rendered when asked
for (`Plan.document`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import NamedTuple

import jax
import numpy as np

from plbjax.anneal import STOP, AnnealResult, Schedule, enable_compilation_cache
from plbjax.errors import BadInput
from plbjax.sf._encoding import Index, diff, settle
from plbjax.sf._model import Placement, assessed, model, movements, violating
from plbjax.sf._phases import (
    PHASES,
    QUENCH_BLOCKS,
    Encoded,
    Phase,
    PhaseResult,
    PhaseSearch,
    Prepared,
    Reached,
    Run,
    SearchConfig,
    balances,
    balancing_model,
    balancing_phase,
    constraint_phase,
    elect_primaries,
    fewest_movements_phase,
    frozen_masks,
    governed_encoding,
    held_for_promotion,
    interrupted,
    movement_budget,
    placement_phase,
    prepare,
    priorities_of,
    tidy_blocks,
)
from plbjax.sf._plan.document import Outcome, Parts, SearchSummary, history, render
from plbjax.sf._plan.explain import Explainer, drop_reasons
from plbjax.sf._plan.probe import findings_encoded
from plbjax.sf._state import Action, ClusterState
from plbjax.version import VERSION


@dataclasses.dataclass(frozen=True)
class Plan:
    """A plan: its actions (typed; their notes hold each one's phase and reason), the History it
    leaves and how its search ran; `document()` renders the whole plan document."""

    actions: tuple[Action, ...]
    history: Mapping[str, tuple[str, ...]]
    search: SearchSummary
    _parts: Parts = dataclasses.field(repr=False, compare=False)

    def document(self) -> dict:
        """The plan document (`plbjax/schemas/plan.schema.json`)."""
        return render(self._parts, self.actions, self.history, self.search)


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


class _Budget:
    """`search.seconds` bounds the whole run: a phase that searches may take a share of the time left
    (placement a third, the constraint check half of what is left, balancing the rest but a block,
    the minimal-movement pass what remains; a phase with nothing to do takes nothing). Placement and
    the constraint check take their share only while their work is not done: each first searches
    what its replicas to place or fix need (`phase.search_until_fixed`), so a fix of a few
    violations hands nearly all of the budget to balancing. Each phase's search leaves time for its
    zero-temperature block, balancing's also for the minimal-movement pass (as many blocks as undo
    every movement its throttles allow, `_tidying`), so the run does not overrun its budget by more
    than a block's misestimate. Compilation is not counted."""

    def __init__(self, schedule: Schedule):
        self.schedule, self.left = schedule, schedule.seconds

    def next(self, share: float, reserve_blocks: int = QUENCH_BLOCKS) -> Schedule:
        if self.left is None:
            return self.schedule
        return dataclasses.replace(self.schedule, seconds=max(self.left * share, 1e-3), reserve_blocks=reserve_blocks)

    def spend(self, search) -> None:
        if search is not None and self.left is not None:
            self.left -= search.seconds


class _Step(NamedTuple):
    """A phase in the plan's order: its search, the share of the seconds left it may take and the
    blocks it leaves for what follows (`_Budget`)."""

    phase: Phase
    search: PhaseSearch
    share: float
    reserve_blocks: int


STEPS = (
    _Step(Phase.PLACEMENT, placement_phase, 1 / 3, QUENCH_BLOCKS),
    _Step(Phase.CONSTRAINT_CHECK, constraint_phase, 1 / 2, QUENCH_BLOCKS),
    _Step(Phase.BALANCING, balancing_phase, 1.0, QUENCH_BLOCKS + 1),
    _Step(Phase.FEWEST_MOVEMENTS, fewest_movements_phase, 1.0, 0),
)


class _Trace:
    """A phase's `progress` that records its searches' blocks (`Search.Phases[].Trace`): each block's
    number, the phase's steps so far, the temperature the block ended at, the best energy over the
    chains and that chain's AvgStdDev (`score` of its best solution); it passes everything on to the
    plan's `progress`."""

    def __init__(self, progress: Callable[[int, int, float, float], None] | None, score: Callable[..., float]):
        self.progress, self.score, self.steps = progress, score, 0
        self.blocks: list[dict] = []
        self.compiling = getattr(progress, "compiling", None)

    def __call__(self, done: int, total: int, elapsed: float, best_energy: float) -> None:
        if self.progress is not None:
            self.progress(done, total, elapsed, best_energy)

    def block(self, steps: int, temperature: float, best_energy: float, best: Callable) -> None:
        self.steps += steps
        self.blocks.append(
            {
                "Block": len(self.blocks) + 1,
                "Steps": self.steps,
                "Temperature": temperature,
                "BestEnergy": best_energy,
                "AvgStdDev": self.score(best()),
            }
        )


def _phase_run(run: Run, phase: Phase, trace: bool) -> tuple[Run, _Trace | None]:
    """`run` as `phase` reads it: its progress told the phase first (a `progress` with a
    `phase_begins(phase)` method: its lines name it), with a `trace`, recorded (`_Trace`)."""
    begins = getattr(run.progress, "phase_begins", None)
    if begins is not None:
        begins(phase)
    if not trace:
        return run, None
    problem, index = run.encoded.problem, run.encoded.index
    score = lambda solution: float(assessed(problem, *settle(index, *solution)).report.avg)
    traced = _Trace(run.progress, score)
    return dataclasses.replace(run, progress=traced), traced


def _run_phases(
    run: Run,
    initial: Placement,
    schedule: Schedule,
    clock: _Clock,
    wanted: tuple[Phase, ...] = PHASES,
    trace: bool = False,
) -> Outcome:
    """SF's phases (those not `wanted` skipped) and the minimal-movement pass, each from where the
    last left off, sharing `search.seconds`; an interrupted run stops after the current phase, then
    the minimal-movement pass runs on what it has. `clock` times each; `trace`: each phase's blocks
    are recorded."""
    budget, reached = _Budget(schedule), Reached(initial)
    traces: dict[Phase, tuple[dict, ...]] = {}
    for step in STEPS:
        reserve = step.reserve_blocks + (_tidying(run, reached) if step.phase == Phase.BALANCING else 0)
        phase_run, traced = _phase_run(run, step.phase, trace)
        with clock(step.phase):
            if step.phase in _AFTER_PLACEMENT:
                phase_run = _holding(phase_run, step.phase, reached.now)
            result = _result(step, phase_run, reached, budget.next(step.share, reserve), wanted)
            result = _promoting(run, step.phase, result)
        budget.spend(result.search)
        reached = reached.then(result)
        if traced is not None:
            traces[step.phase] = tuple(traced.blocks)
    state, _, problem, index = run.encoded
    return Outcome(reached, balances(state, problem, index, reached.before(Phase.BALANCING)), traces)


_AFTER_PLACEMENT = (Phase.CONSTRAINT_CHECK, Phase.BALANCING)


def _holding(run: Run, phase: Phase, now: Placement) -> Run:
    """`run` with the replicas of partitions left without a primary (none of their secondaries
    could be promoted) held where they are (`held_for_promotion`): balancing never makes their
    later promotion impossible, nor does the constraint check, but for a replica in violation."""
    problem, index = run.encoded.problem, run.encoded.index
    held = held_for_promotion(problem, index, now)
    if phase is Phase.CONSTRAINT_CHECK:
        held &= ~violating(index, now, run.priorities)
    return dataclasses.replace(run, free=run.free & ~held) if held.any() else run


def _promoting(run: Run, phase: Phase, result: PhaseResult) -> PhaseResult:
    """After the constraint check and balancing, a secondary of each partition still without a
    primary promoted where the phase made room for it (`elect_primaries`): the phase ran it."""
    if phase not in _AFTER_PLACEMENT or not result.ran:
        return result
    problem, index = run.encoded.problem, run.encoded.index
    before = result.placement
    promoted = elect_primaries(problem, index, before, run.priorities)
    kept = np.where(run.free_partitions, promoted.primary_of, before.primary_of)  # none in a frozen partition
    if np.array_equal(kept, before.primary_of):
        return result
    if not np.array_equal(kept, promoted.primary_of):
        promoted = assessed(problem, before.node_of, kept)
    count = int((kept != before.primary_of).sum())
    reason = f"{result.reason}; {count} secondary(ies) promoted where it made room for their primary"
    return dataclasses.replace(result, reason=reason, placement=promoted)


def _tidying(run: Run, reached: Reached) -> int:
    """Blocks beyond its first that the minimal-movement pass may need after balancing: as many as
    undo every movement balancing's throttles allow (balancing leaves them time, so a plan under a
    seconds budget ends minimal)."""
    state, _, _, index = run.encoded
    placed = int((reached.now.node_of >= 0).sum())
    most = min(movement_budget(state, Phase.BALANCING, placed), placed + index.n_partitions)
    return tidy_blocks(run.kernel, most) - 1


def _result(step: _Step, run: Run, reached: Reached, schedule: Schedule, wanted: tuple[Phase, ...]) -> PhaseResult:
    """`step`'s result; one of SF's phases does not run after a stop, nor where one refresh runs
    another (or none)."""
    if step.phase not in PHASES:
        return step.search(run, reached, schedule)
    if STOP.is_set():
        return interrupted(step.phase, reached.now)
    if step.phase not in wanted:
        reason = f"one refresh runs one stage: {wanted[0]}" if wanted else "one refresh: no stage has work"
        return PhaseResult(step.phase, False, reason, reached.now)
    return step.search(run, reached, schedule)


def _search_summary(search: SearchConfig, index: Index, out: Outcome, clock: _Clock) -> SearchSummary:
    """The plan's `Search`."""
    searches = [r.search for r in out.reached.results if r.search is not None]
    shrunk = [s.shrunk for s in searches if s.shrunk]
    return SearchSummary(
        version=VERSION,
        backend=jax.default_backend(),
        chains=min((s.chains for s in searches), default=0),
        steps=sum(s.steps for s in searches),
        seconds=round(sum(s.seconds for s in searches), 3),
        seed=search.seed,
        budget=search.budget,
        interrupted=STOP.is_set(),
        minimal=out.reached.result(Phase.FEWEST_MOVEMENTS).finished,
        movements_removed=_removed(index, out),
        compile_seconds=round(sum(s.compile_seconds for s in searches), 3),
        phase_seconds=dict(clock.seconds),
        device_memory=shrunk[-1] if shrunk else None,
        phases=tuple(
            _phase_search(r.phase, r.search, search, out.traces.get(r.phase))
            for r in out.reached.results
            if r.search is not None
        ),
    )


def _phase_search(phase: Phase, result: AnnealResult, search: SearchConfig, trace: tuple[dict, ...] | None) -> dict:
    """A phase's entry in the plan's `Search.Phases`: how its search ran and why it `Stopped`; its
    blocks' `Trace` when one was recorded."""
    entry = {
        "Phase": phase,
        "Stopped": result.stopped,
        "Blocks": result.blocks,
        "Steps": result.steps,
        "Chains": result.chains,
        "Tries": search.tries,
        "BlockSteps": search.block_steps,
        "InitialTemperature": result.initial_temperature,
        "InitialEnergy": result.initial_energy,
        "Energy": result.energy,
        "Seconds": round(result.seconds, 3),
        "CompileSeconds": round(result.compile_seconds, 3),
    }
    return entry if trace is None else entry | {"Trace": list(trace)}


def _removed(index: Index, out: Outcome) -> int:
    """Movements the minimal-movement pass undid."""
    made = lambda placement: movements(index, index.initial_node, index.initial_primary, placement)
    return made(out.reached.result(Phase.BALANCING).placement) - made(out.final)


def plan(
    state: ClusterState,
    search: SearchConfig | None = None,
    progress: Callable[[int, int, float, float], None] | None = None,
    *,
    phase: Phase | None = None,
    node_type: str | None = None,
    frozen: Collection[tuple[str, str]] = (),
    unsearched: Callable[[Callable[[], Plan] | None], None] | None = None,
    refresh: bool | str = False,
    trace: bool = False,
) -> Plan:
    """Run the phases on `state` and return the plan (`Plan.document()`: the plan document).
    `search`'s `auto` values are chosen for this backend and cluster size. One PLB round (the
    replay): `phase` runs only that phase, `node_type` balances only that node type's nodes, nothing
    in the `frozen` (ServiceName, PartitionId) partitions moves, swaps or is placed. `unsearched`,
    for a caller that may have to stop before the search ends (a compilation cannot be
    interrupted), receives a function that builds the plan of the prepared state with nothing
    searched, then None once the search is over. `refresh`: one SF refresh, the first stage that
    has work, or the stage of one of SF's actions (`refresh_stages`). `trace`: each phase's
    blocks in `Search.Phases[].Trace`."""
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
        trace=trace,
    )


def refresh_stage(encoded: Encoded, frozen: Collection[tuple[str, str]] = ()) -> Phase | None:
    """The stage one SF refresh runs (PLBScheduler::RefreshAction, every timer expired): the first
    of placement (replicas to place or drop), the constraint check (a violation of any enabled
    constraint, soft ones included, as SystemState::IsConstraintSatisfied checks them; unless
    ConstraintCheckEnabled is false) and balancing (unless LoadBalancingEnabled is false; the
    phase itself finds whether a metric is imbalanced), or None."""
    found, settings = findings_encoded(encoded, frozen), encoded.state.settings
    if found.unplaced:
        return Phase.PLACEMENT
    if (found.violations or found.soft_violations) and settings["ConstraintCheckEnabled"]:
        return Phase.CONSTRAINT_CHECK
    return Phase.BALANCING if settings["LoadBalancingEnabled"] else None


REFRESH_ACTIONS = {  # SF's PLBSchedulerActionType -> the stage it runs
    "NewReplicaPlacement": Phase.PLACEMENT,
    "NewReplicaPlacementWithMove": Phase.PLACEMENT,
    "ConstraintCheck": Phase.CONSTRAINT_CHECK,
    "QuickLoadBalancing": Phase.BALANCING,
    "LoadBalancing": Phase.BALANCING,
}


def refresh_stages(
    encoded: Encoded, refresh: bool | str, frozen: Collection[tuple[str, str]] = ()
) -> tuple[tuple[Phase, ...], Encoded]:
    """The stage one SF refresh runs and `encoded` as that refresh sees it. `refresh` true: the
    first stage with work (`refresh_stage`); an action of SF's PLBSchedulerActionType
    (`REFRESH_ACTIONS`): that stage, as PLBScheduler runs it (Searcher::ProcessSearchType).
    NewReplicaPlacement moves no existing replica; NewReplicaPlacementWithMove, which SF runs after
    PLBActionRetryTimes refreshes that placed nothing, may (MoveExistingReplicaForPlacement)."""
    if refresh is True:
        stage = refresh_stage(encoded, frozen)
        action = "NewReplicaPlacement" if stage is Phase.PLACEMENT else None
    elif refresh in REFRESH_ACTIONS:
        stage, action = REFRESH_ACTIONS[refresh], refresh
    else:
        raise BadInput(f"refresh: {refresh!r} is not true, false or one of {', '.join(REFRESH_ACTIONS)}")
    if action == "NewReplicaPlacement":
        settings = dict(encoded.state.settings, MoveExistingReplicaForPlacement=False)
        encoded = encoded._replace(state=dataclasses.replace(encoded.state, settings=settings))
    return (() if stage is None else (stage,)), encoded


def plan_encoded(
    encoded: Encoded,
    search: SearchConfig | None = None,
    progress: Callable[[int, int, float, float], None] | None = None,
    *,
    phase: Phase | None = None,
    node_type: str | None = None,
    frozen: Collection[tuple[str, str]] = (),
    clock: _Clock | None = None,
    unsearched: Callable[[Callable[[], Plan] | None], None] | None = None,
    refresh: bool | str = False,
    trace: bool = False,
) -> Plan:
    """`plan` of a state already governed and encoded (a `Session`'s)."""
    enable_compilation_cache(only_if_unset=True)
    clock = clock or _Clock()
    wanted = PHASES if phase is None else (phase,)
    if refresh and phase is None:
        with clock("Prepare"):
            wanted, encoded = refresh_stages(encoded, refresh, frozen)
    search = (search or SearchConfig()).resolved(jax.default_backend(), encoded.state.replica_count())
    priorities = priorities_of(encoded.state)
    with clock("Prepare"):
        ready = prepare(encoded, priorities, one_refresh=wanted != PHASES)
    run = _run(ready.encoded, priorities, search, progress, frozen, node_type, wanted != PHASES)
    if unsearched is not None:
        unsearched(lambda: _unsearched_plan(run, ready, search))
    index = ready.encoded.index
    schedule = search.schedule_for(index.n_replicas, index.n_nodes)
    out = _run_phases(run, ready.initial, schedule, clock, wanted, trace)
    if unsearched is not None:
        unsearched(None)
    with clock("Decode"):
        parts = Parts(run, ready, out)
        actions, moved = _decoded(parts)
    return Plan(actions, moved, _search_summary(search, run.encoded.index, out, clock), parts)


def _run(
    encoded: Encoded,
    priorities: np.ndarray,
    search: SearchConfig,
    progress: Callable[[int, int, float, float], None] | None,
    frozen: Collection[tuple[str, str]],
    node_type: str | None,
    one_refresh: bool,
) -> Run:
    """What the phases of a plan of the prepared `encoded` read."""
    state, _, problem, index = encoded
    free, free_partitions = frozen_masks(index, problem, frozen)
    free &= ~np.asarray(problem.replica_stays)  # in transition on a node that blocks its type
    swaps = model(search.swap_probability)
    return Run(
        encoded,
        priorities,
        swaps,
        search.kernel,
        progress,
        free,
        free_partitions,
        node_type,
        one_refresh,
        balancing_model(state, search),
    )


def _unsearched_plan(run: Run, ready: Prepared, search: SearchConfig) -> Plan:
    """The plan of a run stopped before its first search: the prepared state as it is."""
    initial = ready.initial
    results = tuple(interrupted(phase, initial) for phase in (*PHASES, Phase.FEWEST_MOVEMENTS))
    state, _, problem, index = run.encoded
    balance = balances(state, problem, index, initial)
    parts = Parts(run, ready, Outcome(Reached(initial, results), balance))
    actions, moved = _decoded(parts)
    return Plan(actions, moved, _search_summary(search, index, parts.out, _Clock()), parts)


def _decoded(parts: Parts) -> tuple[tuple[Action, ...], dict[str, tuple[str, ...]]]:
    """The plan's actions, each with its phase and reason, and the History it leaves."""
    run, ready, out = parts
    (state, _, problem, index), final = run.encoded, out.final
    why = Explainer(index, problem, out.reached, out.balance_before)
    actions = drop_reasons(state, ready.drops) + diff(index, final.node_of, final.primary_of, why)
    return tuple(actions), history(state, index, out.reached.before(Phase.BALANCING), final)
