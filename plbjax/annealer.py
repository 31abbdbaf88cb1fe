"""Simulated annealing over many independent chains: pure `init` / `step` kernels and a driver.

A chain holds a placement and the running statistics its energy needs, so `step` costs O(M + K^2)
whatever the cluster size: one proposal, its energy change from two node-load changes, Metropolis,
and an in-place update. `run_block` runs a static number of steps under a geometric temperature
ramp, then recomputes the statistics exactly (no float drift) and records the chain's best. The
driver vmaps blocks over chains under one jit and loops blocks on the host, which gives progress
reports and a wall-time budget without recompiling.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax import energy as E
from plbjax.constraints import penalty_of
from plbjax.encoding import Problem
from plbjax.moves import DRAWS, Move, propose, uniform


@dataclasses.dataclass(frozen=True)
class AnnealConfig:
    """Search settings (plain and hashable: static under jit)."""

    chains: int = 64
    steps: int | None = 20_000          # per chain; None: as many as `seconds` allows
    seconds: float | None = 60.0        # wall-time budget of the search, compilation excluded
    seed: int = 0
    block_steps: int = 1_000            # steps between exact refreshes (SF: 1000 per round)
    swap_probability: float = 0.3       # SF's SwapPrimaryProbability
    initial_temperature: float | None = None  # None: probe, probe_factor x the largest |dE| seen
    probe_factor: float = 50.0          # SF: 50 x the largest |dE| of its probe moves
    final_ratio: float = 1e-4           # final temperature / initial temperature


class Chain(eqx.Module):
    node_of: jax.Array        # [R]
    primary_of: jax.Array     # [P]
    loads: jax.Array          # [N, M]
    local: jax.Array          # [S, N, Ms]
    g_total: jax.Array        # [M] over each metric's nodes
    g_sq: jax.Array           # [M] centred on g_centre
    g_centre: jax.Array
    l_total: jax.Array        # [S, Ms]
    l_sq: jax.Array
    l_centre: jax.Array
    fd_loads: jax.Array       # [Df, M] per leaf fault domain (defragmentation's spread term)
    fd_total: jax.Array       # [M] over leaf fault domains
    fd_sq: jax.Array
    fd_centre: jax.Array
    ud_loads: jax.Array       # [Du, M] per upgrade domain
    ud_total: jax.Array
    ud_sq: jax.Array
    ud_centre: jax.Array
    local_score: jax.Array    # sum of local_weight * local deviation
    cost: jax.Array           # movement cost from the phase's initial placement
    moves: jax.Array          # movements from the phase's initial placement (moved replicas, swaps)
    penalty: jax.Array        # energy of the constraint violations
    energy: jax.Array         # SF's energy + penalty
    best_node_of: jax.Array
    best_primary_of: jax.Array
    best_energy: jax.Array
    key: jax.Array
    accepted: jax.Array
    largest_delta: jax.Array  # largest |dE| of a valid proposal so far (the temperature probe)


def _stats(values: jax.Array, mask: jax.Array, count: jax.Array):
    """Sum, centre (the mean) and centred sum of squares of `values` [..., N, k] over `mask` [..., N]."""
    total, _ = E.moments(values, mask, jnp.zeros(values.shape[:-2] + values.shape[-1:]))
    centre = total / jnp.maximum(count, 1.0)
    _, sq = E.moments(values, mask, centre)
    return total, centre, sq


def _fresh(problem: Problem, node_of, primary_of, key, best=None, penalty=None) -> Chain:
    """A chain whose statistics are computed exactly from its placement (the violation penalty too,
    unless given: it is a sum of exact per-move changes, and recomputing it costs a full check)."""
    loads = E.node_loads(problem, node_of, primary_of)
    local = E.local_loads(problem, node_of, primary_of)
    m = loads.shape[1]
    g_total, g_centre, g_sq = _stats(loads.T[..., None], problem.metric_nodes, problem.metric_node_count[:, None])
    fd_loads = E.domain_loads(problem, loads, problem.fd_tree, problem.fd_leaf_up)
    ud_loads = E.domain_loads(problem, loads, problem.ud_tree, problem.ud_up)
    fd_total, fd_centre, fd_sq = _stats(fd_loads.T[..., None], jnp.broadcast_to(problem.fd_leaf_up, (m,) + fd_loads.shape[:1]),
                                        jnp.sum(problem.fd_leaf_up).astype(jnp.float32))
    ud_total, ud_centre, ud_sq = _stats(ud_loads.T[..., None], jnp.broadcast_to(problem.ud_up, (m,) + ud_loads.shape[:1]),
                                        jnp.sum(problem.ud_up).astype(jnp.float32))
    l_count = problem.class_node_count[problem.service_class].astype(jnp.float32)[:, None]
    l_total, l_centre, l_sq = _stats(local, E.local_masks(problem), l_count)
    services = jnp.arange(problem.service_metrics.shape[0])
    local_score = jnp.sum(problem.local_weight * E.local_scores(
        problem, services, E.deviation(l_total, l_sq, l_count, l_centre)))
    chain = Chain(node_of=node_of, primary_of=primary_of, loads=loads, local=local,
                  g_total=g_total[:, 0], g_sq=g_sq[:, 0], g_centre=g_centre[:, 0],
                  l_total=l_total, l_sq=l_sq, l_centre=l_centre,
                  fd_loads=fd_loads, fd_total=fd_total[:, 0], fd_sq=fd_sq[:, 0], fd_centre=fd_centre[:, 0],
                  ud_loads=ud_loads, ud_total=ud_total[:, 0], ud_sq=ud_sq[:, 0], ud_centre=ud_centre[:, 0],
                  local_score=local_score, cost=jnp.zeros(()), moves=jnp.zeros(()), penalty=jnp.zeros(()),
                  energy=jnp.zeros(()), best_node_of=node_of, best_primary_of=primary_of,
                  best_energy=jnp.zeros(()), key=key, accepted=jnp.zeros((), jnp.int32),
                  largest_delta=jnp.zeros(()))
    cost = E.movement_cost(problem, node_of, primary_of)
    if penalty is None:
        penalty = penalty_of(problem, node_of, primary_of, loads)
    energy = (E.energy(_global_score(problem, chain.g_total, chain.g_sq, chain.fd_total, chain.fd_sq,
                                     chain.ud_total, chain.ud_sq, chain) + local_score, cost, problem)
              + penalty)
    if best is None:
        best = (node_of, primary_of, energy)
    better = energy < best[2]
    return dataclasses.replace(
        chain, cost=cost, moves=E.movements(problem, node_of, primary_of),
        penalty=penalty, energy=energy,
        best_node_of=jnp.where(better, node_of, best[0]), best_primary_of=jnp.where(better, primary_of, best[1]),
        best_energy=jnp.minimum(energy, best[2]))


def _global_score(problem: Problem, g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, chain: Chain) -> jax.Array:
    """The global domain's part of AvgStdDev from running sums (centres from `chain`)."""
    node_dev = E.deviation(g_total, g_sq, problem.metric_node_count, chain.g_centre)
    if not problem.features.defrag:
        return jnp.sum(problem.global_weight * node_dev)
    fd_count = jnp.sum(problem.fd_leaf_up).astype(jnp.float32)
    ud_count = jnp.sum(problem.ud_up).astype(jnp.float32)
    scores = E.metric_scores(problem, node_dev, E.deviation(fd_total, fd_sq, fd_count, chain.fd_centre),
                             E.deviation(ud_total, ud_sq, ud_count, chain.ud_centre))
    return jnp.sum(problem.global_weight * scores)


def init(problem: Problem, key: jax.Array) -> Chain:
    """A chain at the initial placement."""
    return _fresh(problem, problem.initial_node, problem.initial_primary, key)


def refresh(problem: Problem, chain: Chain) -> Chain:
    """Recompute the statistics exactly and keep the best placement seen at refresh points."""
    fresh = _fresh(problem, chain.node_of, chain.primary_of, chain.key,
                   best=(chain.best_node_of, chain.best_primary_of, chain.best_energy), penalty=chain.penalty)
    return dataclasses.replace(fresh, accepted=chain.accepted, largest_delta=chain.largest_delta)


def _node_change(total, sq, centre, counted, level, delta):
    """Sum and centred sum of squares after `level` -> `level + delta` on one (counted) node; callers
    pass counted = False for node -1 (no node)."""
    d = jnp.where(counted, delta, 0.0)
    return total + d, sq + d * (2.0 * (level - centre) + d)


def evaluate(problem: Problem, chain: Chain, move: Move):
    """Energy after `move`, with the statistics it would leave (incremental, O(M + Ms))."""
    has_a = move.node_a >= 0                      # a replica being placed has no source node
    a, b = jnp.maximum(move.node_a, 0), move.node_b
    da, db = move.delta_a, move.delta_b
    g_total, g_sq = _node_change(chain.g_total, chain.g_sq, chain.g_centre,
                                 has_a & problem.metric_nodes[:, a], chain.loads[a], da)
    g_total, g_sq = _node_change(g_total, g_sq, chain.g_centre, problem.metric_nodes[:, b], chain.loads[b], db)

    def domains(tree, loads, total, sq, centre):
        """The two nodes' changes on their leaf domains (which may be the same one)."""
        leaf_a, leaf_b = tree[a, -1], tree[b, -1]
        up_a, up_b = has_a & problem.node_up[a], problem.node_up[b]
        total, sq = _node_change(total, sq, centre, up_a, loads[leaf_a], da)
        level_b = loads[leaf_b] + jnp.where(up_a & (leaf_a == leaf_b), da, 0.0)
        return _node_change(total, sq, centre, up_b, level_b, db)

    fd_total, fd_sq, ud_total, ud_sq = chain.fd_total, chain.fd_sq, chain.ud_total, chain.ud_sq
    if problem.features.defrag:     # per-domain spread only enters defragmentation metrics' scores
        fd_total, fd_sq = domains(problem.fd_tree, chain.fd_loads, fd_total, fd_sq, chain.fd_centre)
        ud_total, ud_sq = domains(problem.ud_tree, chain.ud_loads, ud_total, ud_sq, chain.ud_centre)
    g_new = _global_score(problem, g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, chain)

    s = move.service
    slots = problem.service_metrics[s]
    cls = problem.service_class[s]
    local_delta_a = jnp.where(slots >= 0, da[jnp.maximum(slots, 0)], 0.0)
    local_delta_b = jnp.where(slots >= 0, db[jnp.maximum(slots, 0)], 0.0)
    centre, w = chain.l_centre[s], problem.local_weight[s]
    l_count = problem.class_node_count[cls].astype(jnp.float32)
    l_total, l_sq = _node_change(chain.l_total[s], chain.l_sq[s], centre,
                                 has_a & problem.class_allowed[cls, a], chain.local[s, a], local_delta_a)
    l_total, l_sq = _node_change(l_total, l_sq, centre,
                                 problem.class_allowed[cls, b], chain.local[s, b], local_delta_b)
    score = lambda total, sq: jnp.sum(w * E.local_scores(problem, s, E.deviation(total, sq, l_count, centre)))  # noqa: E731
    local_score = chain.local_score - score(chain.l_total[s], chain.l_sq[s]) + score(l_total, l_sq)
    cost = chain.cost + move.cost_delta
    penalty = chain.penalty + move.penalty_delta
    new_energy = E.energy(g_new + local_score, cost, problem) + penalty
    return new_energy, (g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, l_total, l_sq, local_score, cost,
                        penalty, local_delta_a, local_delta_b)


def apply(problem: Problem, chain: Chain, move: Move, accept: jax.Array, new_energy, stats) -> Chain:
    """The chain after `move` if `accept`, else unchanged (every write is masked by `accept`)."""
    (g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, l_total, l_sq, local_score, cost, penalty,
     local_delta_a, local_delta_b) = stats
    keep = lambda new, old: jnp.where(accept, new, old)  # noqa: E731
    zero = lambda d, on=True: jnp.where(accept & on, d, 0.0)  # noqa: E731
    s, a, b = move.service, jnp.maximum(move.node_a, 0), move.node_b
    has_a = move.node_a >= 0
    counted_a, counted_b = has_a & problem.node_up[a], problem.node_up[b]

    def domain_loads(loads, tree):
        if not problem.features.defrag:
            return loads
        return loads.at[tree[a, -1]].add(zero(move.delta_a, counted_a)).at[tree[b, -1]].add(
            zero(move.delta_b, counted_b))

    return dataclasses.replace(
        chain,
        node_of=chain.node_of.at[move.replica].set(keep(move.target, chain.node_of[move.replica])),
        primary_of=chain.primary_of.at[move.partition].set(
            keep(move.new_primary, chain.primary_of[move.partition])),
        loads=chain.loads.at[a].add(zero(move.delta_a, has_a)).at[b].add(zero(move.delta_b)),
        local=chain.local.at[s, a].add(zero(local_delta_a, has_a)).at[s, b].add(zero(local_delta_b)),
        g_total=keep(g_total, chain.g_total), g_sq=keep(g_sq, chain.g_sq),
        fd_loads=domain_loads(chain.fd_loads, problem.fd_tree), ud_loads=domain_loads(chain.ud_loads, problem.ud_tree),
        fd_total=keep(fd_total, chain.fd_total), fd_sq=keep(fd_sq, chain.fd_sq),
        ud_total=keep(ud_total, chain.ud_total), ud_sq=keep(ud_sq, chain.ud_sq),
        l_total=chain.l_total.at[s].set(keep(l_total, chain.l_total[s])),
        l_sq=chain.l_sq.at[s].set(keep(l_sq, chain.l_sq[s])),
        local_score=keep(local_score, chain.local_score), cost=keep(cost, chain.cost),
        moves=keep(chain.moves + move.moves_delta, chain.moves),
        penalty=keep(penalty, chain.penalty),
        energy=keep(new_energy, chain.energy), accepted=chain.accepted + accept.astype(jnp.int32),
    )


def step(problem: Problem, config: AnnealConfig, chain: Chain, temperature: jax.Array) -> Chain:
    """One Metropolis step at `temperature` (one threefry call: the proposal's words and the next key)."""
    words = jax.random.bits(chain.key, (DRAWS + 3,))
    key = words[DRAWS + 1:]
    move = propose(problem, chain.node_of, chain.primary_of, chain.loads, words, config.swap_probability)
    new_energy, stats = evaluate(problem, chain, move)
    delta = new_energy - chain.energy
    uphill_ok = uniform(words[DRAWS]) < jnp.exp(-delta / jnp.maximum(temperature, 1e-30))
    valid = move.valid & (chain.moves + move.moves_delta <= problem.move_budget)
    accept = valid & ((delta <= 0) | uphill_ok)
    largest = jnp.maximum(chain.largest_delta, jnp.where(valid, jnp.abs(delta), 0.0))
    return apply(problem, dataclasses.replace(chain, key=key, largest_delta=largest), move, accept, new_energy,
                 stats)


def run_block(problem: Problem, config: AnnealConfig, chain: Chain, t_start, t_end) -> Chain:
    """`config.block_steps` steps cooling geometrically from t_start to t_end, then a refresh."""
    n = config.block_steps
    ratio = jnp.where(t_start > 0, t_end / jnp.maximum(t_start, 1e-30), 0.0)

    def body(i, c):
        return step(problem, config, c, t_start * ratio ** (i / n))

    return refresh(problem, jax.lax.fori_loop(0, n, body, chain))


@eqx.filter_jit
def _init_chains(problem: Problem, keys: jax.Array) -> Chain:
    return jax.vmap(init, in_axes=(None, 0))(problem, keys)


@eqx.filter_jit
def _run_blocks(problem: Problem, chains: Chain, config: AnnealConfig, t_start, t_end) -> Chain:
    return jax.vmap(run_block, in_axes=(None, None, 0, None, None))(problem, config, chains, t_start, t_end)


_executables: dict = {}


def _compiled_blocks(problem: Problem, chains: Chain, config: AnnealConfig):
    """The compiled block runner for these shapes and this config, and the seconds compiling took."""
    key = (config, jax.tree.structure((problem, chains)),
           tuple((x.shape, x.dtype) for x in jax.tree.leaves((problem, chains))))
    if key in _executables:
        return _executables[key], 0.0
    start = time.perf_counter()
    t = jnp.float32(1.0)
    _executables[key] = _run_blocks.lower(problem, chains, config, t, t).compile()
    return _executables[key], time.perf_counter() - start


@dataclasses.dataclass(frozen=True)
class AnnealResult:
    node_of: np.ndarray        # best placement over all chains
    primary_of: np.ndarray
    energy: float
    initial_energy: float
    steps: int                 # per chain
    chains: int
    seconds: float             # search wall time, compilation excluded
    compile_seconds: float
    accepted: int
    initial_temperature: float
    energies: np.ndarray       # best energy per chain


def anneal(problem: Problem, config: AnnealConfig,
           progress: Callable[[int, int, float, float], None] | None = None) -> AnnealResult:
    """Run `config.chains` chains; return the best placement found (or the initial one)."""
    keys = jax.random.split(jax.random.PRNGKey(config.seed), config.chains)
    chains = _init_chains(problem, keys)
    initial_energy = float(chains.energy[0])
    compiled, compile_seconds = _compiled_blocks(problem, chains, config)

    # Without a given temperature the first block is the probe (SF: T0 from the largest |dE| of random
    # valid moves): it runs greedy, so chains stay near the input, and sets T0 for the rest.
    t0 = config.initial_temperature
    planned = math.ceil(config.steps / config.block_steps) if config.steps else None
    blocks = planned or 1
    done = 0
    start = time.perf_counter()
    first_seconds = 0.0
    while done < blocks:
        if t0 is None:
            t_a = t_b = 0.0
        else:
            t_a = t0 * config.final_ratio ** (done / blocks)
            t_b = t0 * config.final_ratio ** ((done + 1) / blocks)
        chains = compiled(problem, chains, config, jnp.float32(t_a), jnp.float32(t_b))
        best_energy = np.asarray(chains.best_energy)          # waits for the block
        done += 1
        elapsed = time.perf_counter() - start
        if t0 is None:
            found = float(np.median(np.asarray(chains.largest_delta)))
            t0 = config.probe_factor * found if found > 0 else max(initial_energy, 1.0)
        if done == 1:
            first_seconds = elapsed
        if config.seconds:       # fit the schedule to the budget from the blocks run so far
            per_block = (elapsed - first_seconds) / (done - 1) if done > 1 else first_seconds
            fit = done + max(0, int((config.seconds - elapsed) / max(per_block, 1e-9)))
            blocks = max(done, min(planned, fit) if planned else fit)
        if progress is not None:
            progress(done, blocks, elapsed, float(best_energy.min()))
    seconds = time.perf_counter() - start

    best = int(np.argmin(np.asarray(chains.best_energy)))
    return AnnealResult(
        node_of=np.asarray(chains.best_node_of[best]), primary_of=np.asarray(chains.best_primary_of[best]),
        energy=float(chains.best_energy[best]), initial_energy=initial_energy,
        steps=done * config.block_steps, chains=config.chains, seconds=seconds,
        compile_seconds=compile_seconds, accepted=int(np.asarray(chains.accepted).sum()),
        initial_temperature=t0, energies=np.asarray(chains.best_energy))
