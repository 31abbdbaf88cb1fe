"""The encoding stages that read the replica rows, on the host: each service's affinity and domain
policies, the upgrade's homes, History, the replicas in transition, the constraint penalties and the
application groups (`ReplicaStages`). An update of the replicas runs them again on its rows.
"""

from __future__ import annotations

import dataclasses
from itertools import chain

import numpy as np

from plbjax.sf._encoding.app_groups import AppGroups, app_groups
from plbjax.sf._encoding.arrays import bucket, padded
from plbjax.sf._encoding.energy_terms import energy_unit
from plbjax.sf._encoding.problem import (
    HISTORY_WIDTH,
    PRIORITY_SETTINGS,
    PRIORITY_WEIGHT,
    THRESHOLD_PRIORITY,
    UNPLACED_WEIGHT,
)
from plbjax.sf._encoding.rows import Rows
from plbjax.sf._encoding.stages import Entities, nodes_in_domain
from plbjax.sf._state import ClusterState


@dataclasses.dataclass(frozen=True)
class Policies:
    """Each service's affinity and domain policies."""

    parent: np.ndarray  # int32[S] the partition of the service it has affinity to (-1: none)
    aligned: np.ndarray  # bool[S] aligned affinity
    nonpacking: np.ndarray  # bool[S] RequireDomainDistribution
    preferred: np.ndarray  # bool[S, N] PreferPrimaryDomain: where the primary should be


@dataclasses.dataclass(frozen=True)
class UpgradeHomes:
    """During an upgrade replicas go back to their snapshot node once its upgrade domain is done; with
    PreferUpgradedUDs replicas to place prefer the done domains (SF: a soft PreferredLocation)."""

    home: np.ndarray  # int32[rows] snapshot node to return to (-1: none)
    prefers: np.ndarray  # bool[rows] a replica to place that prefers an upgraded domain
    upgraded: np.ndarray  # bool[nodes] in an upgrade domain the upgrade is done with


@dataclasses.dataclass(frozen=True)
class ReplicaStages:
    """The stages that read the replica rows (or are derived again with them)."""

    policies: Policies
    upgrade: UpgradeHomes
    history: np.ndarray  # int32[R, H] the nodes each replica left in earlier balancing runs, -1 padded
    stays: np.ndarray  # bool[rows] in transition: on a node blocklisted for its service type
    penalty: list[float]  # energy per unit of violation, by constraint kind (CAPACITY ... UNPLACED)
    swap_cost: float
    apps: AppGroups | None  # the application groups that limit something (None: none does)


def replica_stages(state: ClusterState, cluster: Entities, rows: Rows, use_costs: bool) -> ReplicaStages:
    """The stages that read `rows`, in order."""
    return ReplicaStages(
        policies=service_policies(cluster),
        upgrade=upgrade_homes(state, cluster, rows),
        history=history(state, cluster, rows),
        stays=in_transition(state, cluster, rows),
        penalty=penalties(state.settings, rows.n_replicas),
        swap_cost=float(state.settings["SwapCost"]) if use_costs else 1.0,
        apps=app_groups(state, cluster, rows),
    )


# ---------------------------------------------------------------------------------- affinity and policies


def service_policies(cluster: Entities) -> Policies:
    """Affinity: a child replica belongs with its parent's replicas (the parent has one partition; a
    parent on every node is the placement classes' matter). Aligned: primary with primary, secondary
    with secondary, for stateful children."""
    first_partition = {}
    for pi, part in enumerate(cluster.partitions):
        first_partition.setdefault(part.service, pi)
    S = cluster.S
    parent, aligned = np.full(S, -1, np.int32), np.zeros(S, bool)
    nonpacking, preferred = np.zeros(S, bool), np.ones((S, cluster.N), bool)
    for si, svc in enumerate(cluster.services):
        for corr in (c for c in svc.correlations if c.service not in cluster.everywhere):
            parent[si] = first_partition.get(corr.service, -1)
            aligned[si] = corr.scheme == "AlignedAffinity" and svc.stateful
        for policy in svc.placement_policies:
            if policy.kind == "RequireDomainDistribution":
                nonpacking[si] = True
            elif policy.kind == "PreferPrimaryDomain" and policy.domain is not None:
                preferred[si, : cluster.n_nodes] = nodes_in_domain(cluster.nodes, policy.domain)
    return Policies(parent=parent, aligned=aligned, nonpacking=nonpacking, preferred=preferred)


def children_of(parent: np.ndarray, n_partitions: int) -> np.ndarray:
    """[P, Kc] the replicas whose parent partition (`parent` [rows], -1: none) is each partition
    (-1 padded)."""
    children = np.flatnonzero(parent >= 0)
    counts = np.bincount(parent[children], minlength=n_partitions)
    table = np.full((n_partitions, padded("Kc", int(counts.max(initial=1)))), -1, np.int32)
    order = children[np.argsort(parent[children], kind="stable")]
    slot = np.arange(order.size) - np.repeat(np.cumsum(counts) - counts, counts)
    table[parent[order], slot] = order
    return table


# ---------------------------------------------------------------------------------- upgrades and history


def upgrade_homes(state: ClusterState, cluster: Entities, rows: Rows) -> UpgradeHomes:
    upgrade = state.upgrade
    done = set(upgrade.domains_done) if upgrade is not None and upgrade.in_progress else set()
    snapshot = upgrade.snapshot if upgrade is not None else {}
    ud_of = {n.name: n.upgrade_domain for n in cluster.nodes}
    home = np.full(rows.n_replicas, -1, np.int32)
    for ri, rid in rows.named(snapshot if done else {}):
        if ud_of[snapshot[str(rid)]] in done:
            home[ri] = cluster.node_ix[snapshot[str(rid)]]
    upgraded = np.array([n.upgrade_domain in done for n in cluster.nodes], bool)
    prefers = (rows.initial_node < 0) & bool(state.settings.get("PreferUpgradedUDs") and upgraded.any())
    return UpgradeHomes(home=home, prefers=prefers, upgraded=upgraded)


def history(state: ClusterState, cluster: Entities, rows: Rows) -> np.ndarray:
    """[R, H] anti-ping-pong: the nodes each replica left in earlier balancing runs, -1 padded; at
    least `HISTORY_WIDTH` wide, so a History that grows between rounds keeps the search's shapes."""
    node_ix = cluster.node_ix
    named = rows.named(state.history)
    left = [(ri, [node_ix[n] for n in state.history[str(rid)] if n in node_ix]) for ri, rid in named]
    lengths = np.fromiter((len(nodes_left) for _, nodes_left in left), np.int64, len(left))
    table = np.full((rows.R, bucket(int(lengths.max(initial=1)), HISTORY_WIDTH)), -1, np.int32)
    at = np.repeat(np.fromiter((ri for ri, _ in left), np.int64, len(left)), lengths)
    table[at, np.arange(at.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = list(
        chain.from_iterable(nodes_left for _, nodes_left in left)
    )
    return table


def in_transition(state: ClusterState, cluster: Entities, rows: Rows) -> np.ndarray:
    """[rows] replicas running on a node blocklisted for their service type: SF marks them in
    transition (PlacementCreator::CreatePlacement), so they stay where they are; a service with one
    instance per node drops them instead (`drops`)."""
    if not state.block_list:
        return np.zeros(rows.n_replicas, bool)
    blocked = np.zeros((len(cluster.services) + 1, cluster.n_nodes + 1), bool)  # [S+1, N+1]: the last, none
    for entry in state.block_list:
        for si, svc in enumerate(cluster.services):
            if svc.type_name == entry.service_type and svc.target >= 0:
                blocked[si, cluster.node_ix[entry.node]] = True
    return blocked[rows.service, rows.initial_node]


# ---------------------------------------------------------------------------------- penalties


def penalties(settings: dict, n_rep: int) -> list[float]:
    """A unit of violation costs its priority's weight in SF's energy (which multiplies AvgStdDev by
    cost + replicas + MoveCostOffset: `energy_unit`); which constraints a search enforces is its scope's."""
    priorities = [int(settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY]
    scale = energy_unit(n_rep, settings["MoveCostOffset"])
    return [PRIORITY_WEIGHT.get(p, 0.0) * scale for p in priorities] + [UNPLACED_WEIGHT * scale]
