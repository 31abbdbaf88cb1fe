"""Machine reassignment as a model for the plbjax annealer: energy terms, constraints and moves.

Energy is the challenge's objective in 64-bit integers (run under `jax.enable_x64`), so every
move's change is exact and the running energy never drifts. A move relocates process p from machine
a to machine b and, for a swap, process q from b to a; its change touches two machines' rows, the
two services' location and neighborhood counts, and the histogram of moved processes per service
that gives the service-move cost (a maximum) in O(1). A move's footprint (its machines, its services
and, across neighborhoods, the services whose dependencies it checks) lets the annealer apply several
independent accepted moves in one step (`AnnealConfig.parallel`).

Hard constraints are checked per move, so every state a chain visits is feasible: capacity (with the
resources of a moved process still held on its original machine for transient resources), conflict
(one process per service and machine), spread (locations covered per service) and dependency (a
service's neighborhoods hold the services it depends on).
"""

from __future__ import annotations


import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.annealer import Model, draw, uniform
from plbjax.roadef.instance import Instance
from plbjax.roadef.objective import balance_terms, load_terms

DRAWS = 3   # random words one proposal uses: process, target (or partner) and move kind


def _padded(rows: list[list[int]]) -> np.ndarray:
    width = max(1, max((len(r) for r in rows), default=0))
    out = np.full((len(rows), width), -1, np.int32)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


class Problem(eqx.Module):
    """One instance and its original assignment as arrays (move costs carry their weights)."""

    capacity: jax.Array           # [M, R] int64
    safety: jax.Array             # [M, R]
    transient: jax.Array          # [R] bool
    load_weight: jax.Array        # [R]
    location: jax.Array           # [M] int32
    neighborhood: jax.Array       # [M]
    machine_move_cost: jax.Array  # [M, M] x its weight
    requirement: jax.Array        # [P, R]
    process_move_cost: jax.Array  # [P] x its weight
    service: jax.Array            # [P] int32
    original: jax.Array           # [P] int32
    members: jax.Array            # [S, K] processes of each service (-1: padding)
    spread_min: jax.Array         # [S]
    depends_on: jax.Array         # [S, Kd] services each service depends on (-1: padding)
    depended_by: jax.Array        # [S, Kr] services depending on each service
    balance_r1: jax.Array         # [B]
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
    depended_by: list[list[int]] = [[] for _ in range(n_services)]
    for s, d in instance.dependencies:
        depends_on[s].append(int(d))
        depended_by[d].append(int(s))
    i64 = lambda x: jnp.asarray(np.asarray(x, np.int64))  # noqa: E731
    i32 = lambda x: jnp.asarray(np.asarray(x, np.int32))  # noqa: E731
    r1, r2, target, weight = (instance.balance.T if len(instance.balance) else np.zeros((4, 0), np.int64))
    return Problem(
        capacity=i64(instance.capacity), safety=i64(instance.safety), transient=jnp.asarray(instance.transient),
        load_weight=i64(instance.load_weight), location=i32(instance.location),
        neighborhood=i32(instance.neighborhood),
        machine_move_cost=i64(instance.machine_move_cost * instance.weight_machine_move),
        requirement=i64(instance.requirement),
        process_move_cost=i64(instance.process_move_cost * instance.weight_process_move),
        service=i32(instance.service), original=i32(original), members=i32(_padded(members)),
        spread_min=i32(instance.spread_min), depends_on=i32(_padded(depends_on)),
        depended_by=i32(_padded(depended_by)), balance_r1=i32(r1), balance_r2=i32(r2), balance_target=i64(target),
        balance_weight=i64(weight), service_move_weight=i64(instance.weight_service_move),
        n_locations=int(instance.location.max()) + 1, n_hoods=int(instance.neighborhood.max()) + 1)


class SearchState(eqx.Module):
    assignment: jax.Array     # [P] machine of each process
    usage: jax.Array          # [M, R]
    held: jax.Array           # [M, R] resources of processes moved away from their original machine
    locations: jax.Array      # [S, L] processes of each service per location
    hoods: jax.Array          # [S, N] processes of each service per neighborhood
    moved: jax.Array          # [S] moved processes per service
    moved_hist: jax.Array     # [K + 1] services per moved count
    most_moved: jax.Array     # max of `moved`
    cost: jax.Array           # [5] load, balance, process move, service move, machine move
    energy: jax.Array         # sum of `cost`


def _machine_terms(problem: Problem, machines, used):
    """[2] (load, balance) cost of `machines` with usage rows `used` (the host objective's terms)."""
    return jnp.stack([
        jnp.sum(load_terms(problem.safety[machines], problem.load_weight, used, jnp)),
        jnp.sum(balance_terms(problem.capacity[machines], problem.balance_r1, problem.balance_r2,
                              problem.balance_target, problem.balance_weight, used, jnp))])


def _fresh(problem: Problem, assignment: jax.Array) -> SearchState:
    n_machines, n_services = problem.capacity.shape[0], problem.spread_min.shape[0]
    req = problem.requirement
    usage = jax.ops.segment_sum(req, assignment, num_segments=n_machines)
    away = assignment != problem.original
    held = jax.ops.segment_sum(jnp.where(away[:, None], req, 0), problem.original, num_segments=n_machines)

    def counts(domain, n):          # processes of each service per location / neighborhood
        return jnp.zeros((n_services, n), jnp.int32).at[problem.service, domain[assignment]].add(1)

    locations = counts(problem.location, problem.n_locations)
    hoods = counts(problem.neighborhood, problem.n_hoods)
    moved = jax.ops.segment_sum(away.astype(jnp.int32), problem.service, num_segments=n_services)
    hist = jnp.zeros(problem.members.shape[1] + 1, jnp.int32).at[moved].add(1)
    most = jnp.max(moved)
    cost = jnp.stack([
        *_machine_terms(problem, jnp.arange(n_machines), usage),
        jnp.sum(jnp.where(away, problem.process_move_cost, 0)),
        problem.service_move_weight * most,
        jnp.sum(problem.machine_move_cost[problem.original, assignment])]).astype(jnp.int64)
    return SearchState(assignment=assignment, usage=usage, held=held, locations=locations, hoods=hoods,
                       moved=moved, moved_hist=hist, most_moved=most, cost=cost, energy=jnp.sum(cost))


def start(problem: Problem) -> SearchState:
    """The state at the original assignment."""
    return _fresh(problem, problem.original)


def refresh(problem: Problem, state: SearchState) -> SearchState:
    """The state recomputed from its assignment (integers: a check, nothing drifts)."""
    return _fresh(problem, state.assignment)


class Move(eqx.Module):
    p: jax.Array            # process moving a -> b
    q: jax.Array            # process moving b -> a (a swap) when `swap`
    swap: jax.Array
    a: jax.Array
    b: jax.Array
    sp: jax.Array           # their services
    sq: jax.Array


class MoveStats(eqx.Module):
    """What a move changes, computed by `propose` against the state it was drawn from."""
    used: jax.Array         # [2, R] usage of a and b after the move
    held: jax.Array         # [2, R]
    locations: jax.Array    # [2, L] rows of services sp and sq after the move
    hoods: jax.Array        # [2, N]
    counts: jax.Array       # [4] moved processes of sp before/after, of sq before/after (after sp's change)
    cost_delta: jax.Array   # [5] change of each cost part, the service-move part as if alone


def _counts_after(table, services, domains, changes, rows):
    """Rows `rows` of a per-service count table after the move's relocations (service, domain, +-1)."""
    out = table[jnp.maximum(rows, 0)]
    for s, d, c in zip(services, domains, changes):
        out = out + jnp.where(rows[..., None] == s, c, 0) * jax.nn.one_hot(d, table.shape[1], dtype=out.dtype)
    return out


def _dependencies_kept(problem: Problem, hoods_of, services):
    """Every moving service's neighborhoods still hold the services it depends on, and every service
    depending on it still finds it."""
    ok = jnp.bool_(True)
    for s in services:
        mine = hoods_of(s[None])[0] > 0
        deps = problem.depends_on[s]
        on = hoods_of(deps) > 0
        ok &= jnp.all((deps[:, None] < 0) | ~mine[None, :] | on)
        users = problem.depended_by[s]
        theirs = hoods_of(users) > 0
        ok &= jnp.all((users[:, None] < 0) | ~theirs | mine[None, :])
    return ok


def _most_moved(hist: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(hist > 0, jnp.arange(hist.shape[0]), 0)).astype(jnp.int32)


def propose(problem: Problem, state: SearchState, words, swap_probability: float):
    """Shift a random process to a random other machine, or swap the machines of two processes."""
    n_proc, n_machines = problem.service.shape[0], problem.capacity.shape[0]
    p = draw(words[0], n_proc)
    a = state.assignment[p]
    swap = uniform(words[2]) < swap_probability
    q = draw(words[1], n_proc)
    shift_to = draw(words[1], n_machines - 1)
    b = jnp.where(swap, state.assignment[q], shift_to + (shift_to >= a))
    home_p, home_q = problem.original[p], problem.original[q]
    sp, sq = problem.service[p], problem.service[q]
    req_p, req_q = problem.requirement[p], jnp.where(swap, 1, 0) * problem.requirement[q]
    on = lambda x: jnp.where(x, 1, 0)  # noqa: E731

    # resources: usage and (for transient resources) resources still held on the original machine
    used = jnp.stack([state.usage[a] - req_p + req_q, state.usage[b] + req_p - req_q])
    held = jnp.stack([state.held[a] + req_p * on(a == home_p) - req_q * on(a == home_q),
                      state.held[b] - req_p * on(b == home_p) + req_q * on(b == home_q)])
    pair = jnp.stack([a, b])
    fits = jnp.all(jnp.where(problem.transient, used + held, used) <= problem.capacity[pair])

    # conflict: where the members of each moving service end up
    def alone(s, machine):
        row = problem.members[s]
        where = state.assignment[jnp.maximum(row, 0)]
        where = jnp.where(row == p, b, jnp.where(swap & (row == q), a, where))
        return jnp.sum((row >= 0) & (where == machine)) <= 1

    no_conflict = alone(sp, b) & (~swap | alone(sq, a))

    # spread and dependency from the per-service counts after the move
    services = (sp, sp, sq, sq)
    changes = (-1, 1, -on(swap), on(swap))
    loc = (problem.location[a], problem.location[b], problem.location[b], problem.location[a])
    hood = (problem.neighborhood[a], problem.neighborhood[b], problem.neighborhood[b], problem.neighborhood[a])
    rows = jnp.stack([sp, sq])
    locations = _counts_after(state.locations, services, loc, changes, rows)
    hoods = _counts_after(state.hoods, services, hood, changes, rows)
    spread_ok = jnp.all(jnp.sum(locations > 0, axis=1) >= problem.spread_min[rows])
    hoods_of = lambda r: _counts_after(state.hoods, services, hood, changes, r)  # noqa: E731
    deps_ok = _dependencies_kept(problem, hoods_of, (sp, sq))

    # the objective's change
    before = _machine_terms(problem, pair, state.usage[pair])
    after = _machine_terms(problem, pair, used)
    moved_p = on(b != home_p) - on(a != home_p)
    moved_q = on(swap) * (on(a != home_q) - on(b != home_q))
    count_p = state.moved[sp]
    count_q = jnp.where(sq == sp, count_p + moved_p, state.moved[sq])
    counts = jnp.stack([count_p, count_p + moved_p, count_q, count_q + moved_q])
    candidates = state.most_moved + jnp.arange(2, -3, -1)
    hist = state.moved_hist[jnp.clip(candidates, 0, state.moved_hist.shape[0] - 1)]
    for c, d in zip(counts, (-1, 1, -1, 1)):
        hist = hist + d * on(candidates == c)
    present = (candidates >= 0) & (candidates < state.moved_hist.shape[0]) & (hist > 0)
    most = jnp.where(jnp.any(present), candidates[jnp.argmax(present)], 0)
    cost_delta = jnp.stack([
        after[0] - before[0], after[1] - before[1],
        problem.process_move_cost[p] * moved_p + problem.process_move_cost[q] * moved_q,
        problem.service_move_weight * (most - state.most_moved),
        problem.machine_move_cost[home_p, b] - problem.machine_move_cost[home_p, a]
        + on(swap) * (problem.machine_move_cost[home_q, a] - problem.machine_move_cost[home_q, b])])
    valid = (a != b) & fits & no_conflict & spread_ok & deps_ok
    move = Move(p=p, q=q, swap=swap, a=a, b=b, sp=sp, sq=sq)
    stats = MoveStats(used=used, held=held, locations=locations, hoods=hoods, counts=counts, cost_delta=cost_delta)
    return move, state.energy + jnp.sum(cost_delta), valid, stats


def _set_rows(table, first, second, after, keep_first, keep_second):
    """`table` with rows `first` / `second` [T] set to after[:, 0] / after[:, 1] where kept."""
    size = table.shape[0]
    return (table.at[jnp.where(keep_first, first, size)].set(after[:, 0], mode="drop")
            .at[jnp.where(keep_second, second, size)].set(after[:, 1], mode="drop"))


def apply(problem: Problem, state: SearchState, moves: Move, keep, energies, stats: MoveStats) -> SearchState:
    """The state after every kept move (kept moves have disjoint footprints: distinct machines and
    services, so no two of them write the same row)."""
    swapped = keep & moves.swap
    k = jnp.where(keep, 1, 0)
    hist = state.moved_hist
    for column, sign in zip(range(4), (-1, 1, -1, 1)):
        hist = hist.at[stats.counts[:, column]].add(sign * k)
    most = _most_moved(hist)
    cost = (state.cost + jnp.sum(jnp.where(keep[:, None], stats.cost_delta, 0), axis=0)).at[3].set(
        problem.service_move_weight * most)
    moved_p, moved_q = stats.counts[:, 1] - stats.counts[:, 0], stats.counts[:, 3] - stats.counts[:, 2]
    return SearchState(
        assignment=_set_rows(state.assignment, moves.p, moves.q, jnp.stack([moves.b, moves.a], axis=1), keep, swapped),
        usage=_set_rows(state.usage, moves.a, moves.b, stats.used, keep, keep),
        held=_set_rows(state.held, moves.a, moves.b, stats.held, keep, keep),
        locations=_set_rows(state.locations, moves.sp, moves.sq, stats.locations, keep, swapped),
        hoods=_set_rows(state.hoods, moves.sp, moves.sq, stats.hoods, keep, swapped),
        moved=state.moved.at[moves.sp].add(k * moved_p).at[moves.sq].add(k * moved_q),
        moved_hist=hist, most_moved=most, cost=cost, energy=jnp.sum(cost))


def footprint(problem: Problem, state: SearchState, move: Move) -> jax.Array:
    """Ids a move reads or writes: its two machines and the services it moves, and when it crosses
    neighborhoods the services whose dependencies it checks (machines 0..M-1, services M..)."""
    m = problem.capacity.shape[0]
    related = lambda s: jnp.concatenate([problem.depends_on[s], problem.depended_by[s]])  # noqa: E731
    crosses = problem.neighborhood[move.a] != problem.neighborhood[move.b]
    crossing = jnp.where(crosses, jnp.concatenate([related(move.sp), jnp.where(move.swap, related(move.sq), -1)]),
                         -1)
    ids = jnp.concatenate([jnp.stack([move.a, move.b, m + move.sp, jnp.where(move.swap, m + move.sq, -1)]),
                           jnp.where(crossing >= 0, m + crossing, -1)])
    return ids


def footprint_ids(problem: Problem) -> int:
    return problem.capacity.shape[0] + problem.spread_min.shape[0]


def solution(state: SearchState) -> jax.Array:
    return state.assignment


MODEL = Model(start=start, propose=propose, apply=apply, refresh=refresh, solution=solution, draws=DRAWS,
              footprint=footprint, footprint_ids=footprint_ids)
