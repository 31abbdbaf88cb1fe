"""Service Fabric's application groups per move: `checked`, a move's change of their measures and
whether it makes an enforced one worse (measured in full by `constraints.app_violations`).

SF's rules (LoadBalancing/): ScaleoutCountConstraint.cpp, an application's replicas occupy at most
MaximumNodes nodes; ApplicationCapacityConstraint.cpp, its load on a node stays within
MaximumCapacity and a new replica may not take its load past TotalApplicationCapacity
(ApplicationCapacityConstraint.cpp:94); ApplicationReservedLoads.cpp:121 with
ApplicationEntry.cpp:118, on every node the application occupies, what its load there lacks of
ReservationCapacity is reserved, and NodeCapacityConstraint.cpp:436 counts it in the node's load, so
no other service takes that room. plbjax measures a scaleout violation with placement's priority
and the others with capacity's (`_state.applications.FOLDED_PRIORITIES`).

A chain keeps `constraints.AppLoads` (each application's replicas and load per node); a move's change
of the measures reads only its nodes, and the kept moves' changes are scattered into it (`applied`).
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from plbjax.sf._encoding import CAPACITY, PLACEMENT, Problem
from plbjax.sf._model.constraints import AppLoads, app_state, relative_excess, reserve


class _Entries(eqx.Module):
    """A move's changes as entries: a node, an application (-1: none), the change of the
    application's replicas and load there, and of the node's load."""

    node: jax.Array  # [X]
    app: jax.Array  # [X]
    count: jax.Array  # [X]
    load: jax.Array  # [X, M]
    node_load: jax.Array  # [X, M]


def _entries(problem: Problem, node_of, move) -> _Entries:
    """The entries of `move` (a `moves.Move`): its node-load changes, what the applications of its
    two services bring to its nodes, and each moved replica leaving its node and reaching another."""
    app_of = problem.apps.replica_app  # pyright: ignore[reportOptionalMemberAccess]
    app = lambda r: jnp.where(r >= 0, app_of[jnp.maximum(r, 0)], -1)
    nodes, zero = move.nodes(), jnp.zeros_like(move.deltas())
    app1 = app(move.replica)
    app2 = jnp.where(move.service2 >= 0, app(move.replica2), -1)
    placed, targets = move.placed()
    replicas = jnp.concatenate([placed, move.replica2[None]])
    targets = jnp.concatenate([targets, move.target2[None]])
    sources = jnp.where(replicas >= 0, node_of[jnp.maximum(replicas, 0)], -1)
    moved = (replicas >= 0) & (sources != targets)
    m = zero.shape[-1]
    none = jnp.zeros((2 * replicas.shape[0], m))
    ones = jnp.ones_like(replicas)
    return _Entries(
        node=jnp.concatenate([nodes, nodes, nodes, jnp.where(moved, sources, -1), jnp.where(moved, targets, -1)]),
        app=jnp.concatenate(
            [
                jnp.full_like(nodes, -1),
                jnp.full_like(nodes, app1),
                jnp.full_like(nodes, app2),
                app(replicas),
                app(replicas),
            ]
        ),
        count=jnp.concatenate([jnp.zeros_like(nodes), jnp.zeros_like(nodes), jnp.zeros_like(nodes), -ones, ones]),
        load=jnp.concatenate([zero, move.locals(), move.loads2(), none]),
        node_load=jnp.concatenate([move.deltas(), zero, zero, none]),
    )


def _grouped(keys: jax.Array, counted: jax.Array, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(first, sums): whether each entry is the first counted one of its key, and the sum of
    `values` [X, ...] over the counted entries of its key."""
    same = (keys[:, None] == keys[None, :]) & counted[:, None] & counted[None, :]
    earlier = jnp.tril(jnp.ones_like(same), -1)
    first = counted & ~jnp.any(same & earlier, axis=1)
    mask = same.reshape(same.shape + (1,) * (values.ndim - 1))
    return first, jnp.sum(jnp.where(mask, values[None], 0), axis=1)


def checked(problem: Problem, enforce: jax.Array, apps_now: AppLoads | None, node_of, loads: jax.Array, move):
    """`move` with the application groups' rules: not allowed where it makes an enforced one worse
    (a scaleout count exceeded further; an application's load on a node, or in all, or a node's load
    with its reservations, grown past its capacity), and their measures' change in its penalty."""
    apps = problem.apps
    assert apps is not None and apps_now is not None
    e = _entries(problem, node_of, move)
    n_nodes = problem.node_up.shape[0]
    ours = (e.app >= 0) & (e.node >= 0)
    a, n = jnp.maximum(e.app, 0), jnp.maximum(e.node, 0)
    first, d_count = _grouped(a * n_nodes + n, ours, e.count)
    _, d_load = _grouped(a * n_nodes + n, ours, e.load)
    c0, l0 = apps_now.count[a, n], apps_now.load[a, n]
    c1, l1 = c0 + d_count, l0 + d_load
    cap = apps.node_capacity[a]
    node_grew = jnp.where(first[:, None], (l1 > l0 + 1e-6) & (l1 > cap), False)
    d_node = jnp.where(first, jnp.sum(relative_excess(l1, cap) - relative_excess(l0, cap), axis=1), 0.0)
    d_used = jnp.where(first, (c1 > 0).astype(jnp.int32) - (c0 > 0).astype(jnp.int32), 0)
    res = apps.reservation[a]
    d_res = jnp.where(first[:, None], reserve(res, c1[:, None], l1) - reserve(res, c0[:, None], l0), 0.0)
    # per application: its nodes occupied and its load in all
    per_app, apps_used = _grouped(a, ours, d_used)
    _, app_load = _grouped(a, ours, e.load)
    maximum, used = apps.max_nodes[a], apps_now.used[a]
    over = lambda u: jnp.maximum(u - maximum, 0)
    d_scaleout = jnp.where(per_app, over(used + apps_used) - over(used), 0)
    t0, tcap = apps_now.total[a], apps.total_capacity[a]
    t1 = t0 + app_load
    total_grew = jnp.where(per_app[:, None], (t1 > t0 + 1e-6) & (t1 > tcap), False)
    d_total = jnp.where(per_app, jnp.sum(relative_excess(t1, tcap) - relative_excess(t0, tcap), axis=1), 0.0)
    # per node: its load with the reservations held on it
    on_node = e.node >= 0
    node_first, d_level = _grouped(n, on_node, e.node_load)
    _, d_reserved = _grouped(n, on_node, d_res)
    level, reserved, capacity = loads[n], apps_now.reserved[n], problem.capacity[n]
    before, after = level + reserved, level + d_level + reserved + d_reserved
    held_grew = jnp.where(node_first[:, None], (after > before + 1e-6) & (after > capacity), False)
    excess = lambda load, extra: relative_excess(load + extra, capacity) - relative_excess(load, capacity)
    d_held = jnp.where(
        node_first, jnp.sum(excess(level + d_level, reserved + d_reserved) - excess(level, reserved), axis=1), 0.0
    )
    capacity_worse = jnp.any(node_grew) | jnp.any(total_grew) | jnp.any(held_grew)
    scaleout_worse = jnp.any(d_scaleout > 0)
    allowed = ~(enforce[CAPACITY] & capacity_worse) & ~(enforce[PLACEMENT] & scaleout_worse)
    penalty = problem.penalty[CAPACITY] * (jnp.sum(d_node) + jnp.sum(d_total) + jnp.sum(d_held))
    penalty += problem.penalty[PLACEMENT] * jnp.sum(d_scaleout).astype(jnp.float32)
    return dataclasses.replace(move, valid=move.valid & allowed, penalty_delta=move.penalty_delta + penalty)


def applied(problem: Problem, apps_now: AppLoads | None, node_of, moves, keep: jax.Array) -> AppLoads:
    """The applications' loads after the kept moves (`keep` [T]; `moves` batched over T, read from
    the placement `node_of` before them): their changes scattered, what follows derived again."""
    assert apps_now is not None
    e = jax.vmap(functools.partial(_entries, problem, node_of))(moves)
    n_apps, n_nodes = apps_now.count.shape
    counted = keep[:, None] & (e.app >= 0) & (e.node >= 0)
    at = jnp.where(counted, e.app * n_nodes + e.node, n_apps * n_nodes).reshape(-1)
    count = apps_now.count.reshape(-1).at[at].add(e.count.reshape(-1), mode="drop")
    load = apps_now.load.reshape(n_apps * n_nodes, -1).at[at].add(e.load.reshape(at.shape[0], -1), mode="drop")
    return app_state(problem, count.reshape(n_apps, n_nodes), load.reshape(apps_now.load.shape))
