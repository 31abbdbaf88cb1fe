"""What the driver tells a `progress` after each block: a `block` method hears the block's steps, the
temperature it ended at and the best energy over the chains, the same best energy the progress call
hears (read with the block's result, no other fetch); a plain callable hears no more than before."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from conftest import QUICK, searchable

from plbjax import anneal as A
from plbjax.sf._model import chain as S

SCHEDULE = dataclasses.replace(QUICK.schedule, chains=4, steps=2000, initial_temperature=None, patience=None)


class _Recorder:
    def __init__(self):
        self.calls, self.blocks = [], []

    def __call__(self, done, total, elapsed, best):
        self.calls.append(best)

    def block(self, steps, temperature, best, solution):
        self.blocks.append((steps, temperature, best, solution()))


@pytest.fixture(scope="module")
def problem(states):
    return searchable(states[0])[0]


def test_a_block_method_hears_each_blocks_steps_temperature_best_energy_and_solution(problem):
    heard = _Recorder()
    result = A.anneal(S.model(), problem, QUICK.kernel, SCHEDULE, heard)
    assert len(heard.blocks) == result.blocks == 4 and sum(b[0] for b in heard.blocks) == result.steps
    temperatures = [b[1] for b in heard.blocks]
    assert temperatures[0] == 0.0  # the probe block runs greedy and sets T0
    t0, ratio = result.initial_temperature, SCHEDULE.final_ratio
    assert temperatures[1:] == pytest.approx([t0 * ratio ** (k / 4) for k in (2, 3, 4)], rel=1e-6)
    best = [b[2] for b in heard.blocks]
    assert best == heard.calls and best == sorted(best, reverse=True) and best[-1] == result.energy
    last = heard.blocks[-1][3]  # the best chain's best solution, as the result's
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(last), jax.tree.leaves(result.solution)))


def test_a_plain_callable_still_hears_every_block(problem):
    heard = []
    A.anneal(S.model(), problem, QUICK.kernel, SCHEDULE, lambda *args: heard.append(args))
    assert [done for done, *_ in heard] == [1, 2, 3, 4]


def test_compiled_programs_are_dropped_once_they_crowd_the_memory_maps(monkeypatch):
    """XLA:CPU maps each program's code; past `MAPS_SHARE` of the system's limit they are dropped
    (a compilation finding no map left crashes the process)."""
    from plbjax.anneal import _driver

    assert 0 < _driver._maps_share() < 1  # Linux says how many this process holds of how many
    monkeypatch.setattr(_driver, "MAPS_SHARE", 1.0)
    assert not A.clear_compiled_if_crowded()
    _driver._executables["marker"] = None
    monkeypatch.setattr(_driver, "MAPS_SHARE", 0.0)
    assert A.clear_compiled_if_crowded() and "marker" not in _driver._executables
