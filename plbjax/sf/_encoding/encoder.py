"""Cluster state -> dense, padded arrays (`Problem`) plus the host-side index back to names.

Everything the search reads lives in one immutable equinox Module shared by all chains. The walk,
stage after stage, each reading the state and the stages before it:

    1. entities          the nodes, services, partitions and metrics in encoding order  (stages)
    2. nodes             status, capacities, domain trees                               (stages)
    3. placement classes the distinct sets of nodes services may use                    (stages)
    4. energy weights    SF's global and local domain weights                           (stages)
    5. replica rows      each partition's replicas, their nodes, roles, costs, loads    (rows)
    6. replica stages    affinity and domain policies, upgrade homes, History, replicas
                         in transition, penalties                                       (replica_stages)
    7. on the device     each stage's share of `Problem`, assembled in one place        (assembly)
    8. the `Index`       names and placements on the host

Stages 1-4 do not depend on the replicas: an update of the replicas (`updates`) keeps them, and
their device arrays. Entities are sorted by name, so the encoding does not depend on the order of
input lists.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter

from plbjax.sf._encoding.arrays import pad
from plbjax.sf._encoding.assembly import (
    Shares,
    class_arrays,
    features_of,
    node_arrays,
    problem_of,
    replica_arrays,
    shares_of,
    weight_arrays,
)
from plbjax.sf._encoding.problem import Index, Problem
from plbjax.sf._encoding.replica_stages import replica_stages
from plbjax.sf._encoding.rows import Rows, replica_rows
from plbjax.sf._encoding.stages import Entities, Stages, encoded_nodes, energy_weights, entities, placement_classes
from plbjax.sf._state import ClusterState, gc_paused


def encode(state: ClusterState, parent_hosts: dict[str, set[str]] | None = None) -> tuple[Problem, Index]:
    """Encode `state`, with the replicas it lacks added (unplaced) and those on nodes that are neither
    Up nor kept unplaced. What a phase may move is its scope (`search_scope.scope`). A child of a service with one
    instance per node may go where its parent may, or only to the nodes `parent_hosts` names for it.

    Capacities are buffered (less NodeBufferPercentage) in normal operation; during an upgrade SF
    may fill nodes up to their full capacity.
    """
    with gc_paused():  # a million replicas make millions of objects, none of them garbage
        return assemble(state, cluster_stages(state, parent_hosts))


def cluster_stages(state: ClusterState, parent_hosts: dict[str, set[str]] | None) -> Stages:
    """Stages 1-4, those that do not depend on the replicas."""
    cluster = entities(state)
    nodes = encoded_nodes(state, cluster)
    classes = placement_classes(state, cluster, nodes, parent_hosts)
    weights = energy_weights(state, cluster, classes)
    return Stages(cluster, nodes, classes, weights)


def assemble(
    state: ClusterState, stages: Stages, rows: Rows | None = None, held: Problem | None = None
) -> tuple[Problem, Index]:
    """Stages 5-8 on top of `stages`: the rows given, or derived from the partitions. `held`: a
    problem encoded with `stages`' nodes, classes and weights (an update), whose device arrays of
    them are taken."""
    cluster = stages.cluster
    use_costs = bool(state.settings.get("UseMoveCostReports", False))
    if rows is None:
        rows = replica_rows(cluster, stages.allowed(), stages.nodes, use_costs)
    replicas = replica_stages(state, cluster, rows, use_costs)
    if held is not None:
        kept = shares_of(held)
        nodes, classes, weights = kept.nodes, kept.classes, kept.weights
    else:
        nodes = node_arrays(stages.nodes, cluster)
        classes = class_arrays(stages.classes, cluster.N)
        weights = weight_arrays(stages.weights)
    shares = Shares(nodes, classes, weights, replica_arrays(cluster, rows, replicas))
    problem = problem_of(features_of(stages, replicas, rows), shares)
    return problem, dataclasses.replace(_index(cluster, rows), stages=stages, rows=rows)


def _index(cluster: Entities, rows: Rows) -> Index:
    partitions, R, P = cluster.partitions, rows.R, rows.P
    return Index(
        nodes=tuple(n.name for n in cluster.nodes),
        metrics=tuple(cluster.metrics),
        services=tuple(s.name for s in cluster.services),
        partitions=tuple(zip(map(attrgetter("service"), partitions), map(attrgetter("partition_id"), partitions))),
        replica_ids=tuple(rows.ids),
        replica_roles=tuple(rows.roles),
        partition_rows=rows.partition_rows,
        input_node=pad(rows.input_node, (R,), -1),
        initial_node=pad(rows.initial_node, (R,), -1),
        initial_primary=pad(rows.initial_primary, (P,), -1),
        stateful=pad(rows.stateful, (P,), False),
        node_status=tuple(n.status for n in cluster.nodes),
        node_intent=tuple(n.deactivation_intent for n in cluster.nodes),
        node_types=tuple(n.node_type for n in cluster.nodes),
        n_nodes=cluster.n_nodes,
        n_replicas=rows.n_replicas,
        n_partitions=len(partitions),
    )
