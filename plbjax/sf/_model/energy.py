"""SF's balancing score and energy, in full and as the change one move makes.

Per metric, the deviation of node loads is SF's normalised standard deviation (std / mean, i.e. the
coefficient of variation) over the nodes the metric may use. AvgStdDev weighs the global domain
0.75 and the mean of per-service domains 0.25 (see `encoding`). The search minimises SF's energy
`(AvgStdDev + 0.001) * (±cost + replicas + MoveCostOffset)`, where cost counts the moves made so far
(its sign is the score's, so moves always cost), or with IgnoreCostInScoring AvgStdDev alone; the
settings are numbers the search reads at run time (`Problem.energy_terms`).

Sums of squares are kept around a fixed centre per metric (the initial mean) so float32 keeps its
precision when loads are large and their spread is small.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from plbjax.sf._encoding import COST, FDS, NODES, OFFSET, UDS, Problem
from plbjax.sf._model.constraints import penalty_of
from plbjax.sf._model.search_scope import Search, SearchScope

SMALL_VALUE = 0.001  # SF's Constants::SmallValue


def replica_loads(problem: Problem, primary_of: jax.Array) -> jax.Array:
    """[R, M] load of each replica in its current role."""
    is_primary = primary_of[problem.replica_partition] == jnp.arange(problem.replica_partition.shape[0])
    return jnp.where(is_primary[:, None], problem.load_primary, problem.load_secondary)


def node_loads(problem: Problem, node_of: jax.Array, primary_of: jax.Array) -> jax.Array:
    """[N, M] load per node."""
    loads = jnp.where((node_of >= 0)[:, None], replica_loads(problem, primary_of), 0.0)
    return jax.ops.segment_sum(loads, jnp.maximum(node_of, 0), num_segments=problem.node_up.shape[0])


def local_loads(problem: Problem, node_of: jax.Array, primary_of: jax.Array) -> jax.Array:
    """[S, N, Ms] load per service, node and local-domain slot."""
    n_services, n_slots = problem.service_metrics.shape
    n_nodes = problem.node_up.shape[0]
    slots = problem.service_metrics[problem.replica_service]  # [R, Ms]
    loads = jnp.take_along_axis(replica_loads(problem, primary_of), jnp.maximum(slots, 0), axis=1)
    loads = jnp.where((slots >= 0) & (node_of >= 0)[:, None], loads, 0.0)
    seg = problem.replica_service * n_nodes + jnp.maximum(node_of, 0)
    out = jax.ops.segment_sum(loads, seg, num_segments=n_services * n_nodes)
    return out.reshape(n_services, n_nodes, n_slots)


def local_masks(problem: Problem) -> jax.Array:
    """[S, N] nodes counted in each service's local deviation."""
    return problem.class_allowed[problem.service_class]


def moments(values: jax.Array, mask: jax.Array, centre: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sum and centred sum of squares over masked nodes; `values` [..., N, k], `mask` [..., N]."""
    m = mask[..., None]
    total = jnp.sum(jnp.where(m, values, 0.0), axis=-2)
    squares = jnp.sum(jnp.where(m, (values - centre[..., None, :]) ** 2, 0.0), axis=-2)
    return total, squares


def deviation(total: jax.Array, squares: jax.Array, count: jax.Array, centre: jax.Array) -> jax.Array:
    """Coefficient of variation from sum and centred sum of squares of `count` values; 0 if sum is 0."""
    n = jnp.maximum(count, 1.0)
    mean = total / n
    var = jnp.maximum(squares / n - (mean - centre) ** 2, 0.0)
    return jnp.where(mean > 0, jnp.sqrt(var) / jnp.where(mean > 0, mean, 1.0), 0.0)


def energy(avg_std_dev: jax.Array, cost: jax.Array, search: Search) -> jax.Array:
    """SF's energy: AvgStdDev traded against the cost of the moves made (plus the phase's own
    charge per move, `move_penalty`, 0 in balancing). A score below zero (defragmentation) counts the
    cost with the opposite sign, so a move never lowers the energy by itself (SF's
    Score::CalculateEnergy, Score.cpp:575). With IgnoreCostInScoring the cost drops out: SF's energy is
    then AvgStdDev, here (AvgStdDev + 0.001) x `energy_unit`, the same order of placements in the
    unit the violations count in."""
    problem = search.cluster
    score = avg_std_dev + SMALL_VALUE
    sign = jnp.where(score >= 0, 1.0, -1.0)
    unit = jnp.maximum(problem.replica_count + problem.energy_terms[OFFSET], 1.0)
    return score * (problem.energy_terms[COST] * sign * cost + unit) + search.scope.move_penalty * cost


def running_primary(scope: SearchScope, partition) -> jax.Array:
    """Whether `partition`'s primary was on a node at the search's origin: only then is a change of
    primary a movement (SF's adds choose freely which new replica is the primary)."""
    init = scope.origin_primary[partition]
    return (init >= 0) & (scope.origin_node[jnp.maximum(init, 0)] >= 0)


def _changed(scope: SearchScope, node_of: jax.Array, primary_of: jax.Array):
    moved = (node_of != scope.origin_node) & (scope.origin_node >= 0)
    swapped = (primary_of != scope.origin_primary) & running_primary(scope, jnp.arange(primary_of.shape[0]))
    return moved, swapped


def movement_cost(search: Search, node_of: jax.Array, primary_of: jax.Array) -> jax.Array:
    """Cost of the moves from the search's origin: moved replicas plus swapped primaries (adds are free)."""
    problem = search.cluster
    moved, swapped = _changed(search.scope, node_of, primary_of)
    factor = problem.node_move_factor[jnp.maximum(node_of, 0)]
    return jnp.sum(jnp.where(moved, problem.move_cost * factor, 0.0)) + problem.swap_cost * jnp.sum(swapped)


def movements(scope: SearchScope, node_of: jax.Array, primary_of: jax.Array) -> jax.Array:
    """Number of movements from the search's origin, as SF's throttles count them
    (`assessment.movements` on the host)."""
    moved, swapped = _changed(scope, node_of, primary_of)
    return (jnp.sum(moved) + jnp.sum(swapped)).astype(jnp.float32)


def exact_deviations(values: jax.Array, mask: jax.Array) -> jax.Array:
    """Deviation per column of `values` [..., N, k] over masked nodes `mask` [..., N] (two-pass)."""
    count = mask.sum(axis=-1).astype(values.dtype)[..., None]
    total, _ = moments(values, mask, jnp.zeros(values.shape[:-2] + values.shape[-1:]))
    centre = total / jnp.maximum(count, 1.0)
    _, squares = moments(values, mask, centre)
    return deviation(total, squares, count, centre)


def domain_loads(problem: Problem, loads: jax.Array, tree: jax.Array, domains: jax.Array) -> jax.Array:
    """[D, M] total load of the Up nodes in each leaf domain of `tree`, for domain ids 0..D-1 where
    `domains` [D] marks the leaves counted."""
    return jax.ops.segment_sum(
        jnp.where(problem.node_up[:, None], loads, 0.0), tree[:, -1], num_segments=domains.shape[0]
    )


def metric_scores(problem: Problem, node_dev: jax.Array, fd_dev: jax.Array, ud_dev: jax.Array) -> jax.Array:
    """[M] each metric's term in the global domain: its deviation, or for a defragmentation metric
    SF's packing score a x (1 - deviation) + b x deviation over fault domains + c x over upgrade
    domains (Score.cpp:427; a, b, c: DefragmentationNodes/Fds/UdsStdDevFactor)."""
    terms = problem.energy_terms
    packing = terms[NODES] * (1.0 - node_dev) + terms[FDS] * fd_dev + terms[UDS] * ud_dev
    return jnp.where(problem.metric_defrag, packing, node_dev)


def local_scores(problem: Problem, services: jax.Array, dev: jax.Array) -> jax.Array:
    """[..., Ms] local-domain terms: deviation, or a x (1 - deviation) for defragmentation metrics
    (a: DefragmentationNodesStdDevFactor; plbjax leaves a service domain's fault- and upgrade-domain
    terms out)."""
    slots = problem.service_metrics[services]
    defrag = (slots >= 0) & problem.metric_defrag[jnp.maximum(slots, 0)]
    return jnp.where(defrag, problem.energy_terms[NODES] * (1.0 - dev), dev)


def avg_std_dev(problem: Problem, node_of: jax.Array, primary_of: jax.Array) -> jax.Array:
    """SF's AvgStdDev of a placement, computed from scratch."""
    loads = node_loads(problem, node_of, primary_of)
    node_dev = exact_deviations(loads.T[..., None], problem.metric_nodes)[:, 0]
    m = loads.shape[1]
    fd = domain_loads(problem, loads, problem.fd_tree, problem.fd_leaf_up)
    ud = domain_loads(problem, loads, problem.ud_tree, problem.ud_up)
    fd_dev = exact_deviations(fd.T[..., None], jnp.broadcast_to(problem.fd_leaf_up, (m,) + fd.shape[:1]))[:, 0]
    ud_dev = exact_deviations(ud.T[..., None], jnp.broadcast_to(problem.ud_up, (m,) + ud.shape[:1]))[:, 0]
    l_dev = exact_deviations(local_loads(problem, node_of, primary_of), local_masks(problem))
    services = jnp.arange(problem.service_metrics.shape[0])
    return jnp.sum(problem.global_weight * metric_scores(problem, node_dev, fd_dev, ud_dev)) + jnp.sum(
        problem.local_weight * local_scores(problem, services, l_dev)
    )


def energy_of(search: Search, node_of: jax.Array, primary_of: jax.Array) -> jax.Array:
    """The search's energy of a placement from scratch (SF's energy + violation penalties): the
    reference for incremental updates."""
    problem = search.cluster
    return energy(
        avg_std_dev(problem, node_of, primary_of), movement_cost(search, node_of, primary_of), search
    ) + penalty_of(problem, node_of, primary_of, node_loads(problem, node_of, primary_of))
