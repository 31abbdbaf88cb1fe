"""Machine reassignment as a model for the plbjax annealer: energy terms, constraints and moves.

Energy is the challenge's objective in 64-bit integers (run under `jax.enable_x64`), so every
move's change is exact and the running energy never drifts. A move relocates process p from machine
a to machine b and, in an ejection chain, a process q of b on to machine c (c == a: a swap); its
change touches up to three machines' rows, the two services' location and neighborhood counts, and
the histogram of moved processes per service that gives the service-move cost (a maximum) in O(1).
Moves back to a process's original machine are proposed on purpose: only they release the
transient resources a moved process still holds there. Dependencies are checked in the
neighborhoods a move changes only, with a count per service and neighborhood of the services
depending on it that are present there (`users_in`), so a check costs O(dependencies of the moving
services), not O(services depending on them). A move's footprint (its machines, its
services and, across neighborhoods, the services they depend on) lets the annealer apply several
independent accepted moves in one step (`AnnealConfig.parallel`).

Hard constraints are checked per move, so every state a chain visits is feasible: capacity (with the
resources of a moved process still held on its original machine for transient resources), conflict
(one process per service and machine), spread (locations covered per service) and dependency (a
service's neighborhoods hold the services it depends on).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.anneal import Model, batched, draw, uniform
from plbjax.roadef._instance import Instance
from plbjax.roadef._objective import balance_terms, load_terms

DRAWS = 4  # random words one proposal uses: process, target (or partner), move kind, q's target

# How a proposal's kind splits (see `propose`): of single moves, the share sent back to their original
# machine; of two-process moves, the share of swaps and of chains that send q back to its original machine.
HOME_SHIFT = 0.2
SWAP = 0.5
HOME_CHAIN = 0.3


def _padded(rows: list[list[int]]) -> np.ndarray:
    width = max(1, max((len(r) for r in rows), default=0))
    out = np.full((len(rows), width), -1, np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


class Problem(eqx.Module):
    """One instance and its original assignment as arrays (move costs carry their weights)."""

    capacity: jax.Array  # [M, R] int64
    safety: jax.Array  # [M, R]
    transient: jax.Array  # [R] bool
    load_weight: jax.Array  # [R]
    location: jax.Array  # [M] int32
    neighborhood: jax.Array  # [M]
    machine_move_cost: jax.Array  # [M, M] x its weight
    requirement: jax.Array  # [P, R]
    process_move_cost: jax.Array  # [P] x its weight
    service: jax.Array  # [P] int32
    original: jax.Array  # [P] int32
    members: jax.Array  # [S, K] processes of each service (-1: padding)
    spread_min: jax.Array  # [S]
    depends_on: jax.Array  # [S, Kd] services each service depends on (-1: padding)
    balance_r1: jax.Array  # [B]
    balance_r2: jax.Array
    balance_target: jax.Array
    balance_weight: jax.Array
    service_move_weight: jax.Array
    n_locations: int = eqx.field(static=True)
    n_hoods: int = eqx.field(static=True)


def encode(instance: Instance, original: np.ndarray) -> Problem:
    """Arrays for the search (call under `jax.enable_x64(True)`)."""
    n_services = len(instance.spread_min)
    members: list[list[int]] = [[] for _ in range(n_services)]
    for p, s in enumerate(instance.service):
        members[s].append(p)
    depends_on: list[list[int]] = [[] for _ in range(n_services)]
    for s, d in instance.dependencies:
        depends_on[s].append(int(d))
    i64 = lambda x: jnp.asarray(np.asarray(x, np.int64))
    i32 = lambda x: jnp.asarray(np.asarray(x, np.int32))
    r1, r2, target, weight = instance.balance.T if len(instance.balance) else np.zeros((4, 0), np.int64)
    return Problem(
        capacity=i64(instance.capacity),
        safety=i64(instance.safety),
        transient=jnp.asarray(instance.transient),
        load_weight=i64(instance.load_weight),
        location=i32(instance.location),
        neighborhood=i32(instance.neighborhood),
        machine_move_cost=i64(instance.machine_move_cost * instance.weight_machine_move),
        requirement=i64(instance.requirement),
        process_move_cost=i64(instance.process_move_cost * instance.weight_process_move),
        service=i32(instance.service),
        original=i32(original),
        members=i32(_padded(members)),
        spread_min=i32(instance.spread_min),
        depends_on=i32(_padded(depends_on)),
        balance_r1=i32(r1),
        balance_r2=i32(r2),
        balance_target=i64(target),
        balance_weight=i64(weight),
        service_move_weight=i64(instance.weight_service_move),
        n_locations=int(instance.location.max()) + 1,
        n_hoods=int(instance.neighborhood.max()) + 1,
    )


class SearchState(eqx.Module):
    assignment: jax.Array  # [P] machine of each process
    usage: jax.Array  # [M, R]
    held: jax.Array  # [M, R] resources of processes moved away from their original machine
    locations: jax.Array  # [S, L] processes of each service per location
    hoods: jax.Array  # [S, N] processes of each service per neighborhood
    users_in: jax.Array  # [S, N] services depending on each service that are present per neighborhood
    moved: jax.Array  # [S] moved processes per service
    moved_hist: jax.Array  # [K + 1] services per moved count
    most_moved: jax.Array  # max of `moved`
    cost: jax.Array  # [5] load, balance, process move, service move, machine move
    energy: jax.Array  # sum of `cost`


def _row_terms(problem: Problem, machines, used):
    """[n, 2] (load, balance) cost of `machines` with usage rows `used` (the host objective's terms)."""
    return jnp.stack(
        [
            load_terms(problem.safety[machines], problem.load_weight, used, jnp),
            balance_terms(
                problem.capacity[machines],
                problem.balance_r1,
                problem.balance_r2,
                problem.balance_target,
                problem.balance_weight,
                used,
                jnp,
            ),
        ],
        axis=-1,
    )


def _users_in(problem: Problem, present: jax.Array) -> jax.Array:
    """[S, N] how many of the services depending on each service are `present` [S, N] per neighborhood."""
    dep = problem.depends_on
    user = jnp.broadcast_to(jnp.arange(dep.shape[0])[:, None], dep.shape)
    return (
        jnp.zeros(present.shape, jnp.int32)
        .at[jnp.where(dep >= 0, dep, dep.shape[0])]
        .add(present[user].astype(jnp.int32), mode="drop")
    )


def _fresh(problem: Problem, assignment: jax.Array) -> SearchState:
    n_machines, n_services = problem.capacity.shape[0], problem.spread_min.shape[0]
    req = problem.requirement
    usage = jax.ops.segment_sum(req, assignment, num_segments=n_machines)
    away = assignment != problem.original
    held = jax.ops.segment_sum(jnp.where(away[:, None], req, 0), problem.original, num_segments=n_machines)

    def counts(domain, n):  # processes of each service per location / neighborhood
        return jnp.zeros((n_services, n), jnp.int32).at[problem.service, domain[assignment]].add(1)

    locations = counts(problem.location, problem.n_locations)
    hoods = counts(problem.neighborhood, problem.n_hoods)
    moved = jax.ops.segment_sum(away.astype(jnp.int32), problem.service, num_segments=n_services)
    hist = jnp.zeros(problem.members.shape[1] + 1, jnp.int32).at[moved].add(1)
    most = jnp.max(moved)
    cost = jnp.stack(
        [
            *jnp.sum(_row_terms(problem, jnp.arange(n_machines), usage), axis=0),
            jnp.sum(jnp.where(away, problem.process_move_cost, 0)),
            problem.service_move_weight * most,
            jnp.sum(problem.machine_move_cost[problem.original, assignment]),
        ]
    ).astype(jnp.int64)
    return SearchState(
        assignment=assignment,
        usage=usage,
        held=held,
        locations=locations,
        hoods=hoods,
        users_in=_users_in(problem, hoods > 0),
        moved=moved,
        moved_hist=hist,
        most_moved=most,
        cost=cost,
        energy=jnp.sum(cost),
    )


def start(problem: Problem) -> SearchState:
    """The state at the original assignment."""
    return _fresh(problem, problem.original)


def refresh(problem: Problem, state: SearchState) -> SearchState:
    """The state recomputed from its assignment (integers: a check, nothing drifts)."""
    return _fresh(problem, state.assignment)


class Move(eqx.Module):
    p: jax.Array  # process moving a -> b
    q: jax.Array  # process moving b -> c when `moves_q` (c == a: a swap)
    moves_q: jax.Array
    a: jax.Array
    b: jax.Array
    c: jax.Array  # == a when q does not move
    sp: jax.Array  # their services
    sq: jax.Array


class MoveStats(eqx.Module):
    """What a move changes, computed by `propose` against the state it was drawn from."""

    used: jax.Array  # [3, R] usage of a, b and c after the move (c's row repeats a's when c == a)
    held: jax.Array  # [3, R]
    locations: jax.Array  # [2, L] rows of services sp and sq after the move
    hoods: jax.Array  # [2, N]
    presence: jax.Array  # [2, 3] change (-1, 0, 1) of sp's / sq's presence in `columns`
    columns: jax.Array  # [3] neighborhoods of a, b and c
    counts: jax.Array  # [4] moved processes of sp before/after, of sq before/after (after sp's change)
    cost_delta: jax.Array  # [5] change of each cost part, the service-move part as if alone


def _counts_after(table, services, domains, changes, rows):
    """Rows `rows` of a per-service count table after the move's relocations (service, domain, +-1)."""
    out = table[jnp.maximum(rows, 0)]
    for s, d, c in zip(services, domains, changes):
        out = out + jnp.where(rows[..., None] == s, c, 0) * jax.nn.one_hot(d, table.shape[1], dtype=out.dtype)
    return out


def _dependencies_kept(problem: Problem, state: SearchState, in_hood, services, columns, presence):
    """Dependencies hold after a move that changes only `services`' presence [2, 3] in the
    neighborhoods `columns`: where a moving service is present its dependencies are, and where it is
    absent no service depending on it is (counted by `users_in`, corrected for the moving services).
    Elsewhere nothing changed, and the state before was feasible. `in_hood(services, columns)` ->
    whether the services are present after the move (broadcast together)."""
    services, columns = jnp.stack(services), jnp.stack(columns)  # [2], [3]
    deps = problem.depends_on[services]  # [2, Kd]
    deps_there = jnp.all((deps[:, None, :] < 0) | in_hood(deps[:, None, :], columns[None, :, None]), axis=-1)
    uses = jnp.any(deps[None, :, :] == services[:, None, None], axis=-1)  # [i, x]: x depends on i
    same = columns[:, None] == columns[None, :]
    users = state.users_in[services[:, None], columns[None, :]] + jnp.einsum(
        "ix,xk,kj->ij", uses.astype(jnp.int32), presence.astype(jnp.int32), same.astype(jnp.int32)
    )
    return jnp.all(jnp.where(in_hood(services[:, None], columns[None, :]), deps_there, users == 0))


def _most_moved(hist: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(hist > 0, jnp.arange(hist.shape[0]), 0)).astype(jnp.int32)


def _other(word, n, skip):
    """A uniform machine in [0, n) other than `skip`."""
    x = draw(word, n - 1)
    return x + (x >= skip)


def _on(x):
    return jnp.where(x, 1, 0)


def _draw(problem: Problem, state: SearchState, words, swap_probability: float) -> Move:
    """Process p moves from machine a to b; with `swap_probability` a process q on b moves on to c."""
    n_proc, n_machines = problem.service.shape[0], problem.capacity.shape[0]
    p, q = draw(words[0], n_proc), draw(words[1], n_proc)
    a, home_p, home_q = state.assignment[p], problem.original[p], problem.original[q]
    u = uniform(words[2])
    moves_q = u < swap_probability
    kind = jnp.where(moves_q, u / swap_probability, (u - swap_probability) / (1 - swap_probability))
    b = jnp.where(moves_q, state.assignment[q], jnp.where(kind < HOME_SHIFT, home_p, _other(words[1], n_machines, a)))
    c = jnp.where(
        ~moves_q | (kind < SWAP), a, jnp.where(kind < SWAP + HOME_CHAIN, home_q, _other(words[3], n_machines, b))
    )
    return Move(p=p, q=q, moves_q=moves_q, a=a, b=b, c=c, sp=problem.service[p], sq=problem.service[q])


def _resources(problem: Problem, state: SearchState, m: Move):
    """Usage and resources still held on the original machine (transient resources) of machines
    a, b, c after the move [3, R], and whether they fit."""
    a, b, c = m.a, m.b, m.c
    home_p, home_q = problem.original[m.p], problem.original[m.q]
    third = c != a  # q moves to a machine other than p's
    req_p, req_q = problem.requirement[m.p], _on(m.moves_q) * problem.requirement[m.q]
    used_a = state.usage[a] - req_p + _on(~third) * req_q
    held_a = state.held[a] + req_p * _on(a == home_p) - _on(~third) * req_q * _on(a == home_q)
    used = jnp.stack([used_a, state.usage[b] + req_p - req_q, jnp.where(third, state.usage[c] + req_q, used_a)])
    held = jnp.stack(
        [
            held_a,
            state.held[b] - req_p * _on(b == home_p) + req_q * _on(b == home_q),
            jnp.where(third, state.held[c] - req_q * _on(c == home_q), held_a),
        ]
    )
    fits = jnp.all(jnp.where(problem.transient, used + held, used) <= problem.capacity[jnp.stack([a, b, c])])
    return used, held, fits


def _no_conflict(problem: Problem, state: SearchState, m: Move) -> jax.Array:
    """No two processes of a moving service end up on one machine."""

    def alone(s, machine):
        row = problem.members[s]
        where = state.assignment[jnp.maximum(row, 0)]
        where = jnp.where(row == m.p, m.b, jnp.where(m.moves_q & (row == m.q), m.c, where))
        return jnp.sum((row >= 0) & (where == machine)) <= 1

    return alone(m.sp, m.b) & (~m.moves_q | alone(m.sq, m.c))


def _spread_and_dependencies(problem: Problem, state: SearchState, m: Move):
    """Per-service location and neighborhood counts after the move, presence changes per service and
    neighborhood, and whether spread and dependencies hold."""
    services = (m.sp, m.sp, m.sq, m.sq)
    changes = (-1, 1, -_on(m.moves_q), _on(m.moves_q))
    loc = (problem.location[m.a], problem.location[m.b], problem.location[m.b], problem.location[m.c])
    hood = (problem.neighborhood[m.a], problem.neighborhood[m.b], problem.neighborhood[m.b], problem.neighborhood[m.c])
    pair = jnp.stack([m.sp, m.sq])
    locations = _counts_after(state.locations, services, loc, changes, pair)
    hoods = _counts_after(state.hoods, services, hood, changes, pair)
    spread_ok = jnp.all(jnp.sum(locations > 0, axis=1) >= problem.spread_min[pair])

    def in_hood(rows, h):
        count = state.hoods[jnp.maximum(rows, 0), h]
        for s, d, n in zip(services, hood, changes):
            count = count + jnp.where((rows == s) & (h == d), n, 0)
        return count > 0

    # presence changes, once per service (sq only when it is another service) and per neighborhood
    columns = (hood[0], hood[1], hood[3])
    new_column = (jnp.bool_(True), columns[1] != columns[0], (columns[2] != columns[0]) & (columns[2] != columns[1]))
    presence = jnp.stack(
        [
            jnp.stack(
                [
                    jnp.where(own & new, _on(hoods[i, h] > 0) - _on(state.hoods[s, h] > 0), 0)
                    for h, new in zip(columns, new_column)
                ]
            )
            for i, (s, own) in enumerate(((m.sp, jnp.bool_(True)), (m.sq, m.moves_q & (m.sq != m.sp))))
        ]
    )
    deps_ok = _dependencies_kept(problem, state, in_hood, (m.sp, m.sq), columns, presence)
    return locations, hoods, presence, jnp.stack(columns), spread_ok & deps_ok


def _cost_delta(problem: Problem, state: SearchState, m: Move, used):
    """The moved services' move counts before and after [4] and the objective's change per term [5]
    (load, balance, process moves, service moves, machine moves; c's row counts only when it is a
    third machine)."""
    home_p, home_q = problem.original[m.p], problem.original[m.q]
    rows = jnp.stack([m.a, m.b, m.c])
    counted = jnp.stack([1, 1, _on(m.c != m.a)])[:, None]
    terms = counted * (_row_terms(problem, rows, used) - _row_terms(problem, rows, state.usage[rows]))
    moved_p = _on(m.b != home_p) - _on(m.a != home_p)
    moved_q = _on(m.moves_q) * (_on(m.c != home_q) - _on(m.b != home_q))
    count_p = state.moved[m.sp]
    count_q = jnp.where(m.sq == m.sp, count_p + moved_p, state.moved[m.sq])
    counts = jnp.stack([count_p, count_p + moved_p, count_q, count_q + moved_q])
    candidates = state.most_moved + jnp.arange(2, -3, -1)
    hist = state.moved_hist[jnp.clip(candidates, 0, state.moved_hist.shape[0] - 1)]
    for n, d in zip(counts, (-1, 1, -1, 1)):
        hist = hist + d * _on(candidates == n)
    present = (candidates >= 0) & (candidates < state.moved_hist.shape[0]) & (hist > 0)
    most = jnp.where(jnp.any(present), candidates[jnp.argmax(present)], 0)
    return counts, jnp.stack(
        [
            jnp.sum(terms[:, 0]),
            jnp.sum(terms[:, 1]),
            problem.process_move_cost[m.p] * moved_p + problem.process_move_cost[m.q] * moved_q,
            problem.service_move_weight * (most - state.most_moved),
            problem.machine_move_cost[home_p, m.b]
            - problem.machine_move_cost[home_p, m.a]
            + _on(m.moves_q) * (problem.machine_move_cost[home_q, m.c] - problem.machine_move_cost[home_q, m.b]),
        ]
    )


def propose(problem: Problem, state: SearchState, words, swap_probability: float):
    """One random move of process p from machine a to b.

    With probability `swap_probability` a process q on b moves on (an ejection chain): to a (a swap),
    to its original machine (freeing b's room and q's transient hold), or to a random machine c.
    Otherwise p alone moves: to its original machine (undoing an earlier move) or to a random one.
    """
    move = _draw(problem, state, words, swap_probability)
    used, held, fits = _resources(problem, state, move)
    locations, hoods, presence, columns, placed_ok = _spread_and_dependencies(problem, state, move)
    counts, cost_delta = _cost_delta(problem, state, move, used)
    valid = (move.a != move.b) & (move.c != move.b) & fits & _no_conflict(problem, state, move) & placed_ok
    stats = MoveStats(
        used=used,
        held=held,
        locations=locations,
        hoods=hoods,
        presence=presence,
        columns=columns,
        counts=counts,
        cost_delta=cost_delta,
    )
    return move, state.energy + jnp.sum(cost_delta), valid, stats


def _set_rows(table, rows, after, keep):
    """`table` with rows `rows[:, i]` [T] set to after[:, i] where `keep[:, i]`."""
    size = table.shape[0]
    for i in range(rows.shape[1]):
        table = table.at[jnp.where(keep[:, i], rows[:, i], size)].set(after[:, i], mode="drop")
    return table


def _users_moved(problem: Problem, users_in, services, keep, stats: MoveStats):
    """`users_in` after the kept moves' presence changes: each adds its change to the services its
    moving services depend on, in the neighborhood that changed."""
    deps = problem.depends_on[services][:, :, None, :]  # [T, 2, 1, Kd]
    change = jnp.where(keep[:, None, None], stats.presence, 0)[..., None]  # [T, 2, 3, 1]
    target = jnp.where((deps >= 0) & (change != 0), deps, users_in.shape[0])
    column = jnp.broadcast_to(stats.columns[:, None, :, None], target.shape)
    return users_in.at[target, column].add(jnp.broadcast_to(change, target.shape), mode="drop")


def apply(problem: Problem, state: SearchState, moves: Move, keep, energies, stats: MoveStats) -> SearchState:
    """The state after every kept move (kept moves have disjoint footprints: distinct machines and
    services, so no two of them write the same row)."""
    with_q = keep & moves.moves_q
    machines = jnp.stack([moves.a, moves.b, moves.c], axis=1)
    machine_kept = jnp.stack([keep, keep, keep & (moves.c != moves.a)], axis=1)
    services = jnp.stack([moves.sp, moves.sq], axis=1)
    service_kept = jnp.stack([keep, with_q], axis=1)
    k = jnp.where(keep, 1, 0)
    hist = state.moved_hist
    for column, sign in zip(range(4), (-1, 1, -1, 1)):
        hist = hist.at[stats.counts[:, column]].add(sign * k)
    most = _most_moved(hist)
    cost = (
        (state.cost + jnp.sum(jnp.where(keep[:, None], stats.cost_delta, 0), axis=0))
        .at[3]
        .set(problem.service_move_weight * most)
    )
    moved_p, moved_q = stats.counts[:, 1] - stats.counts[:, 0], stats.counts[:, 3] - stats.counts[:, 2]
    return SearchState(
        assignment=_set_rows(
            state.assignment, jnp.stack([moves.p, moves.q], axis=1), jnp.stack([moves.b, moves.c], axis=1), service_kept
        ),
        usage=_set_rows(state.usage, machines, stats.used, machine_kept),
        held=_set_rows(state.held, machines, stats.held, machine_kept),
        locations=_set_rows(state.locations, services, stats.locations, service_kept),
        hoods=_set_rows(state.hoods, services, stats.hoods, service_kept),
        users_in=_users_moved(problem, state.users_in, services, keep, stats),
        moved=state.moved.at[moves.sp].add(k * moved_p).at[moves.sq].add(k * moved_q),
        moved_hist=hist,
        most_moved=most,
        cost=cost,
        energy=jnp.sum(cost),
    )


def footprint(problem: Problem, state: SearchState, move: Move) -> jax.Array:
    """Ids a move reads or writes: its machines and the services it moves, and for each process that
    crosses neighborhoods the services its service depends on (their presence is read, their
    `users_in` count written; a service's own count is read under its own id). Machines are ids
    0..M-1, services M.."""
    m = problem.capacity.shape[0]
    hood = problem.neighborhood
    crossing = jnp.concatenate(
        [
            jnp.where(hood[move.a] != hood[move.b], problem.depends_on[move.sp], -1),
            jnp.where(move.moves_q & (hood[move.b] != hood[move.c]), problem.depends_on[move.sq], -1),
        ]
    )
    return jnp.concatenate(
        [
            jnp.stack(
                [
                    move.a,
                    move.b,
                    jnp.where(move.c != move.a, move.c, -1),
                    m + move.sp,
                    jnp.where(move.moves_q, m + move.sq, -1),
                ]
            ),
            jnp.where(crossing >= 0, m + crossing, -1),
        ]
    )


def footprint_ids(problem: Problem) -> int:
    return problem.capacity.shape[0] + problem.spread_min.shape[0]


def solution(state: SearchState) -> jax.Array:
    return state.assignment


@functools.cache
def model(swap_probability: float) -> Model:
    """The machine-reassignment search for the annealer: with `swap_probability` a move is an ejection
    chain of two processes (`propose`). One `Model` per probability, so compiled searches are shared."""
    one = functools.partial(propose, swap_probability=swap_probability)
    return Model(
        start=start,
        propose=batched(one),
        apply=apply,
        refresh=refresh,
        solution=solution,
        draws=DRAWS,
        footprint=footprint,
        footprint_ids=footprint_ids,
    )
