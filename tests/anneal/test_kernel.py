"""The annealer's own behaviour (`plbjax.anneal`): chains, steps, blocks, the driver's budgets and stop.

Most tests run a toy model (items on a line, each drawn toward its target) that compiles in a moment;
those about finishing and screening run Service Fabric's model, which has a `finish`.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import QUICK, searchable

from plbjax import anneal as A
from plbjax.anneal import _driver, _kernel
from plbjax.sf._model import chain as S
from plbjax.sf._model.moves import DRAWS

# ------------------------------------------------------------------ a toy model


class Line(eqx.Module):
    """Items with a target position each, on positions 0..k-1."""

    target: jax.Array  # [n] int32
    k: int = eqx.field(static=True)


class Spot(eqx.Module):
    x: jax.Array  # [n] each item's position
    energy: jax.Array  # sum of |x - target|


class Shift(eqx.Module):
    item: jax.Array
    to: jax.Array


def _energy(problem: Line, x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.abs(x - problem.target)).astype(jnp.float32)


def _start(problem: Line) -> Spot:
    x = jnp.zeros_like(problem.target)
    return Spot(x=x, energy=_energy(problem, x))


def _propose_one(problem: Line, state: Spot, words: jax.Array):
    i, to = A.draw(words[0], problem.target.shape[0]), A.draw(words[1], problem.k)
    t = problem.target[i]
    energy = state.energy + (jnp.abs(to - t) - jnp.abs(state.x[i] - t)).astype(jnp.float32)
    return Shift(item=i, to=to), energy, to != state.x[i], jnp.zeros(())


def _apply(problem: Line, state: Spot, moves: Shift, keep, energies, stats) -> Spot:
    n = state.x.shape[0]
    x = state.x.at[jnp.where(keep, moves.item, n)].set(moves.to, mode="drop")
    return Spot(x=x, energy=state.energy + jnp.sum(jnp.where(keep, energies - state.energy, 0.0)))


def _refresh(problem: Line, state: Spot) -> Spot:
    return Spot(x=state.x, energy=_energy(problem, state.x))


TOY = A.Model(
    start=_start,
    propose=A.batched(_propose_one),
    apply=_apply,
    refresh=_refresh,
    solution=lambda state: state.x,
    draws=2,
    footprint=lambda problem, state, move: move.item[None],
    footprint_ids=lambda problem: problem.target.shape[0],
)
LINE = Line(target=jnp.asarray(np.random.default_rng(0).integers(0, 16, 64), jnp.int32), k=16)
ONE = A.KernelConfig(tries=4, block_steps=50)
FAST = A.Schedule(chains=4, steps=200, seconds=None, initial_temperature=2.0)


def _run(config=ONE, schedule=FAST, **options) -> A.AnnealResult:
    return A.anneal(TOY, LINE, config, schedule, **options)


def test_init_starts_at_the_initial_solution_with_nothing_accepted():
    chain = A.init(TOY, LINE, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(chain.best, np.zeros(64))
    assert float(chain.best_energy) == float(chain.state.energy) == float(jnp.sum(LINE.target))
    assert int(chain.accepted) == 0 and float(chain.largest_delta) == 0.0


@pytest.mark.parametrize("parallel", [False, True])
def test_the_toy_model_passes_the_model_check(parallel):
    report = A.check_model(TOY, LINE, jax.random.PRNGKey(1), dataclasses.replace(ONE, parallel=parallel), steps=50)
    assert report.kept >= (5 if parallel else 1) and report.valid > 100


def _apply_every_energy(problem, state, moves, keep, energies, stats):
    """A wrong apply: the energy changes of every proposal, kept or not."""
    right = _apply(problem, state, moves, keep, energies, stats)
    return dataclasses.replace(right, energy=state.energy + jnp.sum(energies - state.energy))


@pytest.mark.parametrize(
    "wrong, parallel, says",
    [
        (dict(apply=_apply_every_energy), False, "running state vs refresh"),
        (
            dict(footprint=lambda problem, state, move: jnp.full((1,), -1)),
            True,
            "vs refresh|one by one|no longer valid",
        ),
    ],
    ids=["apply", "footprint"],
)
def test_the_model_check_names_what_a_wrong_model_breaks(wrong, parallel, says):
    """An apply that adds every proposal's energy change; a footprint that calls every move independent
    (two kept moves of one item: the energy counts both)."""
    config = dataclasses.replace(ONE, parallel=parallel)
    with pytest.raises(AssertionError, match=says):
        A.check_model(dataclasses.replace(TOY, **wrong), LINE, jax.random.PRNGKey(1), config, steps=50)


def test_at_zero_temperature_a_step_never_makes_the_energy_worse():
    chains = A.hot_chains(TOY, LINE, ONE, jax.random.split(jax.random.PRNGKey(2), 4), 100, 0.0)
    assert np.all(np.asarray(chains.state.energy) < float(jnp.sum(LINE.target)))
    hot = A.hot_chains(TOY, LINE, ONE, jax.random.split(jax.random.PRNGKey(2), 4), 100, 1e6)
    assert np.all(np.asarray(hot.accepted) >= 90)  # almost every step accepts at a huge temperature


def test_run_block_refreshes_and_keeps_the_best_solution_seen():
    """Blocks at a high temperature wander off; the best record keeps the lowest energy seen at a block's
    end, with its solution."""
    block = eqx.filter_jit(A.run_block)
    chain, ends = A.init(TOY, LINE, jax.random.PRNGKey(3)), []
    for t in (0.0, 0.0, 0.0, 0.0, 1e6, 1e6):
        chain = block(TOY, LINE, ONE, chain, jnp.float32(t), jnp.float32(t))
        ends.append(float(chain.state.energy))
        assert float(chain.state.energy) == float(_energy(LINE, chain.state.x))  # refreshed
        assert float(chain.best_energy) == min(ends) == float(_energy(LINE, chain.best))
    assert ends[-1] > min(ends)  # the hot blocks went uphill; the best stayed


def test_the_driver_runs_the_steps_asked_in_whole_blocks():
    assert _run().steps == 200
    assert _run(schedule=dataclasses.replace(FAST, steps=120)).steps == 150


def test_a_seconds_budget_ends_the_search():
    result = _run(schedule=dataclasses.replace(FAST, steps=None, seconds=0.5))
    assert 0 < result.steps and result.seconds < 30  # blocks fitted to the budget (generous: a busy CI)


def test_a_frozen_search_stops_once_patience_blocks_improve_nothing():
    """Cold chains settle; with patience enough to try every item at every place a few times over
    (64 x 16 moves, 200 proposals a block), the search ends when that many blocks improved nothing,
    says why, and has found what running every block finds; with too little patience it stops in a
    local optimum."""
    long = dataclasses.replace(FAST, steps=50 * ONE.block_steps, initial_temperature=0.01)
    full = _run(schedule=long)
    assert full.stopped == "steps" and full.blocks == 50
    patient = _run(schedule=dataclasses.replace(long, patience=3 * 64 * 16 // 200))
    assert patient.stopped == "converged" and patient.blocks < 50
    assert patient.steps == patient.blocks * ONE.block_steps
    assert patient.energy == full.energy
    hasty = _run(schedule=dataclasses.replace(long, patience=1))
    assert hasty.stopped == "converged" and hasty.blocks < patient.blocks


def test_a_hot_search_does_not_stop_while_its_chains_wander():
    """Hot chains leave their best state: not frozen, so patience does not end the search."""
    hot = dataclasses.replace(FAST, steps=20 * ONE.block_steps, initial_temperature=1e6, final_ratio=1.0, patience=1)
    result = _run(schedule=hot)
    assert result.stopped == "steps" and result.blocks == 20


def test_blocks_of_any_length_share_one_compiled_program():
    _driver.clear_compiled()
    first = _run(config=dataclasses.replace(ONE, block_steps=50))
    again = _run(config=dataclasses.replace(ONE, block_steps=20), schedule=dataclasses.replace(FAST, steps=200))
    assert first.compile_seconds > 0 and again.compile_seconds == 0 and again.steps == 200


def test_the_stop_flag_ends_the_search_after_its_block():
    stop = lambda done, total, elapsed, best: A.STOP.set()
    try:
        result = _run(progress=stop)
    finally:
        A.STOP.clear()
    assert result.steps == ONE.block_steps


def test_the_first_block_probes_the_temperature_unless_one_is_given():
    assert _run().initial_temperature == 2.0
    probe = dataclasses.replace(FAST, initial_temperature=None, probe_factor=3.0)
    result = _run(schedule=probe)
    assert result.initial_temperature > 0 and result.initial_temperature % 1.5 == 0  # 3 x a median of integers


def test_the_same_seed_gives_the_same_search_and_another_seed_another():
    a, b = _run(), _run()
    np.testing.assert_array_equal(a.solution, b.solution)
    np.testing.assert_array_equal(a.energies, b.energies)
    c = _run(schedule=dataclasses.replace(FAST, seed=1))
    assert not np.array_equal(a.energies, c.energies) or not np.array_equal(a.solution, c.solution)


def test_room_defaults_to_a_sixteenth_of_the_tries():
    assert [A.KernelConfig(tries=t).step_room for t in (1, 256, 4096, 65536)] == [32, 32, 256, 4096]
    assert A.KernelConfig(tries=65536, room=5).step_room == 5


def test_independent_moves_by_pairs_and_by_tables_agree_with_the_rule():
    """Both ways of picking independent proposals keep exactly what the round rule keeps, computed here
    one proposal at a time: a proposal sharing no id with a kept one is kept when no earlier open
    proposal shares an id with it."""
    rng = np.random.default_rng(0)
    for trial in range(20):
        ids = np.where(rng.random((48, 8)) < 0.5, -1, rng.integers(0, 60, (48, 8)))
        accepts = rng.random(48) < 0.7
        keep = np.zeros(48, bool)
        for _ in range(3):
            shares = lambda i, j: bool(set(ids[i][ids[i] >= 0]) & set(ids[j][ids[j] >= 0]))
            open_ = [
                accepts[i] and not keep[i] and not any(keep[j] and shares(i, j) for j in range(48)) for i in range(48)
            ]
            keep = keep | [open_[i] and not any(open_[j] and shares(i, j) for j in range(i)) for i in range(48)]
        for n_ids in (60, 1 << 20):  # tables over 60 ids; all pairs (a huge id space)
            np.testing.assert_array_equal(
                _kernel.independent_acceptances(jnp.asarray(ids), jnp.asarray(accepts), n_ids), keep
            )


# ------------------------------------------------------------------ on Service Fabric's model (with `finish`)


def _sf_chains(problem, temperature: float, steps: int, n: int = 8, config=QUICK.kernel):
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    return A.hot_chains(S.model(), problem, config, keys, steps, temperature)


def test_multi_try_step_is_the_sequential_chain_stopping_at_its_first_acceptance(states):
    """A step over T proposals = trying them one by one from the same state until one is accepted."""
    problem, _ = searchable(states[0])
    config = dataclasses.replace(QUICK, tries=16)
    chains = _sf_chains(problem, 2.0, 100, n=4)
    temperature = jnp.float32(0.02)
    for c in range(4):
        chain = jax.tree.map(lambda x: x[c], chains)
        after = eqx.filter_jit(A.step)(S.model(), problem, config.kernel, chain, temperature)
        n = DRAWS + 1
        tries, _ = _kernel.proposal_words(chain.key, config.tries, n)
        state = chain.state
        moves, _, _, stats = jax.jit(S.propose, static_argnums=3)(problem, state, tries, config.swap_probability)
        moves, energies, valid, stats = jax.jit(S.finish)(problem, state, moves, stats)
        for i, words in enumerate(tries):
            delta = float(energies[i] - state.energy)
            if bool(valid[i]) and (delta <= 0 or float(A.uniform(words[DRAWS])) < np.exp(-delta / float(temperature))):
                move, change = jax.tree.map(lambda x: x[i], (moves, stats))
                state = jax.jit(S.apply_one)(problem, state, move, jnp.asarray(True), energies[i], change)
                break
        np.testing.assert_array_equal(after.state.node_of, state.node_of)
        np.testing.assert_array_equal(after.state.primary_of, state.primary_of)
        np.testing.assert_allclose(after.state.energy, state.energy, rtol=1e-6)


def test_screening_finishes_only_what_may_be_accepted_and_changes_nothing(states):
    """A parallel step that finishes (domain checks) only the first `room` proposals passing the
    lower-bound screen leaves the state of the step that finishes all of them, when no more than
    `room` pass."""
    problem, _ = searchable(states[1])
    chains = _sf_chains(problem, 2.0, 100, n=4)
    every, screened = (dataclasses.replace(QUICK, tries=64, parallel=True, room=r) for r in (64, 24))
    for c in range(4):
        chain = jax.tree.map(lambda x: x[c], chains)
        a = eqx.filter_jit(A.step)(S.model(), problem, every.kernel, chain, jnp.float32(0.05))
        b = eqx.filter_jit(A.step)(S.model(), problem, screened.kernel, chain, jnp.float32(0.05))
        assert int(a.accepted - chain.accepted) > 0
        for name in ("node_of", "primary_of", "domain_violations", "energy"):
            np.testing.assert_array_equal(getattr(a.state, name), getattr(b.state, name), err_msg=name)


def test_population_resampling_draws_states_by_boltzmann_weight(states):
    """Each chain's state becomes a copy of some chain's state, about n x its weight share of copies
    each; keys and best records stay; no cooling leaves the chains alone."""
    problem, _ = searchable(states[0])
    chains = _sf_chains(problem, 50.0, 200)
    energy = np.asarray(chains.state.energy, np.float64)
    assert len(np.unique(energy)) > 1
    resample = eqx.filter_jit(A.resample)
    for t_start, t_end in [(1.0, 0.5), (0.2, 0.1), (1.0, 1e-6)]:
        after = resample(chains, jnp.float32(t_start), jnp.float32(t_end))
        parents = [
            int(np.flatnonzero((np.asarray(chains.state.node_of) == row).all(axis=1) & (energy == e))[0])
            for row, e in zip(np.asarray(after.state.node_of), np.asarray(after.state.energy, np.float64))
        ]
        weight = np.exp(-(1 / t_end - 1 / t_start) * (energy - energy.min()))
        expected = len(energy) * weight / weight.sum()
        copies = np.bincount(parents, minlength=len(energy))
        assert np.all(copies >= np.floor(expected - 1e-4)) and np.all(copies <= np.ceil(expected + 1e-4))
        np.testing.assert_array_equal(after.key, chains.key)
        np.testing.assert_array_equal(after.best_energy, chains.best_energy)
    coldest = resample(chains, jnp.float32(1.0), jnp.float32(1e-6))
    np.testing.assert_array_equal(np.asarray(coldest.state.energy), np.full(len(energy), energy.min(), np.float32))
    for t_start, t_end in [(0.0, 0.0), (1.0, 1.0)]:
        same = resample(chains, jnp.float32(t_start), jnp.float32(t_end))
        np.testing.assert_array_equal(same.state.node_of, chains.state.node_of)
