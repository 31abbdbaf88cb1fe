"""How `search.seconds` and steps are split between the phases: a phase with little to do (a few
violations to fix, a few replicas to place) searches what its work needs and leaves the rest of its
steps or share of the seconds to the next (`phase.search_until_fixed`)."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import numpy as np
import pytest
from conftest import packed_cluster

from plbjax.anneal import AnnealResult, KernelConfig, Schedule
from plbjax.sf import parse_state
from plbjax.sf._model.search_scope import Scope
from plbjax.sf._phases import phase as _phase
from plbjax.sf._phases.phase import (
    NEEDED_BLOCKS,
    NEEDED_PROPOSALS,
    QUENCH_BLOCKS,
    Phase,
    PhaseResult,
    needed,
    search_until_fixed,
)
from plbjax.sf._phases.search_config import SearchConfig
from plbjax.sf._plan import planning as _plan

KERNEL = KernelConfig(tries=4, block_steps=100)
BUDGET = Schedule(steps=None, seconds=30.0)


def _placement(name: str) -> Any:
    return types.SimpleNamespace(name=name, node_of=np.array([len(name)]), primary_of=np.array([0]))


class _FakeSearches:
    """`scoped_search` stand-in: each call takes 2 s and returns the next placement named."""

    def __init__(self, names: list[str]):
        self.names, self.calls = list(names), []

    def __call__(self, run, now, what, schedule):
        self.calls.append((what, schedule))
        return _placement(self.names.pop(0)), AnnealResult(None, 1.0, 2.0, 100, 1, 2.0, 0.5, 3, 1.0, np.ones(1))


def _fixed(placement: Any) -> bool:
    return placement.name == "fixed"


def _until_fixed(monkeypatch, schedule: Schedule, names: list[str]) -> tuple[Any, list]:
    """`search_until_fixed` of 10 replicas over fake searches: (its placement and search, the calls)."""
    fake = _FakeSearches(names)
    monkeypatch.setattr(_phase, "scoped_search", fake)
    run: Any = types.SimpleNamespace(kernel=KERNEL)
    what = Scope(np.ones(1, bool), np.zeros(1, bool), np.zeros(8, bool))
    found = search_until_fixed(run, _placement("now"), what, schedule, 10, _fixed)
    return found, fake.calls


def test_a_phase_needs_proposals_per_replica_in_whole_blocks_and_keeps_its_seconds_as_the_cap():
    assert needed(BUDGET, KERNEL, 1).steps == NEEDED_BLOCKS * 100
    many = needed(BUDGET, KERNEL, 10_000)
    assert many.steps == NEEDED_PROPOSALS * 10_000 // 4 and many.seconds == 30.0
    given = Schedule(steps=3_000, seconds=30.0)
    assert needed(given, KERNEL, 10_000) is given  # needs more than its steps: as given
    assert needed(Schedule(steps=30_000, seconds=None), KERNEL, 1).steps == NEEDED_BLOCKS * 100


def test_a_phase_that_fixed_its_work_stops_after_what_it_needed(monkeypatch):
    (placement, search), calls = _until_fixed(monkeypatch, BUDGET, ["fixed"])
    assert placement.name == "fixed" and search.seconds == 2.0
    assert [schedule for _, schedule in calls] == [needed(BUDGET, KERNEL, 10)]


def test_a_phase_not_fixed_goes_on_from_its_result_for_the_rest_of_its_share(monkeypatch):
    (placement, search), calls = _until_fixed(monkeypatch, BUDGET, ["half", "fixed"])
    assert placement.name == "fixed"
    (_, first), (what, rest) = calls
    assert first == needed(BUDGET, KERNEL, 10)
    assert rest == dataclasses.replace(BUDGET, seconds=28.0)  # the share less what the first search took
    assert what.start is not None and what.start[0].tolist() == [len("half")]  # from the first one's result
    assert (search.steps, search.seconds, search.compile_seconds, search.accepted) == (200, 4.0, 1.0, 6)
    assert search.initial_energy == 2.0


def test_a_step_bounded_phase_fixed_early_stops_and_says_so(monkeypatch):
    steps = Schedule(steps=30_000, seconds=None)
    (placement, search), calls = _until_fixed(monkeypatch, steps, ["fixed"])
    assert placement.name == "fixed" and search.stopped == "fixed"
    assert [s for _, s in calls] == [needed(steps, KERNEL, 10)]


def test_a_step_bounded_phase_not_fixed_goes_on_with_the_rest_of_its_steps(monkeypatch):
    steps = Schedule(steps=30_000, seconds=None)
    _, calls = _until_fixed(monkeypatch, steps, ["half", "fixed"])
    (_, first), (_, rest) = calls
    assert rest.steps == 30_000 - first.steps and rest.seconds is None


def test_a_phase_whose_work_needs_all_its_steps_searches_once_as_given(monkeypatch):
    schedule = Schedule(steps=1_000, seconds=30.0)  # 10 replicas need 13 blocks of 100 steps
    (placement, _), calls = _until_fixed(monkeypatch, schedule, ["half"])
    assert placement.name == "half" and [s for _, s in calls] == [schedule]


def test_a_check_of_one_violation_leaves_nearly_all_of_the_budget_to_balancing(monkeypatch):
    """One fault-domain violation, 60 s: the check searches its needed blocks (not its old half) and
    balancing is handed the budget less the check's seconds (more than the old split's 30 s on any
    machine that runs a few blocks of a 60-replica cluster in under 30 s)."""
    handed = []

    def balancing(run, reached, schedule):
        handed.append(schedule)
        return PhaseResult(Phase.BALANCING, False, "not searched in this test", reached.now)

    steps = [s._replace(search=balancing) if s.phase == Phase.BALANCING else s for s in _plan.STEPS]
    monkeypatch.setattr(_plan, "STEPS", tuple(steps))
    search = SearchConfig(chains=2, tries=1, parallel=False, block_steps=500, seconds=60.0)
    done = _plan.plan(parse_state(packed_cluster()), search)
    check = next(p for p in done.document()["Phases"] if p["Phase"] == "ConstraintCheck")
    assert check["Ran"] and "violations reduced" in check["Reason"]
    ran = done._parts.out.reached.result(Phase.CONSTRAINT_CHECK).search
    assert ran is not None
    replicas = int(check["Reason"].split()[0])
    wanted = needed(Schedule(steps=None, seconds=60.0), search.kernel, replicas).steps
    assert wanted is not None and ran.steps == wanted + QUENCH_BLOCKS * 500  # its needed blocks, then the quench
    assert [s.seconds for s in handed] == [pytest.approx(60.0 - ran.seconds)]
    assert handed[0].seconds > 30.0
