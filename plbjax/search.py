"""Service Fabric's search: the state of one chain and its energy, updated one move at a time.

A state holds a placement and the running statistics SF's energy needs, so a move costs O(M + K^2)
whatever the cluster size: one proposal (`moves`), its energy change from two node-load changes,
and an in-place update. `refresh` recomputes the statistics exactly (no float drift). `MODEL` is
what the annealer runs.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from plbjax import energy as E
from plbjax.annealer import Model
from plbjax.constraints import penalty_of
from plbjax.encoding import Problem
from plbjax.moves import DRAWS, Move
from plbjax.moves import propose as propose_move


class SearchState(eqx.Module):
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


def _stats(values: jax.Array, mask: jax.Array, count: jax.Array):
    """Sum, centre (the mean) and centred sum of squares of `values` [..., N, k] over `mask` [..., N]."""
    total, _ = E.moments(values, mask, jnp.zeros(values.shape[:-2] + values.shape[-1:]))
    centre = total / jnp.maximum(count, 1.0)
    _, sq = E.moments(values, mask, centre)
    return total, centre, sq


def _fresh(problem: Problem, node_of, primary_of, penalty=None) -> SearchState:
    """A state whose statistics are computed exactly from its placement (the violation penalty too,
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
    state = SearchState(node_of=node_of, primary_of=primary_of, loads=loads, local=local,
                  g_total=g_total[:, 0], g_sq=g_sq[:, 0], g_centre=g_centre[:, 0],
                  l_total=l_total, l_sq=l_sq, l_centre=l_centre,
                  fd_loads=fd_loads, fd_total=fd_total[:, 0], fd_sq=fd_sq[:, 0], fd_centre=fd_centre[:, 0],
                  ud_loads=ud_loads, ud_total=ud_total[:, 0], ud_sq=ud_sq[:, 0], ud_centre=ud_centre[:, 0],
                  local_score=local_score, cost=jnp.zeros(()), moves=jnp.zeros(()), penalty=jnp.zeros(()),
                  energy=jnp.zeros(()))
    cost = E.movement_cost(problem, node_of, primary_of)
    if penalty is None:
        penalty = penalty_of(problem, node_of, primary_of, loads)
    energy = (E.energy(_global_score(problem, state.g_total, state.g_sq, state.fd_total, state.fd_sq,
                                     state.ud_total, state.ud_sq, state) + local_score, cost, problem)
              + penalty)
    return dataclasses.replace(state, cost=cost, moves=E.movements(problem, node_of, primary_of),
                               penalty=penalty, energy=energy)


def _global_score(problem: Problem, g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, state: SearchState) -> jax.Array:
    """The global domain's part of AvgStdDev from running sums (centres from `state`)."""
    node_dev = E.deviation(g_total, g_sq, problem.metric_node_count, state.g_centre)
    if not problem.features.defrag:
        return jnp.sum(problem.global_weight * node_dev)
    fd_count = jnp.sum(problem.fd_leaf_up).astype(jnp.float32)
    ud_count = jnp.sum(problem.ud_up).astype(jnp.float32)
    scores = E.metric_scores(problem, node_dev, E.deviation(fd_total, fd_sq, fd_count, state.fd_centre),
                             E.deviation(ud_total, ud_sq, ud_count, state.ud_centre))
    return jnp.sum(problem.global_weight * scores)


def start(problem: Problem) -> SearchState:
    """The state at the initial placement."""
    return _fresh(problem, problem.initial_node, problem.initial_primary)


def refresh(problem: Problem, state: SearchState) -> SearchState:
    """The statistics recomputed exactly (the violation penalty is kept: it is a sum of exact
    per-move changes, and recomputing it costs a full check)."""
    return _fresh(problem, state.node_of, state.primary_of, penalty=state.penalty)


def _node_change(total, sq, centre, counted, level, delta):
    """Sum and centred sum of squares after `level` -> `level + delta` on one (counted) node; callers
    pass counted = False for node -1 (no node)."""
    d = jnp.where(counted, delta, 0.0)
    return total + d, sq + d * (2.0 * (level - centre) + d)


def evaluate(problem: Problem, state: SearchState, move: Move):
    """Energy after `move`, with the statistics it would leave (incremental, O(M + Ms))."""
    has_a = move.node_a >= 0                      # a replica being placed has no source node
    a, b = jnp.maximum(move.node_a, 0), move.node_b
    da, db = move.delta_a, move.delta_b
    g_total, g_sq = _node_change(state.g_total, state.g_sq, state.g_centre,
                                 has_a & problem.metric_nodes[:, a], state.loads[a], da)
    g_total, g_sq = _node_change(g_total, g_sq, state.g_centre, problem.metric_nodes[:, b], state.loads[b], db)

    def domains(tree, loads, total, sq, centre):
        """The two nodes' changes on their leaf domains (which may be the same one)."""
        leaf_a, leaf_b = tree[a, -1], tree[b, -1]
        up_a, up_b = has_a & problem.node_up[a], problem.node_up[b]
        total, sq = _node_change(total, sq, centre, up_a, loads[leaf_a], da)
        level_b = loads[leaf_b] + jnp.where(up_a & (leaf_a == leaf_b), da, 0.0)
        return _node_change(total, sq, centre, up_b, level_b, db)

    fd_total, fd_sq, ud_total, ud_sq = state.fd_total, state.fd_sq, state.ud_total, state.ud_sq
    if problem.features.defrag:     # per-domain spread only enters defragmentation metrics' scores
        fd_total, fd_sq = domains(problem.fd_tree, state.fd_loads, fd_total, fd_sq, state.fd_centre)
        ud_total, ud_sq = domains(problem.ud_tree, state.ud_loads, ud_total, ud_sq, state.ud_centre)
    g_new = _global_score(problem, g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, state)

    s = move.service
    slots = problem.service_metrics[s]
    cls = problem.service_class[s]
    local_delta_a = jnp.where(slots >= 0, da[jnp.maximum(slots, 0)], 0.0)
    local_delta_b = jnp.where(slots >= 0, db[jnp.maximum(slots, 0)], 0.0)
    centre, w = state.l_centre[s], problem.local_weight[s]
    l_count = problem.class_node_count[cls].astype(jnp.float32)
    l_total, l_sq = _node_change(state.l_total[s], state.l_sq[s], centre,
                                 has_a & problem.class_allowed[cls, a], state.local[s, a], local_delta_a)
    l_total, l_sq = _node_change(l_total, l_sq, centre,
                                 problem.class_allowed[cls, b], state.local[s, b], local_delta_b)
    score = lambda total, sq: jnp.sum(w * E.local_scores(problem, s, E.deviation(total, sq, l_count, centre)))  # noqa: E731
    local_score = state.local_score - score(state.l_total[s], state.l_sq[s]) + score(l_total, l_sq)
    cost = state.cost + move.cost_delta
    penalty = state.penalty + move.penalty_delta
    new_energy = E.energy(g_new + local_score, cost, problem) + penalty
    return new_energy, (g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, l_total, l_sq, local_score, cost,
                        penalty, local_delta_a, local_delta_b)


def _add_rows(local: jax.Array, s, a, delta_a, b, delta_b) -> jax.Array:
    """`local` [S, N, Ms] plus `delta_a` at [s, a] and `delta_b` at [s, b], as one scatter into rows of
    a flat [S * N, Ms] view (a two-index scatter was copied whole every step on a GPU at 8 metrics)."""
    n_services, n_nodes, width = local.shape
    rows = s * n_nodes + jnp.stack([a, b])
    flat = local.reshape(n_services * n_nodes, width).at[rows].add(jnp.stack([delta_a, delta_b]))
    return flat.reshape(local.shape)


def apply_one(problem: Problem, state: SearchState, move: Move, accept: jax.Array, new_energy,
              stats) -> SearchState:
    """The state after `move` if `accept`, else unchanged (every write is masked by `accept`)."""
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
        state,
        node_of=state.node_of.at[move.replica].set(keep(move.target, state.node_of[move.replica])),
        primary_of=state.primary_of.at[move.partition].set(
            keep(move.new_primary, state.primary_of[move.partition])),
        loads=state.loads.at[a].add(zero(move.delta_a, has_a)).at[b].add(zero(move.delta_b)),
        local=_add_rows(state.local, s, a, zero(local_delta_a, has_a), b, zero(local_delta_b)),
        g_total=keep(g_total, state.g_total), g_sq=keep(g_sq, state.g_sq),
        fd_loads=domain_loads(state.fd_loads, problem.fd_tree), ud_loads=domain_loads(state.ud_loads, problem.ud_tree),
        fd_total=keep(fd_total, state.fd_total), fd_sq=keep(fd_sq, state.fd_sq),
        ud_total=keep(ud_total, state.ud_total), ud_sq=keep(ud_sq, state.ud_sq),
        l_total=state.l_total.at[s].set(keep(l_total, state.l_total[s])),
        l_sq=state.l_sq.at[s].set(keep(l_sq, state.l_sq[s])),
        local_score=keep(local_score, state.local_score), cost=keep(cost, state.cost),
        moves=keep(state.moves + move.moves_delta, state.moves),
        penalty=keep(penalty, state.penalty),
        energy=keep(new_energy, state.energy),
    )


def propose(problem: Problem, state: SearchState, words, swap_probability: float):
    """One random move (`moves.propose`), the energy it leaves, and whether it is allowed (its
    constraints and the phase's movement budget)."""
    move = propose_move(problem, state.node_of, state.primary_of, state.loads, words, swap_probability)
    new_energy, stats = evaluate(problem, state, move)
    valid = move.valid & (state.moves + move.moves_delta <= problem.move_budget)
    return move, new_energy, valid, stats


def apply(problem: Problem, state: SearchState, moves: Move, keep: jax.Array, energies, stats) -> SearchState:
    """The state after the kept proposal (SF's moves are applied one per step)."""
    i = jnp.argmax(keep)
    pick = lambda x: x[i]  # noqa: E731
    return apply_one(problem, state, jax.tree.map(pick, moves), keep[i], energies[i], jax.tree.map(pick, stats))


def solution(state: SearchState):
    return state.node_of, state.primary_of


MODEL = Model(start=start, propose=propose, apply=apply, refresh=refresh, solution=solution, draws=DRAWS)
