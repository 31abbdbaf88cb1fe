"""SF's fault- and upgrade-domain constraint as its searches apply it to single replicas, on the host
(microsoft/service-fabric, src/prod/src/Reliability/LoadBalancing/FaultDomainConstraint.cpp): which
replicas of a partition out of its even spread the constraint check may move (`GetInvalidReplicas`),
and where a new replica may go (`FaultDomainSubspace::IsValidDomain`). plbjax's search scores the
spread of a whole partition; these are the per-replica rules its phases hold the search's result to.
The quorum rule and RequireDomainDistribution are left to the search's own measure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plbjax.sf._encoding import Index, Problem
from plbjax.sf._model import Placement


@dataclass(frozen=True)
class Domains:
    """One kind of domain (fault or upgrade) for one placement class: each node's path of domain ids
    `tree` [N, L+1] (column 0 the root), which domains hold a node the class may use (`usable` [D])
    and how many such child domains each has (`children` [D])."""

    tree: np.ndarray
    usable: np.ndarray
    children: np.ndarray

    def child(self, node: int, level: int) -> int:
        return int(self.tree[node, level + 1])


@dataclass(frozen=True)
class HostDomains:
    """A problem's domain arrays copied to the host once, for the per-replica rules of a phase."""

    partition_service: np.ndarray  # [P]
    service_class: np.ndarray  # [S]
    quorum: np.ndarray  # [S, 2]: SF's quorum rule for the fault (0) and upgrade (1) domains
    nonpacking: np.ndarray  # [S]
    trees: tuple[np.ndarray, np.ndarray]  # fault, upgrade: [N, L+1]
    usable: tuple[np.ndarray, np.ndarray]  # [C, D]
    children: tuple[np.ndarray, np.ndarray]  # [C, D]

    @classmethod
    def of(cls, problem: Problem) -> HostDomains:
        host = lambda fault, upgrade: (np.asarray(fault), np.asarray(upgrade))
        return cls(
            np.asarray(problem.partition_service),
            np.asarray(problem.service_class),
            np.asarray(problem.domain_quorum),
            np.asarray(problem.service_nonpacking),
            host(problem.fd_tree, problem.ud_tree),
            host(problem.fd_usable, problem.ud_usable),
            host(problem.fd_children, problem.ud_children),
        )

    def domains(self, partition: int, kind: int) -> Domains | None:
        """Partition's domains of `kind` (0 fault, 1 upgrade), or None where these rules do not
        apply (SF's quorum rule, RequireDomainDistribution)."""
        service = int(self.partition_service[partition])
        if int(self.quorum[service, kind]) > 0 or (kind == 0 and bool(self.nonpacking[service])):
            return None
        cls = int(self.service_class[service])
        return Domains(self.trees[kind], self.usable[kind][cls], self.children[kind][cls])


def invalid_replicas(domains: Domains, placed: list[tuple[int, int]]) -> set[int]:
    """The replicas (rows) of `placed` [(row, node)] that SF's GetInvalidReplicas may pick to leave
    their domain (those it picks at random among several all count): at each level, a replica in a
    child domain without a usable node first, then the excess over the even spread."""
    return _picked(domains, placed, 0, 0)


def _picked(domains: Domains, placed: list[tuple[int, int]], level: int, remove: int) -> set[int]:
    """FaultDomainConstraint::GetInvalidReplicas on the subtree at `level` holding `placed`, of which
    `remove` must leave."""
    rows = {row for row, _ in placed}
    if level + 1 >= domains.tree.shape[1] or remove >= len(placed):
        return rows if remove > 0 else set()
    groups: dict[int, list[tuple[int, int]]] = {}
    for row, node in placed:
        groups.setdefault(domains.child(node, level), []).append((row, node))
    stranded = {row for c, members in groups.items() if not domains.usable[c] for row, _ in members}
    picked = set(stranded) if remove > 0 else set()
    remove = max(remove - len(stranded), 0)
    groups = {c: members for c, members in groups.items() if domains.usable[c]}
    count = len(placed) - len(stranded)
    if count == 0 or (count == 1 and remove == 0):
        return picked
    n_domains = int(domains.children[domains.tree[placed[0][1], level]])
    if n_domains == 1:
        return picked | _picked(domains, next(iter(groups.values())), level + 1, remove)
    if remove == 0 and count <= n_domains:
        for members in groups.values():
            picked |= _picked(domains, members, level + 1, len(members) - 1)
        return picked
    base = (count - remove) // n_domains
    sizes = [len(members) for members in groups.values()]
    under = sum(max(base - s, 0) for s in sizes) + (n_domains - len(groups)) * base
    over = sum(max(s - base - 1, 0) for s in sizes)
    chosen = max(over, under + remove) - over  # one more from as many domains above the base, at random
    for members in groups.values():
        extra = max(len(members) - base - 1, 0) + (chosen > 0 and len(members) > base)
        picked |= _picked(domains, members, level + 1, extra)
    return picked


def valid_target(domains: Domains, others: list[int], target: int) -> bool:
    """Whether SF places a new replica on node `target` beside its partition's replicas on `others`
    (FaultDomainSubspace::IsValidDomain for an unplaced replica): level by level, a domain without a
    usable node never; a domain holding none of the replicas always; else, with a sibling domain
    below the floor of the even spread, only a domain below it, and never one at its ceiling unless
    every domain is even."""
    for level in range(domains.tree.shape[1] - 1):
        here = domains.tree[target, level]
        inside = [n for n in others if domains.tree[n, level] == here]
        into = domains.child(target, level)
        if not domains.usable[into]:
            return False
        counts: dict[int, int] = {}
        for n in inside:
            counts[domains.child(n, level)] = counts.get(domains.child(n, level), 0) + 1
        if counts.get(into, 0) == 0:
            return True
        n_domains = int(domains.children[here])
        if n_domains == 1:
            continue
        spread = sum(c for d, c in counts.items() if domains.usable[d])
        floor, ceil = spread // n_domains, -(-spread // n_domains)
        occupied = [c for d, c in counts.items() if domains.usable[d]]
        below = min(occupied + [0] * (n_domains - len(occupied))) < floor
        at = counts[into]
        if at > ceil or (at >= floor and below) or (at == ceil and ceil != floor):
            return False
    return True


def held_in_transition(problem: Problem, index: Index, now: Placement, kind: int) -> np.ndarray:
    """[R] the replicas of the partitions in domain violation of `kind` (0 fault, 1 upgrade) whose
    `invalid_replicas` are all in transition (on a node that blocks their type, they stay): SF's
    constraint check moves none of them for it (ConstraintCheckFaultDomainShouldRun)."""
    out = np.zeros(now.node_of.shape[0], bool)
    stays, host = np.asarray(problem.replica_stays), HostDomains.of(problem)
    violated = now.report.violations.fault_domain if kind == 0 else now.report.violations.upgrade_domain
    for p in np.flatnonzero(np.asarray(violated)[: index.n_partitions]).tolist():
        domains = host.domains(p, kind)
        rows = list(index.partition_rows[p])
        if domains is None:
            continue
        picked = invalid_replicas(domains, [(r, int(now.node_of[r])) for r in rows if now.node_of[r] >= 0])
        if picked and all(stays[r] for r in picked):
            out[rows] = True
    return out
