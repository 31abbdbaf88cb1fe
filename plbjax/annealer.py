"""Simulated annealing over many independent chains: pure `init` / `step` kernels and a driver.

The annealer knows nothing of the problem it searches. A `Model` says how: where a search starts,
how one random move is proposed with its energy change (incrementally, O(1) in the problem's size),
how an accepted move is applied, and how the running statistics are recomputed exactly. A `Chain`
wraps the model's state with what every search needs: the random key, the best solution seen at a
refresh, acceptance counts and the temperature probe.

`run_block` runs a static number of steps under a geometric temperature ramp, then refreshes. The
driver vmaps blocks over chains under one jit and loops blocks on the host, which gives progress
reports and a wall-time budget without recompiling.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec


STOP = threading.Event()    # set (e.g. by a signal handler): running searches end after their block


@dataclasses.dataclass(frozen=True)
class AnnealConfig:
    """Search settings (plain and hashable: static under jit)."""

    chains: int = 64
    steps: int | None = 20_000          # per chain; None: as many as `seconds` allows
    seconds: float | None = 60.0        # wall-time budget of the search, compilation excluded
    seed: int = 0
    block_steps: int = 1_000            # steps between exact refreshes (SF: 1000 per round)
    swap_probability: float = 0.3       # SF's SwapPrimaryProbability
    tries: int = 1                      # proposals evaluated together per step (the first accepted is applied)
    parallel: bool = False              # apply every accepted proposal that is independent of earlier ones
    room: int | None = None             # most proposals a step finishes and may apply (its first `room`
                                        # that may be accepted); None: tries / 16, at least 32
    population: bool = False            # population annealing: resample the chains' states at each block's end
    initial_temperature: float | None = None  # None: probe, probe_factor x the largest |dE| seen
    probe_factor: float = 50.0          # SF: 50 x the largest |dE| of its probe moves
    final_ratio: float = 1e-4           # final temperature / initial temperature

    @property
    def step_room(self) -> int:
        """`room`, or its default for `tries` (a sixteenth, at least 32: a GPU step of 65,536 finishes 4,096)."""
        return self.room if self.room is not None else max(32, self.tries // 16)


@dataclasses.dataclass(frozen=True)
class Model:
    """How a problem is searched (plain functions of the problem, static under jit).

    start(problem) -> state: the search state at the problem's initial solution; every state has
        an `energy` field.
    propose(problem, state, words, swap_probability) -> (move, energy, valid, stats): a step's
        random moves, one per row of `words` [T, draws] (random uint32), batched over T: the energy
        each would leave, whether it is allowed, and whatever `apply` needs to reuse (`batched`
        makes it from a function of one move). With `finish`, a lower bound of the energy and a
        necessary condition for validity.
    finish(problem, state, move, stats) -> (move, energy, valid, stats): the costly rest of the
        evaluation, exact, run only on the proposals that may be accepted (None: none needed).
    apply(problem, state, moves, keep, energies, stats) -> state: the state after the proposals
        marked in `keep` [T] (their moves, energies and stats batched over T proposals).
    refresh(problem, state) -> state: the running statistics recomputed exactly.
    solution(state) -> pytree: what the search returns (e.g. the placement).
    footprint(problem, state, move) -> [F] int ids (-1: none), for models whose `apply` takes
        several moves at once: moves with disjoint footprints do not change each other's validity
        and `apply` gives the state they leave applied one by one; None: one move per step.
    """

    start: Callable
    propose: Callable
    apply: Callable
    refresh: Callable
    solution: Callable
    draws: int
    footprint: Callable | None = None
    footprint_ids: Callable | None = None   # problem -> number of distinct footprint ids
    finish: Callable | None = None


class Chain(eqx.Module):
    state: Any                # the model's search state
    best: Any                 # the model's solution at the lowest energy seen at a refresh
    best_energy: jax.Array
    key: jax.Array
    accepted: jax.Array
    largest_delta: jax.Array  # largest |dE| of a step's first proposal when valid (the temperature probe,
                              # so T0 does not grow with the tries per step)


def batched(propose_one: Callable) -> Callable:
    """A model's `propose` from a function that draws one move from one row of words."""
    return jax.vmap(propose_one, in_axes=(None, None, 0, None))


def uniform(word: jax.Array) -> jax.Array:
    """A uniform float in [0, 1) from one random 32-bit word."""
    return (word >> 8).astype(jnp.float32) * (1.0 / (1 << 24))


def draw(word: jax.Array, n: jax.Array) -> jax.Array:
    """A uniform integer in [0, n) from one random word, for a traced n (0 when n is 0)."""
    return (word % jnp.maximum(n, 1).astype(jnp.uint32)).astype(jnp.int32)


def init(model: Model, problem, key: jax.Array) -> Chain:
    """A chain at the problem's initial solution."""
    state = model.start(problem)
    return Chain(state=state, best=model.solution(state), best_energy=state.energy, key=key,
                 accepted=jnp.zeros((), jnp.int32), largest_delta=jnp.zeros((), jnp.float32))


def refresh(model: Model, problem, chain: Chain) -> Chain:
    """Recompute the model's statistics exactly and keep the best solution seen at refresh points."""
    state = model.refresh(problem, chain.state)
    better = state.energy < chain.best_energy
    best = jax.tree.map(lambda new, old: jnp.where(better, new, old), model.solution(state), chain.best)
    return dataclasses.replace(chain, state=state, best=best,
                               best_energy=jnp.minimum(state.energy, chain.best_energy))


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


def _first(accepts: jax.Array) -> jax.Array:
    """[T] only the first accepted proposal."""
    return accepts & (jnp.arange(accepts.shape[0]) == jnp.argmax(accepts))


def _independent(ids: jax.Array, accepts: jax.Array, n_ids: int, rounds: int = 3) -> jax.Array:
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
        blocked = lambda keep: jnp.any(shared & keep[None, :], axis=1)  # noqa: E731
        earlier = order[None, :] < order[:, None]                  # earlier[i, j]: j < i
        first = lambda open_: ~jnp.any(shared & earlier & open_[None, :], axis=1)  # noqa: E731
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


def step(model: Model, problem, config: AnnealConfig, chain: Chain, temperature: jax.Array) -> Chain:
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
    move, energy, valid, stats = model.propose(problem, chain.state, words, config.swap_probability)
    chance = uniform(words[:, model.draws])

    def metropolis(energy, chance):
        delta = (energy - chain.state.energy).astype(jnp.float32)
        return (delta <= 0) | (chance < jnp.exp(-delta / jnp.maximum(temperature, 1e-30)))

    rows = jnp.arange(config.tries)
    if config.step_room < config.tries:
        maybe = (valid & metropolis(energy, chance)).at[0].set(valid[0])
        rows, = jnp.nonzero(maybe, size=config.step_room, fill_value=0)
        move, energy, stats, chance = jax.tree.map(lambda x: x[rows], (move, energy, stats, chance))
        valid = valid[rows] & (jnp.arange(rows.shape[0]) < jnp.sum(maybe))
    if model.finish is not None:
        move, energy, finished, stats = model.finish(problem, chain.state, move, stats)
        valid = valid & finished
    accepts = valid & metropolis(energy, chance)
    if config.parallel and model.footprint is not None:
        ids = jax.vmap(model.footprint, in_axes=(None, None, 0))(problem, chain.state, move)
        keep = _independent(ids, accepts, model.footprint_ids(problem))
    else:
        keep = _first(accepts)
    probe = valid[0] & (rows[0] == 0)
    return Chain(state=model.apply(problem, chain.state, move, keep, energy, stats),
                 best=chain.best, best_energy=chain.best_energy, key=key,
                 accepted=chain.accepted + jnp.sum(keep, dtype=jnp.int32),
                 largest_delta=jnp.maximum(chain.largest_delta,
                                           jnp.where(probe, jnp.abs(energy[0] - chain.state.energy), 0.0)))


def run_block(model: Model, problem, config: AnnealConfig, chain: Chain, t_start, t_end) -> Chain:
    """`config.block_steps` steps cooling geometrically from t_start to t_end, then a refresh."""
    n = config.block_steps
    ratio = jnp.where(t_start > 0, t_end / jnp.maximum(t_start, 1e-30), 0.0)

    def body(i, c):
        return step(model, problem, config, c, t_start * ratio ** (i / n))

    return refresh(model, problem, jax.lax.fori_loop(0, n, body, chain))


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
    cooling = jnp.where((t_start > 0) & (t_end > 0) & (t_end < t_start),
                        1 / jnp.maximum(t_end, 1e-30) - 1 / jnp.maximum(t_start, 1e-30), 0.0)
    weight = jnp.exp(-cooling * (energy - jnp.min(energy)))
    share = jnp.cumsum(weight) / jnp.sum(weight)
    offset = jax.random.uniform(jax.random.fold_in(chains.key[0], n))
    parent = jnp.minimum(jnp.searchsorted(share, (offset + jnp.arange(n)) / n, side="right"), n - 1)
    parent = jnp.where(cooling > 0, parent, jnp.arange(n))
    state = jax.tree.map(lambda x: x[parent], chains.state)
    if layout is not None:
        state = jax.lax.with_sharding_constraint(state, layout)
    return dataclasses.replace(chains, state=state)


@eqx.filter_jit
def init_chains(model: Model, problem, keys: jax.Array) -> Chain:
    """One chain per key, all at the initial solution."""
    return jax.vmap(init, in_axes=(None, None, 0))(model, problem, keys)


@eqx.filter_jit(donate="all-except-first")
def _run_blocks(kept, chains: Chain, model: Model, config: AnnealConfig, layout=None) -> Chain:
    """One block of every chain. `kept` = (problem, [start, end] temperatures) is read only; the
    chains passed in are donated (their buffers hold the result, so a run needs one copy of them).
    `layout`: the chains' sharding over devices (None on one device)."""
    problem, temperatures = kept
    chains = jax.vmap(run_block, in_axes=(None, None, None, 0, None, None))(model, problem, config, chains,
                                                                           temperatures[0], temperatures[1])
    return resample(chains, temperatures[0], temperatures[1], layout) if config.population else chains


def enable_compilation_cache() -> None:
    """Keep compiled searches on disk so repeated runs on similar clusters skip XLA compilation."""
    logging.getLogger("jax").setLevel(logging.WARNING)   # not Hydra's INFO lines about absent TPUs
    path = os.environ.get("PLBJAX_CACHE_DIR", str(Path.home() / ".cache" / "plbjax" / "xla"))
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def shard(problem, chains: Chain):
    """Chains split over every device (all local devices, or every process's after
    `jax.distributed.initialize()`), the problem replicated on each; unchanged on one device or
    when the chains do not divide evenly."""
    devices = jax.devices()
    if len(devices) == 1 or chains.key.shape[0] % len(devices):
        return problem, chains
    mesh = Mesh(np.array(devices), ("chains",))
    put = lambda tree, spec: jax.tree.map(  # noqa: E731
        lambda x: jax.device_put(x, NamedSharding(mesh, spec)) if isinstance(x, jax.Array) else x, tree)
    return put(problem, PartitionSpec()), put(chains, PartitionSpec("chains"))


def _host(x: jax.Array) -> np.ndarray:
    """A (possibly multi-process) array as one NumPy array on this host."""
    if jax.process_count() > 1:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


_executables: dict = {}


def clear_compiled() -> None:
    """Forget every compiled search (and JAX's compiled functions). A process that plans many
    differently shaped clusters keeps each compiled program until then; on a CPU each holds memory
    maps, and a few hundred exhaust the system's limit ("LLVM compilation error: Cannot allocate
    memory"; seen in the validity sweep after ~400 clusters of 17 shapes)."""
    _executables.clear()
    jax.clear_caches()


def _compiled_blocks(model: Model, problem, chains: Chain, config: AnnealConfig):
    """The compiled block runner for this model, these shapes and this config, and the seconds
    compiling took."""
    layout = chains.key.sharding if isinstance(chains.key.sharding, NamedSharding) else None
    # Only the step's settings shape the compiled code: runs that differ in budget, seed or
    # temperatures share it.
    config = dataclasses.replace(config, chains=0, steps=None, seconds=None, seed=0, initial_temperature=None,
                                 probe_factor=0.0, final_ratio=0.0)
    key = (model, config, layout, jax.tree.structure((problem, chains)),
           tuple((x.shape, x.dtype) for x in jax.tree.leaves((problem, chains))))
    if key not in _executables:
        start = time.perf_counter()
        compiled = _run_blocks.lower((problem, jnp.ones(2, jnp.float32)), chains, model, config, layout).compile()
        _executables[key] = lambda kept, chains: compiled(kept, chains, model, config, layout)
        return _executables[key], time.perf_counter() - start
    return _executables[key], 0.0


@dataclasses.dataclass(frozen=True)
class AnnealResult:
    solution: Any              # the model's best solution over all chains (host arrays)
    energy: float
    initial_energy: float
    steps: int                 # per chain
    chains: int
    seconds: float             # search wall time, compilation excluded
    compile_seconds: float
    accepted: int
    initial_temperature: float
    energies: np.ndarray       # best energy per chain
    shrunk: str | None = None  # why the search ran smaller than asked, if it did


def _out_of_memory(error: Exception) -> bool:
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def _smaller(config: AnnealConfig) -> AnnealConfig | None:
    """Half the chains, or with one chain half the tries (None: nothing left to halve)."""
    if config.chains > 1:
        return dataclasses.replace(config, chains=config.chains // 2)
    if config.tries > 1:
        return dataclasses.replace(config, tries=config.tries // 2,
                                   room=None if config.room is None else max(1, config.room // 2))
    return None


def anneal(model: Model, problem, config: AnnealConfig,
           progress: Callable[[int, int, float, float], None] | None = None,
           deadline: float | None = None,
           checkpoint: Callable[[Any, float], None] | None = None, checkpoint_seconds: float = 5.0) -> AnnealResult:
    """Run `config.chains` chains; return the best solution found (or the initial one).

    `deadline` (a `time.perf_counter()` instant) also bounds the search, compilation included;
    `STOP.set()` ends it after the current block (the best so far is returned).
    `checkpoint(solution, energy)` receives the best solution so far (host arrays) when it has
    improved, at most every `checkpoint_seconds`, for callers that must hold a result at any time.
    When the device runs out of memory the search starts again with half the chains (with one chain,
    half the tries a step), as often as needed; the result says so (`shrunk`).
    """
    asked = config
    while True:
        try:
            result = _anneal(model, problem, config, progress, deadline, checkpoint, checkpoint_seconds)
        except jax.errors.JaxRuntimeError as error:
            smaller = _smaller(config)
            if not _out_of_memory(error) or smaller is None:
                raise
            logging.getLogger(__name__).warning("out of device memory with %d chain(s) x %d tries: retrying with %d x %d",
                                                config.chains, config.tries, smaller.chains, smaller.tries)
            clear_compiled()
            config = smaller
            continue
        if config != asked:
            result = dataclasses.replace(result, shrunk=f"out of device memory: {config.chains} chain(s) x "
                                                        f"{config.tries} tries a step instead of {asked.chains} x {asked.tries}")
        return result


def _anneal(model: Model, problem, config: AnnealConfig, progress, deadline, checkpoint,
            checkpoint_seconds: float) -> AnnealResult:
    """`anneal` with this config."""
    keys = jax.random.split(jax.random.PRNGKey(config.seed), config.chains)
    problem, chains = shard(problem, init_chains(model, problem, keys))
    initial_energy = float(_host(chains.state.energy)[0])
    compiled, compile_seconds = _compiled_blocks(model, problem, chains, config)

    # Without a given temperature the first block is the probe (SF: T0 from the largest |dE| of random
    # valid moves): it runs greedy, so chains stay near the input, and sets T0 for the rest.
    t0 = config.initial_temperature
    planned = math.ceil(config.steps / config.block_steps) if config.steps else None
    blocks = planned or 1
    done = 0
    start = time.perf_counter()
    budget = min(config.seconds or math.inf, deadline - start if deadline is not None else math.inf)
    first_seconds = 0.0
    saved_energy, saved_at = initial_energy, start
    while done < blocks and not (done and STOP.is_set()):
        if t0 is None:
            t_a = t_b = 0.0
        else:
            t_a = t0 * config.final_ratio ** (done / blocks)
            t_b = t0 * config.final_ratio ** ((done + 1) / blocks)
        chains = compiled((problem, jnp.array([t_a, t_b], jnp.float32)), chains)
        best_energy = _host(chains.best_energy)               # waits for the block
        done += 1
        elapsed = time.perf_counter() - start
        if t0 is None:
            found = float(np.median(_host(chains.largest_delta)))
            t0 = config.probe_factor * found if found > 0 else max(initial_energy, 1.0)
        if done == 1:
            first_seconds = elapsed
        if math.isfinite(budget):      # fit the schedule to the budget from the blocks run so far
            per_block = (elapsed - first_seconds) / (done - 1) if done > 1 else first_seconds
            fit = done + max(0, int((budget - elapsed) / max(per_block, 1e-9)))
            blocks = max(done, min(planned, fit) if planned else fit)
        if progress is not None:
            progress(done, blocks, elapsed, float(best_energy.min()))
        if checkpoint is not None and best_energy.min() < saved_energy and (
                time.perf_counter() - saved_at >= checkpoint_seconds):
            best = int(np.argmin(best_energy))
            checkpoint(jax.tree.map(lambda x: _host(x)[best], chains.best), float(best_energy[best]))
            saved_energy, saved_at = float(best_energy[best]), time.perf_counter()
    seconds = time.perf_counter() - start

    energies = _host(chains.best_energy)
    best = int(np.argmin(energies))
    return AnnealResult(
        solution=jax.tree.map(lambda x: _host(x)[best], chains.best),
        energy=float(energies[best]), initial_energy=initial_energy,
        steps=done * config.block_steps, chains=config.chains, seconds=seconds,
        compile_seconds=compile_seconds, accepted=int(_host(chains.accepted).sum()),
        initial_temperature=t0, energies=energies)
