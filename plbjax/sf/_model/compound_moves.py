"""SF's compound move (`Checker::MoveSolution`) where a partition fills its fault or upgrade domains
evenly: a random move, then a replica of the domain it crowded to the domain it left, for the fault
and then the upgrade domains, each leg checked as `moves` checks one replica's move."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from plbjax.anneal import draw
from plbjax.sf._encoding import CAPACITY, CONSTRAINTS, THRESHOLD, Problem
from plbjax.sf._model.constraints import NodeLoads, fits, partition_nodes, relative_excess
from plbjax.sf._model.moves import Move, earlier, enforced, leg, replica_load, running
from plbjax.sf._model.search_scope import Search


def _pick(mask, word) -> jax.Array:
    """The position of a uniformly drawn True of `mask` (0 when there is none)."""
    return jnp.argmax(mask & (jnp.cumsum(mask) - 1 == draw(word, jnp.sum(mask))))


def _in_cells(problem: Problem, first_cell, end_cell, word):
    """A random Up node of domain cells first_cell..end_cell-1 (`Problem.domain_nodes`), and whether
    there is one."""
    lo, hi = problem.domain_first[first_cell], problem.domain_first[end_cell]
    return problem.domain_nodes[lo + draw(word, hi - lo)], hi > lo


def _excess_legs(limit, loads, nodes, deltas) -> jax.Array:
    """Change of the summed relative excess over `limit` when each of `nodes` [L] (-1: none) in turn
    gains its `deltas` [L, M] (a node may come more than once)."""
    has, n = nodes >= 0, jnp.maximum(nodes, 0)
    level = loads[n] + running(nodes, has, deltas)
    change = relative_excess(level + deltas, limit[n]) - relative_excess(level, limit[n])
    return jnp.sum(jnp.where(has[:, None], change, 0.0))


def _fit_legs(search: Search, loads: NodeLoads, nodes, deltas) -> jax.Array:
    """Every node of `nodes` [L] stays within capacity once it has all its `deltas` [L, M] (with
    `loads.held`, the load leaving a node still on it: only what arrives counts)."""
    deltas = deltas if loads.held is None else jnp.maximum(deltas, 0.0)
    has = nodes >= 0
    last = has & ~jnp.any(earlier(nodes, has), axis=0)
    total = running(nodes, has, deltas) + deltas
    return jnp.all(jax.vmap(fits, in_axes=(None, None, 0, 0))(search, loads, jnp.where(last, nodes, -1), total))


def propose_compound(search: Search, node_of, primary_of, loads, words) -> Move:
    """SF's compound move, for partitions that fill their domains evenly (`Checker::MoveSolution`: a
    random move, then each replica in breach of a domain constraint moved to a random node that
    keeps the constraints checked before). A random movable replica moves to a random node of its
    service's; if that crowds its top fault domain, another of the partition's replicas there moves
    to a node of the fault domain the first one left; if the upgrade domains are then uneven, a
    replica in the crowded one moves to a node of the short one in its own fault domain. The whole
    move's domain check is `chain.finish`'s; partitions with affinity take no compound moves."""
    problem, scope = search.cluster, search.scope
    r = scope.movable[draw(words[0], scope.n_movable)]
    p, s = problem.replica_partition[r], problem.replica_service[r]
    cls = problem.service_class[s]
    t1 = problem.class_nodes[cls, draw(words[1], problem.class_node_count[cls])]
    rows, n0, src1 = problem.partition_replicas[p], partition_nodes(problem, node_of, p), node_of[r]
    top = min(1, problem.fd_tree.shape[1] - 1)
    fd = lambda n: problem.fd_tree[jnp.maximum(n, 0), top]
    ud = lambda n: problem.ud_tree[jnp.maximum(n, 0), 1]
    du = problem.ud_up.shape[0]
    n1 = jnp.where(rows == r, t1, n0)
    crowded = (rows >= 0) & (rows != r) & (n1 >= 0) & (fd(n1) == fd(t1)) & (fd(t1) != fd(src1))
    leg2, k2 = jnp.any(crowded), _pick(crowded, words[2] & 0xFFFF)
    r2, src2 = jnp.where(leg2, rows[k2], -1), n1[k2]
    t2, found2 = _in_cells(problem, fd(src1) * du, (fd(src1) + 1) * du, words[2] >> 16)
    n2 = jnp.where(leg2 & (rows == r2), t2, n1)
    gone = jnp.stack([ud(src1), jnp.where(leg2, ud(src2), -1)])
    came = jnp.stack([ud(t1), jnp.where(leg2, ud(t2), -1)])
    net = jax.vmap(lambda u: jnp.sum(came == u) - jnp.sum(gone == u))
    over, short = (net(came) > 0) & (came >= 0), (net(gone) < 0) & (gone >= 0)
    uneven = (rows >= 0) & (rows != r) & (rows != r2) & (n2 >= 0) & (ud(n2) == came[jnp.argmax(over)])
    uneven &= jnp.any(short)
    leg3, k3 = jnp.any(uneven), _pick(uneven, words[3] & 0xFFFF)
    r3, src3 = jnp.where(leg3, rows[k3], -1), n2[k3]
    cell = fd(src3) * du + gone[jnp.argmax(short)]
    t3, found3 = _in_cells(problem, cell, cell + 1, words[3] >> 16)

    legs = [(r, t1, n0, jnp.asarray(True)), (r2, t2, n1, leg2), (r3, t3, n2, leg3)]
    changes, cost, moved = jnp.zeros(CONSTRAINTS), jnp.zeros(()), jnp.zeros(())
    valid = (scope.n_movable > 0) & (problem.class_node_count[cls] > 0) & (src1 >= 0)
    valid &= ~leg2 | found2
    valid &= ~leg3 | found3
    for replica, dst, before, on in legs:
        c, cost_i, moved_i, ok = leg(search, node_of, primary_of, jnp.maximum(replica, 0), dst, before)
        changes, cost, moved = (
            changes + jnp.where(on, c, 0.0),
            cost + jnp.where(on, cost_i, 0.0),
            moved + jnp.where(on, moved_i, 0.0),
        )
        valid &= ~on | (ok & scope.may_move[jnp.maximum(replica, 0)])
    load = lambda replica, on: jnp.where(on, replica_load(problem, primary_of, jnp.maximum(replica, 0)), 0.0)
    l1, l2, l3 = load(r, True), load(r2, leg2), load(r3, leg3)
    off = lambda n, on: jnp.where(on, n, -1)
    nodes = jnp.stack([src1, t1, off(src2, leg2), off(t2, leg2), off(src3, leg3), off(t3, leg3)])
    deltas = jnp.stack([-l1, l1, -l2, l2, -l3, l3])
    changes = changes.at[CAPACITY].set(_excess_legs(problem.capacity, loads.now, nodes, deltas))
    if problem.features.thresholds:
        changes = changes.at[THRESHOLD].set(_excess_legs(problem.threshold_load, loads.now, nodes, deltas))
    valid &= _fit_legs(search, loads, nodes, deltas) & enforced(scope, changes)
    if problem.features.affinity:
        valid &= (problem.replica_parent[r] < 0) & ~jnp.any(problem.children_of[p] >= 0)
    none, zero = jnp.asarray(-1, jnp.int32), jnp.zeros_like(l1)
    return Move(
        replica=r,
        target=t1,
        replica2=none,
        target2=none,
        partition=p,
        new_primary=primary_of[p],
        partition2=none,
        service=s,
        service2=none,
        node_a=src1,
        node_b=t1,
        delta_a=-l1,
        delta_b=l1,
        local_a=-l1,
        local_b=l1,
        load2=zero,
        load2_b=zero,
        new_primary2=none,
        cost_delta=cost,
        moves_delta=moved,
        penalty_delta=jnp.sum(problem.penalty * changes),
        valid=valid,
        repaired=jnp.stack([r2, r3]),
        repaired_to=jnp.stack([off(t2, leg2), off(t3, leg3)]),
        leg_nodes=nodes[2:],
        leg_deltas=deltas[2:],
    )
