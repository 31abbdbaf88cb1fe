"""Benchmark baseline: one sequential simulated-annealing chain compiled with numba.

This is the annealer a user would write instead of plbjax: the same encoded arrays (a
`plbjax.encoding.Problem`, converted to numpy once), the same move set and probabilities, the same
validity rules, the same SF energy with the same incremental update as `plbjax.annealer.evaluate`,
Metropolis acceptance and the same geometric temperature schedule (T0 -> T0 * final_ratio over
`steps`), all in float64 and in plain sequential loops.

Differences that favour the baseline (it is the thing to beat):
  * only the chosen proposal is built (plbjax builds a move and a swap and selects one);
  * the best energy is tracked at every step, not at block boundaries: the best placement is kept
    as the current one plus an undo log of the moves accepted since, materialised only when the
    log grows past R + P entries or at the end (O(1) amortised per step);
  * float64 needs no frequent exact refresh: the statistics are recomputed from scratch every
    `refresh_steps` steps (default 100,000) instead of every 1,000.

Numba is a benchmark-only dependency (`pip install plbjax[bench]`).

    from baseline_numba import run_baseline
    out = run_baseline(problem, steps=1_000_000, seed=0, t0=t0)      # or seconds=10.0
"""

from __future__ import annotations

import time
from collections import namedtuple

import numba as nb
import numpy as np

from plbjax.encoding import Problem

SMALL_VALUE = 0.001
MOVE_COST_OFFSET = 1000.0

# The Problem's fields as numpy arrays: floats as float64, ints as int64, masks as bool.
Arrays = namedtuple("Arrays", [
    "node_up", "capacity", "metric_nodes", "metric_node_count", "fd_tree", "ud_tree",
    "replica_partition", "replica_service", "load_primary", "load_secondary", "move_cost",
    "partition_replicas", "partition_service", "service_class", "service_metrics",
    "class_nodes", "class_node_count", "class_allowed", "fd_children", "ud_children",
    "global_weight", "local_weight", "initial_node", "initial_primary", "swap_cost",
    "movable", "n_movable", "swappable", "n_swappable", "check_capacity",
    "check_fault_domain", "check_upgrade_domain", "replica_count",
])

_SCALARS_F = ("swap_cost", "replica_count")
_SCALARS_I = ("n_movable", "n_swappable")
_SCALARS_B = ("check_capacity", "check_fault_domain", "check_upgrade_domain")


def problem_arrays(problem: Problem) -> Arrays:
    """The Problem as numpy arrays for numba (done once per problem)."""
    out = {}
    for name in Arrays._fields:
        a = np.asarray(getattr(problem, name))
        if name in _SCALARS_F:
            out[name] = float(a)
        elif name in _SCALARS_I:
            out[name] = int(a)
        elif name in _SCALARS_B:
            out[name] = bool(a)
        elif a.dtype == np.bool_:
            out[name] = np.ascontiguousarray(a)
        elif np.issubdtype(a.dtype, np.integer):
            out[name] = np.ascontiguousarray(a, dtype=np.int64)
        else:
            out[name] = np.ascontiguousarray(a, dtype=np.float64)
    return Arrays(**out)


# Chain state. Scalars live in `sc`: [local_score, cost, energy, best_energy, accepted, log_len,
# log_mode (1: best = current + undo log, 0: best = the explicit best arrays)].
State = namedtuple("State", [
    "node_of", "primary_of", "loads", "local", "g_total", "g_sq", "g_centre",
    "l_total", "l_sq", "l_centre", "sc", "best_node_of", "best_primary_of",
    "log_kind", "log_index", "log_value",
])
_LS, _COST, _E, _BEST, _ACC, _LOGN, _LOGMODE = range(7)


# ------------------------------------------------------------------------------------ kernels


@nb.njit(cache=True)
def _seed(seed):
    np.random.seed(seed)


@nb.njit(inline="always", cache=True)
def _deviation(total, sq, count, centre):
    n = max(count, 1.0)
    mean = total / n
    var = max(sq / n - (mean - centre) ** 2, 0.0)
    return np.sqrt(var) / mean if mean > 0 else 0.0


@nb.njit(cache=True)
def _refresh(A, st):
    """Recompute every statistic exactly from the placement (recentred on the current means)."""
    R, M = A.load_primary.shape
    S, N, Ms = st.local.shape
    st.loads[:] = 0.0
    st.local[:] = 0.0
    for r in range(R):
        n = st.node_of[r]
        if n < 0:
            continue
        p = A.replica_partition[r]
        prim = st.primary_of[p] == r
        for m in range(M):
            st.loads[n, m] += A.load_primary[r, m] if prim else A.load_secondary[r, m]
        s = A.replica_service[r]
        for k in range(Ms):
            slot = A.service_metrics[s, k]
            if slot >= 0:
                st.local[s, n, k] += A.load_primary[r, slot] if prim else A.load_secondary[r, slot]
    g = 0.0
    for m in range(M):
        tot = 0.0
        for n in range(N):
            if A.metric_nodes[m, n]:
                tot += st.loads[n, m]
        c = tot / max(A.metric_node_count[m], 1.0)
        sq = 0.0
        for n in range(N):
            if A.metric_nodes[m, n]:
                sq += (st.loads[n, m] - c) ** 2
        st.g_total[m], st.g_sq[m], st.g_centre[m] = tot, sq, c
        g += A.global_weight[m] * _deviation(tot, sq, A.metric_node_count[m], c)
    local_score = 0.0
    for s in range(S):
        cls = A.service_class[s]
        cnt = float(A.class_node_count[cls])
        for k in range(Ms):
            tot = 0.0
            for n in range(N):
                if A.class_allowed[cls, n]:
                    tot += st.local[s, n, k]
            c = tot / max(cnt, 1.0)
            sq = 0.0
            for n in range(N):
                if A.class_allowed[cls, n]:
                    sq += (st.local[s, n, k] - c) ** 2
            st.l_total[s, k], st.l_sq[s, k], st.l_centre[s, k] = tot, sq, c
            local_score += A.local_weight[s, k] * _deviation(tot, sq, cnt, c)
    cost = 0.0
    for r in range(R):
        if A.initial_node[r] >= 0 and st.node_of[r] != A.initial_node[r]:
            cost += A.move_cost[r]
    for p in range(st.primary_of.shape[0]):
        if A.initial_primary[p] >= 0 and st.primary_of[p] != A.initial_primary[p]:
            cost += A.swap_cost
    st.sc[_LS] = local_score
    st.sc[_COST] = cost
    st.sc[_E] = (g + local_score + SMALL_VALUE) * (cost + A.replica_count + MOVE_COST_OFFSET)


@nb.njit(cache=True)
def domain_violation(tree, children, nodes, cls):
    """plbjax.constraints.domain_violation: sum over levels and parents of max(0, max - min - 1)."""
    K = nodes.shape[0]
    total = 0
    for level in range(1, tree.shape[1]):
        for i in range(K):
            if nodes[i] < 0:
                continue
            parent = tree[nodes[i], level - 1]
            first = True
            for j in range(i):
                if nodes[j] >= 0 and tree[nodes[j], level - 1] == parent:
                    first = False
                    break
            if not first:
                continue
            most, least, occupied = 0, K + 1, 0
            for j in range(K):
                if nodes[j] < 0 or tree[nodes[j], level - 1] != parent:
                    continue
                child = tree[nodes[j], level]
                count, first_child = 0, True
                for q in range(K):
                    if nodes[q] >= 0 and tree[nodes[q], level] == child:
                        count += 1
                        if q < j:
                            first_child = False
                if first_child:
                    occupied += 1
                most = max(most, count)
                least = min(least, count)
            if occupied < children[cls, parent]:
                least = 0
            total += max(most - least - 1, 0)
    return total


@nb.njit(inline="always", cache=True)
def _fits(A, loads, node, delta):
    if not A.check_capacity:
        return True
    for m in range(delta.shape[0]):
        if delta[m] > 0 and loads[node, m] + delta[m] > A.capacity[node, m]:
            return False
    return True


@nb.njit(cache=True)
def _materialise_arrays(node_of, primary_of, best_node_of, best_primary_of, log_kind, log_index,
                        log_value, sc):
    """best arrays = current placement with the undo log applied in reverse; log mode off."""
    if sc[_LOGMODE] == 0:
        return
    best_node_of[:] = node_of
    best_primary_of[:] = primary_of
    for i in range(int(sc[_LOGN]) - 1, -1, -1):
        if log_kind[i] == 0:
            best_node_of[log_index[i]] = log_value[i]
        else:
            best_primary_of[log_index[i]] = log_value[i]
    sc[_LOGN] = 0
    sc[_LOGMODE] = 0


def _materialise(st: State) -> None:
    _materialise_arrays(st.node_of, st.primary_of, st.best_node_of, st.best_primary_of,
                        st.log_kind, st.log_index, st.log_value, st.sc)


@nb.njit(inline="always", cache=True)
def _fits(check, capacity, loads, node, delta):
    """Adding `delta` to `node` keeps every metric that grows within capacity (constraints.fits)."""
    if not check:
        return True
    for m in range(delta.shape[0]):
        if delta[m] > 0 and loads[node, m] + delta[m] > capacity[node, m]:
            return False
    return True


@nb.njit(cache=True)
def _anneal(A, st, first, n, total, t0, final_ratio, swap_probability, refresh_steps, probe):
    """Steps first .. first + n - 1 of a `total`-step schedule T0 * final_ratio ** (i / total).

    One step = plbjax.annealer.step: propose (moves.propose), incremental energy
    (annealer.evaluate), Metropolis, apply. With `probe`, nothing is applied and the largest
    |dE| over the valid proposals is returned (annealer.probe).

    Everything is unpacked into locals once: passing the namedtuples into a per-step function
    costs a reference-count update per array field, which dominated the step time.
    """
    node_of, primary_of, loads, local = st.node_of, st.primary_of, st.loads, st.local
    g_total, g_sq, g_centre = st.g_total, st.g_sq, st.g_centre
    l_total, l_sq, l_centre, sc = st.l_total, st.l_sq, st.l_centre, st.sc
    best_node_of, best_primary_of = st.best_node_of, st.best_primary_of
    log_kind, log_index, log_value = st.log_kind, st.log_index, st.log_value
    log_cap = log_kind.shape[0]
    node_up, capacity, metric_nodes, metric_node_count = (A.node_up, A.capacity, A.metric_nodes,
                                                          A.metric_node_count)
    fd_tree, ud_tree, fd_children, ud_children = A.fd_tree, A.ud_tree, A.fd_children, A.ud_children
    replica_partition, replica_service = A.replica_partition, A.replica_service
    load_primary, load_secondary, move_cost = A.load_primary, A.load_secondary, A.move_cost
    partition_replicas, partition_service = A.partition_replicas, A.partition_service
    service_class, service_metrics = A.service_class, A.service_metrics
    class_nodes, class_node_count, class_allowed = A.class_nodes, A.class_node_count, A.class_allowed
    global_weight, local_weight = A.global_weight, A.local_weight
    initial_node, initial_primary = A.initial_node, A.initial_primary
    movable, swappable = A.movable, A.swappable
    n_movable, n_swappable = A.n_movable, A.n_swappable
    swap_cost, replica_count = A.swap_cost, A.replica_count
    check_capacity, check_fd, check_ud = (A.check_capacity, A.check_fault_domain,
                                          A.check_upgrade_domain)

    M = load_primary.shape[1]
    Ms = service_metrics.shape[1]
    K = partition_replicas.shape[1]
    load, delta_a, delta_b = np.empty(M), np.empty(M), np.empty(M)
    g_tot, g_sq_new = np.empty(M), np.empty(M)
    da_loc, db_loc, l_tot, l_sq_new = np.empty(Ms), np.empty(Ms), np.empty(Ms), np.empty(Ms)
    before, after = np.empty(K, np.int64), np.empty(K, np.int64)
    can_move, can_swap = n_movable > 0, n_swappable > 0
    largest = 0.0
    cooling = final_ratio ** (1.0 / total)               # T_i = t0 * final_ratio ** (i / total)
    temperature = t0 * final_ratio ** (first / total) / cooling

    for i in range(first, first + n):
        temperature *= cooling
        if not probe and i > 0 and i % refresh_steps == 0:
            _refresh(A, st)
            if sc[_E] < sc[_BEST]:
                sc[_BEST], sc[_LOGMODE], sc[_LOGN] = sc[_E], 1, 0
        if not (can_move or can_swap):
            continue
        if can_move and can_swap:
            swap = np.random.random() < swap_probability
        else:
            swap = can_swap

        # ---- proposal (moves.propose_swap / moves.propose_move), `continue` when invalid
        if swap:
            p = swappable[np.random.randint(0, n_swappable)]
            old = primary_of[p]
            size, pos_old = 0, -1
            for k in range(K):
                if partition_replicas[p, k] >= 0:
                    size += 1
                if pos_old < 0 and partition_replicas[p, k] == old:
                    pos_old = k
            pos_old = max(pos_old, 0)
            j = np.random.randint(0, max(size - 1, 1))
            r = partition_replicas[p, j + (1 if j >= pos_old else 0)]
            a, b = node_of[old], node_of[r]
            if size < 2 or a < 0 or b < 0 or not node_up[b]:
                continue
            for m in range(M):
                delta_a[m] = load_secondary[old, m] - load_primary[old, m]
                delta_b[m] = load_primary[r, m] - load_secondary[r, m]
            if not (_fits(check_capacity, capacity, loads, a, delta_a)
                    and _fits(check_capacity, capacity, loads, b, delta_b)):
                continue
            init = initial_primary[p]
            cost_delta = swap_cost * ((1.0 if r != init else 0.0) - (1.0 if old != init else 0.0))
            s = partition_service[p]
        else:
            r = movable[np.random.randint(0, n_movable)]
            p, s = replica_partition[r], replica_service[r]
            cls = service_class[s]
            b = class_nodes[cls, np.random.randint(0, max(class_node_count[cls], 1))]
            a = node_of[r]
            clash = False
            for k in range(K):
                rr = partition_replicas[p, k]
                before[k] = node_of[rr] if rr >= 0 else -1
                clash |= before[k] == b                      # replica exclusion (and b == a)
                after[k] = b if rr == r else before[k]
            if clash:
                continue
            prim = primary_of[p] == r
            for m in range(M):
                load[m] = load_primary[r, m] if prim else load_secondary[r, m]
                delta_a[m] = -load[m]
                delta_b[m] = load[m]
            if not _fits(check_capacity, capacity, loads, b, load):
                continue
            if check_fd and (domain_violation(fd_tree, fd_children, after, cls)
                             > domain_violation(fd_tree, fd_children, before, cls)):
                continue
            if check_ud and (domain_violation(ud_tree, ud_children, after, cls)
                             > domain_violation(ud_tree, ud_children, before, cls)):
                continue
            init = initial_node[r]
            cost_delta = move_cost[r] * ((1.0 if b != init else 0.0) - (1.0 if a != init else 0.0))

        # ---- incremental energy (annealer.evaluate): two node-load changes
        g_new = 0.0
        for m in range(M):
            c = g_centre[m]
            tot, sq = g_total[m], g_sq[m]
            if metric_nodes[m, a]:
                d = delta_a[m]
                sq += d * (2.0 * (loads[a, m] - c) + d)
                tot += d
            if metric_nodes[m, b]:
                d = delta_b[m]
                sq += d * (2.0 * (loads[b, m] - c) + d)
                tot += d
            g_tot[m], g_sq_new[m] = tot, sq
            g_new += global_weight[m] * _deviation(tot, sq, metric_node_count[m], c)
        cls = service_class[s]
        l_count = float(class_node_count[cls])
        in_a, in_b = class_allowed[cls, a], class_allowed[cls, b]
        old_local, new_local = 0.0, 0.0
        for k in range(Ms):
            slot = service_metrics[s, k]
            da_loc[k] = delta_a[slot] if slot >= 0 else 0.0
            db_loc[k] = delta_b[slot] if slot >= 0 else 0.0
            c, w = l_centre[s, k], local_weight[s, k]
            tot, sq = l_total[s, k], l_sq[s, k]
            old_local += w * _deviation(tot, sq, l_count, c)
            if in_a:
                sq += da_loc[k] * (2.0 * (local[s, a, k] - c) + da_loc[k])
                tot += da_loc[k]
            if in_b:
                sq += db_loc[k] * (2.0 * (local[s, b, k] - c) + db_loc[k])
                tot += db_loc[k]
            l_tot[k], l_sq_new[k] = tot, sq
            new_local += w * _deviation(tot, sq, l_count, c)
        local_score = sc[_LS] - old_local + new_local
        cost = sc[_COST] + cost_delta
        new_energy = (g_new + local_score + SMALL_VALUE) * (cost + replica_count + MOVE_COST_OFFSET)
        delta = new_energy - sc[_E]
        if probe:
            largest = max(largest, abs(delta))
            continue

        # ---- Metropolis
        if delta > 0 and not (np.random.random() < np.exp(-delta / max(temperature, 1e-30))):
            continue

        # ---- apply, keeping the undo log while the best is "current + log"
        if sc[_LOGMODE] == 1:
            nlog = int(sc[_LOGN])
            if nlog == log_cap:
                _materialise_arrays(node_of, primary_of, best_node_of, best_primary_of,
                                    log_kind, log_index, log_value, sc)
            else:
                if swap:
                    log_kind[nlog], log_index[nlog], log_value[nlog] = 1, p, primary_of[p]
                else:
                    log_kind[nlog], log_index[nlog], log_value[nlog] = 0, r, node_of[r]
                sc[_LOGN] = nlog + 1
        if swap:
            primary_of[p] = r
        else:
            node_of[r] = b
        for m in range(M):
            loads[a, m] += delta_a[m]
            loads[b, m] += delta_b[m]
            g_total[m], g_sq[m] = g_tot[m], g_sq_new[m]
        for k in range(Ms):
            local[s, a, k] += da_loc[k]
            local[s, b, k] += db_loc[k]
            l_total[s, k], l_sq[s, k] = l_tot[k], l_sq_new[k]
        sc[_LS] = local_score
        sc[_COST] = cost
        sc[_E] = new_energy
        sc[_ACC] += 1
        if new_energy < sc[_BEST]:
            sc[_BEST], sc[_LOGMODE], sc[_LOGN] = new_energy, 1, 0
    return largest


# ------------------------------------------------------------------------------------ driver


def _new_state(A: Arrays, S: int, N: int, Ms: int) -> State:
    R, M = A.load_primary.shape
    P = A.partition_replicas.shape[0]
    log = R + P
    st = State(
        node_of=A.initial_node.copy(), primary_of=A.initial_primary.copy(),
        loads=np.zeros((N, M)), local=np.zeros((S, N, Ms)),
        g_total=np.zeros(M), g_sq=np.zeros(M), g_centre=np.zeros(M),
        l_total=np.zeros((S, Ms)), l_sq=np.zeros((S, Ms)), l_centre=np.zeros((S, Ms)),
        sc=np.zeros(7), best_node_of=A.initial_node.copy(), best_primary_of=A.initial_primary.copy(),
        log_kind=np.zeros(log, np.int64), log_index=np.zeros(log, np.int64),
        log_value=np.zeros(log, np.int64),
    )
    _refresh(A, st)
    st.sc[_BEST] = st.sc[_E]
    st.sc[_LOGMODE] = 1                              # best = current (empty log)
    return st


def _init(problem: Problem | Arrays, seed: int):
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    S, Ms = A.service_metrics.shape
    N = A.node_up.shape[0]
    _seed(int(seed))
    return A, _new_state(A, S, N, Ms)


_compile_seconds: float | None = None


def compile_kernels() -> float:
    """Compile every kernel on a tiny problem; returns the seconds it took (0 once compiled)."""
    global _compile_seconds
    if _compile_seconds is not None:
        return 0.0
    from plbjax.encoding import encode
    from plbjax.generator import ClusterSpec, generate
    from plbjax.state import parse_state

    start = time.perf_counter()
    tiny, _ = encode(parse_state(generate(ClusterSpec(nodes=8, services=2, partitions_per_service=2,
                                                      fault_domains=2, upgrade_domains=2))))
    A, st = _init(tiny, 0)
    _anneal(A, st, 0, 20, 20, 1.0, 1e-4, 0.3, 5, True)
    _anneal(A, st, 0, 20, 20, 1.0, 1e-4, 0.3, 5, False)
    _materialise(st)
    _compile_seconds = time.perf_counter() - start
    return _compile_seconds


def probe_temperature(problem: Problem | Arrays, seed: int = 0, probes: int = 50,
                      swap_probability: float = 0.3, factor: float = 50.0) -> float:
    """SF's initial temperature: `factor` x the largest |dE| of `probes` random valid moves."""
    compile_kernels()
    A, st = _init(problem, seed)
    found = _anneal(A, st, 0, probes, probes, 1.0, 1.0, swap_probability, 1 << 62, True)
    return factor * found if found > 0 else max(float(st.sc[_E]), 1.0)


def run_baseline(problem: Problem | Arrays, steps: int | None = None, seed: int = 0,
                 t0: float | None = None, final_ratio: float = 1e-4, swap_probability: float = 0.3,
                 checkpoints: int = 50, seconds: float | None = None,
                 refresh_steps: int = 100_000) -> dict:
    """Anneal one chain for `steps` steps (or, with steps=None, about `seconds` of wall time).

    Returns dict(best_energy, initial_energy, energy_trace=[(seconds, best energy)], steps,
    seconds, accepted, t0, node_of, primary_of (the best placement), compile_seconds).
    `checkpoints`: the schedule is run in this many chunks, with (elapsed, best) recorded after
    each. Compilation is excluded from `seconds` (kernels are compiled on a tiny problem first).
    With `seconds`, the step count is calibrated by timing short runs of the same schedule.
    """
    compile_s = compile_kernels()
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    if t0 is None:
        t0 = probe_temperature(A, seed, swap_probability=swap_probability)
    if steps is None:
        if seconds is None:
            raise ValueError("give steps or seconds")
        steps = _calibrate(A, seconds, seed, t0, final_ratio, swap_probability, refresh_steps)
    steps = max(int(steps), 1)
    A, st = _init(A, seed)
    initial = float(st.sc[_E])
    bounds = np.unique(np.linspace(0, steps, max(int(checkpoints), 1) + 1).astype(np.int64))
    trace = [(0.0, initial)]
    start = time.perf_counter()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        _anneal(A, st, int(lo), int(hi - lo), steps, float(t0), float(final_ratio),
                float(swap_probability), int(refresh_steps), False)
        trace.append((time.perf_counter() - start, float(st.sc[_BEST])))
    elapsed = time.perf_counter() - start
    _materialise(st)
    return dict(best_energy=float(st.sc[_BEST]), initial_energy=initial, energy_trace=trace,
                steps=steps, seconds=elapsed, accepted=int(st.sc[_ACC]), t0=float(t0),
                node_of=st.best_node_of.copy(), primary_of=st.best_primary_of.copy(),
                compile_seconds=compile_s)


def _calibrate(A, seconds, seed, t0, final_ratio, swap_probability, refresh_steps) -> int:
    """Steps that fill `seconds`: time whole short schedules until one takes >= 2% of the budget."""
    n = 20_000
    while True:
        _, st = _init(A, seed)
        start = time.perf_counter()
        _anneal(A, st, 0, n, n, float(t0), float(final_ratio), float(swap_probability),
                int(refresh_steps), False)
        took = time.perf_counter() - start
        if took >= max(0.02 * seconds, 0.05) or n >= 1 << 34:
            return int(n * seconds / took)
        n *= 4
