"""Hard constraints: replica exclusion, node capacity, fault- and upgrade-domain distribution.

A search step may never make a constraint worse than it is (SF's balancing keeps every constraint
whose priority is not -1). Domain distribution follows SF's rule: at every level of the domain tree,
the replicas of a partition under one parent differ by at most one between that parent's usable
child domains (each holds floor(n/d) or floor(n/d)+1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from plbjax.encoding import Problem


def domain_violation(tree: jax.Array, children: jax.Array, nodes: jax.Array, cls: jax.Array) -> jax.Array:
    """How far one partition's replicas on `nodes` ([K], -1 = none) are from an even spread.

    Sum over levels and parent domains of max(0, max - min - 1), where min is 0 when the parent has
    usable child domains (for placement class `cls`) holding none of the replicas.
    """
    valid = nodes >= 0
    paths = tree[jnp.maximum(nodes, 0)]                         # [K, L+1]
    k = nodes.shape[0]
    earlier = jnp.tril(jnp.ones((k, k), bool), -1)              # earlier[i, j]: j < i
    pair = valid[:, None] & valid[None, :]
    total = jnp.zeros((), jnp.int32)
    for level in range(1, tree.shape[1]):
        child, parent = paths[:, level], paths[:, level - 1]
        same_child = (child[:, None] == child[None, :]) & pair
        same_parent = (parent[:, None] == parent[None, :]) & pair
        count = same_child.sum(axis=1)
        first_in_child = valid & ~jnp.any(same_child & earlier, axis=1)
        first_in_parent = valid & ~jnp.any(same_parent & earlier, axis=1)
        occupied = jnp.sum(same_parent & first_in_child[None, :], axis=1)
        most = jnp.max(jnp.where(same_parent, count[None, :], 0), axis=1)
        least = jnp.min(jnp.where(same_parent, count[None, :], k + 1), axis=1)
        least = jnp.where(occupied < children[cls, parent], 0, least)
        total += jnp.sum(jnp.where(first_in_parent, jnp.maximum(most - least - 1, 0), 0))
    return total


def partition_nodes(problem: Problem, node_of: jax.Array, partition: jax.Array) -> jax.Array:
    """[K] nodes of one partition's replicas (-1 for padding or unplaced)."""
    row = problem.partition_replicas[partition]
    return jnp.where(row >= 0, node_of[jnp.maximum(row, 0)], -1)


def fits(problem: Problem, loads: jax.Array, node: jax.Array, delta: jax.Array) -> jax.Array:
    """Adding `delta` [M] to `node` keeps every metric that grows within capacity."""
    ok = (delta <= 0) | (loads[node] + delta <= problem.capacity[node])
    return ~problem.check_capacity | jnp.all(ok)


def violations(problem: Problem, node_of: jax.Array, primary_of: jax.Array, loads: jax.Array) -> dict:
    """Full-state constraint report: per-partition exclusion/FD/UD measures, per-node capacity excess."""
    cls = problem.service_class[problem.partition_service]
    nodes = jax.vmap(partition_nodes, in_axes=(None, None, 0))(problem, node_of,
                                                               jnp.arange(cls.shape[0]))
    k = nodes.shape[1]
    same = (nodes[:, :, None] == nodes[:, None, :]) & (nodes[:, :, None] >= 0)
    exclusion = (same & ~jnp.eye(k, dtype=bool)).sum(axis=(1, 2)) // 2
    fd = jax.vmap(domain_violation, in_axes=(None, None, 0, 0))(problem.fd_tree, problem.fd_children,
                                                                nodes, cls)
    ud = jax.vmap(domain_violation, in_axes=(None, None, 0, 0))(problem.ud_tree, problem.ud_children,
                                                                nodes, cls)
    excess = jnp.maximum(loads - problem.capacity, 0.0)
    return dict(exclusion=exclusion, fault_domain=fd, upgrade_domain=ud, capacity=excess)
