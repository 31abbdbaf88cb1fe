"""SF's three kinds of work, in its order — placement, constraint check, balancing — to a `Plan`.

Every phase runs the same annealer on the same encoded cluster (one compilation), scoped by
`_scope.scope` (a `Search`: the cluster and what the phase may do): which replicas may move, which
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

import jax
import numpy as np

from plbjax.anneal import STOP, AnnealResult, Schedule, enable_compilation_cache
from plbjax.sf._encoding import diff
from plbjax.sf._model import Placement, model, movements
from plbjax.sf._phases import (
    QUENCH_BLOCKS,
    Encoded,
    PhaseResult,
    Prepared,
    Run,
    SearchConfig,
    balances,
    balancing_model,
    balancing_phase,
    built_from_primaries,
    constraint_phase,
    elect_primaries,
    frozen_masks,
    governed_encoding,
    interrupted,
    placement_phase,
    prepare,
    priorities_of,
    tidy,
)
from plbjax.sf._plan.document import Outcome, Parts, SearchReport, history, render, stages
from plbjax.sf._plan.explain import Explainer, drop_reasons
from plbjax.sf._plan.probe import findings_encoded
from plbjax.sf._state import ClusterState
from plbjax.version import VERSION

NO_STAGE = "none"  # `refresh_stage` when no stage has work


@dataclasses.dataclass(frozen=True)
class Plan:
    """A plan: its actions (the document's `Actions`, reasons included), the History it leaves and
    how its search ran; `document()` renders the whole plan document."""

    actions: tuple[dict, ...]
    history: Mapping[str, tuple[str, ...]]
    search: SearchReport
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
    what its replicas to place or fix need (`_phase.search_until_fixed`), so a fix of a few
    violations hands nearly all of the budget to balancing. Each phase's
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


def _skipped(name: str, now: Placement, only: str) -> PhaseResult:
    reason = "one refresh: no stage has work" if only == NO_STAGE else f"one refresh runs one stage: {only}"
    return PhaseResult(name, False, reason, now)


def _run_phases(run: Run, start: Placement, schedule: Schedule, clock: _Clock, only: str | None = None) -> Outcome:
    """Placement, constraint check, balancing (or `only` one of them) and the minimal-movement pass,
    each from where the last left off, sharing `search.seconds`; an interrupted run stops after the
    current phase, then the minimal-movement pass runs on what it has. `clock` times each."""
    budget = _Budget(schedule)
    wanted = lambda name: only is None or only == name
    with clock("Placement"):
        placement = interrupted("Placement", start)
        if not STOP.is_set():
            placement = (
                placement_phase(run, start, budget.next(1 / 3))
                if wanted("Placement")
                else _skipped("Placement", start, str(only))
            )
        budget.spend(placement.search)
        placed = elect_primaries(run.problem, run.index, placement.placement, run.priorities)
        placed = built_from_primaries(run.problem, run.index, start, placed)
    check = interrupted("ConstraintCheck", placed)
    if not STOP.is_set():
        with clock("ConstraintCheck"):
            check = (
                constraint_phase(run, placed, budget.next(1 / 2))
                if wanted("ConstraintCheck")
                else _skipped("ConstraintCheck", placed, str(only))
            )
        budget.spend(check.search)
    balance_before = balances(run.state, run.problem, run.index, check.placement)
    balancing = interrupted("Balancing", check.placement)
    if not STOP.is_set():
        with clock("Balancing"):
            balancing = (
                balancing_phase(
                    run,
                    check.placement,
                    budget.next(1.0, QUENCH_BLOCKS + 1),
                    balance_before,
                    movements(run.index, start.node_of, start.primary_of, placed),
                )
                if wanted("Balancing")
                else _skipped("Balancing", check.placement, str(only))
            )
        budget.spend(balancing.search)
    with clock("FewestMovements"):
        final, removed, tidied, minimal = tidy(run, balancing.placement, budget.next(1.0, 0))
    searches = [s for s in (placement.search, check.search, balancing.search, tidied) if s is not None]
    return Outcome(placement, placed, check, balancing, balance_before, final, removed, searches, minimal)


def _search_report(search: SearchConfig, out: Outcome, clock: _Clock) -> SearchReport:
    """The plan's `Search`."""
    searches: list[AnnealResult] = out.searches
    shrunk = [s.shrunk for s in searches if s.shrunk]
    return SearchReport(
        version=VERSION,
        backend=jax.default_backend(),
        chains=min((s.chains for s in searches), default=0),
        steps=sum(s.steps for s in searches),
        seconds=round(sum(s.seconds for s in searches), 3),
        seed=search.seed,
        budget=search.budget,
        interrupted=STOP.is_set(),
        minimal=out.minimal,
        movements_removed=out.removed,
        compile_seconds=round(sum(s.compile_seconds for s in searches), 3),
        phase_seconds=dict(clock.seconds),
        device_memory=shrunk[-1] if shrunk else None,
    )


def plan(
    state: ClusterState,
    search: SearchConfig | None = None,
    progress: Callable[[int, int, float, float], None] | None = None,
    *,
    phase: str | None = None,
    node_type: str | None = None,
    frozen: Collection[tuple[str, str]] = (),
    unsearched: Callable[[Callable[[], Plan] | None], None] | None = None,
    refresh: bool = False,
) -> Plan:
    """Run the phases on `state` and return the plan (`Plan.document()`: the plan document).
    `search`'s `auto` values are chosen for this backend and cluster size. One PLB round (the
    replay): `phase` runs only that phase, `node_type` balances only that node type's nodes, nothing
    in the `frozen` (ServiceName, PartitionId) partitions moves, swaps or is placed. `unsearched`,
    for a caller that may have to stop before the search ends (a compilation cannot be
    interrupted), receives a function that builds the plan of the prepared state with nothing
    searched, then None once the search is over. `refresh`: one SF refresh, the first stage that
    has work (`refresh_stage`)."""
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
    unsearched: Callable[[Callable[[], Plan] | None], None] | None = None,
    refresh: bool = False,
) -> Plan:
    """`plan` of a state already governed and encoded (a `Session`'s)."""
    enable_compilation_cache(only_if_unset=True)
    clock = clock or _Clock()
    if refresh and phase is None:
        with clock("Prepare"):
            phase = refresh_stage(encoded, frozen)
        encoded = _first_refresh(encoded)
    search = (search or SearchConfig()).resolved(jax.default_backend(), encoded.state.replica_count())
    priorities = priorities_of(encoded.state)
    with clock("Prepare"):
        ready = prepare(encoded, priorities)
    problem, index = ready.problem, ready.index
    free, free_partitions = frozen_masks(index, problem, frozen)
    free &= ~np.asarray(problem.replica_stays)  # in transition on a node that blocks its type
    run = Run(
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
        balancing_model(ready.state, search),
    )
    if unsearched is not None:
        unsearched(lambda: _unsearched_plan(run, ready, search))
    out = _run_phases(run, ready.initial, search.schedule, clock, phase)
    if unsearched is not None:
        unsearched(None)
    with clock("Decode"):
        parts = Parts(run, ready, out)
        actions, moved = _decoded(parts)
    return Plan(actions, moved, _search_report(search, out, clock), parts)


def _unsearched_plan(run: Run, ready: Prepared, search: SearchConfig) -> Plan:
    """The plan of a run stopped before its first search: the prepared state as it is."""
    start = ready.initial
    phases = [interrupted(name, start) for name in ("Placement", "ConstraintCheck", "Balancing")]
    balance = balances(run.state, run.problem, run.index, start)
    parts = Parts(run, ready, Outcome(phases[0], start, phases[1], phases[2], balance, start, 0, [], True))
    actions, moved = _decoded(parts)
    return Plan(actions, moved, _search_report(search, parts.out, _Clock()), parts)


def _decoded(parts: Parts) -> tuple[tuple[dict, ...], dict[str, tuple[str, ...]]]:
    """The plan's actions, each with its phase and reason, and the History it leaves."""
    run, ready, out = parts
    index, final = run.index, out.final
    why = Explainer(index, run.problem, stages(parts), out.balance_before)
    actions = drop_reasons(run.state, ready.drops) + diff(index, final.node_of, final.primary_of, why)
    return tuple(actions), history(run.state, index, out.check.placement, final)
