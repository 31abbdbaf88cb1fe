"""A `Model`'s contract, checked on one problem: what every problem's tests call.

`check_model` runs a chain hot for a while (no refresh) and checks that (a) the incremental state
equals its recomputation: the running state and the state after each valid proposal against
`refresh` (and an exact energy, if given), (b) a step's kept moves applied together equal them
applied one by one, each proposed again on the state its predecessors left, and (c) the same key
gives the same chain. It raises AssertionError naming the check and the field; `hot_chains` is
there for a problem's own tests.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.anneal._config import KernelConfig
from plbjax.anneal._kernel import Chain, first_acceptance, independent_acceptances, init, step
from plbjax.anneal._model import Model, Problem, State
from plbjax.anneal._store import stored


class Tolerance(NamedTuple):
    """How close floats must be (integers and booleans must be equal)."""

    rtol: float = 1e-5
    atol: float = 1e-3


FLOATS, EXACT = Tolerance(), Tolerance(0.0, 0.0)
ONE_TRY = KernelConfig(tries=1)


class ModelReport(NamedTuple):
    """What the checks saw, so a test can ask that they were not vacuous."""

    accepted: int  # moves the hot run applied
    valid: int  # valid proposals checked one by one against recomputation
    kept: int  # moves the checked step kept and applied together


class ExactEnergyFn(Protocol):
    def __call__(self, problem: Problem, solution: Any, /) -> jax.Array:
        """The energy of a solution computed from scratch."""
        ...


def _fields(state: State, names: tuple[str, ...] | None) -> Any:
    """The state's fields `names` (None: the whole state)."""
    return state if names is None else {name: getattr(state, name) for name in names}


def assert_close(what: str, got: Any, expected: Any, tolerance: Tolerance) -> None:
    """Two pytrees leaf by leaf: integers and booleans equal, floats within `tolerance`."""
    paths, tree = jax.tree_util.tree_flatten_with_path(got)
    assert tree == jax.tree.structure(expected), f"{what}: the structures differ"
    for (path, a), b in zip(paths, jax.tree.leaves(expected)):
        a, b = np.asarray(a), np.asarray(b)
        message = f"{what}{jax.tree_util.keystr(path)}"
        if np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_allclose(a, b, rtol=tolerance.rtol, atol=tolerance.atol, err_msg=message)
        else:
            np.testing.assert_array_equal(a, b, err_msg=message)


def hot_chains(
    model: Model, problem: Problem, config: KernelConfig, keys: jax.Array, steps: int, temperature: float
) -> Chain:
    """One chain per key [C, 2] after `steps` kernel steps at `temperature` from the initial solution
    (no refresh: the running statistics as the steps left them). Compiled once per model, config and
    shapes, whatever the steps and temperature."""
    return _hot_chains(model, problem, config, keys, jnp.int32(steps), jnp.float32(temperature))


@stored
def _hot_chains(model: Model, problem: Problem, config: KernelConfig, keys, steps, temperature) -> Chain:
    steps_ = jax.vmap(step, in_axes=(None, None, None, 0, None))
    run = lambda _, chains: steps_(model, problem, config, chains, temperature)
    return jax.lax.fori_loop(0, steps, run, jax.vmap(init, in_axes=(None, None, 0))(model, problem, keys))


@eqx.filter_jit
def _proposals(model: Model, problem: Problem, state: State, words: jax.Array):
    """The proposals from `words`, finished: (moves, energies, valid, stats)."""
    moves, energies, valid, stats = model.propose(problem, state, words)
    if model.finish is None:
        return moves, energies, valid, stats
    return model.finish(problem, state, moves, stats)


def _row(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda x: x[i : i + 1], tree)


@eqx.filter_jit
def _each_alone(model: Model, problem: Problem, state: State, proposals, energy: ExactEnergyFn | None):
    """The state after each proposal applied alone, its refresh, and its exact energy (batched over
    the proposals; the energy None without `energy`)."""
    moves, energies, _, stats = proposals

    def alone(move, energy_, stat):
        one = lambda x: x[None]
        after = model.apply(problem, state, *jax.tree.map(one, (move, jnp.asarray(True), energy_, stat)))
        exact = None if energy is None else energy(problem, model.solution(after))
        return after, model.refresh(problem, after), exact

    return jax.vmap(alone)(moves, energies, stats)


def check_incremental(
    model: Model,
    problem: Problem,
    state: State,
    words: jax.Array,
    tolerance: Tolerance,
    fields: tuple[str, ...] | None = None,
    energy: ExactEnergyFn | None = None,
) -> int:
    """(a) The running `state`, and the state after each valid proposal from `words` applied alone,
    equal their `refresh` on `fields` (and their energy `energy`'s); each proposal's energy is the
    one its state is left with. Returns how many proposals were valid."""
    exact = jax.jit(model.refresh)(problem, state)
    assert_close("running state vs refresh", _fields(state, fields), _fields(exact, fields), tolerance)
    if energy is not None:
        exact_energy = eqx.filter_jit(energy)(problem, model.solution(state))
        assert_close("running energy vs exact energy", state.energy, exact_energy, tolerance)
    proposals = _proposals(model, problem, state, words)
    valid = np.flatnonzero(np.asarray(proposals[2]))
    each = _each_alone(model, problem, state, proposals, energy)
    afters, fresh, exact_energies = jax.tree.map(lambda x: x[valid], each)
    what = f"proposals {valid.tolist()} applied alone"
    assert_close(f"{what}: energy vs the proposal's", afters.energy, proposals[1][valid], tolerance)
    assert_close(f"{what} vs refresh", _fields(afters, fields), _fields(fresh, fields), tolerance)
    if energy is not None:
        assert_close(f"{what}: energy vs exact energy", afters.energy, exact_energies, tolerance)
    return len(valid)


def _kept(model: Model, problem: Problem, config: KernelConfig, state: State, moves, valid) -> jax.Array:
    """[T] what a step keeps of the valid proposals: every independent one when parallel, else the first."""
    if not (config.parallel and model.footprint is not None and model.footprint_ids is not None):
        return first_acceptance(valid)
    ids = jax.vmap(model.footprint, in_axes=(None, None, 0))(problem, state, moves)
    return independent_acceptances(ids, valid, model.footprint_ids(problem))


def check_step(
    model: Model,
    problem: Problem,
    config: KernelConfig,
    state: State,
    words: jax.Array,
    tolerance: Tolerance,
    fields: tuple[str, ...] | None = None,
) -> int:
    """(b) The valid proposals from `words` that a step with `config` keeps, applied together, equal
    them applied one by one in order, each proposed again (row i of the same words) on the state its
    predecessors left (the same move, still valid); the result equals its `refresh` on `fields`.
    Returns how many moves were kept."""
    moves, energies, valid, stats = _proposals(model, problem, state, words)
    keep = jax.jit(_kept, static_argnums=(0, 2))(model, problem, config, state, moves, valid)
    apply = jax.jit(model.apply)
    together = apply(problem, state, moves, keep, energies, stats)
    one_by_one = state
    for i in np.flatnonzero(np.asarray(keep)).tolist():
        move, energy, ok, stat = _row(_proposals(model, problem, one_by_one, words), i)
        assert bool(ok[0]), f"kept proposal {i} is no longer valid after the kept ones before it"
        assert_close(f"kept proposal {i} re-proposed", move, _row(moves, i), tolerance)
        one_by_one = apply(problem, one_by_one, move, ok, energy, stat)
    assert_close("step's kept moves together vs one by one", together, one_by_one, tolerance)
    exact = jax.jit(model.refresh)(problem, together)
    assert_close("step's kept moves together vs refresh", _fields(together, fields), _fields(exact, fields), tolerance)
    return int(np.sum(np.asarray(keep)))


def check_model(
    model: Model,
    problem: Problem,
    key: jax.Array,
    config: KernelConfig = ONE_TRY,
    *,
    steps: int = 300,
    temperature: float = 5.0,
    proposals: int = 256,
    tolerance: Tolerance = FLOATS,
    fields: tuple[str, ...] | None = None,
    energy: ExactEnergyFn | None = None,
) -> ModelReport:
    """Run a chain `steps` steps hot with `config` from `key`, then check (a) `check_incremental`,
    (b) `check_step` on `proposals` random proposals, and (c) that the same key runs the same chain.
    `fields` names the state's fields `refresh` recomputes (None: all); `energy`, if given,
    is the exact energy the running one must equal."""
    hot_key, words_key = jax.random.split(key)
    keys = jnp.stack([hot_key, hot_key])
    chains = hot_chains(model, problem, config, keys, steps, temperature)
    chain, twin = (jax.tree.map(lambda x, c=c: x[c], chains) for c in (0, 1))
    accepted = int(chain.accepted)
    assert accepted > 0, f"the hot run of {steps} steps at temperature {temperature} accepted no move"
    words = jax.random.bits(words_key, (proposals, model.draws), jnp.uint32)
    valid = check_incremental(model, problem, chain.state, words, tolerance, fields, energy)
    kept = check_step(model, problem, config, chain.state, words, tolerance, fields)
    assert valid > 0 and kept > 0, f"of {proposals} proposals {valid} were valid and a step kept {kept}"
    assert_close("two chains of the same key", twin, chain, EXACT)
    again = hot_chains(model, problem, config, keys, steps, temperature)
    assert_close("the same keys run again", again, chains, EXACT)
    return ModelReport(accepted=accepted, valid=valid, kept=kept)
