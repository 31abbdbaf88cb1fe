"""Synthetic Service Fabric clusters: a state document (spec section 1) from a few knobs.

In the spirit of Jumanji's generator modules: a frozen :class:`ClusterSpec` describes the
cluster's shape and :func:`generate` turns a seed and a spec into a plain, JSON-serialisable state
document (``SchemaVersion``, ``NodeTypes``, ``Nodes``, ``Services``, ``Partitions``), the same for
the same seed: a :class:`plbjax.generators.Generator`.  ``plbjax-generate`` (:func:`main`) is the
command-line front end.

Layout
    * nodes ``Node000``..; node types ``NodeType0``.. assigned in contiguous blocks;
    * top-level fault domains ``fd:/dc{k}`` (``fd:/dc{k}/r{j}`` when racks_per_fault_domain > 1)
      and upgrade domains ``UD{k}``, both round-robin over the nodes, so every domain has nodes
      and consecutive nodes sit in different domains;
    * every node carries ``PlacementProperties: {"NodeColor": ...}``;
    * with custom metrics and ``capacity_headroom > 0`` every node gets ``Capacities``
      ``ceil(headroom * max(total load / nodes, largest replica load))`` per metric (the same
      on all nodes; the second term only matters for clusters with fewer replicas than nodes).

Services ``fabric:/App/Svc{i}``; a ``stateless_fraction`` of them stateless with
``InstanceCount = replicas_per_partition``, the rest stateful with
``TargetReplicaSetSize = replicas_per_partition``.  With ``metrics > 0`` every service reports
all custom metrics ``Metric0``.. (Weight cycling High/Medium/Low by metric index; stateful:
``PrimaryDefaultLoad > SecondaryDefaultLoad``; stateless: ``DefaultLoad``) and every replica
carries ``Loads`` drawn log-normally around its service's default load (primaries heavier).
Loads and capacities are integers (as SF reports them) when ``load_scale >= 5``, else floats
rounded to one decimal.  With ``metrics == 0`` services have no ``Metrics`` key (SF's default
metrics apply), replicas no ``Loads`` and nodes no ``Capacities``.

Identifiers: ``PartitionId`` is a GUID-shaped string that encodes the indices
(``"{service:08x}-0000-0000-0000-{partition:012x}"``), ``ReplicaId`` is ``"R{s}-{p}-{k}"``;
the primary is listed first.

Initial placement (every replica placed) respects the hard rules:
    * no two replicas of a partition on one node;
    * capacities (no ``NodeBufferPercentage`` is emitted, so buffered = raw capacity);
    * placement constraints (``NodeType == NodeTypeK`` on a ``placement_constraint_fraction``
      of the services, only when ``node_types > 1``);
    * fault domains: the replicas of a partition are spread evenly over the top-level fault
      domains among its eligible nodes (per-domain counts differ by at most one, so they are
      on distinct domains whenever replicas <= eligible domains);
    * upgrade domains: the same even spread when it can be achieved (relaxed for a partition
      only if no placement satisfying it is found).
``skew`` concentrates replicas on a few nodes (Zipf-like node weights on a random node order,
exponent ``3 * skew``) within those rules.  Placement is a weighted greedy, one partition at a
time (constrained services first, then the partitions heaviest relative to capacity; primary
first): candidate nodes for a block of partitions are drawn in one vectorised call from the
weights of the nodes that still have room for a typical replica, a node-wide vectorised
weighted pick is the fallback when no candidate fits, and a partition whose greedy dead-ends is
retried (fresh noise, then worst-fit).  If one still fails, the whole placement is redone
worst-fit (ignoring skew; tight capacities), then both passes again allowing a partition to
give up the upgrade-domain spread, before :class:`~plbjax.errors.BadInput` (a ``ValueError``)
is raised.  Very tight capacities (headroom near 1 with several metrics and large
partitions) can still end there: the placement is greedy, not an exact packing.  The Python work per replica is
O(1) amortised: 100,000 replicas on 1,000 nodes take one to three seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from plbjax.errors import BadInput
from plbjax.version import add_flag as add_version_flag

__all__ = ["ClusterSpec", "generate", "main"]

_WEIGHTS = ("High", "Medium", "Low")
_COLORS = ("Blue", "Green", "Red")
_BLOCK = 512  # partitions whose candidates are drawn in one vectorised call
_PRIMARY_FACTOR = 1.5  # PrimaryDefaultLoad / SecondaryDefaultLoad


@dataclass(frozen=True)
class ClusterSpec:
    """The shape of a synthetic cluster; `generate` draws one for a seed."""

    nodes: int = 20
    node_types: int = 1
    fault_domains: int = 5  # top-level FDs
    racks_per_fault_domain: int = 1  # >1 gives hierarchical FDs "fd:/dcK/rJ"
    upgrade_domains: int = 5
    metrics: int = 2  # custom metrics "Metric0".. ; 0 => SF default metrics
    services: int = 5
    partitions_per_service: int = 4
    replicas_per_partition: int = 3  # TargetReplicaSetSize (stateful) / InstanceCount (stateless)
    stateless_fraction: float = 0.2
    skew: float = 0.5  # 0 = uniform spread, 1 = piled on few nodes
    load_scale: float = 10.0  # typical load per replica
    capacity_headroom: float = 2.0  # capacity = headroom * total load / nodes; 0 = no capacities
    placement_constraint_fraction: float = 0.0  # services with a NodeType constraint

    @property
    def total_replicas(self) -> int:
        return self.services * self.partitions_per_service * self.replicas_per_partition


# --------------------------------------------------------------------------------------------
# validation


def _validate(seed: int, spec: ClusterSpec) -> None:
    def whole(v, least: int) -> bool | np.bool_:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= least

    def need(ok: bool | np.bool_, field: str, what: str) -> None:
        if not ok:
            raise BadInput(f"ClusterSpec.{field} = {getattr(spec, field)!r}: {what}")

    if not whole(seed, 0):
        raise BadInput(f"seed = {seed!r}: must be an integer >= 0")
    for f in (
        "nodes",
        "node_types",
        "fault_domains",
        "racks_per_fault_domain",
        "upgrade_domains",
        "partitions_per_service",
        "replicas_per_partition",
    ):
        need(whole(getattr(spec, f), 1), f, "must be an integer >= 1")
    for f in ("metrics", "services"):
        need(whole(getattr(spec, f), 0), f, "must be an integer >= 0")
    for f in ("stateless_fraction", "skew", "placement_constraint_fraction"):
        v = getattr(spec, f)
        need(isinstance(v, (int, float)) and 0.0 <= v <= 1.0, f, "must be in [0, 1]")
    need(
        isinstance(spec.load_scale, (int, float)) and spec.load_scale > 0 and math.isfinite(spec.load_scale),
        "load_scale",
        "must be a positive number",
    )
    need(
        isinstance(spec.capacity_headroom, (int, float))
        and spec.capacity_headroom >= 0
        and math.isfinite(spec.capacity_headroom),
        "capacity_headroom",
        "must be >= 0",
    )
    need(spec.node_types <= spec.nodes, "node_types", f"more node types than nodes ({spec.nodes})")
    leaves = spec.fault_domains * spec.racks_per_fault_domain
    need(
        leaves <= spec.nodes,
        "fault_domains",
        f"fault_domains * racks_per_fault_domain = {leaves} > nodes = {spec.nodes} (every domain must have a node)",
    )
    need(spec.upgrade_domains <= spec.nodes, "upgrade_domains", f"more upgrade domains than nodes ({spec.nodes})")
    need(
        spec.replicas_per_partition <= spec.nodes,
        "replicas_per_partition",
        f"more replicas per partition than nodes ({spec.nodes}): no two replicas of a partition may share a node",
    )


# --------------------------------------------------------------------------------------------
# placement


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


# --------------------------------------------------------------------------------------------
# the generator


def generate(seed: int, spec: ClusterSpec) -> dict:
    """A cluster state document (plain dict, JSON-serialisable) for ``spec``, the same for the same
    ``seed``: a :class:`plbjax.generators.Generator`.

    Raises :class:`plbjax.errors.BadInput` (a ``ValueError``) for an invalid seed or spec or when
    the hard rules leave no room for some partition.
    """
    _validate(seed, spec)
    rng = np.random.default_rng(int(seed))
    nodes = _node_layout(spec)
    services = _services(rng, spec)
    loads = _loads(rng, spec, services)
    capacity = _capacity(spec, loads)
    assign = _initial_placement(rng, spec, nodes, services, loads, capacity)
    return _document(spec, nodes, services, loads, capacity, assign)


class _Nodes(NamedTuple):
    """Each node's top-level fault domain, rack, upgrade domain and node type (round-robin domains,
    contiguous blocks of node types), and its name."""

    fd: np.ndarray
    rack: np.ndarray
    ud: np.ndarray
    type: np.ndarray
    names: list[str]


def _node_layout(spec: ClusterSpec) -> _Nodes:
    N = int(spec.nodes)
    idx = np.arange(N)
    width = max(3, len(str(N - 1)))
    F = int(spec.fault_domains)
    return _Nodes(
        fd=idx % F,
        rack=(idx // F) % int(spec.racks_per_fault_domain),
        ud=idx % int(spec.upgrade_domains),
        type=idx * int(spec.node_types) // N,
        names=[f"Node{i:0{width}d}" for i in range(N)],
    )


class _Services(NamedTuple):
    """Which services are stateless, and the node type each is constrained to (-1: none)."""

    stateless: np.ndarray
    constraint: np.ndarray


def _services(rng: np.random.Generator, spec: ClusterSpec) -> _Services:
    S, T = int(spec.services), int(spec.node_types)
    n_stateless = int(round(spec.stateless_fraction * S))
    stateless = np.zeros(S, dtype=bool)
    if n_stateless:
        stateless[rng.choice(S, size=n_stateless, replace=False)] = True
    constraint = np.full(S, -1)
    if T > 1 and spec.placement_constraint_fraction > 0:
        n_con = int(round(spec.placement_constraint_fraction * S))
        if n_con:
            which = rng.choice(S, size=n_con, replace=False)
            constraint[which] = rng.integers(0, T, size=n_con)
    return _Services(stateless=stateless, constraint=constraint)


class _Loads(NamedTuple):
    """Loads in integer units (1, or 0.1 for float loads) so that capacity bookkeeping is exact. The
    arrays are None without custom metrics."""

    as_int: bool  # loads and capacities are integers (load_scale >= 5)
    unit: float  # units per load
    primary: np.ndarray | None  # (S, M) default loads of stateful services
    secondary: np.ndarray | None
    instance: np.ndarray | None  # (S, M) default loads of stateless services
    replicas: np.ndarray | None  # (P, R, M) each replica's load; slot 0 is the primary

    def number(self, x) -> int | float:
        """A load or capacity in the document's terms."""
        return int(x) if self.as_int else round(float(x) / self.unit, 1)


def _loads(rng: np.random.Generator, spec: ClusterSpec, services: _Services) -> _Loads:
    """Default loads log-normal around load_scale (primaries heavier); replica loads log-normal
    around their default, per partition and per replica."""
    as_int = spec.load_scale >= 5
    unit = 1.0 if as_int else 10.0
    S, M, R = int(spec.services), int(spec.metrics), int(spec.replicas_per_partition)
    if not M:
        return _Loads(as_int, unit, None, None, None, None)

    def rnd(x):
        return np.maximum(np.rint(x * unit), 1.0)

    base = spec.load_scale * rng.lognormal(0.0, 0.5, size=(S, M))
    secondary = rnd(base)
    primary = np.maximum(rnd(_PRIMARY_FACTOR * base), secondary + 1.0)
    instance = rnd(base)
    svc_of_part = np.repeat(np.arange(S), int(spec.partitions_per_service))
    part_f = rng.lognormal(0.0, 0.3, size=(len(svc_of_part), 1, M))
    noise = rng.lognormal(0.0, 0.1, size=(len(svc_of_part), R, M))
    sl = services.stateless[svc_of_part]
    role_default = np.where(
        sl[:, None, None], instance[svc_of_part][:, None, :], secondary[svc_of_part][:, None, :]
    ).repeat(R, axis=1)
    role_default[~sl, 0, :] = primary[svc_of_part[~sl]]
    replicas = np.maximum(np.rint(role_default * part_f * noise), 1.0)
    return _Loads(as_int, unit, primary, secondary, instance, replicas)


def _capacity(spec: ClusterSpec, loads: _Loads) -> np.ndarray | None:
    """Every node's capacity per metric (units): headroom x the mean node load, but never below
    headroom x the largest replica (a sparse cluster, fewer replicas than nodes, would otherwise fit
    no replica at all). None without custom metrics or with capacity_headroom 0."""
    if loads.replicas is None or spec.capacity_headroom <= 0:
        return None
    N = int(spec.nodes)
    total = loads.replicas.sum(axis=(0, 1))
    largest = (
        loads.replicas.max(axis=(0, 1))
        if loads.replicas.shape[0]
        else np.full(int(spec.metrics), spec.load_scale * loads.unit)
    )
    cap = np.ceil(spec.capacity_headroom * np.maximum(total / N, largest))
    if (cap * N < total).any():
        raise BadInput(
            f"ClusterSpec.capacity_headroom = {spec.capacity_headroom}: total node "
            "capacity is below the total load (use >= 1, or 0 for no capacities)"
        )
    return cap


def _node_weights(rng: np.random.Generator, spec: ClusterSpec) -> np.ndarray:
    """Zipf-like weights on a random node order, exponent 3 x skew."""
    N = int(spec.nodes)
    rank = np.empty(N)
    rank[rng.permutation(N)] = np.arange(N)
    return (rank + 1.0) ** (-3.0 * spec.skew)


def _eligibility_classes(spec: ClusterSpec, nodes: _Nodes, services: _Services) -> dict:
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


def _initial_placement(
    rng: np.random.Generator,
    spec: ClusterSpec,
    nodes: _Nodes,
    services: _Services,
    loads: _Loads,
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


# --------------------------------------------------------------------------------------------
# the document


def _document(
    spec: ClusterSpec,
    nodes: _Nodes,
    services: _Services,
    loads: _Loads,
    capacity: np.ndarray | None,
    assign: np.ndarray,
) -> dict:
    metric_names = [f"Metric{j}" for j in range(int(spec.metrics))]
    return {
        "SchemaVersion": 1,
        "Settings": {},
        "NodeTypes": [{"Name": f"NodeType{t}"} for t in range(int(spec.node_types))],
        "Nodes": _node_docs(spec, nodes, loads, capacity, metric_names),
        "Services": _service_docs(spec, services, loads, metric_names),
        "Partitions": _partition_docs(spec, nodes, services, loads, assign, metric_names),
    }


def _node_docs(
    spec: ClusterSpec, nodes: _Nodes, loads: _Loads, capacity: np.ndarray | None, metric_names: list[str]
) -> list[dict]:
    racks = int(spec.racks_per_fault_domain) > 1
    cap_dict = None if capacity is None else {m: loads.number(v) for m, v in zip(metric_names, capacity)}
    docs = []
    for i, name in enumerate(nodes.names):
        fd = f"fd:/dc{nodes.fd[i]}" + (f"/r{nodes.rack[i]}" if racks else "")
        nd: dict = {
            "NodeName": name,
            "NodeType": f"NodeType{nodes.type[i]}",
            "FaultDomain": fd,
            "UpgradeDomain": f"UD{nodes.ud[i]}",
        }
        if cap_dict is not None:
            nd["Capacities"] = dict(cap_dict)
        nd["PlacementProperties"] = {"NodeColor": _COLORS[i % len(_COLORS)]}
        docs.append(nd)
    return docs


def _service_docs(spec: ClusterSpec, services: _Services, loads: _Loads, metric_names: list[str]) -> list[dict]:
    R = int(spec.replicas_per_partition)
    docs = []
    for s in range(int(spec.services)):
        sv: dict = {"ServiceName": f"fabric:/App/Svc{s}", "ServiceTypeName": f"Svc{s}Type"}
        if services.stateless[s]:
            sv["ServiceKind"] = "Stateless"
            sv["InstanceCount"] = R
        else:
            sv["ServiceKind"] = "Stateful"
            sv["TargetReplicaSetSize"] = R
        if services.constraint[s] >= 0:
            sv["PlacementConstraints"] = f"NodeType == NodeType{services.constraint[s]}"
        if metric_names:
            sv["Metrics"] = [_metric_doc(services.stateless[s], loads, s, j, m) for j, m in enumerate(metric_names)]
        docs.append(sv)
    return docs


def _metric_doc(stateless: bool, loads: _Loads, s: int, j: int, name: str) -> dict:
    """Service s's metric j: Weight cycling High/Medium/Low by metric index, and its default loads."""
    md: dict = {"Name": name, "Weight": _WEIGHTS[j % 3]}
    if stateless:
        assert loads.instance is not None  # metrics come with default loads
        md["DefaultLoad"] = loads.number(loads.instance[s, j])
    else:
        assert loads.primary is not None and loads.secondary is not None  # as above
        md["PrimaryDefaultLoad"] = loads.number(loads.primary[s, j])
        md["SecondaryDefaultLoad"] = loads.number(loads.secondary[s, j])
    return md


def _partition_docs(
    spec: ClusterSpec, nodes: _Nodes, services: _Services, loads: _Loads, assign: np.ndarray, metric_names: list[str]
) -> list[dict]:
    PPS, R = int(spec.partitions_per_service), int(spec.replicas_per_partition)
    assign_l = assign.tolist()
    loads_l = None
    if loads.replicas is not None:
        loads_l = (
            loads.replicas.astype(np.int64) if loads.as_int else np.round(loads.replicas / loads.unit, 1)
        ).tolist()
    parts = []
    for p in range(int(spec.services) * PPS):
        s, k = divmod(p, PPS)
        role0, role = ("Instance", "Instance") if services.stateless[s] else ("Primary", "Secondary")
        reps = []
        for q in range(R):
            rp = {
                "ReplicaId": f"R{s}-{k}-{q}",
                "Role": role0 if q == 0 else role,
                "NodeName": nodes.names[assign_l[p][q]],
            }
            if loads_l is not None:
                rp["Loads"] = dict(zip(metric_names, loads_l[p][q]))
            reps.append(rp)
        parts.append(
            {"ServiceName": f"fabric:/App/Svc{s}", "PartitionId": f"{s:08x}-0000-0000-0000-{k:012x}", "Replicas": reps}
        )
    return parts


# --------------------------------------------------------------------------------------------
# command line


def _epilog() -> str:
    """The `timeline` kinds with their options, and examples."""
    from plbjax.sf.replay.generate import KINDS, options

    kinds = [
        f"  {kind}: " + ", ".join(f"{name}={value}" for name, value in options(kind).items()) for kind in sorted(KINDS)
    ]
    return "\n".join(
        [
            "plbjax-generate timeline KIND --state PATH [-p NAME=VALUE ...] [-o FILE]: a replay timeline over a",
            "state (plbjax-generate timeline --help). KIND, with its options (-p) and their defaults:",
            *kinds,
            "",
            "examples:",
            "  plbjax-generate --nodes 40 --services 20 --metrics 3 -o cluster.yaml",
            "  plbjax-generate --nodes 100 --skew 0.9 --placement-constraint-fraction 0.2 --seed 7 -o skewed.json",
            "  plbjax-generate timeline diurnal --state cluster.yaml -p days=0.5 -o diurnal.yaml",
        ]
    )


OPTION_HELP = {  # ClusterSpec field -> what its option means (plbjax-generate --help)
    "nodes": "nodes in the cluster",
    "node_types": "node types NodeType0.. (the nodes split among them)",
    "fault_domains": "top-level fault domains",
    "racks_per_fault_domain": "racks per fault domain; above 1, fault domains are fd:/dcK/rJ",
    "upgrade_domains": "upgrade domains",
    "metrics": "custom metrics Metric0..; 0: SF's default metrics",
    "services": "services fabric:/App/Svc0..",
    "partitions_per_service": "partitions of each service",
    "replicas_per_partition": "TargetReplicaSetSize (stateful) or InstanceCount (stateless)",
    "stateless_fraction": "share of the services that are stateless",
    "skew": "how unevenly replicas are placed: 0 spreads them evenly, 1 piles them on a few nodes "
    "(Zipf-like node weights, exponent 3 x skew)",
    "load_scale": "typical load of a replica per metric (log-normal around it, primaries heavier; "
    "5 and above: integer loads)",
    "capacity_headroom": "node capacity per custom metric: headroom x the metric's total load / nodes "
    "(at least the largest replica's load); 0: no capacities",
    "placement_constraint_fraction": "share of the services constrained to one node type (NodeType == NodeTypeK)",
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="plbjax-generate",
        description="Generate a synthetic Service Fabric cluster state document (JSON or YAML).",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_flag(ap)
    for f in dataclasses.fields(ClusterSpec):
        typ = type(f.default)
        ap.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=typ,
            default=f.default,
            metavar=typ.__name__.upper(),
            help=f"{OPTION_HELP[f.name]} (default: {f.default})",
        )
    ap.add_argument(
        "--seed", type=int, default=0, metavar="INT", help="random seed: the same seed, the same cluster (default: 0)"
    )
    ap.add_argument(
        "-o", "--out", metavar="PATH", default=None, help="output file, .json or .yaml/.yml (default: JSON on stdout)"
    )
    return ap


def _dump(doc: dict, path: str | None) -> None:
    if path is None:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    low = path.lower()
    if low.endswith((".yaml", ".yml")):
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        with open(path, "w", encoding="utf-8") as fh:
            yaml.dump(doc, fh, Dumper=dumper, sort_keys=False, default_flow_style=None)
    elif low.endswith(".json"):
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
    else:
        raise BadInput(f"--out {path!r}: extension must be .json, .yaml or .yml")


def main(argv=None) -> int:
    """``plbjax-generate [--nodes N ...] [-o PATH]``, or ``plbjax-generate timeline KIND --state PATH``
    (`plbjax.sf.replay.generate`); 0 on success, 2 on bad input."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["timeline"]:
        from plbjax.sf.replay.generate import main as timeline_main

        timeline_main(argv[1:])
        return 0
    args = vars(_parser().parse_args(argv))
    out, seed = args.pop("out"), args.pop("seed")
    try:
        doc = generate(seed, ClusterSpec(**args))
        _dump(doc, out)
    except BadInput as e:
        print(f"plbjax-generate: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
