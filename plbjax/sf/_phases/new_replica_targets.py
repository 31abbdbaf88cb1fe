"""Where SF's placement puts a new replica, beyond what plbjax's search scores: SF filters each new
replica's target nodes constraint by constraint (each constraint's GetTargetNodes), where plbjax's
search only keeps a partition's violations from growing. A replica placed where SF would not place
it is unplaced again after the search (and listed in Unplaced)."""

from __future__ import annotations

import numpy as np

from plbjax.sf._encoding import FAULT_DOMAIN, UPGRADE_DOMAIN, Index, Problem
from plbjax.sf._model import Placement, assessed
from plbjax.sf._phases.domain_replicas import Domains, HostDomains, valid_target


def held_to_targets(
    problem: Problem, index: Index, start: Placement, now: Placement, priorities, everywhere: np.ndarray
) -> Placement:
    """`now` without the replicas placed since `start` on nodes SF's placement would not give them
    (but for the partitions `everywhere` [P] of services on every node, which SF's domain rules skip):
    a new primary outside its service's PreferPrimaryDomain (SF's `FaultDomain ^P` is a block list
    for the primary, ServiceDomain.cpp:2230 and NodeBlockListConstraint.cpp:37, void where it would
    block every Up node), and a new replica in a domain the even spread keeps it from
    (`valid_target`), for the domain kinds enforced (priority 0)."""
    node_of = now.node_of.copy()
    new = (start.node_of < 0) & (now.node_of >= 0)
    kinds = [k for k, c in enumerate((FAULT_DOMAIN, UPGRADE_DOMAIN)) if priorities[c] == 0]
    host = HostDomains.of(problem)
    preferred = _primary_domains(problem)
    for p in np.unique(np.asarray(problem.replica_partition)[new]).tolist():
        if everywhere[p]:
            continue
        rows = [r for r in index.partition_rows[p] if new[r]]
        _primary_domain(now, node_of, p, new, preferred[host.partition_service[p]])
        for domains in filter(None, (host.domains(p, kind) for kind in kinds)):
            _spread(domains, index, node_of, p, rows)
    if np.array_equal(node_of, now.node_of):
        return now
    held = assessed(problem, node_of, now.primary_of)
    strays = new & (node_of >= 0) & np.asarray(held.report.violations.affinity, bool)
    strays &= ~np.asarray(now.report.violations.affinity, bool)
    if not strays.any():
        return held
    node_of[strays] = -1  # new child replicas beside a parent replica unplaced above: SF places none alone
    return assessed(problem, node_of, now.primary_of)


def barred_primaries(problem: Problem, start: Placement, now: Placement) -> np.ndarray:
    """[R] the replicas placed since `start` outside their service's primary domain: none of them
    may become its partition's primary (SF's block list for the primary)."""
    new = np.flatnonzero((start.node_of < 0) & (now.node_of >= 0))
    service = np.asarray(problem.partition_service)[np.asarray(problem.replica_partition)[new]]
    domains = _primary_domains(problem)[service]  # [new, N]
    out = np.zeros(now.node_of.shape[0], bool)
    out[new] = domains.any(axis=1) & ~domains[np.arange(new.shape[0]), now.node_of[new]]
    return out


def _primary_domains(problem: Problem) -> np.ndarray:
    """[S, N] each service's primary domain, its Up nodes (none: no such rule)."""
    return np.asarray(problem.primary_preferred) & np.asarray(problem.node_up)[None, :]


def _primary_domain(now: Placement, node_of: np.ndarray, p: int, new: np.ndarray, domain: np.ndarray) -> None:
    """Unplace partition p's primary in `node_of` when it is new and outside its primary `domain`
    [N] (its Up nodes; none: no such rule)."""
    primary = int(now.primary_of[p])
    if primary >= 0 and new[primary] and node_of[primary] >= 0 and domain.any() and not domain[node_of[primary]]:
        node_of[primary] = -1


def _spread(domains: Domains, index: Index, node_of: np.ndarray, p: int, rows: list[int]) -> None:
    """Unplace, one at a time, partition p's new replicas (`rows`) that SF would not place where they
    are beside the partition's other replicas in `domains`, until the rest may all stay."""
    while True:
        wrong = [r for r in rows if node_of[r] >= 0 and not _may_stay(domains, index, node_of, p, r)]
        if not wrong:
            return
        node_of[wrong[-1]] = -1


def _may_stay(domains: Domains, index: Index, node_of: np.ndarray, p: int, r: int) -> bool:
    """Whether SF would place partition p's replica r where it is, beside the others placed."""
    beside = [int(node_of[o]) for o in index.partition_rows[p] if o != r and node_of[o] >= 0]
    return valid_target(domains, beside, int(node_of[r]))
