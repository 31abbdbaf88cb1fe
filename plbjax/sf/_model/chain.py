"""Service Fabric's search: the state of one chain and its energy, updated by moves.

A state holds a placement and the running statistics SF's energy needs (sums and centred sums of
squares of loads per metric over nodes, domains and each service's nodes, and each partition's
domain violations), so a move costs O(M + K^2) whatever the cluster size: one proposal (`moves`),
its energy change from its node-load changes (two, or six for a compound move; `propose`; the K^2
domain check only for moves that may be accepted, `finish`), and an in-place update. Moves on
disjoint nodes and partitions (`footprint`) can be applied together: their changes of the sums add
up, and the deviations are recomputed from the new sums, so a parallel step equals its moves
applied one by one. `refresh` recomputes the statistics exactly (no float drift).
`model(swap_probability)` is what the annealer runs, on a `Search` (the cluster and one phase's
scope), what `anneal` calls the problem.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.anneal import Model
from plbjax.sf._encoding import FAULT_DOMAIN, UPGRADE_DOMAIN, Problem
from plbjax.sf._model import app_groups
from plbjax.sf._model import energy as E
from plbjax.sf._model.constraints import (
    AppLoads,
    NodeLoads,
    app_loads,
    domain_violations_of,
    held_loads,
    partition_domain_violations,
    penalty_of,
)
from plbjax.sf._model.moves import DRAWS, Move, partition_after, running
from plbjax.sf._model.proposals import propose_batch, shares
from plbjax.sf._model.search_scope import Search, SearchScope

DOMAINS = np.array([FAULT_DOMAIN, UPGRADE_DOMAIN])  # the constraints `finish` checks


class SearchState(eqx.Module):
    node_of: jax.Array  # [R]
    primary_of: jax.Array  # [P]
    loads: jax.Array  # [N, M]
    local: jax.Array  # [S, N, Ms]
    g_total: jax.Array  # [M] over each metric's nodes
    g_sq: jax.Array  # [M] centred on g_centre
    g_centre: jax.Array
    l_total: jax.Array  # [S, Ms]
    l_sq: jax.Array
    l_centre: jax.Array
    fd_loads: jax.Array  # [Df, M] per leaf fault domain (defragmentation's spread term)
    fd_total: jax.Array  # [M] over leaf fault domains
    fd_sq: jax.Array
    fd_centre: jax.Array
    ud_loads: jax.Array  # [Du, M] per upgrade domain
    ud_total: jax.Array
    ud_sq: jax.Array
    ud_centre: jax.Array
    local_score: jax.Array  # sum of local_weight * local deviation
    cost: jax.Array  # movement cost from the search's origin
    moves: jax.Array  # movements from the search's origin (moved replicas, swaps)
    penalty: jax.Array  # energy of the constraint violations
    domain_violations: jax.Array  # [P, 2] each partition's fault- and upgrade-domain violation measure
    energy: jax.Array  # SF's energy + penalty
    held: jax.Array | None = None  # [N, M] loads with what moves away, under PreventTransientOvercommit
    apps: AppLoads | None = None  # the application groups' loads (`Features.applications`)


def _stats(values: jax.Array, mask: jax.Array, count: jax.Array):
    """Sum, centre (the mean) and centred sum of squares of `values` [..., N, k] over `mask` [..., N]."""
    total, _ = E.moments(values, mask, jnp.zeros(values.shape[:-2] + values.shape[-1:]))
    centre = total / jnp.maximum(count, 1.0)
    _, sq = E.moments(values, mask, centre)
    return total, centre, sq


def _fresh(search: Search, node_of, primary_of, penalty=None, domain_violations=None) -> SearchState:
    """A state whose statistics are computed exactly from its placement (the violation penalty and
    the partitions' domain violations too, unless given: they are sums of exact per-move changes,
    and recomputing them costs a full check)."""
    problem = search.cluster
    loads = E.node_loads(problem, node_of, primary_of)
    local = E.local_loads(problem, node_of, primary_of)
    m = loads.shape[1]
    g_total, g_centre, g_sq = _stats(loads.T[..., None], problem.metric_nodes, problem.metric_node_count[:, None])
    fd_loads = E.domain_loads(problem, loads, problem.fd_tree, problem.fd_leaf_up)
    ud_loads = E.domain_loads(problem, loads, problem.ud_tree, problem.ud_up)
    fd_total, fd_centre, fd_sq = _stats(
        fd_loads.T[..., None],
        jnp.broadcast_to(problem.fd_leaf_up, (m,) + fd_loads.shape[:1]),
        jnp.sum(problem.fd_leaf_up).astype(jnp.float32),
    )
    ud_total, ud_centre, ud_sq = _stats(
        ud_loads.T[..., None],
        jnp.broadcast_to(problem.ud_up, (m,) + ud_loads.shape[:1]),
        jnp.sum(problem.ud_up).astype(jnp.float32),
    )
    l_count = problem.class_node_count[problem.service_class].astype(jnp.float32)[:, None]
    l_total, l_centre, l_sq = _stats(local, E.local_masks(problem), l_count)
    services = jnp.arange(problem.service_metrics.shape[0])
    local_score = jnp.sum(
        problem.local_weight * E.local_scores(problem, services, E.deviation(l_total, l_sq, l_count, l_centre))
    )
    state = SearchState(
        node_of=node_of,
        primary_of=primary_of,
        loads=loads,
        local=local,
        g_total=g_total[:, 0],
        g_sq=g_sq[:, 0],
        g_centre=g_centre[:, 0],
        l_total=l_total,
        l_sq=l_sq,
        l_centre=l_centre,
        fd_loads=fd_loads,
        fd_total=fd_total[:, 0],
        fd_sq=fd_sq[:, 0],
        fd_centre=fd_centre[:, 0],
        ud_loads=ud_loads,
        ud_total=ud_total[:, 0],
        ud_sq=ud_sq[:, 0],
        ud_centre=ud_centre[:, 0],
        local_score=local_score,
        cost=jnp.zeros(()),
        moves=jnp.zeros(()),
        penalty=jnp.zeros(()),
        domain_violations=domain_violations,  # pyright: ignore[reportArgumentType]
        energy=jnp.zeros(()),
        held=held_loads(search, node_of, primary_of, loads) if search.scope.transient else None,
        apps=app_loads(problem, node_of, primary_of) if problem.features.applications else None,
    )
    cost = E.movement_cost(search, node_of, primary_of)
    if penalty is None:
        penalty = penalty_of(problem, node_of, primary_of, loads)
    if domain_violations is None:
        domain_violations = domain_violations_of(problem, node_of)
    state = dataclasses.replace(
        state,
        cost=cost,
        moves=E.movements(search.scope, node_of, primary_of),
        penalty=penalty,
        domain_violations=domain_violations,
    )
    return dataclasses.replace(state, energy=_energy(search, state))


def _global_score(problem: Problem, g_total, g_sq, fd_total, fd_sq, ud_total, ud_sq, state: SearchState) -> jax.Array:
    """The global domain's part of AvgStdDev from running sums (centres from `state`)."""
    node_dev = E.deviation(g_total, g_sq, problem.metric_node_count, state.g_centre)
    if not problem.features.defrag:
        return jnp.sum(problem.global_weight * node_dev)
    fd_count = jnp.sum(problem.fd_leaf_up).astype(jnp.float32)
    ud_count = jnp.sum(problem.ud_up).astype(jnp.float32)
    scores = E.metric_scores(
        problem,
        node_dev,
        E.deviation(fd_total, fd_sq, fd_count, state.fd_centre),
        E.deviation(ud_total, ud_sq, ud_count, state.ud_centre),
    )
    return jnp.sum(problem.global_weight * scores)


def start(search: Search) -> SearchState:
    """The state at the search's start (`Scope.start`, by default its origin)."""
    return _fresh(search, search.scope.start_node, search.scope.start_primary)


def refresh(search: Search, state: SearchState) -> SearchState:
    """The statistics recomputed exactly (the violation penalty and domain violations are kept)."""
    return _fresh(search, state.node_of, state.primary_of, state.penalty, state.domain_violations)


def _node_change(centre, counted, level, delta):
    """Changes of the sum and the centred sum of squares when one (counted) node goes from `level` to
    `level + delta`; callers pass counted = False for node -1 (no node)."""
    d = jnp.where(counted, delta, 0.0)
    return d, d * (2.0 * (level - centre) + d)


class Changes(eqx.Module):
    """What one move adds to a state's running statistics (its `apply` sums them over kept moves)."""

    g_total: jax.Array  # [M]
    g_sq: jax.Array
    fd_total: jax.Array
    fd_sq: jax.Array
    ud_total: jax.Array
    ud_sq: jax.Array
    l_total: jax.Array  # [Ms] of the move's service
    l_sq: jax.Array
    local: jax.Array  # [L, Ms] the service's local load changes on the move's nodes (`Move.nodes`)
    l2_total: jax.Array  # the same for an exchange's second service (zero if none)
    l2_sq: jax.Array
    local2: jax.Array
    local_score: jax.Array
    cost: jax.Array
    moves: jax.Array
    penalty: jax.Array
    domains: jax.Array  # [2] the partition's domain violations after the move (`finish`)
    domains2: jax.Array  # [2] the same for an exchange's second partition (zero if none)


_SUMMED = ("g_total", "g_sq", "fd_total", "fd_sq", "ud_total", "ud_sq", "local_score", "cost", "moves", "penalty")


def _plus(search: Search, state: SearchState, changes: Changes) -> SearchState:
    """`state`'s running statistics plus `changes` (summed over moves), and the energy they give."""
    state = dataclasses.replace(state, **{k: getattr(state, k) + getattr(changes, k) for k in _SUMMED})
    return dataclasses.replace(state, energy=_energy(search, state))


def _energy(search: Search, state: SearchState) -> jax.Array:
    """The search's energy from the running statistics."""
    problem = search.cluster
    score = (
        _global_score(
            problem, state.g_total, state.g_sq, state.fd_total, state.fd_sq, state.ud_total, state.ud_sq, state
        )
        + state.local_score
    )
    return E.energy(score, state.cost, search) + search.scope.violation_weight * state.penalty


def _local_score(problem: Problem, state: SearchState, s, total, sq) -> jax.Array:
    """Service s's weighted local-domain term from its running sums `total`, `sq` [Ms]."""
    count = problem.class_node_count[problem.service_class[s]].astype(jnp.float32)
    dev = E.deviation(total, sq, count, state.l_centre[s])
    return jnp.sum(problem.local_weight[s] * E.local_scores(problem, s, dev))


def _changes(centre, counted, level, delta):
    """Changes of the sum and the centred sum of squares when entries [L] (counted: not node -1) go
    from `level` to `level + delta` [L, k], entry after entry (`level` holds what earlier entries
    of the same node or domain added: `moves.running`)."""
    total, sq = _node_change(centre, counted, level, delta)
    return jnp.sum(total, axis=0), jnp.sum(sq, axis=0)


def evaluate(search: Search, state: SearchState, move: Move, paired: bool = True):
    """Energy after `move`, with the changes it makes to the statistics (incremental, O(L (M + Ms))
    for its L node changes); without `paired` (static) the move changes one service's loads only."""
    problem = search.cluster
    nodes, deltas = move.nodes(), move.deltas()
    has = nodes >= 0  # a replica being placed has no source node
    n = jnp.maximum(nodes, 0)
    level = state.loads[n] + running(nodes, has, deltas)
    g_total, g_sq = _changes(state.g_centre, has[:, None] & problem.metric_nodes[:, n].T, level, deltas)

    def domains(tree, loads, centre):
        """The nodes' changes on their leaf domains (which may be shared)."""
        leaf, up = tree[n, -1], has & problem.node_up[n]
        return _changes(centre, up[:, None], loads[leaf] + running(leaf, up, deltas), deltas)

    zero = jnp.zeros_like(state.fd_total)
    fd_total, fd_sq, ud_total, ud_sq = zero, zero, zero, zero
    if problem.features.defrag:  # per-domain spread only enters defragmentation metrics' scores
        fd_total, fd_sq = domains(problem.fd_tree, state.fd_loads, state.fd_centre)
        ud_total, ud_sq = domains(problem.ud_tree, state.ud_loads, state.ud_centre)

    def local(s, on):
        """Service s's local loads on the nodes change by `on` [L, M]: the changes [L, Ms] of its
        nodes' loads, of its running sums [Ms], and of its weighted local score."""
        slots = problem.service_metrics[s]
        cls = problem.service_class[s]
        local = jnp.where((slots >= 0)[None, :] & has[:, None], on[:, jnp.maximum(slots, 0)], 0.0)
        level = state.local[s, n] + running(nodes, has, local)
        l_total, l_sq = _changes(state.l_centre[s], problem.class_allowed[cls, n][:, None], level, local)
        score = _local_score(problem, state, s, state.l_total[s] + l_total, state.l_sq[s] + l_sq) - _local_score(
            problem, state, s, state.l_total[s], state.l_sq[s]
        )
        return local, l_total, l_sq, score

    local_, l_total, l_sq, local_score = local(move.service, move.locals())
    if paired:
        local2, l2_total, l2_sq, local2_score = jax.tree.map(
            lambda x: jnp.where(move.service2 >= 0, x, 0.0),
            local(jnp.maximum(move.service2, 0), move.loads2()),
        )
    else:
        local2, l2_total, l2_sq = jnp.zeros_like(local_), jnp.zeros_like(l_total), jnp.zeros_like(l_sq)
        local2_score = jnp.zeros_like(local_score)
    p2 = jnp.maximum(move.partition2, 0)
    changes = Changes(
        g_total=g_total,
        g_sq=g_sq,
        fd_total=fd_total,
        fd_sq=fd_sq,
        ud_total=ud_total,
        ud_sq=ud_sq,
        l_total=l_total,
        l_sq=l_sq,
        local=local_,
        l2_total=l2_total,
        l2_sq=l2_sq,
        local2=local2,
        local_score=local_score + local2_score,
        cost=move.cost_delta,
        moves=move.moves_delta,
        penalty=move.penalty_delta,
        domains=state.domain_violations[move.partition],
        domains2=jnp.where(move.partition2 >= 0, state.domain_violations[p2], 0),
    )
    new_energy = _plus(search, state, changes).energy
    return new_energy, changes


def _first_of(ids: jax.Array, size: int) -> jax.Array:
    """[n] whether each of `ids` [n] (in 0..size, `size` meaning none) is the first occurrence of its id."""
    rank = jnp.arange(ids.shape[0])
    return (ids < size) & (jnp.full(size + 1, ids.shape[0]).at[ids].min(rank)[ids] == rank)


def _leaf_domains(problem: Problem, nodes, deltas, n_nodes: int, loads, tree, centre):
    """Leaf-domain loads after the kept moves (`nodes` [X]: their nodes, out of range when not kept;
    `deltas` [X, M]), and the change of their sum and centred sum of squares (moves on distinct nodes
    may share a leaf domain: squares from the new loads)."""
    size = loads.shape[0]
    node = jnp.minimum(nodes, n_nodes - 1)
    leaves = jnp.where((nodes < n_nodes) & problem.node_up[node], tree[node, -1], size)
    new = loads.at[leaves].add(deltas, mode="drop")
    row = jnp.minimum(leaves, size - 1)
    first = _first_of(leaves, size)[:, None]
    d_total = jnp.sum(jnp.where(first, new[row] - loads[row], 0.0), axis=0)
    d_sq = jnp.sum(jnp.where(first, (new[row] - centre) ** 2 - (loads[row] - centre) ** 2, 0.0), axis=0)
    return new, d_total, d_sq


def _flat(x: jax.Array) -> jax.Array:
    """[T, L, ...] entries of a step's moves as one list, entry by entry ([L, T]: every move's first
    node, then every move's second, ...)."""
    return jnp.swapaxes(x, 0, 1).reshape((-1,) + x.shape[2:])


def apply(search: Search, state: SearchState, moves: Move, keep: jax.Array, energies, changes: Changes) -> SearchState:
    """The state after every kept move (`keep` [T]; moves and changes batched over T). Kept moves
    touch disjoint nodes and partitions (see `footprint`), so their writes commute and their changes
    of the running sums add up; the scores that are not sums (deviations) are recomputed from the new
    sums, once per touched service. The result is the state the moves leave applied one by one."""
    cluster = search.cluster
    total = lambda x: jnp.sum(jnp.where(keep.reshape((-1,) + (1,) * (x.ndim - 1)), x, 0.0), axis=0)
    n_nodes, n_parts, n_services = state.loads.shape[0], state.primary_of.shape[0], state.l_total.shape[0]
    nodes = moves.nodes()
    nodes = _flat(jnp.where(keep[:, None] & (nodes >= 0), nodes, n_nodes))  # out of range: dropped
    deltas = _flat(moves.deltas())
    width = nodes.shape[0] // keep.shape[0]
    s = jnp.where(keep, moves.service, n_services)
    s2 = jnp.where(keep & (moves.service2 >= 0), moves.service2, n_services)

    local_rows = state.local.reshape(n_services * n_nodes, -1)
    row = lambda s, node: jnp.where(
        (node < n_nodes) & (s < n_services),
        s * n_nodes + node,
        n_services * n_nodes,
    )
    # One scatter per array (two chained ones made XLA on a GPU copy the whole array twice a step).
    local = local_rows.at[jnp.concatenate([row(jnp.tile(s, width), nodes), row(jnp.tile(s2, width), nodes)])].add(
        jnp.concatenate([_flat(changes.local), _flat(changes.local2)]), mode="drop"
    )
    both = jnp.concatenate([s, s2])
    l_total = state.l_total.at[both].add(jnp.concatenate([changes.l_total, changes.l2_total]), mode="drop")
    l_sq = state.l_sq.at[both].add(jnp.concatenate([changes.l_sq, changes.l2_sq]), mode="drop")
    first = _first_of(both, n_services)  # each touched service's score once
    service = jnp.minimum(both, n_services - 1)
    score = jax.vmap(_local_score, in_axes=(None, None, 0, 0, 0))
    local_score = jnp.sum(
        jnp.where(
            first,
            score(cluster, state, service, l_total[service], l_sq[service])
            - score(cluster, state, service, state.l_total[service], state.l_sq[service]),
            0.0,
        )
    )
    summed = dataclasses.replace(jax.tree.map(total, changes), local_score=local_score, domains=None, domains2=None)
    fd_loads, ud_loads = state.fd_loads, state.ud_loads
    if cluster.features.defrag:
        fd_loads, fd_total, fd_sq = _leaf_domains(
            cluster, nodes, deltas, n_nodes, fd_loads, cluster.fd_tree, state.fd_centre
        )
        ud_loads, ud_total, ud_sq = _leaf_domains(
            cluster, nodes, deltas, n_nodes, ud_loads, cluster.ud_tree, state.ud_centre
        )
        summed = dataclasses.replace(summed, fd_total=fd_total, fd_sq=fd_sq, ud_total=ud_total, ud_sq=ud_sq)
    parts = jnp.where(keep, moves.partition, n_parts)
    parts2 = jnp.where(keep & (moves.partition2 >= 0), moves.partition2, n_parts)
    n_replicas = state.node_of.shape[0]
    placed, targets = moves.placed()
    replicas = jnp.concatenate(
        [
            _flat(jnp.where(keep[:, None] & (placed >= 0), placed, n_replicas)),
            jnp.where(keep & (moves.replica2 >= 0), moves.replica2, n_replicas),
        ]
    )
    plus = _plus(search, state, summed)  # the order of the writes below is the program's: keep it
    domain_violations = state.domain_violations.at[jnp.concatenate([parts, parts2])].set(
        jnp.concatenate([changes.domains, changes.domains2]), mode="drop"
    )
    node_of = state.node_of.at[replicas].set(jnp.concatenate([_flat(targets), moves.target2]), mode="drop")
    primary_of = state.primary_of.at[
        jnp.concatenate([parts, jnp.where(keep & (moves.new_primary2 >= 0), moves.partition2, n_parts)])
    ].set(jnp.concatenate([moves.new_primary, moves.new_primary2]), mode="drop")
    loads = state.loads.at[nodes].add(deltas, mode="drop")
    return dataclasses.replace(
        plus,
        fd_loads=fd_loads,
        ud_loads=ud_loads,
        domain_violations=domain_violations,
        node_of=node_of,
        primary_of=primary_of,
        loads=loads,
        local=local.reshape(state.local.shape),
        l_total=l_total,
        l_sq=l_sq,
        held=held_loads(search, node_of, primary_of, loads) if search.scope.transient else None,
        apps=app_groups.applied(cluster, state.apps, state.node_of, moves, keep)
        if cluster.features.applications
        else None,
    )


def apply_one(search: Search, state: SearchState, move: Move, accept: jax.Array, new_energy, changes) -> SearchState:
    """The state after `move` if `accept`, else unchanged."""
    batch = lambda x: jnp.asarray(x)[None]
    return apply(
        search, state, jax.tree.map(batch, move), batch(accept), batch(new_energy), jax.tree.map(batch, changes)
    )


def _allowed(scope: SearchScope, state: SearchState, move: Move) -> jax.Array:
    """The move's constraints and the phase's movement budget allow it."""
    return move.valid & (state.moves + move.moves_delta <= scope.move_budget)


EXCHANGE = 0.1  # share of exchanges among the search's proposals
COMPOUND = 0.05  # share of compound moves where the cluster has them (`Features.compound`): a step of
# fewer than 20 tries has none (more cost the example's short searches quality; docs/benchmarks.md)


def propose(search: Search, state: SearchState, words, swap_probability: float = 0.3):
    """Random moves, one per row of `words` (`moves.propose_batch`; kinds in the shares given), but
    for their domain checks (`finish`): a lower bound of the energy each leaves (its partitions'
    domain violations, times their penalty, are the most the move can remove), whether it may be
    allowed, and its changes."""
    cluster = search.cluster
    mix = shares(swap_probability, EXCHANGE, COMPOUND if cluster.features.compound else 0.0)

    def evaluated(paired: bool, moves: Move):
        if cluster.features.applications:
            check = functools.partial(app_groups.checked, cluster, search.scope.enforce, state.apps, state.node_of)
            moves = jax.vmap(check, in_axes=(None, 0))(state.loads, moves)
        one = functools.partial(evaluate, paired=paired)
        return moves, *jax.vmap(one, in_axes=(None, None, 0))(search, state, moves)

    node_of, primary_of = state.node_of, state.primary_of
    loads = NodeLoads(state.loads, state.held)
    move, new_energy, changes = propose_batch(search, node_of, primary_of, loads, words, mix, evaluated)
    removable = jnp.sum((changes.domains + changes.domains2) * cluster.penalty[DOMAINS], axis=-1)
    bound = new_energy - search.scope.violation_weight * removable
    return move, bound, _allowed(search.scope, state, move), changes


def finish(search: Search, state: SearchState, moves: Move, changes: Changes):
    """The proposals' fault- and upgrade-domain checks: (moves, energies, valid, changes) exactly.
    Moves that make an enforced distribution worse are not allowed; a change of a soft one enters
    the penalty."""
    cluster, scope = search.cluster, search.scope

    def after(partition, replicas, targets, service):
        nodes = partition_after(cluster, state.node_of, partition, replicas, targets)
        return partition_domain_violations(cluster, nodes, service)

    after1 = jax.vmap(after)(moves.partition, *moves.placed(), moves.service)
    second = moves.partition2 >= 0
    p2 = jnp.maximum(moves.partition2, 0)
    after2 = jnp.where(
        second[:, None],
        jax.vmap(after)(p2, moves.replica2[:, None], moves.target2[:, None], cluster.partition_service[p2]),
        0,
    )
    change = (after1 + after2 - changes.domains - changes.domains2).astype(jnp.float32)
    worse = jnp.any(scope.enforce[DOMAINS] & (change > 0), axis=-1)
    penalty = jnp.sum(change * cluster.penalty[DOMAINS], axis=-1)
    moves = dataclasses.replace(moves, valid=moves.valid & ~worse, penalty_delta=moves.penalty_delta + penalty)
    changes = dataclasses.replace(changes, penalty=changes.penalty + penalty, domains=after1, domains2=after2)
    energies = jax.vmap(lambda c: _plus(search, state, c).energy)(changes)
    return moves, energies, _allowed(scope, state, moves), changes


def footprint(search: Search, state: SearchState, move: Move) -> jax.Array:
    """Ids of what a move's validity and changes depend on: its nodes (ids 0..N-1), its partitions
    and their affinity parents' (N..N+P-1: a child's affinity reads where its parent's replicas are,
    and a parent's replica moves with the child beside it), and the movement budget (one last id)
    while fewer movements remain than there are partitions, so kept moves never exceed it. Sums over
    nodes, services and domains need no id: `apply` adds them up."""
    cluster = search.cluster
    n_nodes, n_parts = state.loads.shape[0], state.primary_of.shape[0]
    tight = search.scope.move_budget - state.moves < n_parts
    partition = lambda p: jnp.where(p >= 0, n_nodes + p, -1)
    parent = lambda r: jnp.where(r >= 0, partition(cluster.replica_parent[jnp.maximum(r, 0)]), -1)
    ids = [*move.nodes(), partition(move.partition), partition(move.partition2)]
    if cluster.features.affinity:
        ids += [parent(move.replica), parent(move.replica2)]
    ids.append(jnp.where(tight & (move.moves_delta > 0), n_nodes + n_parts, -1))
    if cluster.apps is not None:  # an application's scaleout count and total load are its own
        app = lambda r: jnp.where(r >= 0, cluster.apps.replica_app[jnp.maximum(r, 0)], -1)  # pyright: ignore
        ids += [jnp.where(app(r) >= 0, n_nodes + n_parts + 1 + app(r), -1) for r in (move.replica, move.replica2)]
    return jnp.stack(ids).astype(jnp.int32)


def footprint_ids(search: Search) -> int:
    cluster = search.cluster
    apps = 0 if cluster.apps is None else cluster.apps.max_nodes.shape[0]
    return cluster.node_up.shape[0] + cluster.partition_service.shape[0] + 1 + apps


def solution(state: SearchState):
    return state.node_of, state.primary_of


SWAP_PROBABILITY = 0.3  # SF's SwapPrimaryProbability


@functools.cache
def model(swap_probability: float = SWAP_PROBABILITY) -> Model:
    """Service Fabric's search for the annealer: primary swaps with this probability, exchanges with
    `EXCHANGE`, replica moves otherwise. One `Model` per probability, so compiled searches are shared."""
    if not 0 <= swap_probability <= 1:
        raise ValueError(f"swap_probability {swap_probability} is not in [0, 1]")
    return Model(
        start=start,
        propose=functools.partial(propose, swap_probability=swap_probability),
        finish=finish,
        apply=apply,
        refresh=refresh,
        solution=solution,
        draws=DRAWS,
        footprint=footprint,
        footprint_ids=footprint_ids,
    )
