"""The state as the phases see it: governed and encoded (`Encoded`), SF's constraint priorities,
surplus replicas dropped, children of one-per-node parents confined, primaries elected (`Prepared`)."""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

import numpy as np

from plbjax.sf._encoding import (
    AFFINITY,
    FAULT_DOMAIN,
    PRIORITY_SETTINGS,
    THRESHOLD_PRIORITY,
    UPGRADE_DOMAIN,
    Index,
    Problem,
    encode,
    with_parent_hosts,
    without_dropped,
)
from plbjax.sf._model import Placement, assessed, violating
from plbjax.sf._phases.drops import Drop, drop_surplus
from plbjax.sf._phases.on_every_node import capacity_in_force, parent_hosts, service_nodes
from plbjax.sf._phases.primaries import elect_primaries
from plbjax.sf._state import ClusterState, NodeStatus, apply_resource_governance


class Encoded(NamedTuple):
    """A state under resource governance, its reports and its encoding."""

    state: ClusterState
    health: list[dict]
    problem: Problem
    index: Index


def governed_encoding(state: ClusterState) -> Encoded:
    """Resource governance and the encoding of `state`."""
    governed, health = apply_resource_governance(state)
    return Encoded(governed, health, *encode(governed))


def priorities_of(state: ClusterState) -> np.ndarray:
    """SF priority of each constraint kind (UNPLACED ranks above everything)."""
    return np.array([int(state.settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY, -2])


def surplus_replicas(state: ClusterState, problem: Problem, index: Index) -> np.ndarray:
    """[partitions] replicas each partition has beyond its service's target (one-per-node: 0)."""
    n = index.n_partitions
    targets = {s.name: s.target for s in state.services}
    target = np.array([targets[name] for name in index.services], np.int64)[np.asarray(problem.partition_service)[:n]]
    sizes = np.fromiter(map(len, index.partition_rows), np.int64, n)  # rows: the replicas to create too
    return np.where(target >= 0, np.maximum(sizes - target, 0), 0)


def frozen_masks(index: Index, problem: Problem, frozen: Collection[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """[R] replicas and [P] partitions outside the `frozen` (ServiceName, PartitionId) partitions,
    less the replicas on a node deactivated with Pause or Restart (SF's PlacementCreator: a
    deactivated node's replicas are in transition, not movable; nor may its primaries swap)."""
    free_partitions = np.ones(problem.partition_service.shape[0], bool)
    if frozen:
        keys = {(service, str(pid)) for service, pid in frozen}
        free_partitions[: index.n_partitions] = [(s, str(pid)) not in keys for s, pid in index.partitions]
    kept = np.append(np.asarray(problem.node_kept), False)[index.initial_node]  # [R]; -1 (no node) -> False
    return free_partitions[np.asarray(problem.replica_partition)] & ~kept, free_partitions


class Prepared(NamedTuple):
    """The state as the phases see it: governed, surplus replicas dropped, encoded (with resource
    governance's reports), primaries elected."""

    encoded: Encoded
    input: Placement  # the input's placement as it runs now (replicas on Down nodes count as lost)
    initial: Placement  # the plan's initial placement: where placement starts
    drops: list[Drop]


class _UsableNodes(dict):
    """Each service's Up allowed nodes by name, found when first asked for (surplus drops ask for
    few services, and a million-replica cluster has thousands)."""

    def __init__(self, index: Index, allowed: np.ndarray):
        super().__init__()
        self.index, self.allowed = index, allowed

    def __missing__(self, service: str) -> list[str]:
        s = self.index.services.index(service)
        self[service] = [self.index.nodes[n] for n in np.flatnonzero(self.allowed[s])]
        return self[service]


def prepare(encoded: Encoded, priorities: np.ndarray, one_refresh: bool = False) -> Prepared:
    """Surplus drops (the phases plan partitions without them; `one_refresh`: only those one SF
    refresh makes, `drops.drop_surplus`), children of one-per-node parents confined to where a
    parent instance will be, and elected primaries."""
    state, governance_health, problem, index = encoded
    running = np.array([status is not NodeStatus.DOWN for status in index.node_status] + [False], bool)
    input_node = np.where(running[index.input_node], index.input_node, -1)  # -1 indexes the last, False
    given = assessed(problem, input_node, index.initial_primary)
    drops: list[Drop] = []
    if surplus_replicas(state, problem, index).any() or any(s.target < 0 for s in state.services):
        state, drops = drop_surplus(
            state,
            index,
            given.report.loads,
            capacity_in_force(problem, priorities),
            violating(index, given, priorities),
            _UsableNodes(index, service_nodes(problem)[:, : index.n_nodes]),
            (int(priorities[FAULT_DOMAIN]), int(priorities[UPGRADE_DOMAIN]), int(priorities[AFFINITY])),
            one_refresh,
        )
    if drops:
        problem, index = without_dropped(state, index)
    initial = given
    if drops or not np.array_equal(index.initial_node, input_node):
        initial = assessed(problem, index.initial_node, index.initial_primary)
    hosts = parent_hosts(problem, index, state, initial, priorities)
    if hosts:
        problem, index = with_parent_hosts(state, problem, index, hosts)
        initial = assessed(problem, index.initial_node, index.initial_primary)
    initial = elect_primaries(problem, index, initial, priorities)
    return Prepared(Encoded(state, governance_health, problem, index), given, initial, drops)
