"""The baseline's chain: `anneal`, n sequential steps (propose, incremental energy, Metropolis,
apply) of one chain compiled with numba, keeping the best placement as the current one plus an
undo log (`materialise`)."""

from __future__ import annotations

import numba as nb
import numpy as np

from plbjax.baseline._arrays import (
    ACC,
    BEST,
    CAPACITY,
    COST,
    FAULT_DOMAIN,
    LOGMODE,
    LOGN,
    LS,
    MOVES,
    PEN,
    PLACEMENT,
    UNPLACED,
    UPGRADE_DOMAIN,
    E,
    State,
)
from plbjax.baseline._energy import deviation, domain_violation, energy_of, excess_change, fits_node, refresh_stats


@nb.njit(cache=True)
def seed_chain(seed):
    np.random.seed(seed)


@nb.njit(cache=True)
def _materialise_arrays(node_of, primary_of, best_node_of, best_primary_of, log_kind, log_index, log_value, sc):
    """best arrays = current placement with the undo log applied in reverse; log mode off."""
    if sc[LOGMODE] == 0:
        return
    best_node_of[:] = node_of
    best_primary_of[:] = primary_of
    for i in range(int(sc[LOGN]) - 1, -1, -1):
        if log_kind[i] == 0:
            best_node_of[log_index[i]] = log_value[i]
        else:
            best_primary_of[log_index[i]] = log_value[i]
    sc[LOGN] = 0
    sc[LOGMODE] = 0


def materialise(st: State) -> None:
    _materialise_arrays(
        st.node_of, st.primary_of, st.best_node_of, st.best_primary_of, st.log_kind, st.log_index, st.log_value, st.sc
    )


@nb.njit(cache=True)
def anneal(A, st, first, n, t_start, t_end, swap_probability, refresh_steps, probe):
    """`n` steps (global step numbers first .. first + n - 1) cooling geometrically from t_start
    to t_end (plbjax.anneal.run_block); statistics are recomputed exactly every `refresh_steps` steps.

    One step = plbjax.anneal.step with the SF model: propose (plbjax.sf._model.moves), incremental energy
    (plbjax.sf._model.chain.evaluate), Metropolis, apply. With `probe`, nothing is applied and the largest
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
    move_budget = A.move_budget  # the throttles: most movements from the origin
    nonpacking, node_move_factor = A.service_nonpacking, A.node_move_factor
    quorum, quorum_level = A.domain_quorum, A.quorum_level
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
            refresh_stats(A, st)
            if sc[E] < sc[BEST]:
                sc[BEST], sc[LOGMODE], sc[LOGN] = sc[E], 1, 0
        if not (can_move or can_swap):
            continue
        if can_move and can_swap:
            swap = np.random.random() < swap_probability
        else:
            swap = can_swap

        # ---- proposal (plbjax.sf._model.moves: a swap or a move), `continue` when invalid.
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
                fits_node(check_capacity, capacity, loads, a, delta_a)
                and fits_node(check_capacity, capacity, loads, b, delta_b)
            ):
                continue
            init = initial_primary[p]
            moved = (1 if r != init else 0) - (1 if old != init else 0)
            if sc[MOVES] + moved > move_budget:
                continue
            cost_delta = swap_cost * moved
            penalty_delta = 0.0
            if pen[CAPACITY] != 0:
                penalty_delta = pen[CAPACITY] * (
                    excess_change(capacity, loads, a, delta_a) + excess_change(capacity, loads, b, delta_b)
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
            if not fits_node(check_capacity, capacity, loads, b, load):
                continue
            fd = 0
            if domains_fd:
                pack, limit, level = nonpacking[s], quorum[s, 0], quorum_level[s, 0]
                fd = domain_violation(
                    fd_tree, fd_children, fd_usable, after, cls, pack, limit, level
                ) - domain_violation(fd_tree, fd_children, fd_usable, before, cls, pack, limit, level)
                if check_fd and fd > 0:
                    continue
            ud = 0
            if domains_ud:
                limit, level = quorum[s, 1], quorum_level[s, 1]
                ud = domain_violation(
                    ud_tree, ud_children, ud_usable, after, cls, False, limit, level
                ) - domain_violation(ud_tree, ud_children, ud_usable, before, cls, False, limit, level)
                if check_ud and ud > 0:
                    continue
            init = initial_node[r]
            moved = ((1 if b != init else 0) - (1 if a != init else 0)) if init >= 0 else 0
            if sc[MOVES] + moved > move_budget:
                continue
            cost_delta = move_cost[r] * (
                (node_move_factor[b] if b != init and init >= 0 else 0.0)
                - (node_move_factor[max(a, 0)] if a != init and init >= 0 else 0.0)
            )
            penalty_delta = pen[FAULT_DOMAIN] * fd + pen[UPGRADE_DOMAIN] * ud
            if pen[CAPACITY] != 0:
                penalty_delta += pen[CAPACITY] * (
                    excess_change(capacity, loads, a, delta_a) + excess_change(capacity, loads, b, delta_b)
                )
            if a >= 0 and not class_allowed[cls, a]:
                penalty_delta -= pen[PLACEMENT]
            if a < 0:
                penalty_delta -= pen[UNPLACED]

        # ---- incremental energy (plbjax.sf._model.chain.evaluate): two node-load changes
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
            g_new += global_weight[m] * deviation(tot, sq, metric_node_count[m], c)
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
            old_local += w * deviation(tot, sq, l_count, c)
            if in_a:
                sq += da_loc[k] * (2.0 * (local[s, a0, k] - c) + da_loc[k])
                tot += da_loc[k]
            if in_b:
                sq += db_loc[k] * (2.0 * (local[s, b, k] - c) + db_loc[k])
                tot += db_loc[k]
            l_tot[k], l_sq_new[k] = tot, sq
            new_local += w * deviation(tot, sq, l_count, c)
        local_score = sc[LS] - old_local + new_local
        cost = sc[COST] + cost_delta
        penalty = sc[PEN] + penalty_delta
        new_energy = energy_of(g_new + local_score, cost, replica_count, move_penalty) + penalty
        delta = new_energy - sc[E]
        if probe:
            largest = max(largest, abs(delta))
            continue

        # ---- Metropolis
        if delta > 0 and not (np.random.random() < np.exp(-delta / max(temperature, 1e-30))):
            continue

        # ---- apply, keeping the undo log while the best is "current + log"
        if sc[LOGMODE] == 1:
            nlog = int(sc[LOGN])
            if nlog == log_cap:
                _materialise_arrays(
                    node_of, primary_of, best_node_of, best_primary_of, log_kind, log_index, log_value, sc
                )
            else:
                if swap:
                    log_kind[nlog], log_index[nlog], log_value[nlog] = 1, p, primary_of[p]
                else:
                    log_kind[nlog], log_index[nlog], log_value[nlog] = 0, r, node_of[r]
                sc[LOGN] = nlog + 1
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
        sc[LS] = local_score
        sc[COST] = cost
        sc[PEN] = penalty
        sc[MOVES] += moved
        sc[E] = new_energy
        sc[ACC] += 1
        if new_energy < sc[BEST]:
            sc[BEST], sc[LOGMODE], sc[LOGN] = new_energy, 1, 0
    return largest
