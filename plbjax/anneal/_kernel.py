"""Pure annealing kernels: a `Chain` and its `init`, `step`, `run_block`, `refresh`, and population
annealing's `resample`.

A `Chain` wraps the model's state with what every search needs: the random key, the best solution
seen at a refresh, acceptance counts and the temperature probe. `run_block` runs a number of steps
(static, or traced to share one program) under a geometric temperature ramp, then refreshes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from plbjax.anneal._config import KernelConfig
from plbjax.anneal._model import Model


class Chain(eqx.Module):
    state: Any  # the model's search state
    best: Any  # the model's solution at the lowest energy seen at a refresh
    best_energy: jax.Array
    key: jax.Array
    accepted: jax.Array
    largest_delta: jax.Array  # largest |dE| of a step's first proposal when valid (the temperature probe,
    # so T0 does not grow with the tries per step)


def batched(propose_one: Callable) -> Callable:
    """A model's `propose` from a function that draws one move from one row of words."""
    return jax.vmap(propose_one, in_axes=(None, None, 0))


def uniform(word: jax.Array) -> jax.Array:
    """A uniform float in [0, 1) from one random 32-bit word."""
    return (word >> 8).astype(jnp.float32) * (1.0 / (1 << 24))


def draw(word: jax.Array, n: jax.Array | int) -> jax.Array:
    """A uniform integer in [0, n) from one random word, for a traced n (0 when n is 0)."""
    return (word % jnp.maximum(n, 1).astype(jnp.uint32)).astype(jnp.int32)


def init(model: Model, problem, key: jax.Array) -> Chain:
    """A chain at the problem's initial solution."""
    state = model.start(problem)
    return Chain(
        state=state,
        best=model.solution(state),
        best_energy=state.energy,
        key=key,
        accepted=jnp.zeros((), jnp.int32),
        largest_delta=jnp.zeros((), jnp.float32),
    )


def refresh(model: Model, problem, chain: Chain) -> Chain:
    """Recompute the model's statistics exactly and keep the best solution seen at refresh points."""
    state = model.refresh(problem, chain.state)
    better = state.energy < chain.best_energy
    best = jax.tree.map(lambda new, old: jnp.where(better, new, old), model.solution(state), chain.best)
    return dataclasses.replace(chain, state=state, best=best, best_energy=jnp.minimum(state.energy, chain.best_energy))


def _mix(x: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finalizer: a bijection of uint32 that scrambles every bit."""
    x = (x ^ (x >> 16)) * jnp.uint32(0x85EBCA6B)
    x = (x ^ (x >> 13)) * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def proposal_words(key: jax.Array, tries: int, n: int) -> tuple[jax.Array, jax.Array]:
    """[tries, n] random words for one step's proposals, and the chain's next key. One threefry call
    draws the next key and two seed words; the proposals' words hash a counter with the seeds
    (threefry for every word cost as much as the proposals themselves on a CPU)."""
    bits = jax.random.bits(key, (4,), jnp.uint32)
    counter = jnp.arange(tries * n, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9) + bits[0]
    return _mix(_mix(counter) ^ bits[1]).reshape(tries, n), bits[2:]


def first_acceptance(accepts: jax.Array) -> jax.Array:
    """[T] only the first accepted proposal."""
    return accepts & (jnp.arange(accepts.shape[0]) == jnp.argmax(accepts))


def independent_acceptances(ids: jax.Array, accepts: jax.Array, n_ids: int, rounds: int = 3) -> jax.Array:
    """[T] accepted proposals with pairwise disjoint footprints `ids` [T, F] (ids in 0..n_ids-1, -1:
    none). In each round, a proposal that shares no id with a kept one is kept when no earlier
    remaining proposal shares an id with it; later rounds let proposals that lost to an unkept one
    in. Computed by comparing all pairs (T^2 F^2, cheap on a CPU up to ~64k) or with tables over
    the ids (n_ids scatters), whichever is cheaper."""
    t, f = ids.shape
    order = jnp.arange(t)
    if t * t * f * f <= max(1 << 16, 4 * n_ids):
        same = (ids[:, None, :, None] == ids[None, :, None, :]) & (ids[:, None, :, None] >= 0)
        shared = jnp.any(same, axis=(2, 3))
        blocked = lambda keep: jnp.any(shared & keep[None, :], axis=1)
        earlier = order[None, :] < order[:, None]  # earlier[i, j]: j < i
        first = lambda open_: ~jnp.any(shared & earlier & open_[None, :], axis=1)
    else:
        slot = jnp.where(ids >= 0, ids, n_ids)

        def blocked(keep):
            taken = jnp.zeros(n_ids + 1, bool).at[jnp.where(keep[:, None], slot, n_ids)].set(True).at[n_ids].set(False)
            return jnp.any(taken[slot], axis=1)

        def first(open_):
            claim = jnp.full(n_ids + 1, t).at[slot].min(jnp.where(open_[:, None], order[:, None], t))
            return jnp.all((ids < 0) | (claim[slot] == order[:, None]), axis=1)

    keep = jnp.zeros_like(accepts)
    for _ in range(rounds):
        open_ = accepts & ~keep & ~blocked(keep)
        keep = keep | (open_ & first(open_))
    return keep


def step(model: Model, problem, config: KernelConfig, chain: Chain, temperature: jax.Array) -> Chain:
    """One Metropolis step at `temperature` over `config.tries` proposals from the same state.

    The proposals are evaluated together against the current state. Those that may be accepted (and
    the first, the temperature probe) are kept in order, up to `config.step_room` (all when that is
    >= tries), and finished. By default the first one Metropolis accepts is applied: rejected
    proposals leave the state unchanged, so this is the sequential chain that tries them in order and
    stops at the first acceptance (unless more than the room may be accepted and the first of those
    kept are not). With
    `config.parallel` (and a model with footprints) every accepted proposal whose footprint no
    other kept one touches is applied too: such moves commute and do not change each other's
    validity, so the step's state is the one they leave applied one by one (each was accepted on
    its energy change from the step's starting state).
    """
    words, key = proposal_words(chain.key, config.tries, model.draws + 1)
    move, energy, valid, stats = model.propose(problem, chain.state, words)
    chance = uniform(words[:, model.draws])

    def metropolis(energy, chance):
        delta = (energy - chain.state.energy).astype(jnp.float32)
        return (delta <= 0) | (chance < jnp.exp(-delta / jnp.maximum(temperature, 1e-30)))

    rows = jnp.arange(config.tries)
    if config.step_room < config.tries:
        maybe = (valid & metropolis(energy, chance)).at[0].set(valid[0])
        (rows,) = jnp.nonzero(maybe, size=config.step_room, fill_value=0)
        move, energy, stats, chance = jax.tree.map(lambda x: x[rows], (move, energy, stats, chance))
        valid = valid[rows] & (jnp.arange(rows.shape[0]) < jnp.sum(maybe))
    if model.finish is not None:
        move, energy, finished, stats = model.finish(problem, chain.state, move, stats)
        valid = valid & finished
    accepts = valid & metropolis(energy, chance)
    if config.parallel and model.footprint is not None:
        assert model.footprint_ids is not None  # given with footprint
        ids = jax.vmap(model.footprint, in_axes=(None, None, 0))(problem, chain.state, move)
        keep = independent_acceptances(ids, accepts, model.footprint_ids(problem))
    else:
        keep = first_acceptance(accepts)
    probe = valid[0] & (rows[0] == 0)
    return Chain(
        state=model.apply(problem, chain.state, move, keep, energy, stats),
        best=chain.best,
        best_energy=chain.best_energy,
        key=key,
        accepted=chain.accepted + jnp.sum(keep, dtype=jnp.int32),
        largest_delta=jnp.maximum(chain.largest_delta, jnp.where(probe, jnp.abs(energy[0] - chain.state.energy), 0.0)),
    )


def run_block(
    model: Model, problem, config: KernelConfig, chain: Chain, t_start, t_end, steps=None, batched: bool = False
) -> Chain:
    """`steps` steps (`config.block_steps` when None; a traced count keeps one compiled program for
    every block length) cooling geometrically from t_start to t_end, then a refresh. `batched`:
    `chain` holds chains on its first axis, each run alike; the loop steps them all, vmapped inside
    it (the same chains as `run_block` vmapped, but traced in half the time: JAX batches the loop's
    body once instead of finding which of its carried values are batched)."""
    n = config.block_steps if steps is None else steps
    ratio = jnp.where(t_start > 0, t_end / jnp.maximum(t_start, 1e-30), 0.0)
    one_step = jax.vmap(step, in_axes=(None, None, None, 0, None)) if batched else step
    fresh = jax.vmap(refresh, in_axes=(None, None, 0)) if batched else refresh

    def body(i, c):
        return one_step(model, problem, config, c, t_start * ratio ** (i / n))

    return fresh(model, problem, jax.lax.fori_loop(0, n, body, chain))


def resample(chains: Chain, t_start, t_end, layout=None) -> Chain:
    """Population annealing's reweighting for a cooling from `t_start` to `t_end`: every chain's
    state is replaced by a draw from all chains' states with weights exp(-(1/t_end - 1/t_start) E)
    (systematic resampling: a state's copies are its share of the weights times the number of
    chains, rounded up or down), so effort moves from poor states to good ones. Keys, best records
    and counters stay with their chain, so copies diverge and no best solution is lost. Unchanged
    while the temperature does not fall (the greedy probe block). `layout`: the chains' sharding,
    which the drawn states keep."""
    energy = chains.state.energy.astype(jnp.float32)
    n = energy.shape[0]
    cooling = jnp.where(
        (t_start > 0) & (t_end > 0) & (t_end < t_start),
        1 / jnp.maximum(t_end, 1e-30) - 1 / jnp.maximum(t_start, 1e-30),
        0.0,
    )
    weight = jnp.exp(-cooling * (energy - jnp.min(energy)))
    share = jnp.cumsum(weight) / jnp.sum(weight)
    offset = jax.random.uniform(jax.random.fold_in(chains.key[0], n))
    parent = jnp.minimum(jnp.searchsorted(share, (offset + jnp.arange(n)) / n, side="right"), n - 1)
    parent = jnp.where(cooling > 0, parent, jnp.arange(n))
    state = jax.tree.map(lambda x: x[parent], chains.state)
    if layout is not None:
        state = jax.lax.with_sharding_constraint(state, layout)
    return dataclasses.replace(chains, state=state)
