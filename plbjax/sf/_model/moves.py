"""Random neighbour moves, SF's way: move a replica or instance, or swap a primary with a secondary;
and the exchange of two replicas of different partitions (a trade when both nodes are nearly full).

Each `propose_*` draws one move for one chain and says whether it is valid (all constraints no
worse but the fault- and upgrade-domain distribution, whose K^2 check `chain.finish` adds only for
moves that may be accepted); `compound_moves` holds SF's compound move and `proposals` mixes the
kinds into a step's worth. Every move is described by the same fields — up to two replicas whose
nodes change, the partition whose primary may change, the load change on two nodes, and a compound
move's repair legs (none unless the cluster's domains are tight: `repairs`) — so energy and apply
code are shared.
A move may also undo one, back to the replica's node at the search's origin (the minimal-movement
pass undoes what does not pay for itself).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from plbjax.anneal import draw, uniform
from plbjax.sf._encoding import AFFINITY, CAPACITY, CONSTRAINTS, PLACEMENT, PREFERRED, THRESHOLD, UNPLACED, Problem
from plbjax.sf._model.constraints import (
    Change,
    NodeLoads,
    away_from_home,
    excess_change,
    fits,
    misplaced_on,
    off_preferred,
    parent_partition,
    partition_nodes,
    strays,
)
from plbjax.sf._model.energy import running_primary
from plbjax.sf._model.search_scope import Search, SearchScope


class Move(eqx.Module):
    replica: jax.Array  # replica placed on `target` (unchanged node for a swap)
    target: jax.Array
    replica2: jax.Array  # an exchange's second replica, placed on `target2` (-1: none)
    target2: jax.Array
    partition: jax.Array  # partition whose primary becomes `new_primary`
    new_primary: jax.Array
    partition2: jax.Array  # the second replica's partition (-1: none)
    service: jax.Array
    service2: jax.Array  # the second replica's service when it is another one (-1: none)
    node_a: jax.Array  # the two nodes whose loads change (distinct; node_a -1: none)
    node_b: jax.Array
    delta_a: jax.Array  # [M] load change of node_a
    delta_b: jax.Array  # [M]
    local_a: jax.Array  # [M] of delta_a and delta_b, what `service`'s replicas bring
    local_b: jax.Array
    load2: jax.Array  # [M] change of `service2`'s load on node_a
    load2_b: jax.Array  # [M] and on node_b
    new_primary2: jax.Array  # `partition2`'s primary after the move (-1: unchanged)
    cost_delta: jax.Array  # change in movement cost against the initial placement
    moves_delta: jax.Array  # change in the number of movements (moved replicas, swapped primaries)
    penalty_delta: jax.Array  # change in the violations' energy (domain distribution: see `chain.finish`)
    valid: jax.Array  # no constraint worse (domain distribution: see `chain.finish`)
    repaired: jax.Array  # [E] more replicas of `partition` a compound move places on `repaired_to` (-1: none)
    repaired_to: jax.Array  # [E]
    leg_nodes: jax.Array  # [2E] their source and target nodes (-1: none)
    leg_deltas: jax.Array  # [2E, M] their load changes, all `service`'s

    def nodes(self) -> jax.Array:
        """[..., L] every node whose load changes, in order (node_a, node_b, then the repair legs')."""
        return jnp.concatenate([self.node_a[..., None], self.node_b[..., None], self.leg_nodes], axis=-1)

    def deltas(self) -> jax.Array:
        """[..., L, M] their load changes."""
        pair = jnp.stack([self.delta_a, self.delta_b], axis=-2)
        return jnp.concatenate([pair, self.leg_deltas], axis=-2)

    def locals(self) -> jax.Array:
        """[..., L, M] what `service`'s replicas bring to them."""
        pair = jnp.stack([self.local_a, self.local_b], axis=-2)
        return jnp.concatenate([pair, self.leg_deltas], axis=-2)

    def loads2(self) -> jax.Array:
        """[..., L, M] what `service2`'s replicas bring to them."""
        pair = jnp.stack([self.load2, self.load2_b], axis=-2)
        return jnp.concatenate([pair, jnp.zeros_like(self.leg_deltas)], axis=-2)

    def placed(self) -> tuple[jax.Array, jax.Array]:
        """([..., 1 + E], same) `partition`'s replicas the move places, and their nodes."""
        replicas = jnp.concatenate([self.replica[..., None], self.repaired], axis=-1)
        return replicas, jnp.concatenate([self.target[..., None], self.repaired_to], axis=-1)


DRAWS = 5  # random words one proposal uses
REPAIRS = 2  # a compound move's legs after its first: the fault domains', then the upgrade domains'


def repairs(problem: Problem) -> int:
    """The repair legs every move carries (static): none unless the cluster has compound moves."""
    return REPAIRS if problem.features.compound else 0


def _no_repairs(problem: Problem) -> dict[str, jax.Array]:
    e, m = repairs(problem), problem.load_primary.shape[1]
    none = jnp.full(e, -1, jnp.int32)
    return dict(
        repaired=none,
        repaired_to=none,
        leg_nodes=jnp.full(2 * e, -1, jnp.int32),
        leg_deltas=jnp.zeros((2 * e, m), jnp.float32),
    )


def earlier(keys: jax.Array, counted: jax.Array) -> jax.Array:
    """[L, L] entry j comes before entry i and has the same key (both counted)."""
    rank = jnp.arange(keys.shape[0])
    same = (keys[:, None] == keys[None, :]) & counted[:, None] & counted[None, :]
    return same & (rank[None, :] < rank[:, None])


def running(keys: jax.Array, counted: jax.Array, values: jax.Array) -> jax.Array:
    """[L, ...] the sum of `values` [L, ...] of the earlier entries with each entry's key: what a
    key's level has gained before the entry (exact zeros where there are none)."""
    mask = earlier(keys, counted)
    mask = mask.reshape(mask.shape + (1,) * (values.ndim - 1))
    return jnp.sum(jnp.where(mask, values[None], 0.0), axis=1)


def partition_after(problem: Problem, node_of, partition, replicas, targets) -> jax.Array:
    """[K] nodes of `partition` once each of `replicas` [k] (-1: none) is on its one of `targets`."""
    nodes = partition_nodes(problem, node_of, partition)
    row = problem.partition_replicas[partition]
    for r, t in zip(replicas, targets):
        nodes = jnp.where((row == r) & (r >= 0), t, nodes)
    return nodes


def _excess(limit, loads, a, delta_a, b, delta_b) -> jax.Array:
    """Change of the summed relative excess over `limit` when two (distinct) nodes change."""
    return excess_change(limit, loads, a, delta_a) + excess_change(limit, loads, b, delta_b)


def replica_load(problem: Problem, primary_of, r) -> jax.Array:
    """[M] replica r's load in its role."""
    is_primary = primary_of[problem.replica_partition[r]] == r
    return jnp.where(is_primary, problem.load_primary[r], problem.load_secondary[r])


def _f32(x) -> jax.Array:
    return x.astype(jnp.float32)


def leg(search: Search, node_of, primary_of, r, dst, before=None):
    """Replica r going from its node to `dst` (a node): the change of every constraint measure but
    capacity's and affinity's (`_affinity`: it depends on the whole move), its movement cost and
    count changes, and whether the move is allowed on its own (not a replica that stays, an Up node
    open to the phase that its service may use, no replica of its partition there, no return to a
    node it was balanced away from, the partition's movement throttle kept). Movements count from
    the search's origin; `before`: the partition's nodes (a compound move's earlier legs made)."""
    problem, scope = search.cluster, search.scope
    src = node_of[r]
    p, s = problem.replica_partition[r], problem.replica_service[r]
    cls = problem.service_class[s]
    is_primary = primary_of[p] == r
    allowed = problem.class_allowed[cls, dst]
    changes = jnp.zeros(CONSTRAINTS).at[PLACEMENT].set(_f32(~allowed) - _f32(misplaced_on(problem, r, src)))
    if problem.features.preferred:
        changes = changes.at[PREFERRED].set(
            _f32(is_primary) * (_f32(off_preferred(problem, s, dst)) - _f32(off_preferred(problem, s, src)))
            + _f32(away_from_home(problem, r, dst))
            - _f32(away_from_home(problem, r, src))
        )
    changes = changes.at[UNPLACED].set(-_f32(src < 0) * (1.0 + _f32(is_primary)))
    before = partition_nodes(problem, node_of, p) if before is None else before
    rows = problem.partition_replicas[p]
    init_row = jnp.where(rows >= 0, scope.origin_node[jnp.maximum(rows, 0)], -1)
    moved_after = jnp.sum((jnp.where(rows == r, dst, before) != init_row) & (init_row >= 0))
    returns = jnp.any(problem.history[r] == dst) if scope.history else jnp.zeros((), bool)
    ok = (
        allowed
        & ~problem.replica_stays[r]
        & scope.node_open[dst]
        & ~jnp.any(before == dst)
        & ~returns
        & (moved_after <= scope.partition_budget)
    )
    init = scope.origin_node[r]
    moved = lambda n: _f32((n != init) & (init >= 0))
    cost = problem.move_cost[r] * (
        moved(dst) * problem.node_move_factor[dst] - moved(src) * problem.node_move_factor[jnp.maximum(src, 0)]
    )
    return changes, cost, moved(dst) - moved(src), ok


def _affinity(problem: Problem, node_of, primary_of, p, p2, change: Change) -> jax.Array:
    """The change of the affinity measure when `change` moves replicas of partitions p and p2 (-1:
    none) or hands their primaries over: the child replicas in violation among theirs and their
    children's, after less before (a child's violation depends on its siblings and its parent's
    replicas, `constraints.strays`), each replica counted once."""
    rows = []
    for x, other in ((p, p2), (p2, p)):
        own = problem.partition_replicas[jnp.maximum(x, 0)]
        counted = (x >= 0) & ~((other >= 0) & (parent_partition(problem, x) == other))  # else among other's children
        rows += [jnp.where(counted, own, -1), jnp.where(x >= 0, problem.children_of[jnp.maximum(x, 0)], -1)]
    rows = jnp.concatenate(rows)
    after = strays(problem, node_of, primary_of, rows, change)
    return _f32(jnp.sum(after) - jnp.sum(strays(problem, node_of, primary_of, rows)))


def enforced(scope: SearchScope, changes: jax.Array) -> jax.Array:
    """No enforced constraint but capacity (checked by `fits`) gets worse."""
    return ~jnp.any(scope.enforce & (changes.at[CAPACITY].set(0.0) > 0))


def _with_capacity(problem: Problem, changes, loads: NodeLoads, a, delta_a, b, delta_b) -> jax.Array:
    changes = changes.at[CAPACITY].set(_excess(problem.capacity, loads.now, a, delta_a, b, delta_b))
    if problem.features.thresholds:
        changes = changes.at[THRESHOLD].set(_excess(problem.threshold_load, loads.now, a, delta_a, b, delta_b))
    return changes


def _single(problem: Problem, **fields) -> Move:
    """A move of one replica: no second replica, no repair legs."""
    none = jnp.asarray(-1, jnp.int32)
    return Move(
        **_no_repairs(problem),
        replica2=none,
        target2=none,
        partition2=none,
        service2=none,
        new_primary2=none,
        load2=jnp.zeros_like(fields["delta_a"]),
        load2_b=jnp.zeros_like(fields["delta_a"]),
        local_a=fields["delta_a"],
        local_b=fields["delta_b"],
        **fields,
    )


def _children_on(problem: Problem, node_of, r, node):
    """The child replicas (of partitions with affinity to r's) on `node`: one of them, and how many."""
    kids = problem.children_of[problem.replica_partition[r]]
    here = (kids >= 0) & (node_of[jnp.maximum(kids, 0)] == node)
    return kids[jnp.argmax(here)], jnp.sum(here)


def _move_to(search: Search, node_of, primary_of, loads, r, t, drawn) -> Move:
    """Replica r moved (or placed) on node t (-1: no node; `drawn`: the draw found one). A parent's
    replica takes the child replica beside it along (SF's affinity repair moves children after their
    parent), so it is valid with at most one child beside it."""
    problem, scope = search.cluster, search.scope
    p, s = problem.replica_partition[r], problem.replica_service[r]
    a, dst = node_of[r], jnp.maximum(t, 0)
    load = replica_load(problem, primary_of, r)
    changes, cost, moved, ok = leg(search, node_of, primary_of, r, dst)
    if not problem.features.affinity:
        changes = _with_capacity(problem, changes, loads, a, -load, dst, load)
        valid = drawn & (t >= 0) & ok & fits(search, loads, dst, load) & enforced(scope, changes)
        return _single(
            problem,
            replica=r,
            target=dst,
            partition=p,
            new_primary=primary_of[p],
            service=s,
            node_a=a,
            node_b=dst,
            delta_a=-load,
            delta_b=load,
            cost_delta=cost,
            moves_delta=moved,
            penalty_delta=jnp.sum(problem.penalty * changes),
            valid=valid,
        )
    q, beside = _children_on(problem, node_of, r, a)
    along = (beside == 1) & (a >= 0)
    changes2, cost2, moved2, ok2 = leg(search, node_of, primary_of, q, dst)
    load2 = jnp.where(along, replica_load(problem, primary_of, q), 0.0)
    gone = lambda x: jnp.where(along, x, 0.0)
    q_along = jnp.where(along, q, -1)
    change = Change(moved=((r, jnp.where(t >= 0, dst, -1)), (q_along, dst)))
    p2 = jnp.where(along, problem.replica_partition[q], -1)
    changes = (changes + gone(changes2)).at[AFFINITY].set(_affinity(problem, node_of, primary_of, p, p2, change))
    total = load + load2
    changes = _with_capacity(problem, changes, loads, a, -total, dst, total)
    valid = (
        drawn
        & (t >= 0)
        & ok
        & (ok2 | ~along)
        & ((beside == 0) | along | (a < 0))
        & fits(search, loads, dst, total)
        & enforced(scope, changes)
    )
    none = jnp.asarray(-1, jnp.int32)
    return Move(
        **_no_repairs(problem),
        replica=r,
        target=dst,
        replica2=jnp.where(along, q, none),
        target2=dst,
        partition=p,
        new_primary=primary_of[p],
        partition2=jnp.where(along, problem.replica_partition[q], none),
        service=s,
        service2=jnp.where(along, problem.replica_service[q], none),
        node_a=a,
        node_b=dst,
        delta_a=-total,
        delta_b=total,
        local_a=-load,
        local_b=load,
        load2=-load2,
        load2_b=load2,
        new_primary2=none,
        cost_delta=cost + gone(cost2),
        moves_delta=moved + gone(moved2),
        penalty_delta=jnp.sum(problem.penalty * changes),
        valid=valid,
    )


def propose_move(search: Search, node_of, primary_of, loads, words) -> Move:
    """Move (or place) a random movable replica on a random node its placement constraints allow, or
    (an `undo_share` of the time, as SF's search cancels movements) back to its node at the search's origin."""
    problem, scope = search.cluster, search.scope
    r = scope.movable[draw(words[0], scope.n_movable)]
    cls = problem.service_class[problem.replica_service[r]]
    undo = uniform(words[2]) < scope.undo_share
    t = jnp.where(undo, scope.origin_node[r], problem.class_nodes[cls, draw(words[1], problem.class_node_count[cls])])
    return _move_to(
        search,
        node_of,
        primary_of,
        loads,
        r,
        t,
        (scope.n_movable > 0) & (undo | (problem.class_node_count[cls] > 0)),
    )


def propose_exchange(search: Search, node_of, primary_of, loads, words) -> Move:
    """Trade the nodes of a random movable replica and a movable replica of another partition that
    started on its node (half the time: so a chain of moves through that node collapses into one)
    or on a random node its service may use (a trade when both nodes are too full for either move)."""
    problem, scope = search.cluster, search.scope
    r = scope.movable[draw(words[0], scope.n_movable)]
    a = node_of[r]
    cls = problem.service_class[problem.replica_service[r]]
    elsewhere = problem.class_nodes[cls, draw(words[1], problem.class_node_count[cls])]
    key = jnp.maximum(jnp.where(uniform(words[2]) < 0.5, a, elsewhere), 0)
    first, count = scope.node_first[key], scope.node_first[key + 1] - scope.node_first[key]
    q = scope.by_node[first + draw(words[3], count)]
    b = node_of[q]
    p, p2 = problem.replica_partition[r], problem.replica_partition[q]
    s, s2 = problem.replica_service[r], problem.replica_service[q]
    load, load2 = replica_load(problem, primary_of, r), replica_load(problem, primary_of, q)
    delta_a, delta_b = load2 - load, load - load2
    changes, cost, moved, ok = leg(search, node_of, primary_of, r, jnp.maximum(b, 0))
    changes2, cost2, moved2, ok2 = leg(search, node_of, primary_of, q, jnp.maximum(a, 0))
    changes = _with_capacity(problem, changes + changes2, loads, a, delta_a, b, delta_b)
    if problem.features.affinity:
        change = Change(moved=((r, b), (q, a)))
        changes = changes.at[AFFINITY].set(_affinity(problem, node_of, primary_of, p, p2, change))
    valid = (
        (scope.n_movable > 0)
        & (count > 0)
        & (a >= 0)
        & (b >= 0)
        & (a != b)
        & (p != p2)
        & ok
        & ok2
        & fits(search, loads, a, delta_a if loads.held is None else load2)  # held: what leaves still counts
        & fits(search, loads, b, delta_b if loads.held is None else load)
        & enforced(scope, changes)
    )
    if problem.features.affinity:  # no parent's replica leaves or reaches a child of its partition
        for x in (r, q):
            valid &= (_children_on(problem, node_of, x, a)[1] == 0) & (_children_on(problem, node_of, x, b)[1] == 0)
    same = s == s2
    return Move(
        **_no_repairs(problem),
        replica=r,
        target=b,
        replica2=q,
        target2=a,
        partition=p,
        new_primary=primary_of[p],
        partition2=p2,
        service=s,
        service2=jnp.where(same, -1, s2),
        node_a=a,
        node_b=b,
        delta_a=delta_a,
        delta_b=delta_b,
        local_a=jnp.where(same, delta_a, -load),
        local_b=jnp.where(same, delta_b, load),
        load2=jnp.where(same, 0.0, load2),
        load2_b=jnp.where(same, 0.0, -load2),
        new_primary2=jnp.asarray(-1, jnp.int32),
        cost_delta=cost + cost2,
        moves_delta=moved + moved2,
        penalty_delta=jnp.sum(problem.penalty * changes),
        valid=valid,
    )


def _child_swap(problem: Problem, node_of, primary_of, old, a, b):
    """The aligned child partition whose primary is beside the parent's primary `old` (on node a) and
    that has a replica on node b, swapping along with its parent (SF moves an aligned child's
    primary with its parent's): whether it does, its old and new primary, and whether the parent
    may swap at all (not when an aligned child would be left behind)."""
    kids = problem.children_of[problem.replica_partition[old]]
    aligned_kids = jnp.any((kids >= 0) & problem.replica_aligned[jnp.maximum(kids, 0)])
    kid, beside = _children_on(problem, node_of, old, a)
    kp = problem.replica_partition[kid]
    rows = problem.partition_replicas[kp]
    on_b = (rows >= 0) & (node_of[jnp.maximum(rows, 0)] == b)
    along = aligned_kids & (beside == 1) & (a >= 0) & (primary_of[kp] == kid) & jnp.any(on_b)
    along &= problem.replica_aligned[kid]
    return along, kp, kid, rows[jnp.argmax(on_b)], ~aligned_kids | along


def propose_swap(search: Search, node_of, primary_of, loads, words) -> Move:
    """Swap the primary of a random partition with one of its placed secondaries (a promotion when
    the primary has no node), neither of them one that stays (SF swaps only movable replicas); a
    parent's aligned child swaps along on the same two nodes."""
    problem, scope = search.cluster, search.scope
    p = scope.swappable[draw(words[2], scope.n_swappable)]
    row = problem.partition_replicas[p]
    size = jnp.sum(row >= 0)
    old = primary_of[p]
    j = draw(words[3], size - 1)
    q = row[j + (j >= jnp.argmax(row == old))]
    a, b = node_of[old], node_of[q]
    delta_a = problem.load_secondary[old] - problem.load_primary[old]
    delta_b = problem.load_primary[q] - problem.load_secondary[q]
    s = problem.partition_service[p]
    init = scope.origin_primary[p]
    swapped = (_f32(q != init) - _f32(old != init)) * _f32(running_primary(scope, p))
    none = jnp.asarray(-1, jnp.int32)
    zero = jnp.zeros_like(delta_a)
    along, kp, kid, kid_b, may = jnp.asarray(False), none, none, none, jnp.asarray(True)
    load2, load2_b = zero, zero
    if problem.features.affinity:
        along, kp, kid, kid_b, may = _child_swap(problem, node_of, primary_of, old, a, b)
        load2 = jnp.where(along, problem.load_secondary[kid] - problem.load_primary[kid], 0.0)
        load2_b = jnp.where(along, problem.load_primary[kid_b] - problem.load_secondary[kid_b], 0.0)
        k_init = scope.origin_primary[kp]
        k_swapped = (_f32(kid_b != k_init) - _f32(kid != k_init)) * _f32(running_primary(scope, kp))
        swapped = swapped + jnp.where(along, k_swapped, 0.0)
    changes = _with_capacity(problem, jnp.zeros(CONSTRAINTS), loads, a, delta_a + load2, b, delta_b + load2_b)
    if problem.features.affinity:
        change = Change(primaries=((p, q), (jnp.where(along, kp, -1), kid_b)))
        p2 = jnp.where(along, kp, -1)
        changes = changes.at[AFFINITY].set(_affinity(problem, node_of, primary_of, p, p2, change))
    if problem.features.preferred:
        off = lambda svc, n: _f32(off_preferred(problem, svc, n))
        s2 = problem.partition_service[jnp.maximum(kp, 0)]
        changes = changes.at[PREFERRED].set(off(s, b) - off(s, a) + jnp.where(along, off(s2, b) - off(s2, a), 0.0))
    changes = changes.at[UNPLACED].set(-_f32(a < 0))  # a promotion gives the partition a placed primary
    valid = (
        (scope.n_swappable > 0)
        & (size >= 2)
        & (b >= 0)
        & problem.node_up[jnp.maximum(b, 0)]
        & ~((a >= 0) & problem.node_kept[jnp.maximum(a, 0)])  # a deactivated node's primary stays
        & may
        & ~problem.replica_stays[old]
        & ~problem.replica_stays[q]
        & ~(along & (problem.replica_stays[kid] | problem.replica_stays[kid_b]))
        & fits(search, loads, a, delta_a + load2)
        & fits(search, loads, b, delta_b + load2_b)
        & enforced(scope, changes)
    )
    return Move(
        **_no_repairs(problem),
        replica=q,
        target=b,
        replica2=jnp.where(along, kid_b, none),
        target2=b,
        partition=p,
        new_primary=q,
        partition2=jnp.where(along, kp, none),
        service=s,
        service2=jnp.where(along, problem.partition_service[jnp.maximum(kp, 0)], none),
        node_a=a,
        node_b=b,
        delta_a=delta_a + load2,
        delta_b=delta_b + load2_b,
        local_a=delta_a,
        local_b=delta_b,
        load2=load2,
        load2_b=load2_b,
        new_primary2=jnp.where(along, kid_b, none),
        cost_delta=problem.swap_cost * swapped,
        moves_delta=swapped,
        penalty_delta=jnp.sum(problem.penalty * changes),
        valid=valid,
    )
