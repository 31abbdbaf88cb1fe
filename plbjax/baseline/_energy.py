"""The baseline's energy of a placement, in float64 numba kernels: SF's score, the move cost and
the constraint penalties, from scratch (`refresh_stats`, `_penalty`) and the pieces of a step's
incremental update (`deviation`, `energy_of`, `excess_change`, `domain_violation`, `fits_node`)."""

from __future__ import annotations

import numba as nb
import numpy as np

from plbjax.baseline._arrays import CAPACITY, COST, FAULT_DOMAIN, LS, PEN, PLACEMENT, UNPLACED, UPGRADE_DOMAIN, E

SMALL_VALUE = 0.001
MOVE_COST_OFFSET = 1000.0


@nb.njit(inline="always", cache=True)
def deviation(total, sq, count, centre):
    n = max(count, 1.0)
    mean = total / n
    var = max(sq / n - (mean - centre) ** 2, 0.0)
    return np.sqrt(var) / mean if mean > 0 else 0.0


@nb.njit(inline="always", cache=True)
def energy_of(avg_std_dev, cost, replica_count, move_penalty):
    """plbjax.sf._model.energy.energy: (AvgStdDev + 0.001) * (cost + replicas + 1000), plus a move penalty."""
    score = avg_std_dev + SMALL_VALUE
    sign = 1.0 if score >= 0 else -1.0
    return score * (sign * cost + replica_count + MOVE_COST_OFFSET) + move_penalty * cost


@nb.njit(cache=True)
def refresh_stats(A, st):
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
        g += A.global_weight[m] * deviation(tot, sq, A.metric_node_count[m], c)
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
            local_score += A.local_weight[s, k] * deviation(tot, sq, cnt, c)
    cost = 0.0
    for r in range(R):
        if A.initial_node[r] >= 0 and st.node_of[r] != A.initial_node[r]:
            cost += A.move_cost[r] * A.node_move_factor[max(st.node_of[r], 0)]
    for p in range(st.primary_of.shape[0]):
        if A.initial_primary[p] >= 0 and st.primary_of[p] != A.initial_primary[p]:
            cost += A.swap_cost
    st.sc[LS] = local_score
    st.sc[COST] = cost
    st.sc[PEN] = _penalty(A, st.node_of, st.loads)
    st.sc[E] = energy_of(g + local_score, cost, A.replica_count, A.move_penalty) + st.sc[PEN]


@nb.njit(cache=True)
def _penalty(A, node_of, loads):
    """plbjax.sf._model.constraints.penalty_of: penalty-weighted capacity excess, misplaced replicas, fault- and
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
        s = A.partition_service[p]
        cls = A.service_class[s]
        fd += domain_violation(
            A.fd_tree,
            A.fd_children,
            A.fd_usable,
            nodes,
            cls,
            A.service_nonpacking[s],
            A.domain_quorum[s, 0],
            A.quorum_level[s, 0],
        )
        ud += domain_violation(
            A.ud_tree, A.ud_children, A.ud_usable, nodes, cls, False, A.domain_quorum[s, 1], A.quorum_level[s, 1]
        )
    return (
        pen[CAPACITY] * excess
        + pen[PLACEMENT] * misplaced
        + pen[FAULT_DOMAIN] * fd
        + pen[UPGRADE_DOMAIN] * ud
        + pen[UNPLACED] * unplaced
    )


@nb.njit(inline="always", cache=True)
def _rel_excess(load, cap):
    """plbjax.sf._model.constraints.relative_excess: 1 + the excess as a fraction of capacity when over, else 0."""
    if not np.isfinite(cap) or load <= cap:
        return 0.0
    return 1.0 + (load - cap) / max(cap, 1.0)


@nb.njit(inline="always", cache=True)
def excess_change(capacity, loads, node, delta):
    """plbjax.sf._model.constraints.excess_change: change of the node's summed relative excess (0 for no node)."""
    if node < 0:
        return 0.0
    out = 0.0
    for m in range(delta.shape[0]):
        out += _rel_excess(loads[node, m] + delta[m], capacity[node, m]) - _rel_excess(
            loads[node, m], capacity[node, m]
        )
    return out


@nb.njit(cache=True)
def domain_violation(tree, children, usable, nodes_in, cls, nonpacking=False, quorum=0, quorum_level=0):
    """plbjax.sf._model.constraints.domain_violation: sum over levels and parents of max(0, max - min - 1);
    with `nonpacking` (RequireDomainDistribution) the top level counts replicas beyond one per domain;
    under the quorum rule (`quorum` > 0) level `quorum_level` counts replicas beyond `quorum` per domain,
    and no other level counts; at each level a replica in a domain without a node of the class is left out."""
    K = nodes_in.shape[0]
    total = 0
    nodes = np.empty(K, np.int64)
    for level in range(1, tree.shape[1]):
        if quorum > 0 and level != quorum_level:
            continue
        for q in range(K):
            n = nodes_in[q]
            nodes[q] = n if n >= 0 and usable[cls, tree[n, level]] else -1
        if (nonpacking and level == 1) or quorum > 0:
            limit = quorum if quorum > 0 else 1
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
                    total += max(count - limit, 0)
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


@nb.njit(inline="always", cache=True)
def fits_node(check, capacity, loads, node, delta):
    """Adding `delta` to `node` keeps every metric that grows within capacity (plbjax.sf._model.constraints.fits;
    true when capacity is not enforced or there is no node)."""
    if not check or node < 0:
        return True
    for m in range(delta.shape[0]):
        if delta[m] > 0 and loads[node, m] + delta[m] > capacity[node, m]:
            return False
    return True
