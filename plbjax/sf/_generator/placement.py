"""The generator's initial placement: every replica on a node, under the hard rules (see `_generator`).

A weighted greedy, one partition at a time (`_Placer`), from candidate nodes drawn by the skew
weights (`_Candidates`), with retries and worst-fit passes (`initial_placement`).
"""

from __future__ import annotations

import numpy as np

from plbjax.errors import BadInput
from plbjax.sf._generator.spec import ClusterSpec, DrawnLoads, DrawnServices, NodeLayout

_BLOCK = 512  # partitions whose candidates are drawn in one vectorised call


class _Placer:
    """Greedy weighted placement of whole partitions under the hard rules.

    Remaining capacity is kept twice: ``rem`` (N, M) for node-wide vectorised picks and
    ``rem_l`` (lists) for the cheap per-candidate scan; both change only in commit/undo.
    """

    def __init__(self, rng, weights, fd_of, ud_of, n_fd, n_ud, rem):
        self.rng = rng
        self.logw = np.log(weights)
        self.fd_of = fd_of
        self.ud_of = ud_of
        self.fd_list = fd_of.tolist()
        self.ud_list = ud_of.tolist()
        self.n_fd = n_fd
        self.n_ud = n_ud
        self.rem = rem  # (N, M) remaining capacity in load units, or None
        self.rem_l = None if rem is None else rem.tolist()
        self.cap0 = None if rem is None else rem.copy()
        self._pending: list[int] = []

    def _take(self, n, load_l, sign):
        assert self.rem_l is not None  # called only with capacities
        row = self.rem_l[n]
        for j, x in enumerate(load_l):
            row[j] -= sign * x
        self._pending.append(n)

    def sync(self):
        """Bring ``rem`` up to date with ``rem_l`` (rows touched since the last sync)."""
        if self._pending:
            assert self.rem_l is not None  # rows are pending only with capacities
            idx = np.unique(np.asarray(self._pending))
            self.rem[idx] = np.asarray([self.rem_l[i] for i in idx.tolist()])
            self._pending.clear()

    # -- one partition -----------------------------------------------------------------------

    def place(self, loads, loads_l, r, elig, spread, cands, strict_ud=True, mode="weighted"):
        """Place r replicas; return the node list (committed) or None (nothing committed).

        loads: (r, M) array or None (loads_l: the same as lists); elig: bool (N,) mask;
        spread: (qf, sf, qu, su) even-spread parameters; cands: preferred nodes, in order.
        """
        qf, sf, qu, su = spread
        fd_cnt = [0] * self.n_fd
        ud_cnt = [0] * self.n_ud
        fd_top = 0  # domains already holding q+1 replicas
        ud_top = 0
        chosen: list[int] = []
        rem_l = self.rem_l
        fd_list, ud_list = self.fd_list, self.ud_list

        for slot in range(r):
            load_l = None if loads_l is None else loads_l[slot]
            pick = -1
            for n in cands:
                c = fd_cnt[fd_list[n]]
                if not (c < qf or (c == qf and fd_top < sf)):
                    continue
                if strict_ud:
                    c = ud_cnt[ud_list[n]]
                    if not (c < qu or (c == qu and ud_top < su)):
                        continue
                if n in chosen:
                    continue
                if rem_l is not None:
                    assert load_l is not None  # loads come with capacities
                    row = rem_l[n]
                    if any(row[j] < x for j, x in enumerate(load_l)):
                        continue
                pick = n
                break
            if pick < 0:
                pick = self._vector_pick(
                    None if loads is None else loads[slot],
                    elig,
                    chosen,
                    fd_cnt,
                    fd_top,
                    ud_cnt,
                    ud_top,
                    spread,
                    strict_ud,
                    mode,
                )
            if pick < 0:
                if rem_l is not None:
                    assert loads_l is not None  # loads come with capacities
                    for k, n in enumerate(chosen):
                        self._take(n, loads_l[k], -1)
                return None
            f = fd_list[pick]
            if fd_cnt[f] == qf:
                fd_top += 1
            fd_cnt[f] += 1
            u = ud_list[pick]
            if ud_cnt[u] == qu:
                ud_top += 1
            ud_cnt[u] += 1
            chosen.append(pick)
            if rem_l is not None:
                self._take(pick, load_l, 1)
        return chosen

    def _vector_pick(self, load, elig, chosen, fd_cnt, fd_top, ud_cnt, ud_top, spread, strict_ud, mode):
        qf, sf, qu, su = spread
        fc = np.asarray(fd_cnt)
        ok = elig.copy()
        if chosen:
            ok[chosen] = False
        fd_ok = (fc < qf) | ((fc == qf) & (fd_top < sf))
        ok &= fd_ok[self.fd_of]
        if strict_ud:
            uc = np.asarray(ud_cnt)
            ud_ok = (uc < qu) | ((uc == qu) & (ud_top < su))
            ok &= ud_ok[self.ud_of]
        if self.rem is not None:
            self.sync()
            ok &= (self.rem >= load).all(axis=1)
        idx = np.flatnonzero(ok)
        if idx.size == 0:
            return -1
        if mode == "roomiest" and self.rem is not None:
            # worst fit: the node whose tightest metric keeps the largest share free
            assert self.cap0 is not None  # set with rem
            key = ((self.rem[idx] - load) / np.maximum(self.cap0[idx], 1e-9)).min(axis=1)
        else:
            key = self.logw[idx] + self.rng.gumbel(size=idx.size)
        return int(idx[int(np.argmax(key))])


class _Unplaceable(Exception):
    """args[0]: the index of the partition the greedy could not place."""


class _Candidates:
    """Candidate nodes for mode "weighted": drawn (with replacement) by the skew weights from the live
    nodes, for a block of partitions in one vectorised call. With capacities, a node that cannot take
    a typical replica any more leaves the draws (the vectorised fallback may still pick it)."""

    def __init__(self, weights: np.ndarray, typical: list | None):
        self.weights = weights
        self.typical = typical  # median replica load per metric; None: no capacities
        self.live = np.ones(len(weights), dtype=bool)
        self.cdfs: dict = {}  # eligibility class -> cumulative weights of its live nodes

    def start_class(self, c: int, elig: np.ndarray, u: np.ndarray) -> None:
        """Draw for the partitions of class `c` from the uniforms `u` [partitions, draws]."""
        self.c, self.elig, self.u = c, elig, u
        self.block: list = []  # candidate rows for partitions b0.. from the current cdf
        self.b0 = 0

    def draw(self, b: int) -> list:
        """The distinct candidates for the class's b-th partition, in draw order."""
        cdf = self.cdfs.get(self.c)
        if cdf is None or b - self.b0 >= len(self.block):
            if cdf is None:
                cdf = self.cdfs[self.c] = np.cumsum(np.where(self.elig & self.live, self.weights, 0.0))
            total = cdf[-1]
            self.b0 = b
            if total > 0:
                pos = np.searchsorted(cdf, self.u[b : b + _BLOCK] * total, side="right")
                self.block = np.minimum(pos, len(self.weights) - 1).tolist()
            else:
                self.block = [[]] * len(self.u[b : b + _BLOCK])
        return list(dict.fromkeys(self.block[b - self.b0]))

    def retire_full(self, nodes: list, rem_l: list) -> None:
        """Nodes of `nodes` left without room for a typical replica leave the draws."""
        assert self.typical is not None  # called only with capacities
        for n in nodes:
            row = rem_l[n]
            if self.live[n] and any(row[j] < x for j, x in enumerate(self.typical)):
                self.live[n] = False
                self.cdfs.clear()


def _place_all(placer, rng, order, con_of_part, class_info, loads, loads_all, weights, R, mode, relax_ud):
    """Place every partition, in ``order``; (P, R) node indices or raise _Unplaceable.

    mode "weighted": candidates drawn by the skew weights (`_Candidates`), node-wide weighted pick
    as fallback, retries for a dead-end partition.  mode "roomiest": every replica on the feasible
    node with most room left (worst fit), the robust choice for tight capacities.  relax_ud: a
    partition that cannot be placed with its upgrade domains spread evenly may be placed without
    that rule.
    """
    P = len(order)
    K = 4 * R + 4  # candidate draws (with replacement) per partition
    cls_seq = con_of_part[order]
    weighted = mode == "weighted"
    if weighted:
        typical = None if placer.rem is None or not P else np.median(loads.reshape(-1, loads.shape[2]), axis=0).tolist()
        candidates = _Candidates(weights, typical)
    retries = _retries(mode, relax_ud)
    assign = np.empty((P, R), dtype=np.int64)
    bounds = [0, *(np.flatnonzero(np.diff(cls_seq)) + 1).tolist(), P] if P else [0]
    for start, stop in zip(bounds[:-1], bounds[1:]):  # one eligibility class at a time
        c = int(cls_seq[start])
        elig, spread = class_info[c]
        if weighted:
            candidates.start_class(c, elig, rng.random((stop - start, K)))
        for b, p in enumerate(order[start:stop].tolist()):
            got = _place_partition(
                placer, p, loads, loads_all, R, elig, spread, candidates.draw(b) if weighted else [], mode, retries
            )
            assign[p] = got
            if weighted and placer.rem_l is not None:
                candidates.retire_full(got, placer.rem_l)
    return assign


def _retries(mode: str, relax_ud: bool) -> tuple:
    """(strict_ud, mode) of the passes that retry a partition the first pass could not place."""
    if mode == "weighted":
        retries = ((True, "weighted"), (True, "roomiest"), (True, "weighted"))
    else:
        retries = ((True, "roomiest"),)
    return retries + ((False, mode), (False, "roomiest")) if relax_ud else retries


def _place_partition(placer, p, loads, loads_all, R, elig, spread, cands, mode, retries) -> list:
    """Partition p's nodes: from `cands` first, then by each retry in turn; else _Unplaceable."""
    pl = None if loads is None else loads[p]
    pll = None if loads_all is None else loads_all[p]
    got = placer.place(pl, pll, R, elig, spread, cands, True, mode)
    for strict_ud, m in retries:
        if got is not None:
            break
        got = placer.place(pl, pll, R, elig, spread, [], strict_ud, m)
    if got is None:
        raise _Unplaceable(p)
    return got


def _spread(r: int, n_dom: int) -> tuple[int, int]:
    """(q, s): even spread of r replicas over n_dom domains = s domains with q+1, rest q."""
    return divmod(r, n_dom)


def _node_weights(rng: np.random.Generator, spec: ClusterSpec) -> np.ndarray:
    """Zipf-like weights on a random node order, exponent 3 x skew."""
    N = int(spec.nodes)
    rank = np.empty(N)
    rank[rng.permutation(N)] = np.arange(N)
    return (rank + 1.0) ** (-3.0 * spec.skew)


def _eligibility_classes(spec: ClusterSpec, nodes: NodeLayout, services: DrawnServices) -> dict:
    """class (-1: any node, t: node type t) -> (eligible nodes, even-spread parameters (qf, sf, qu, su))."""
    R = int(spec.replicas_per_partition)
    class_info = {}
    for c in sorted(set(services.constraint.tolist())):
        elig = np.ones(len(nodes.names), dtype=bool) if c < 0 else (nodes.type == c)
        ne = int(elig.sum())
        if R > ne:
            raise BadInput(
                f"replicas_per_partition = {R} > {ne} nodes of NodeType{c} that services constrained to it may use"
            )
        qf, sf = _spread(R, len(set(nodes.fd[elig].tolist())))
        qu, su = _spread(R, len(set(nodes.ud[elig].tolist())))
        class_info[c] = (elig, (qf, sf, qu, su))
    return class_info


def initial_placement(
    rng: np.random.Generator,
    spec: ClusterSpec,
    nodes: NodeLayout,
    services: DrawnServices,
    loads: DrawnLoads,
    capacity: np.ndarray | None,
) -> np.ndarray:
    """(P, R) the node of every replica: weighted then worst-fit passes, then both again giving up the
    upgrade-domain spread where a partition needs it; BadInput if all four fail. Constrained services
    first (fewer choices), then within a class the partitions with the largest load relative to
    capacity first (first-fit decreasing), else in order."""
    weights = _node_weights(rng, spec)
    class_info = _eligibility_classes(spec, nodes, services)
    PPS, R = int(spec.partitions_per_service), int(spec.replicas_per_partition)
    P = int(spec.services) * PPS
    rem = None if capacity is None else np.tile(capacity.astype(float), (int(spec.nodes), 1))
    con_of_part = services.constraint[np.repeat(np.arange(int(spec.services)), PPS)]
    size = np.zeros(P) if rem is None else -(loads.replicas / rem[0]).max(axis=2).sum(axis=1)
    order = np.lexsort((np.arange(P), size, con_of_part, con_of_part < 0))
    loads_all = None if loads.replicas is None else loads.replicas.tolist()
    failure = ""
    for attempt, relax_ud in (("weighted", False), ("roomiest", False), ("weighted", True), ("roomiest", True)):
        placer = _Placer(
            rng,
            weights,
            nodes.fd,
            nodes.ud,
            int(spec.fault_domains),
            int(spec.upgrade_domains),
            None if rem is None else rem.copy(),
        )
        try:
            return _place_all(
                placer, rng, order, con_of_part, class_info, loads.replicas, loads_all, weights, R, attempt, relax_ud
            )
        except _Unplaceable as e:
            s_i, p_i = divmod(e.args[0], PPS)
            failure = (
                f"cannot place partition {p_i} of fabric:/App/Svc{s_i}: no {R} nodes "
                "satisfy the capacity, placement-constraint and fault-domain rules "
                f"(capacity_headroom = {spec.capacity_headroom}, skew = {spec.skew})"
            )
    raise BadInput(failure)
