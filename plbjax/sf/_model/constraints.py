"""Hard constraints: replica exclusion, node capacity, fault- and upgrade-domain distribution, and
Service Fabric's application groups (scaleout count, application capacity, reservation: `AppLoads`,
`app_violations`; a move's change is `app_groups.checked`'s).

A search step may never make a constraint worse than it is (SF's balancing keeps every constraint
whose priority is not -1). Domain distribution follows SF's rule: at every level of the domain tree,
the replicas of a partition under one parent differ by at most one between that parent's usable
child domains (each holds floor(n/d) or floor(n/d)+1); or, under SF's quorum rule, no domain of the
first level with two or more holds more than a quorum's complement.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from plbjax.sf._encoding import CAPACITY, Problem
from plbjax.sf._model.search_scope import Search
from plbjax.sf._model.violation_record import AppViolations, Violations


def domain_violation(
    tree: jax.Array,
    children: jax.Array,
    usable: jax.Array,
    nodes: jax.Array,
    cls: jax.Array,
    nonpacking: jax.Array | bool = False,
    quorum: jax.Array | int = 0,
    quorum_level: jax.Array | int = 0,
) -> jax.Array:
    """How far one partition's replicas on `nodes` ([K], -1 = none) are from an even spread.

    Sum over levels and parent domains of max(0, max - min - 1), where min is 0 when the parent has
    usable child domains (for placement class `cls`) holding none of the replicas. With `nonpacking`
    (RequireDomainDistribution) the top level instead allows one replica per domain. At each level a
    replica counts unless its domain there holds no node of the class, `usable` [C, D] (SF's
    FaultDomainConstraint::HasDomainViolation leaves out only those: a replica out of place on a
    node of a usable domain counts in the spread). Under SF's quorum rule (`quorum` > 0) only level
    `quorum_level` counts, and there the replicas beyond `quorum` in each domain.
    """
    paths = tree[jnp.maximum(nodes, 0)]  # [K, L+1]
    k = nodes.shape[0]
    earlier = jnp.tril(jnp.ones((k, k), bool), -1)  # earlier[i, j]: j < i
    total = jnp.zeros((), jnp.int32)
    for level in range(1, tree.shape[1]):
        child, parent = paths[:, level], paths[:, level - 1]
        valid = (nodes >= 0) & usable[cls, child]
        pair = valid[:, None] & valid[None, :]
        same_child = (child[:, None] == child[None, :]) & pair
        same_parent = (parent[:, None] == parent[None, :]) & pair
        count = same_child.sum(axis=1)
        first_in_child = valid & ~jnp.any(same_child & earlier, axis=1)
        first_in_parent = valid & ~jnp.any(same_parent & earlier, axis=1)
        occupied = jnp.sum(same_parent & first_in_child[None, :], axis=1)
        most = jnp.max(jnp.where(same_parent, count[None, :], 0), axis=1)
        least = jnp.min(jnp.where(same_parent, count[None, :], k + 1), axis=1)
        least = jnp.where(occupied < children[cls, parent], 0, least)
        spread = jnp.sum(jnp.where(first_in_parent, jnp.maximum(most - least - 1, 0), 0))
        packed = jnp.sum(jnp.where(first_in_child, count - 1, 0))
        beyond = jnp.sum(jnp.where(first_in_child, jnp.maximum(count - quorum, 0), 0))
        even = jnp.where(nonpacking & (level == 1), packed, spread)
        total += jnp.where(quorum > 0, jnp.where(level == quorum_level, beyond, 0), even)
    return total


def partition_domain_violations(problem: Problem, nodes: jax.Array, service: jax.Array) -> jax.Array:
    """[2] (fault domain, upgrade domain) `domain_violation` of one partition of `service` whose
    replicas are on `nodes` [K]; a replica in a domain without a node the service may use is left
    out of the spread there (it breaks its placement constraint instead)."""
    cls = problem.service_class[service]
    return jnp.stack(
        [
            domain_violation(
                problem.fd_tree,
                problem.fd_children,
                problem.fd_usable,
                nodes,
                cls,
                problem.service_nonpacking[service],
                problem.domain_quorum[service, 0],
                problem.quorum_level[service, 0],
            ),
            domain_violation(
                problem.ud_tree,
                problem.ud_children,
                problem.ud_usable,
                nodes,
                cls,
                False,
                problem.domain_quorum[service, 1],
                problem.quorum_level[service, 1],
            ),
        ]
    )


def domain_violations_of(problem: Problem, node_of: jax.Array) -> jax.Array:
    """[P, 2] every partition's `partition_domain_violations`."""
    parts = jnp.arange(problem.partition_service.shape[0])
    nodes = jax.vmap(partition_nodes, in_axes=(None, None, 0))(problem, node_of, parts)
    return jax.vmap(partition_domain_violations, in_axes=(None, 0, 0))(problem, nodes, problem.partition_service)


def partition_nodes(problem: Problem, node_of: jax.Array, partition: jax.Array) -> jax.Array:
    """[K] nodes of one partition's replicas (-1 for padding or unplaced)."""
    row = problem.partition_replicas[partition]
    return jnp.where(row >= 0, node_of[jnp.maximum(row, 0)], -1)


class NodeLoads(eqx.Module):
    """The nodes' loads a move is checked against: `now` [N, M], and under PreventTransientOvercommit
    `held` [N, M] (`now` with the load still moving away, `held_loads`; else None)."""

    now: jax.Array
    held: jax.Array | None = None


def held_loads(search: Search, node_of, primary_of, loads: jax.Array) -> jax.Array:
    """[N, M] the nodes' loads as SF's PreventTransientOvercommit counts them: `loads` plus, on each
    replica's origin node, what it held there and no longer does (moved away, or a primary turned
    secondary) until its movement finishes (SF's NodeMovingInChanges: only the load moving in counts
    as changed, NodeCapacityConstraint.cpp:486)."""
    problem, scope = search.cluster, search.scope
    origin, rows = scope.origin_node, jnp.arange(node_of.shape[0])
    role_load = lambda primary: jnp.where(
        (primary[problem.replica_partition] == rows)[:, None], problem.load_primary, problem.load_secondary
    )
    kept = jnp.where((node_of == origin)[:, None], role_load(primary_of), 0.0)
    gone = jnp.where((origin >= 0)[:, None], jnp.maximum(role_load(scope.origin_primary) - kept, 0.0), 0.0)
    return loads.at[jnp.maximum(origin, 0)].add(gone)


def fits(search: Search, loads: NodeLoads, node: jax.Array, delta: jax.Array) -> jax.Array:
    """Adding `delta` [M] to `node` keeps every metric that grows within capacity (or the search does
    not enforce capacity, or there is no node); under PreventTransientOvercommit, with the load
    moving away from the node still on it."""
    level = loads.now if loads.held is None else loads.held
    ok = (delta <= 0) | (level[node] + delta <= search.cluster.capacity[node])
    return ~search.scope.enforce[CAPACITY] | (node < 0) | jnp.all(ok)


def relative_excess(load: jax.Array, capacity: jax.Array) -> jax.Array:
    """Capacity violation of a node and metric: 1 + the excess as a fraction of capacity when over
    (so fixing counts, and so does getting closer), 0 within capacity or when unlimited."""
    over = jnp.isfinite(capacity) & (load > capacity)
    return jnp.where(over, 1.0 + (load - capacity) / jnp.maximum(capacity, 1.0), 0.0)


def excess_change(limit: jax.Array, loads: jax.Array, node: jax.Array, delta: jax.Array) -> jax.Array:
    """Change of the node's summed relative excess over `limit` [N, M] (capacity, or the resource
    threshold) when `delta` [M] is added (0 for no node)."""
    n = jnp.maximum(node, 0)
    cap = limit[n]
    change = relative_excess(loads[n] + delta, cap) - relative_excess(loads[n], cap)
    return jnp.where(node >= 0, jnp.sum(change), 0.0)


def misplaced_on(problem: Problem, r, node) -> jax.Array:
    """Replica r on `node` is where its placement constraint (or the block list) does not allow it:
    not an allowed Up node, unless it is still on its initial node, deactivated with Pause or
    Restart, or blocking its service type (SF keeps such replicas where they are, in transition, and
    places none there: `Problem.node_kept`, `Problem.replica_stays`)."""
    n = jnp.maximum(node, 0)
    allowed = problem.class_allowed[problem.service_class[problem.replica_service[r]], n]
    stays = (problem.node_kept[n] | problem.replica_stays[r]) & (node == problem.initial_node[r])
    return (node >= 0) & ~allowed & ~stays


def misplaced(problem: Problem, node_of: jax.Array) -> jax.Array:
    """[R] replicas on a node their placement constraint (or the block list) does not allow, but those
    that stay where they are (`misplaced_on`)."""
    return misplaced_on(problem, jnp.arange(node_of.shape[0]), node_of)


class Change(NamedTuple):
    """A placement seen after a move, without copying it: replicas on other nodes ((replica, node)
    pairs; replica -1: none) and partitions with another primary ((partition, primary) pairs;
    partition -1: none)."""

    moved: tuple = ()
    primaries: tuple = ()


def _nodes_at(node_of: jax.Array, rows: jax.Array, change: Change) -> jax.Array:
    """[L] nodes of replica `rows` (-1 for padding or unplaced) after `change`."""
    nodes = jnp.where(rows >= 0, node_of[jnp.maximum(rows, 0)], -1)
    for r, t in change.moved:
        nodes = jnp.where((rows == r) & (r >= 0), t, nodes)
    return nodes


def _primary_at(primary_of: jax.Array, partition, change: Change) -> jax.Array:
    primary = primary_of[partition]
    for p, new in change.primaries:
        primary = jnp.where((partition == p) & (p >= 0), new, primary)
    return primary


def parent_partition(problem: Problem, partition) -> jax.Array:
    """The parent partition of `partition`'s service (-1: none)."""
    row = problem.partition_replicas[partition, 0]
    return jnp.where(row >= 0, problem.replica_parent[jnp.maximum(row, 0)], -1)


def _covering(problem: Problem, node_of, primary_of, child, change: Change) -> jax.Array:
    """Child partition `child` has more replicas than its parent and one beside every parent replica
    (of the parent's role, when aligned), so its others may be anywhere: SF's
    AllowHigherChildTargetReplicaCountForAffinity (AffinityConstraint::GetInvalidReplicas: no
    violation once the colocated parent replicas reach the parent's target or all its active ones;
    AffinitySubspace::GetTargetNodes). A partition's rows are its target (surplus replicas are
    dropped before the phases). With the setting false, never: every child replica stays beside a
    parent replica (AffinitySubspace::GetTargetNodes)."""
    if not problem.features.higher_child:
        return jnp.asarray(False)
    parent = parent_partition(problem, child)
    prows = problem.partition_replicas[jnp.maximum(parent, 0)]
    crows = problem.partition_replicas[child]
    pnodes, cnodes = _nodes_at(node_of, prows, change), _nodes_at(node_of, crows, change)
    pprimary = _primary_at(primary_of, jnp.maximum(parent, 0), change)
    cprimary = _primary_at(primary_of, child, change)
    aligned = problem.replica_aligned[jnp.maximum(crows[0], 0)] & (pprimary >= 0) & (cprimary >= 0)
    beside = (pnodes[:, None] == cnodes[None, :]) & (pnodes[:, None] >= 0)
    roles = ~aligned | ((prows == pprimary)[:, None] == (crows == cprimary)[None, :])
    colocated = jnp.sum(jnp.any(beside & roles, axis=1))
    target, active = jnp.sum(prows >= 0), jnp.sum(pnodes >= 0)
    return (parent >= 0) & (jnp.sum(crows >= 0) > target) & (colocated >= jnp.minimum(target, active))


def _stray(problem: Problem, node_of, primary_of, r, change: Change) -> jax.Array:
    """Replica r (after `change`) is a child replica away from its parent's replicas (SF's affinity:
    aligned puts primary with primary and secondaries with secondaries), its partition not
    `_covering`."""
    parent = jnp.maximum(problem.replica_parent[r], 0)
    rows = problem.partition_replicas[parent]
    node = _nodes_at(node_of, jnp.reshape(r, (1,)), change)[0]
    here = (rows >= 0) & (_nodes_at(node_of, rows, change) == node)
    is_primary = rows == _primary_at(primary_of, parent, change)
    primary = _primary_at(primary_of, problem.replica_partition[r], change) == r
    aligned_ok = jnp.any(here & jnp.where(primary, is_primary, ~is_primary))
    ok = jnp.where(problem.replica_aligned[r], aligned_ok, jnp.any(here))
    covering = _covering(problem, node_of, primary_of, problem.replica_partition[r], change)
    return (problem.replica_parent[r] >= 0) & (r >= 0) & (node >= 0) & ~ok & ~covering


def strays(problem: Problem, node_of, primary_of, rows: jax.Array, change: Change | None = None) -> jax.Array:
    """[L] which of replica `rows` (-1: none) are in affinity violation after `change` (`_stray`)."""
    change = Change() if change is None else change
    return jax.vmap(lambda r: _stray(problem, node_of, primary_of, r, change))(rows)


def affinity_violated(problem: Problem, node_of, primary_of, r, node, as_primary) -> jax.Array:
    """Replica r would be in affinity violation on `node` (as its partition's primary when
    `as_primary`, else in the role `primary_of` gives it)."""
    p = problem.replica_partition[r]
    primaries = ((jnp.where(as_primary, p, -1), r),)
    return _stray(problem, node_of, primary_of, r, Change(moved=((r, node),), primaries=primaries))


def off_preferred(problem: Problem, service, node) -> jax.Array:
    """A primary on `node` is outside its service's preferred primary domain."""
    return (node >= 0) & ~problem.primary_preferred[service, jnp.maximum(node, 0)]


def away_from_home(problem: Problem, r, node) -> jax.Array:
    """Replica r on `node` is not back on its upgrade snapshot node, though its domain is done, or
    (a new replica under PreferUpgradedUDs) not in an upgrade domain the upgrade is done with."""
    home = problem.replica_home[r]
    elsewhere = problem.replica_upgraded[r] & ~problem.node_upgraded[jnp.maximum(node, 0)]
    return (node >= 0) & (((home >= 0) & (node != home)) | elsewhere)


def unplaced(problem: Problem, node_of: jax.Array) -> jax.Array:
    """[R] real replicas without a node."""
    real = jnp.arange(node_of.shape[0]) < problem.replica_count
    return real & (node_of < 0)


class AppLoads(eqx.Module):
    """Each application's replicas `count` [A, N] and load `load` [A, N, M] per node, with what
    follows from them: nodes occupied `used` [A], load in all `total` [A, M], and the load each
    node holds in reserve for the applications on it, `reserved` [N, M]."""

    count: jax.Array
    load: jax.Array
    used: jax.Array
    total: jax.Array
    reserved: jax.Array


def app_loads(problem: Problem, node_of: jax.Array, primary_of: jax.Array) -> AppLoads:
    """The applications' loads of placement `node_of`, `primary_of`."""
    apps = problem.apps
    assert apps is not None
    n_apps, n_nodes = apps.max_nodes.shape[0], problem.node_up.shape[0]
    rows = jnp.arange(node_of.shape[0])
    primary = primary_of[problem.replica_partition] == rows
    loads = jnp.where(primary[:, None], problem.load_primary, problem.load_secondary)
    placed = (apps.replica_app >= 0) & (node_of >= 0)
    at = jnp.where(placed, apps.replica_app * n_nodes + jnp.maximum(node_of, 0), n_apps * n_nodes)
    count = jax.ops.segment_sum(placed.astype(jnp.int32), at, num_segments=n_apps * n_nodes + 1)[:-1]
    load = jax.ops.segment_sum(jnp.where(placed[:, None], loads, 0.0), at, num_segments=n_apps * n_nodes + 1)[:-1]
    return app_state(problem, count.reshape(n_apps, n_nodes), load.reshape(n_apps, n_nodes, -1))


def app_state(problem: Problem, count: jax.Array, load: jax.Array) -> AppLoads:
    """`AppLoads` of the applications' replicas `count` [A, N] and loads `load` [A, N, M] per node."""
    reservation = problem.apps.reservation  # pyright: ignore[reportOptionalMemberAccess]
    reserved = jnp.sum(reserve(reservation[:, None, :], count[..., None], load), axis=0)
    return AppLoads(count, load, jnp.sum(count > 0, axis=1), jnp.sum(load, axis=1), reserved)


def reserve(reservation, count, load):
    """What an application holds in reserve on a node: its reservation less its load there, where
    it has a replica (ApplicationEntry::GetReservationDiff)."""
    return jnp.where(count > 0, jnp.maximum(reservation - load, 0.0), 0.0)


def app_violations(
    problem: Problem, node_of: jax.Array, primary_of: jax.Array, loads: jax.Array
) -> AppViolations[jax.Array]:
    """The application groups' violations of a placement whose node loads are `loads` [N, M]."""
    apps = problem.apps
    assert apps is not None
    now = app_loads(problem, node_of, primary_of)
    scaleout = jnp.maximum(now.used - apps.max_nodes, 0)
    node = relative_excess(now.load, apps.node_capacity[:, None, :])
    total = relative_excess(now.total, apps.total_capacity)
    reserved = relative_excess(loads + now.reserved, problem.capacity) - relative_excess(loads, problem.capacity)
    app, on = jnp.maximum(apps.replica_app, 0), jnp.maximum(node_of, 0)
    ours = (apps.replica_app >= 0) & (node_of >= 0)
    over = (jnp.sum(node, axis=2)[app, on] > 0) | (jnp.sum(total, axis=1)[app] > 0)
    return AppViolations(scaleout, node, total, reserved, ours & (scaleout[app] > 0), ours & over)


def violations(problem: Problem, node_of: jax.Array, primary_of: jax.Array, loads: jax.Array) -> Violations[jax.Array]:
    """Full-state constraint report: per-node capacity violation, per-replica placement, affinity and
    unplaced flags, per-partition exclusion, fault-domain, upgrade-domain and preferred-primary."""
    n_parts = problem.partition_service.shape[0]
    nodes = jax.vmap(partition_nodes, in_axes=(None, None, 0))(problem, node_of, jnp.arange(n_parts))
    k = nodes.shape[1]
    same = (nodes[:, :, None] == nodes[:, None, :]) & (nodes[:, :, None] >= 0)
    exclusion = (same & ~jnp.eye(k, dtype=bool)).sum(axis=(1, 2)) // 2
    domains = domain_violations_of(problem, node_of)
    replicas = jnp.arange(node_of.shape[0])
    affinity = strays(problem, node_of, primary_of, replicas)
    primary_node = jnp.where(primary_of >= 0, node_of[jnp.maximum(primary_of, 0)], -1)
    preferred = off_preferred(problem, problem.partition_service, primary_node)
    headless = (primary_of >= 0) & (node_of[jnp.maximum(primary_of, 0)] < 0)
    return Violations(
        capacity=relative_excess(loads, problem.capacity),
        placement=misplaced(problem, node_of),
        fault_domain=domains[:, 0],
        upgrade_domain=domains[:, 1],
        affinity=affinity,
        preferred=preferred,
        threshold=relative_excess(loads, problem.threshold_load),
        unplaced=unplaced(problem, node_of),
        away=away_from_home(problem, replicas, node_of),
        headless=headless,
        exclusion=exclusion,
        apps=None if problem.apps is None else app_violations(problem, node_of, primary_of, loads),
    )


def measures(report: Violations[jax.Array]) -> jax.Array:
    """[CONSTRAINTS] total violation per constraint kind (a partition without a placed primary counts
    as one more unplaced replica, so primaries are placed first; PreferredLocation counts preferred
    primary domains and upgrade snapshot nodes)."""
    totals = [sum(map(jnp.sum, more), jnp.sum(own).astype(jnp.float32)) for own, *more in report.by_kind()]
    return jnp.stack(totals)


def penalty_of(problem: Problem, node_of: jax.Array, primary_of: jax.Array, loads: jax.Array) -> jax.Array:
    """The energy the placement's violations add (weights by SF priority)."""
    return jnp.sum(problem.penalty * measures(violations(problem, node_of, primary_of, loads)))
