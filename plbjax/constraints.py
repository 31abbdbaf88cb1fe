"""Hard constraints: replica exclusion, node capacity, fault- and upgrade-domain distribution.

A search step may never make a constraint worse than it is (SF's balancing keeps every constraint
whose priority is not -1). Domain distribution follows SF's rule: at every level of the domain tree,
the replicas of a partition under one parent differ by at most one between that parent's usable
child domains (each holds floor(n/d) or floor(n/d)+1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from plbjax.encoding import CAPACITY, FAULT_DOMAIN, PLACEMENT, UNPLACED, UPGRADE_DOMAIN, Problem


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
    """Adding `delta` [M] to `node` keeps every metric that grows within capacity (or capacity is
    not enforced, or there is no node)."""
    ok = (delta <= 0) | (loads[node] + delta <= problem.capacity[node])
    return ~problem.enforce[CAPACITY] | (node < 0) | jnp.all(ok)


def relative_excess(load: jax.Array, capacity: jax.Array) -> jax.Array:
    """How far loads exceed capacity, as a fraction of capacity (0 within capacity or unlimited)."""
    return jnp.where(jnp.isfinite(capacity), jnp.maximum(load - capacity, 0.0) / jnp.maximum(capacity, 1.0), 0.0)


def excess_change(problem: Problem, loads: jax.Array, node: jax.Array, delta: jax.Array) -> jax.Array:
    """Change of the node's summed relative excess when `delta` [M] is added (0 for no node)."""
    n = jnp.maximum(node, 0)
    cap = problem.capacity[n]
    change = relative_excess(loads[n] + delta, cap) - relative_excess(loads[n], cap)
    return jnp.where(node >= 0, jnp.sum(change), 0.0)


def misplaced(problem: Problem, node_of: jax.Array) -> jax.Array:
    """[R] replicas on a node their placement constraint (or the block list) does not allow."""
    cls = problem.service_class[problem.replica_service]
    allowed = problem.class_allowed[cls, jnp.maximum(node_of, 0)]
    return (node_of >= 0) & ~allowed


def unplaced(problem: Problem, node_of: jax.Array) -> jax.Array:
    """[R] real replicas without a node."""
    real = jnp.arange(node_of.shape[0]) < problem.replica_count
    return real & (node_of < 0)


def violations(problem: Problem, node_of: jax.Array, primary_of: jax.Array, loads: jax.Array) -> dict:
    """Full-state constraint report: per-node capacity excess, per-replica placement and unplaced
    flags, per-partition exclusion / fault-domain / upgrade-domain measures."""
    cls = problem.service_class[problem.partition_service]
    nodes = jax.vmap(partition_nodes, in_axes=(None, None, 0))(problem, node_of, jnp.arange(cls.shape[0]))
    k = nodes.shape[1]
    same = (nodes[:, :, None] == nodes[:, None, :]) & (nodes[:, :, None] >= 0)
    exclusion = (same & ~jnp.eye(k, dtype=bool)).sum(axis=(1, 2)) // 2
    per_partition = jax.vmap(domain_violation, in_axes=(None, None, 0, 0))
    return dict(capacity=relative_excess(loads, problem.capacity),
                placement=misplaced(problem, node_of), unplaced=unplaced(problem, node_of),
                exclusion=exclusion,
                fault_domain=per_partition(problem.fd_tree, problem.fd_children, nodes, cls),
                upgrade_domain=per_partition(problem.ud_tree, problem.ud_children, nodes, cls))


def measures(report: dict) -> jax.Array:
    """[5] total violation per constraint (CAPACITY, PLACEMENT, FAULT_DOMAIN, UPGRADE_DOMAIN, UNPLACED)."""
    out = [None] * 5
    out[CAPACITY] = jnp.sum(report["capacity"])
    out[PLACEMENT] = jnp.sum(report["placement"])
    out[FAULT_DOMAIN] = jnp.sum(report["fault_domain"])
    out[UPGRADE_DOMAIN] = jnp.sum(report["upgrade_domain"])
    out[UNPLACED] = jnp.sum(report["unplaced"])
    return jnp.stack([jnp.asarray(x, jnp.float32) for x in out])


def penalty_of(problem: Problem, node_of: jax.Array, primary_of: jax.Array, loads: jax.Array) -> jax.Array:
    """The energy the placement's violations add (weights by SF priority)."""
    return jnp.sum(problem.penalty * measures(violations(problem, node_of, primary_of, loads)))
