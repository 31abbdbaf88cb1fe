"""One sequential simulated-annealing chain compiled with numba (see `plbjax.baseline`).

The same encoded arrays as plbjax (a `plbjax.sf.Problem`, converted to numpy once), the same replica
moves and primary swaps, the same validity rules, the same energy (SF's energy plus the
constraint-violation penalties) with the same incremental update as the SF model's `evaluate`,
Metropolis acceptance and the same geometric temperature schedule (T0 -> T0 * final_ratio over the
run), all in float64 and in plain sequential loops.

Differences that favour the baseline (it is the thing to beat):
  * only the chosen proposal is built (plbjax builds several kinds of proposal and selects one);
  * the best energy is tracked at every step, not at block boundaries: the best placement is kept
    as the current one plus an undo log of the moves accepted since, materialised only when the
    log grows past R + P entries or at the end (O(1) amortised per step);
  * float64 needs no frequent exact refresh: the statistics are recomputed from scratch every
    `refresh_steps` steps (default 100,000) instead of every 1,000.

Rules the baseline does not implement (affinity, preferred primary domains, defragmentation,
resource thresholds, history, closed nodes, throttles) make `problem_arrays` raise
NotImplementedError; the benchmark's generated clusters use none of them. Nor does it propose
exchanges (two replicas trading nodes), which plbjax's model mixes in.

Kernels are cached on disk (numba cache=True: plbjax/baseline/__pycache__/, git-ignored); a cold
compile takes 15-30 s.
"""

from __future__ import annotations

import time
from collections import namedtuple

import numba as nb
import numpy as np

from plbjax.sf import (
    ClusterSpec,
    ClusterState,
    Index,
    Search,
    encode,
    full_scope,
    generate,
    parse_state,
    scope,
)

# The constraint indices of `SearchScope.enforce` / `Problem.penalty`: the one private import, read to map
# plbjax's order onto the baseline's own (below) by name.
from plbjax.sf._problem import CAPACITY as SF_CAPACITY
from plbjax.sf._problem import FAULT_DOMAIN as SF_FAULT_DOMAIN
from plbjax.sf._problem import PLACEMENT as SF_PLACEMENT
from plbjax.sf._problem import UNPLACED as SF_UNPLACED
from plbjax.sf._problem import UPGRADE_DOMAIN as SF_UPGRADE_DOMAIN

SMALL_VALUE = 0.001
MOVE_COST_OFFSET = 1000.0

# The Problem's fields as numpy arrays: floats as float64, ints as int64, masks as bool.
Arrays = namedtuple(
    "Arrays",
    [
        "node_up",
        "capacity",
        "metric_nodes",
        "metric_node_count",
        "fd_tree",
        "ud_tree",
        "replica_partition",
        "replica_service",
        "load_primary",
        "load_secondary",
        "move_cost",
        "partition_replicas",
        "partition_service",
        "service_class",
        "service_metrics",
        "class_nodes",
        "class_node_count",
        "class_allowed",
        "fd_children",
        "ud_children",
        "fd_usable",
        "ud_usable",
        "global_weight",
        "local_weight",
        "initial_node",
        "initial_primary",
        "swap_cost",
        "movable",
        "n_movable",
        "swappable",
        "n_swappable",
        "enforce",
        "penalty",
        "replica_count",
        "move_penalty",
        "service_nonpacking",
        "node_move_factor",
    ],
)
# The baseline's own order of the constraint terms it implements (problem_arrays maps plbjax's
# `enforce` / `penalty` entries onto it by name, so the compiled kernels never depend on plbjax's order).
CAPACITY, PLACEMENT, FAULT_DOMAIN, UPGRADE_DOMAIN, UNPLACED = range(5)
_FROM_SF = (SF_CAPACITY, SF_PLACEMENT, SF_FAULT_DOMAIN, SF_UPGRADE_DOMAIN, SF_UNPLACED)  # in that order

_SCALARS_F = ("swap_cost", "replica_count", "move_penalty")
_SCALARS_I = ("n_movable", "n_swappable")


def _unsupported(search: Search) -> list[str]:
    """Energy terms or rules of `search` that the baseline does not implement (in use)."""
    problem, within = search.cluster, search.scope
    features = ("affinity", "defrag", "thresholds", "preferred")
    out = [f"feature {name}" for name in features if getattr(problem.features, name)]
    if within.history:
        out.append("feature history")
    if not np.array_equal(np.asarray(within.node_open), np.asarray(problem.node_up)):
        out.append("closed nodes (node_open)")
    for name in ("move_budget", "partition_budget"):
        if int(getattr(within, name)) < 2**31 - 1:
            out.append(f"throttle {name}")
    if np.any(np.asarray(problem.replica_parent) >= 0):
        out.append("affinity")
    if not np.all(np.asarray(problem.primary_preferred)):
        out.append("preferred primary domain")
    return out


def problem_arrays(search: Search) -> Arrays:
    """The search's cluster and scope as numpy arrays for numba (done once per search); the scope's
    origin is the baseline's `initial_node` / `initial_primary`, where it starts and counts from.

    Raises NotImplementedError for a problem that uses rules the baseline lacks (affinity,
    preferred primary domains, defragmentation, resource thresholds, history, closed nodes,
    throttles): the benchmark's generated clusters use none of them.
    """
    missing = _unsupported(search)
    if missing:
        raise NotImplementedError("the numba baseline does not implement: " + ", ".join(missing))
    within = search.scope
    origin = {"initial_node": within.origin_node, "initial_primary": within.origin_primary}
    out = {}
    for name in Arrays._fields:
        source = within if hasattr(within, name) else search.cluster
        a = np.asarray(origin[name] if name in origin else getattr(source, name))
        if name in ("enforce", "penalty"):  # in the baseline's order CAPACITY .. UNPLACED
            a = a[list(_FROM_SF)]
        if name in _SCALARS_F:
            out[name] = float(a)
        elif name in _SCALARS_I:
            out[name] = int(a)
        elif a.dtype == np.bool_:
            out[name] = np.ascontiguousarray(a)
        elif np.issubdtype(a.dtype, np.integer):
            out[name] = np.ascontiguousarray(a, dtype=np.int64)
        else:
            out[name] = np.ascontiguousarray(a, dtype=np.float64)
    return Arrays(**out)


# Chain state. Scalars live in `sc`: [local_score, cost, energy, best_energy, accepted, log_len,
# log_mode (1: best = current + undo log, 0: best = the explicit best arrays), penalty].
State = namedtuple(
    "State",
    [
        "node_of",
        "primary_of",
        "loads",
        "local",
        "g_total",
        "g_sq",
        "g_centre",
        "l_total",
        "l_sq",
        "l_centre",
        "sc",
        "best_node_of",
        "best_primary_of",
        "log_kind",
        "log_index",
        "log_value",
    ],
)
_LS, _COST, _E, _BEST, _ACC, _LOGN, _LOGMODE, _PEN = range(8)


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


@nb.njit(inline="always", cache=True)
def _energy(avg_std_dev, cost, replica_count, move_penalty):
    """plbjax.sf._energy.energy: SF's (AvgStdDev + 0.001) * (cost + replicas + 1000), plus a phase's move penalty."""
    score = avg_std_dev + SMALL_VALUE
    sign = 1.0 if score >= 0 else -1.0
    return score * (sign * cost + replica_count + MOVE_COST_OFFSET) + move_penalty * cost


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
            cost += A.move_cost[r] * A.node_move_factor[max(st.node_of[r], 0)]
    for p in range(st.primary_of.shape[0]):
        if A.initial_primary[p] >= 0 and st.primary_of[p] != A.initial_primary[p]:
            cost += A.swap_cost
    st.sc[_LS] = local_score
    st.sc[_COST] = cost
    st.sc[_PEN] = _penalty(A, st.node_of, st.loads)
    st.sc[_E] = _energy(g + local_score, cost, A.replica_count, A.move_penalty) + st.sc[_PEN]


@nb.njit(cache=True)
def _penalty(A, node_of, loads):
    """plbjax.sf._constraints.penalty_of: penalty-weighted capacity excess, misplaced replicas, fault- and
    upgrade-domain measures and unplaced replicas of the whole placement."""
    pen = A.penalty
    if (
        pen[CAPACITY] == 0
        and pen[PLACEMENT] == 0
        and pen[FAULT_DOMAIN] == 0
        and pen[UPGRADE_DOMAIN] == 0
        and pen[UNPLACED] == 0
    ):
        return 0.0
    N, M = loads.shape
    excess = 0.0
    for n in range(N):
        for m in range(M):
            excess += _rel_excess(loads[n, m], A.capacity[n, m])
    misplaced, unplaced = 0.0, 0.0
    for r in range(node_of.shape[0]):
        n = node_of[r]
        if n >= 0 and not A.class_allowed[A.service_class[A.replica_service[r]], n]:
            misplaced += 1.0
        if n < 0 and r < A.replica_count:
            unplaced += 1.0
    P, K = A.partition_replicas.shape
    nodes = np.empty(K, np.int64)
    fd, ud = 0.0, 0.0
    for p in range(P):
        for k in range(K):
            rr = A.partition_replicas[p, k]
            nodes[k] = node_of[rr] if rr >= 0 else -1
        cls = A.service_class[A.partition_service[p]]
        fd += domain_violation(
            A.fd_tree, A.fd_children, A.fd_usable, nodes, cls, A.service_nonpacking[A.partition_service[p]]
        )
        ud += domain_violation(A.ud_tree, A.ud_children, A.ud_usable, nodes, cls, False)
    return (
        pen[CAPACITY] * excess
        + pen[PLACEMENT] * misplaced
        + pen[FAULT_DOMAIN] * fd
        + pen[UPGRADE_DOMAIN] * ud
        + pen[UNPLACED] * unplaced
    )


@nb.njit(inline="always", cache=True)
def _rel_excess(load, cap):
    """plbjax.sf._constraints.relative_excess: 1 + the excess as a fraction of capacity when over, else 0."""
    if not np.isfinite(cap) or load <= cap:
        return 0.0
    return 1.0 + (load - cap) / max(cap, 1.0)


@nb.njit(inline="always", cache=True)
def _excess_change(capacity, loads, node, delta):
    """plbjax.sf._constraints.excess_change: change of the node's summed relative excess (0 for no node)."""
    if node < 0:
        return 0.0
    out = 0.0
    for m in range(delta.shape[0]):
        out += _rel_excess(loads[node, m] + delta[m], capacity[node, m]) - _rel_excess(
            loads[node, m], capacity[node, m]
        )
    return out


@nb.njit(cache=True)
def domain_violation(tree, children, usable, nodes_in, cls, nonpacking=False):
    """plbjax.sf._constraints.domain_violation: sum over levels and parents of max(0, max - min - 1);
    with `nonpacking` (RequireDomainDistribution) the top level counts replicas beyond one per domain;
    at each level a replica in a domain without a node of the class is left out."""
    K = nodes_in.shape[0]
    total = 0
    nodes = np.empty(K, np.int64)
    for level in range(1, tree.shape[1]):
        for q in range(K):
            n = nodes_in[q]
            nodes[q] = n if n >= 0 and usable[cls, tree[n, level]] else -1
        if nonpacking and level == 1:
            for i in range(K):
                if nodes[i] < 0:
                    continue
                child, count, first_child = tree[nodes[i], 1], 0, True
                for q in range(K):
                    if nodes[q] >= 0 and tree[nodes[q], 1] == child:
                        count += 1
                        if q < i:
                            first_child = False
                if first_child:
                    total += count - 1
            continue
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


@nb.njit(cache=True)
def _materialise_arrays(node_of, primary_of, best_node_of, best_primary_of, log_kind, log_index, log_value, sc):
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
    _materialise_arrays(
        st.node_of, st.primary_of, st.best_node_of, st.best_primary_of, st.log_kind, st.log_index, st.log_value, st.sc
    )


@nb.njit(inline="always", cache=True)
def _fits(check, capacity, loads, node, delta):
    """Adding `delta` to `node` keeps every metric that grows within capacity (plbjax.sf._constraints.fits;
    true when capacity is not enforced or there is no node)."""
    if not check or node < 0:
        return True
    for m in range(delta.shape[0]):
        if delta[m] > 0 and loads[node, m] + delta[m] > capacity[node, m]:
            return False
    return True


@nb.njit(cache=True)
def _anneal(A, st, first, n, t_start, t_end, swap_probability, refresh_steps, probe):
    """`n` steps (global step numbers first .. first + n - 1) cooling geometrically from t_start
    to t_end (plbjax.anneal.run_block); statistics are recomputed exactly every `refresh_steps` steps.

    One step = plbjax.anneal.step with the SF model: propose (plbjax.sf._moves), incremental energy
    (plbjax.sf._model.evaluate), Metropolis, apply. With `probe`, nothing is applied and the largest
    |dE| over the valid proposals is returned (the driver's greedy probe block).

    Everything is unpacked into locals once: passing the namedtuples into a per-step function
    costs a reference-count update per array field, which dominated the step time.
    """
    node_of, primary_of, loads, local = st.node_of, st.primary_of, st.loads, st.local
    g_total, g_sq, g_centre = st.g_total, st.g_sq, st.g_centre
    l_total, l_sq, l_centre, sc = st.l_total, st.l_sq, st.l_centre, st.sc
    best_node_of, best_primary_of = st.best_node_of, st.best_primary_of
    log_kind, log_index, log_value = st.log_kind, st.log_index, st.log_value
    log_cap = log_kind.shape[0]
    node_up, capacity, metric_nodes, metric_node_count = (A.node_up, A.capacity, A.metric_nodes, A.metric_node_count)
    fd_tree, ud_tree, fd_children, ud_children = A.fd_tree, A.ud_tree, A.fd_children, A.ud_children
    fd_usable, ud_usable = A.fd_usable, A.ud_usable
    replica_partition, replica_service = A.replica_partition, A.replica_service
    load_primary, load_secondary, move_cost = A.load_primary, A.load_secondary, A.move_cost
    partition_replicas, partition_service = A.partition_replicas, A.partition_service
    service_class, service_metrics = A.service_class, A.service_metrics
    class_nodes, class_node_count, class_allowed = A.class_nodes, A.class_node_count, A.class_allowed
    global_weight, local_weight = A.global_weight, A.local_weight
    initial_node, initial_primary = A.initial_node, A.initial_primary
    movable, swappable = A.movable, A.swappable
    n_movable, n_swappable = A.n_movable, A.n_swappable
    swap_cost, replica_count, move_penalty = A.swap_cost, A.replica_count, A.move_penalty
    nonpacking, node_move_factor = A.service_nonpacking, A.node_move_factor
    check_capacity, check_fd, check_ud = A.enforce[CAPACITY], A.enforce[FAULT_DOMAIN], A.enforce[UPGRADE_DOMAIN]
    pen = A.penalty
    domains_fd = check_fd or pen[FAULT_DOMAIN] != 0
    domains_ud = check_ud or pen[UPGRADE_DOMAIN] != 0

    M = load_primary.shape[1]
    Ms = service_metrics.shape[1]
    K = partition_replicas.shape[1]
    load, delta_a, delta_b = np.empty(M), np.empty(M), np.empty(M)
    g_tot, g_sq_new = np.empty(M), np.empty(M)
    da_loc, db_loc, l_tot, l_sq_new = np.empty(Ms), np.empty(Ms), np.empty(Ms), np.empty(Ms)
    before, after = np.empty(K, np.int64), np.empty(K, np.int64)
    can_move, can_swap = n_movable > 0, n_swappable > 0
    largest = 0.0
    cooling = (t_end / t_start) ** (1.0 / n) if t_start > 0 and n > 0 else 1.0
    temperature = t_start / cooling  # step j runs at t_start * cooling ** j

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

        # ---- proposal (plbjax.sf._moves: a swap or a move), `continue` when invalid.
        # a: the node losing load (-1: none, a replica being placed or a primary without a node)
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
            if size < 2 or b < 0 or not node_up[b]:
                continue
            for m in range(M):
                delta_a[m] = load_secondary[old, m] - load_primary[old, m]
                delta_b[m] = load_primary[r, m] - load_secondary[r, m]
            if not (
                _fits(check_capacity, capacity, loads, a, delta_a)
                and _fits(check_capacity, capacity, loads, b, delta_b)
            ):
                continue
            init = initial_primary[p]
            cost_delta = swap_cost * ((1.0 if r != init else 0.0) - (1.0 if old != init else 0.0))
            penalty_delta = 0.0
            if pen[CAPACITY] != 0:
                penalty_delta = pen[CAPACITY] * (
                    _excess_change(capacity, loads, a, delta_a) + _excess_change(capacity, loads, b, delta_b)
                )
            s = partition_service[p]
        else:
            r = movable[np.random.randint(0, n_movable)]
            p, s = replica_partition[r], replica_service[r]
            cls = service_class[s]
            if class_node_count[cls] == 0:
                continue
            b = class_nodes[cls, np.random.randint(0, class_node_count[cls])]
            a = node_of[r]
            clash = False
            for k in range(K):
                rr = partition_replicas[p, k]
                before[k] = node_of[rr] if rr >= 0 else -1
                clash |= before[k] == b  # replica exclusion (and b == a)
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
            fd = 0
            if domains_fd:
                fd = domain_violation(fd_tree, fd_children, fd_usable, after, cls, nonpacking[s]) - domain_violation(
                    fd_tree, fd_children, fd_usable, before, cls, nonpacking[s]
                )
                if check_fd and fd > 0:
                    continue
            ud = 0
            if domains_ud:
                ud = domain_violation(ud_tree, ud_children, ud_usable, after, cls, False) - domain_violation(
                    ud_tree, ud_children, ud_usable, before, cls, False
                )
                if check_ud and ud > 0:
                    continue
            init = initial_node[r]
            cost_delta = move_cost[r] * (
                (node_move_factor[b] if b != init and init >= 0 else 0.0)
                - (node_move_factor[max(a, 0)] if a != init and init >= 0 else 0.0)
            )
            penalty_delta = pen[FAULT_DOMAIN] * fd + pen[UPGRADE_DOMAIN] * ud
            if pen[CAPACITY] != 0:
                penalty_delta += pen[CAPACITY] * (
                    _excess_change(capacity, loads, a, delta_a) + _excess_change(capacity, loads, b, delta_b)
                )
            if a >= 0 and not class_allowed[cls, a]:
                penalty_delta -= pen[PLACEMENT]
            if a < 0:
                penalty_delta -= pen[UNPLACED]

        # ---- incremental energy (plbjax.sf._model.evaluate): two node-load changes
        has_a = a >= 0
        a0 = max(a, 0)
        g_new = 0.0
        for m in range(M):
            c = g_centre[m]
            tot, sq = g_total[m], g_sq[m]
            if has_a and metric_nodes[m, a0]:
                d = delta_a[m]
                sq += d * (2.0 * (loads[a0, m] - c) + d)
                tot += d
            if metric_nodes[m, b]:
                d = delta_b[m]
                sq += d * (2.0 * (loads[b, m] - c) + d)
                tot += d
            g_tot[m], g_sq_new[m] = tot, sq
            g_new += global_weight[m] * _deviation(tot, sq, metric_node_count[m], c)
        cls = service_class[s]
        l_count = float(class_node_count[cls])
        in_a, in_b = has_a and class_allowed[cls, a0], class_allowed[cls, b]
        old_local, new_local = 0.0, 0.0
        for k in range(Ms):
            slot = service_metrics[s, k]
            da_loc[k] = delta_a[slot] if slot >= 0 else 0.0
            db_loc[k] = delta_b[slot] if slot >= 0 else 0.0
            c, w = l_centre[s, k], local_weight[s, k]
            tot, sq = l_total[s, k], l_sq[s, k]
            old_local += w * _deviation(tot, sq, l_count, c)
            if in_a:
                sq += da_loc[k] * (2.0 * (local[s, a0, k] - c) + da_loc[k])
                tot += da_loc[k]
            if in_b:
                sq += db_loc[k] * (2.0 * (local[s, b, k] - c) + db_loc[k])
                tot += db_loc[k]
            l_tot[k], l_sq_new[k] = tot, sq
            new_local += w * _deviation(tot, sq, l_count, c)
        local_score = sc[_LS] - old_local + new_local
        cost = sc[_COST] + cost_delta
        penalty = sc[_PEN] + penalty_delta
        new_energy = _energy(g_new + local_score, cost, replica_count, move_penalty) + penalty
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
                _materialise_arrays(
                    node_of, primary_of, best_node_of, best_primary_of, log_kind, log_index, log_value, sc
                )
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
            if has_a:
                loads[a, m] += delta_a[m]
            loads[b, m] += delta_b[m]
            g_total[m], g_sq[m] = g_tot[m], g_sq_new[m]
        for k in range(Ms):
            if has_a:
                local[s, a, k] += da_loc[k]
            local[s, b, k] += db_loc[k]
            l_total[s, k], l_sq[s, k] = l_tot[k], l_sq_new[k]
        sc[_LS] = local_score
        sc[_COST] = cost
        sc[_PEN] = penalty
        sc[_E] = new_energy
        sc[_ACC] += 1
        if new_energy < sc[_BEST]:
            sc[_BEST], sc[_LOGMODE], sc[_LOGN] = new_energy, 1, 0
    return largest


# ------------------------------------------------------------------------------------ driver


def balancing_problem(state: ClusterState) -> tuple[Search, Index]:
    """The encoded cluster scoped like plan's balancing phase on a cluster where every service is
    imbalanced and nothing is throttled: everything may move (`full_scope`: every placed replica
    moves, stateful primaries swap with a placed secondary), no constraint may get worse."""
    problem, index = encode(state)
    return scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index)), index


def _new_state(A: Arrays, S: int, N: int, Ms: int) -> State:
    R, M = A.load_primary.shape
    P = A.partition_replicas.shape[0]
    log = R + P
    st = State(
        node_of=A.initial_node.copy(),
        primary_of=A.initial_primary.copy(),
        loads=np.zeros((N, M)),
        local=np.zeros((S, N, Ms)),
        g_total=np.zeros(M),
        g_sq=np.zeros(M),
        g_centre=np.zeros(M),
        l_total=np.zeros((S, Ms)),
        l_sq=np.zeros((S, Ms)),
        l_centre=np.zeros((S, Ms)),
        sc=np.zeros(8),
        best_node_of=A.initial_node.copy(),
        best_primary_of=A.initial_primary.copy(),
        log_kind=np.zeros(log, np.int64),
        log_index=np.zeros(log, np.int64),
        log_value=np.zeros(log, np.int64),
    )
    _refresh(A, st)
    st.sc[_BEST] = st.sc[_E]
    st.sc[_LOGMODE] = 1  # best = current (empty log)
    return st


def _init(problem: Search | Arrays, seed: int):
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
    start = time.perf_counter()
    tiny, _ = balancing_problem(
        parse_state(
            generate(0, ClusterSpec(nodes=8, services=2, partitions_per_service=2, fault_domains=2, upgrade_domains=2))
        )
    )
    A, st = _init(tiny, 0)
    _anneal(A, st, 0, 20, 1.0, 1e-4, 0.3, 5, True)
    _anneal(A, st, 0, 20, 1.0, 1e-4, 0.3, 5, False)
    _materialise(st)
    _compile_seconds = time.perf_counter() - start
    return _compile_seconds


def energy(problem: Search | Arrays, node_of: np.ndarray, primary_of: np.ndarray) -> float:
    """The baseline's float64 energy of any placement (SF's energy plus the penalties), from scratch."""
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    S, Ms = A.service_metrics.shape
    st = _new_state(A, S, A.node_up.shape[0], Ms)
    st.node_of[:] = node_of
    st.primary_of[:] = primary_of
    _refresh(A, st)
    return float(st.sc[_E])


def probe_temperature(
    problem: Search | Arrays, seed: int = 0, probes: int = 50, swap_probability: float = 0.3, factor: float = 50.0
) -> float:
    """SF's initial temperature: `factor` x the largest |dE| of `probes` random valid moves."""
    compile_kernels()
    A, st = _init(problem, seed)
    found = _anneal(A, st, 0, probes, 1.0, 1.0, swap_probability, 1 << 62, True)
    return factor * found if found > 0 else max(float(st.sc[_E]), 1.0)


def run_baseline(
    problem: Search | Arrays,
    steps: int | None = None,
    seed: int = 0,
    t0: float | None = None,
    final_ratio: float = 1e-4,
    swap_probability: float = 0.3,
    checkpoints: int = 50,
    seconds: float | None = None,
    refresh_steps: int = 100_000,
) -> dict:
    """Anneal one chain for `steps` steps, or (steps=None) for `seconds` of wall time.

    The schedule T0 -> T0 * final_ratio is geometric in the fraction of the run done, run in
    `checkpoints` chunks with (elapsed, best energy) recorded after each. With `seconds`, each chunk
    covers an equal share of the remaining schedule and gets the steps the measured rate fits into
    an equal share of the remaining time (as plbjax fits its blocks to a budget), so the run ends
    at the final temperature close to `seconds`. Compilation is excluded (kernels are compiled on
    a tiny problem first). Returns dict(best_energy, initial_energy, energy_trace=[(seconds, best)],
    steps, seconds, accepted, t0, node_of, primary_of (the best placement), compile_seconds).
    """
    compile_s = compile_kernels()
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    if t0 is None:
        t0 = probe_temperature(A, seed, swap_probability=swap_probability)
    if steps is None and seconds is None:
        raise ValueError("give steps or seconds")
    chunks = max(int(checkpoints), 1)
    rate = _calibrate(A, seconds, seed, t0, swap_probability, refresh_steps) if steps is None else 0.0
    A, st = _init(A, seed)
    initial = float(st.sc[_E])
    temperature = lambda frac: float(t0) * float(final_ratio) ** frac
    trace = [(0.0, initial)]
    done, frac, elapsed = 0, 0.0, 0.0
    start = time.perf_counter()
    for k in range(chunks):
        left = chunks - k
        if steps is not None:
            n = (int(steps) * (k + 1)) // chunks - done
        else:
            assert seconds is not None  # steps or seconds is given
            if done:
                rate = done / elapsed
            n = int(rate * max(seconds - elapsed, 0.0) / left)
        n = max(n, 1)
        nxt = frac + (1.0 - frac) / left
        _anneal(A, st, done, n, temperature(frac), temperature(nxt), float(swap_probability), int(refresh_steps), False)
        done, frac = done + n, nxt
        elapsed = time.perf_counter() - start
        trace.append((elapsed, float(st.sc[_BEST])))
    _materialise(st)
    return dict(
        best_energy=float(st.sc[_BEST]),
        initial_energy=initial,
        energy_trace=trace,
        steps=done,
        seconds=elapsed,
        accepted=int(st.sc[_ACC]),
        t0=float(t0),
        node_of=st.best_node_of.copy(),
        primary_of=st.best_primary_of.copy(),
        compile_seconds=compile_s,
    )


def _calibrate(A, seconds, seed, t0, swap_probability, refresh_steps) -> float:
    """Steps per second of a short hot run (>= 1% of the budget; the run then re-measures itself)."""
    n = 20_000
    while True:
        _, st = _init(A, seed)
        start = time.perf_counter()
        _anneal(A, st, 0, n, float(t0), float(t0), float(swap_probability), int(refresh_steps), False)
        took = time.perf_counter() - start
        if took >= max(0.01 * seconds, 0.02) or n >= 1 << 34:
            return n / took
        n *= 4
