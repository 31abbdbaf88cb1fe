"""Random neighbour moves, SF's way: move a replica or instance, or swap a primary with a secondary.

`propose` draws one move for one chain and says whether it is valid (all constraints no worse but
the fault- and upgrade-domain distribution, whose K^2 check `search.finish` adds only for moves that
may be accepted); `propose_batch` draws a step's worth, computing each kind only where it is drawn.
Every move is described by the same fields — the replica whose node changes, the partition whose
primary may change, and the load change on two nodes — so energy and apply code are shared.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.annealer import draw, uniform
from plbjax.constraints import (affinity_violated, away_from_home, excess_change, fits, off_preferred,
                                partition_nodes)
from plbjax.encoding import AFFINITY, CAPACITY, CONSTRAINTS, PLACEMENT, PREFERRED, THRESHOLD, UNPLACED, Problem


class Move(eqx.Module):
    replica: jax.Array       # replica placed on `target` (unchanged node for a swap)
    target: jax.Array
    partition: jax.Array     # partition whose primary becomes `new_primary`
    new_primary: jax.Array
    service: jax.Array
    node_a: jax.Array        # the two nodes whose loads change (distinct; node_a -1: none)
    node_b: jax.Array
    delta_a: jax.Array       # [M]
    delta_b: jax.Array       # [M]
    cost_delta: jax.Array    # change in movement cost against the initial placement
    moves_delta: jax.Array   # change in the number of movements (moved replicas, swapped primaries)
    penalty_delta: jax.Array # change in the violations' energy (domain distribution: see `search.finish`)
    valid: jax.Array         # no constraint worse (domain distribution: see `search.finish`)


DRAWS = 5  # random words one proposal uses


def partition_after(problem: Problem, node_of, move: Move) -> jax.Array:
    """[K] nodes of the move's partition once its replica is on its target."""
    before = partition_nodes(problem, node_of, move.partition)
    return jnp.where(problem.partition_replicas[move.partition] == move.replica, move.target, before)


def _excess(limit, loads, a, delta_a, b, delta_b) -> jax.Array:
    """Change of the summed relative excess over `limit` when two (distinct) nodes change."""
    return excess_change(limit, loads, a, delta_a) + excess_change(limit, loads, b, delta_b)


def _enforced(problem: Problem, changes: jax.Array) -> jax.Array:
    """No enforced constraint gets worse."""
    return ~jnp.any(problem.enforce & (changes > 0))


def propose_move(problem: Problem, node_of, primary_of, loads, words) -> Move:
    """Move (or place) a random movable replica on a random node its placement constraints allow."""
    r = problem.movable[draw(words[0], problem.n_movable)]
    p, s = problem.replica_partition[r], problem.replica_service[r]
    cls = problem.service_class[s]
    t = problem.class_nodes[cls, draw(words[1], problem.class_node_count[cls])]
    a = node_of[r]
    load = jnp.where(primary_of[p] == r, problem.load_primary[r], problem.load_secondary[r])
    before = partition_nodes(problem, node_of, p)
    after = jnp.where(problem.partition_replicas[p] == r, t, before)
    is_primary = primary_of[p] == r
    f32 = lambda x: x.astype(jnp.float32)  # noqa: E731
    changes = jnp.zeros(CONSTRAINTS).at[CAPACITY].set(_excess(problem.capacity, loads, a, -load, t, load))
    if problem.features.thresholds:
        changes = changes.at[THRESHOLD].set(_excess(problem.threshold_load, loads, a, -load, t, load))
    changes = changes.at[PLACEMENT].set(-f32((a >= 0) & ~problem.class_allowed[cls, jnp.maximum(a, 0)]))
    if problem.features.affinity:
        changes = changes.at[AFFINITY].set(f32(affinity_violated(problem, node_of, primary_of, r, t, is_primary))
                                           - f32(affinity_violated(problem, node_of, primary_of, r, a, is_primary)))
    if problem.features.preferred:
        changes = changes.at[PREFERRED].set(
            f32(is_primary) * (f32(off_preferred(problem, s, t)) - f32(off_preferred(problem, s, a)))
            + f32(away_from_home(problem, r, t)) - f32(away_from_home(problem, r, a)))
    changes = changes.at[UNPLACED].set(-f32(a < 0) * (1.0 + f32(is_primary)))
    init_row = jnp.where(problem.partition_replicas[p] >= 0,
                         problem.initial_node[jnp.maximum(problem.partition_replicas[p], 0)], -1)
    moved_after = jnp.sum((after != init_row) & (init_row >= 0))
    returns = jnp.any(problem.history[r] == t) if problem.features.history else jnp.zeros((), bool)
    valid = ((problem.n_movable > 0) & (problem.class_node_count[cls] > 0) & ~jnp.any(before == t)
             & problem.node_open[t] & ~returns
             & (moved_after <= problem.partition_budget)
             & fits(problem, loads, t, load) & _enforced(problem, changes.at[CAPACITY].set(0.0)))
    init = problem.initial_node[r]
    moved = lambda n: ((n != init) & (init >= 0)).astype(jnp.float32)  # noqa: E731 (adds cost nothing)
    return Move(replica=r, target=t, partition=p, new_primary=primary_of[p], service=s,
                node_a=a, node_b=t, delta_a=-load, delta_b=load,
                cost_delta=problem.move_cost[r] * (moved(t) * problem.node_move_factor[t]
                                                   - moved(a) * problem.node_move_factor[jnp.maximum(a, 0)]),
                moves_delta=moved(t) - moved(a),
                penalty_delta=jnp.sum(problem.penalty * changes), valid=valid)


def propose_swap(problem: Problem, node_of, primary_of, loads, words) -> Move:
    """Swap the primary of a random partition with one of its placed secondaries (a promotion when
    the primary has no node)."""
    p = problem.swappable[draw(words[2], problem.n_swappable)]
    row = problem.partition_replicas[p]
    size = jnp.sum(row >= 0)
    old = primary_of[p]
    j = draw(words[3], size - 1)
    q = row[j + (j >= jnp.argmax(row == old))]
    a, b = node_of[old], node_of[q]
    delta_a = problem.load_secondary[old] - problem.load_primary[old]
    delta_b = problem.load_primary[q] - problem.load_secondary[q]
    s = problem.partition_service[p]
    f32 = lambda x: x.astype(jnp.float32)  # noqa: E731
    aff = lambda r, n, prim: f32(affinity_violated(problem, node_of, primary_of, r, n, prim))  # noqa: E731
    changes = jnp.zeros(CONSTRAINTS).at[CAPACITY].set(_excess(problem.capacity, loads, a, delta_a, b, delta_b))
    if problem.features.thresholds:
        changes = changes.at[THRESHOLD].set(_excess(problem.threshold_load, loads, a, delta_a, b, delta_b))
    if problem.features.affinity:
        changes = changes.at[AFFINITY].set(aff(old, a, False) + aff(q, b, True) - aff(old, a, True)
                                           - aff(q, b, False))
    if problem.features.preferred:
        changes = changes.at[PREFERRED].set(f32(off_preferred(problem, s, b)) - f32(off_preferred(problem, s, a)))
    changes = changes.at[UNPLACED].set(-f32(a < 0))   # a promotion gives the partition a placed primary
    valid = ((problem.n_swappable > 0) & (size >= 2) & (b >= 0) & problem.node_up[jnp.maximum(b, 0)]
             & fits(problem, loads, a, delta_a) & fits(problem, loads, b, delta_b)
             & _enforced(problem, changes.at[CAPACITY].set(0.0)))
    init = problem.initial_primary[p]
    swapped = (q != init).astype(jnp.float32) - (old != init).astype(jnp.float32)
    return Move(replica=q, target=b, partition=p, new_primary=q, service=s,
                node_a=a, node_b=b, delta_a=delta_a, delta_b=delta_b,
                cost_delta=problem.swap_cost * swapped, moves_delta=swapped,
                penalty_delta=jnp.sum(problem.penalty * changes), valid=valid)


def propose(problem: Problem, node_of, primary_of, loads, words, swap_probability: float) -> Move:
    """One random move from `DRAWS` random words: a swap with probability `swap_probability` (SF: 0.3),
    else a replica move."""
    can_move, can_swap = problem.n_movable > 0, problem.n_swappable > 0
    swap = jnp.where(can_move & can_swap, uniform(words[4]) < swap_probability, can_swap)
    move = propose_move(problem, node_of, primary_of, loads, words)
    other = propose_swap(problem, node_of, primary_of, loads, words)
    return jax.tree.map(lambda m, s: jnp.where(swap, s, m), move, other)


def _swap_slots(tries: int, swap_probability: float) -> tuple[np.ndarray, float]:
    """Which of slots 1..tries-1 are swaps (floor(tries p) of them, spread evenly), and the chance
    that slot 0 is a swap, so the expected share of swaps is exactly p."""
    swaps = min(int(tries * swap_probability), tries - 1)
    slot = np.arange(1, tries)
    is_swap = slot * swaps // max(tries - 1, 1) > (slot - 1) * swaps // max(tries - 1, 1)
    return is_swap, min(tries * swap_probability - swaps, 1.0)


def propose_batch(problem: Problem, node_of, primary_of, loads, words, swap_probability: float) -> Move:
    """One move per row of `words` [T, DRAWS], a `swap_probability` share of them swaps, stratified:
    the first is drawn as `propose` draws it (so one proposal is exactly `propose`), of the others a
    fixed, evenly spread floor(T p) are swaps and the rest replica moves. A proposal that may be
    either kind costs both; these cost one."""
    is_swap, first_swap = _swap_slots(words.shape[0], swap_probability)
    first = jax.tree.map(lambda x: x[None], propose(problem, node_of, primary_of, loads, words[0], first_swap))
    parts, slots = [first], [np.zeros(1, int)]
    for kind, mask in ((propose_move, ~is_swap), (propose_swap, is_swap)):
        if mask.any():
            rows = 1 + np.flatnonzero(mask)
            parts.append(jax.vmap(kind, in_axes=(None, None, None, None, 0))(problem, node_of, primary_of, loads,
                                                                              words[rows]))
            slots.append(rows)
    order = np.argsort(np.concatenate(slots))
    return jax.tree.map(lambda *xs: jnp.concatenate(xs)[order], *parts)
