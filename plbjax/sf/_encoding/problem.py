"""The encoded cluster: `Problem` (the arrays every search reads), `Features` (the optional rules
in use) and `Index` (host-side names and placements), with the constraint kinds and weights."""

from __future__ import annotations

import dataclasses
import functools
from itertools import chain
from typing import TYPE_CHECKING

import equinox as eqx
import numpy as np
from jaxtyping import Array, Bool, Float, Int

if TYPE_CHECKING:
    from plbjax.sf._encoding.app_groups import AppGroups
    from plbjax.sf._encoding.rows import Rows
    from plbjax.sf._encoding.stages import Stages
    from plbjax.sf._state import Intent, NodeStatus, Role

CAPACITY, PLACEMENT, FAULT_DOMAIN, UPGRADE_DOMAIN, AFFINITY, PREFERRED, THRESHOLD, UNPLACED = range(8)
CONSTRAINTS = 8
THRESHOLD_PRIORITY = 1  # ResourceThresholds: utilisation every node should end below, a soft goal
PRIORITY_SETTINGS = (
    "CapacityConstraintPriority",
    "PlacementConstraintPriority",
    "FaultDomainConstraintPriority",
    "UpgradeDomainConstraintPriority",
    "AffinityConstraintPriority",
    "PreferredLocationConstraintPriority",
)
PRIORITY_WEIGHT = {0: 100.0, 1: 10.0, 2: 1.0}  # violation penalty per priority, in AvgStdDev units
UNPLACED_WEIGHT = 1000.0  # a replica left unplaced, in AvgStdDev units
HISTORY_WIDTH = 8  # nodes a replica's History holds before its array widens (and the search recompiles)


@dataclasses.dataclass(frozen=True)
class Features:
    """Which optional rules the cluster uses. Static: the search compiles only the rules in use."""

    affinity: bool = False  # some service has an affinity correlation
    defrag: bool = False  # some metric is a defragmentation metric
    thresholds: bool = False  # ResourceThresholds are set
    preferred: bool = False  # PreferPrimaryDomain or upgrade snapshot nodes
    compound: bool = False  # a partition fills every fault or upgrade domain evenly: compound moves
    higher_child: bool = True  # AllowHigherChildTargetReplicaCountForAffinity: a larger child's extras go anywhere
    applications: bool = False  # some application group limits its services (`Problem.apps`)


class Problem(eqx.Module):
    """The cluster, as arrays: what the encoding derives from the state, the same for every phase
    (what a phase's search may do is its `search_scope.SearchScope`). N nodes, R replicas, P partitions,
    S services, M metrics (all padded)."""

    features: Features = eqx.field(static=True)

    # nodes
    node_up: Bool[Array, " N"]  # Up and real: counted in deviations, may receive replicas
    node_kept: Bool[Array, " N"]  # deactivated with Pause or Restart: its replicas may stay, none come
    capacity: Float[Array, "N M"]  # capacity in force (buffered unless told otherwise), inf if unlimited
    threshold_load: Float[Array, "N M"]  # ResourceThresholds x capacity, inf where none
    metric_nodes: Bool[Array, "M N"]  # nodes counted in a metric's global deviation
    metric_node_count: Float[Array, " M"]
    metric_defrag: Bool[Array, " M"]  # defragmentation metric: pack instead of spread
    fd_leaf_up: Bool[Array, " Df"]  # leaf fault domains (by domain id) holding Up nodes
    ud_up: Bool[Array, " Du"]  # upgrade domains (by domain id) holding Up nodes
    fd_tree: Int[Array, "N Lf"]  # column 0 is the root, then one fault-domain level per column
    ud_tree: Int[Array, "N 2"]  # root, upgrade domain
    domain_nodes: Int[Array, " N"]  # Up nodes by (top fault domain, upgrade domain) cell, padded
    domain_first: Int[Array, " Df*Du+1"]  # domain_nodes[domain_first[c]:domain_first[c + 1]] are cell c's
    # replicas
    replica_partition: Int[Array, " R"]
    replica_service: Int[Array, " R"]
    replica_parent: Int[Array, " R"]  # partition of the service it has affinity to (-1: none)
    replica_aligned: Bool[Array, " R"]  # aligned affinity: primary with primary, secondary with secondary
    children_of: Int[Array, "P Kc"]  # child replicas of each (parent) partition, -1 padded
    replica_home: Int[Array, " R"]  # upgrade snapshot node to return to (PreferredLocation; -1: none)
    replica_upgraded: Bool[Array, " R"]  # a new replica that prefers an upgraded domain (PreferUpgradedUDs)
    replica_stays: Bool[Array, " R"]  # on a node that blocks its service type: in transition, it stays (no
    # constraint counts it, it neither moves nor swaps; SF's PlacementCreator, IsInBlockList)
    node_upgraded: Bool[Array, " N"]  # in an upgrade domain the running upgrade is done with
    load_primary: Float[Array, "R M"]  # load of the replica when it is (or becomes) the primary
    load_secondary: Float[Array, "R M"]  # load as a secondary; instances use load_primary for both
    move_cost: Float[Array, " R"]
    node_move_factor: Float[Array, " N"]  # moving onto a node costs move_cost x this: higher-priority nodes
    # cost up to 1.5x, so lower-priority targets are preferred
    # partitions
    partition_replicas: Int[Array, "P K"]  # replica indices, -1 padded
    partition_service: Int[Array, " P"]
    # services
    service_class: Int[Array, " S"]  # placement class (allowed node set)
    service_metrics: Int[Array, "S Ms"]  # metric index of each local-domain slot, -1 padded
    service_nonpacking: Bool[Array, " S"]  # RequireDomainDistribution: one replica per fault domain
    primary_preferred: Bool[Array, "S N"]  # PreferPrimaryDomain: where the primary should be
    # placement classes
    class_nodes: Int[Array, "C N"]  # allowed Up nodes of the class, padded
    class_node_count: Int[Array, " C"]
    class_allowed: Bool[Array, "C N"]  # the same set as a mask: nodes counted in a service's local deviation
    fd_children: Int[Array, "C Df"]  # eligible child domains under each fault domain, per class
    ud_children: Int[Array, "C Du"]
    fd_usable: Bool[Array, "C Df"]  # fault domains (any level) holding a node of the class
    ud_usable: Bool[Array, "C Du"]
    # services: SF's quorum-based domain rule (fault, upgrade domains; `stages._quorum_rules`)
    domain_quorum: Int[Array, "S 2"]  # most replicas of a partition per domain (0: the even spread)
    quorum_level: Int[Array, "S 2"]  # the domain-tree level it holds at
    # energy weights: AvgStdDev = sum(global_weight * dev) + sum(local_weight * dev)
    global_weight: Float[Array, " M"]
    local_weight: Float[Array, "S Ms"]
    energy_terms: Float[Array, " 5"]  # the energy's settings, read at run time (`energy_terms.COST` ...)
    # the plan's initial placement: each replica's node in the input if that node can hold it (Up, or
    # deactivated with Pause or Restart), the input's primaries (where a search starts and counts
    # movements from is its scope's)
    initial_node: Int[Array, " R"]  # -1: unplaced or padding
    initial_primary: Int[Array, " P"]  # -1: none
    history: Int[Array, "R H"]  # History: nodes a replica was balanced away from (-1 padded)
    # constraints, indexed by CAPACITY ... UNPLACED
    penalty: Float[Array, " 8"]  # energy per unit of violation (by SF priority; 0: off)
    # scalars
    swap_cost: Float[Array, ""]
    replica_count: Float[Array, ""]  # SF's movement factor adds this (and MoveCostOffset) to the move cost
    # application groups (None unless `features.applications`)
    apps: AppGroups | None = None

    @property
    def shape(self) -> dict[str, int]:
        r, m = self.load_primary.shape
        p, k = self.partition_replicas.shape
        return dict(
            N=self.node_up.shape[0],
            R=r,
            M=m,
            P=p,
            K=k,
            S=self.service_class.shape[0],
            Ms=self.service_metrics.shape[1],
            C=self.class_nodes.shape[0],
        )


@dataclasses.dataclass(frozen=True)
class Index:
    """Host-side names and placements, to decode arrays back into the document's terms. Where a
    replica starts has three names: `input_node`, where the input lists it; `initial_node`, where
    the plan starts it (the input's node if that node can hold it: `Problem.initial_node`); a
    search's origin and start (`search_scope.SearchScope`). The encoding changes no primary: the input's
    primaries are the plan's initial ones, `initial_primary`."""

    nodes: tuple[str, ...]
    metrics: tuple[str, ...]
    services: tuple[str, ...]
    partitions: tuple[tuple[str, str | int], ...]  # (service name, PartitionId as given)
    replica_ids: tuple[str | int | None, ...]  # ReplicaId as given; None for replicas to create
    replica_roles: tuple[Role, ...]  # role in the input (or the role a new one gets)
    partition_rows: tuple[tuple[int, ...], ...]  # replica indices of each partition
    input_node: np.ndarray  # int32[R] node in the input (-1: none or padding)
    initial_node: np.ndarray  # int32[R] node the plan starts it on (-1: unplaced: none, or not Up nor kept)
    initial_primary: np.ndarray  # int32[P] primary replica in the input (-1: none)
    stateful: np.ndarray  # bool[P]
    node_status: tuple[NodeStatus, ...]
    node_intent: tuple[Intent | None, ...]  # a Disabled node's DeactivationIntent
    node_types: tuple[str | None, ...]
    n_nodes: int
    n_replicas: int
    n_partitions: int
    stages: Stages | None = dataclasses.field(default=None, compare=False, repr=False)  # for updates
    rows: Rows | None = dataclasses.field(default=None, compare=False, repr=False)  # for updates

    @functools.cached_property
    def row_partition(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, partition): every partition's replica rows, flat in partition order, and the
        partition of each, so that per-replica work on the host is vectorised."""
        sizes = np.fromiter(map(len, self.partition_rows), np.int64, len(self.partition_rows))
        rows = np.fromiter(chain.from_iterable(self.partition_rows), np.int64, int(sizes.sum()))
        return rows, np.repeat(np.arange(len(sizes)), sizes)
