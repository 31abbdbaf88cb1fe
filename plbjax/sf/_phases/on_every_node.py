"""Services with one instance per node (InstanceCount -1): never moved by the search, their missing
instances added on every allowed node with room, where their affinity children may then go."""

from __future__ import annotations

import numpy as np

from plbjax.sf._encoding import AFFINITY, CAPACITY, Index, Problem
from plbjax.sf._model import Placement, assessed
from plbjax.sf._state import ClusterState


def everywhere_partitions(state: ClusterState, index: Index) -> np.ndarray:
    """[P] partitions of services with one instance per node (InstanceCount -1)."""
    services = {s.name: s for s in state.services}
    return np.array([services[service].target < 0 for service, _ in index.partitions], bool)


def everywhere(state: ClusterState, index: Index) -> np.ndarray:
    """[R] replicas of services with one instance per node (never moved by the search)."""
    out = np.zeros(index.input_node.shape[0], bool)
    for p in np.flatnonzero(everywhere_partitions(state, index)):
        out[list(index.partition_rows[p])] = True
    return out


def capacity_in_force(problem: Problem, priorities: np.ndarray) -> np.ndarray:
    """[N, M] capacity in force, inf where unlimited or where capacity is not enforced."""
    capacity = np.asarray(problem.capacity)
    return capacity if priorities[CAPACITY] >= 0 else np.full_like(capacity, np.inf)


def service_nodes(problem: Problem) -> np.ndarray:
    """[S, N] the Up nodes each service may use."""
    return np.asarray(problem.class_allowed)[np.asarray(problem.service_class)]


def place_everywhere(
    problem: Problem, index: Index, state: ClusterState, now: Placement, priorities: np.ndarray
) -> tuple[Placement, int]:
    """`now` with the missing instances of one-per-node services (InstanceCount -1) added on every
    allowed node that has none yet and has room for one (SF places them only where they fit);
    how many were added. The rest stay unplaced and are reported."""
    node_of, loads = now.node_of.copy(), now.report.loads.copy()
    capacity = capacity_in_force(problem, priorities)
    allowed = service_nodes(problem)
    load, parent = np.asarray(problem.load_primary), np.asarray(problem.replica_parent)
    added = 0
    for p in np.flatnonzero(everywhere_partitions(state, index)):
        rows = list(index.partition_rows[p])
        free = allowed[int(problem.partition_service[p])].copy()
        free[node_of[rows][node_of[rows] >= 0]] = False
        if rows and parent[rows[0]] >= 0 and priorities[AFFINITY] >= 0:  # only beside a replica of its parent
            beside = np.zeros_like(free)
            hosts = node_of[list(index.partition_rows[parent[rows[0]]])]
            beside[hosts[hosts >= 0]] = True
            free &= beside
        for r in (r for r in rows if node_of[r] < 0):
            fits = free & np.all((load[r] <= 0) | (loads + load[r] <= capacity), axis=1)
            if not fits.any():
                break
            n = int(np.argmax(fits))
            node_of[r], free[n] = n, False
            loads[n] += load[r]
            added += 1
    if not added:
        return now, 0
    return assessed(problem, node_of, now.primary_of), added


def parent_hosts(
    problem: Problem, index: Index, state: ClusterState, start: Placement, priorities: np.ndarray
) -> dict[str, set[str]]:
    """{parent: nodes} for each one-per-node service that has affinity children: the nodes its
    instances will be on once placed where they fit."""
    parents = {c.service for s in state.services for c in s.correlations}
    parents &= {s.name for s in state.services if s.target < 0}
    if not parents:
        return {}
    node_of = place_everywhere(problem, index, state, start, priorities)[0].node_of
    hosts: dict[str, set[str]] = {name: set() for name in parents}
    for p, (service, _) in enumerate(index.partitions):
        if service in parents:
            hosts[service] |= {index.nodes[node_of[r]] for r in index.partition_rows[p] if node_of[r] >= 0}
    return hosts
