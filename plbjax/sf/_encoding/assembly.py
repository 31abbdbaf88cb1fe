"""The stages on the device, and `Problem` assembled from them in one place.

Each stage's share of `Problem` is a typed record of padded device arrays, its fields named as
`Problem`'s: `NodeArrays` (from `Nodes`), `ClassArrays` (`Classes`) and `WeightArrays` (`Weights`),
the cluster's share, which an update of the replicas keeps; `ReplicaArrays` (the `Rows` and the
`ReplicaStages` that read them). `Shares` holds the four; `problem_of` assembles `Problem` from
them and `Features`, and `shares_of` takes them back out of an encoded one (an update keeps some).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from plbjax.sf._encoding.app_groups import AppGroups
from plbjax.sf._encoding.arrays import on_device, pad
from plbjax.sf._encoding.problem import Features, Problem
from plbjax.sf._encoding.replica_stages import ReplicaStages, children_of
from plbjax.sf._encoding.rows import Rows, partition_table
from plbjax.sf._encoding.stages import Classes, Entities, Nodes, Stages, Weights, top_fault_domain


class NodeArrays(NamedTuple):
    """The nodes on the device: status, capacities, domains, move factors."""

    node_up: jax.Array
    node_kept: jax.Array
    capacity: jax.Array
    threshold_load: jax.Array
    fd_leaf_up: jax.Array
    ud_up: jax.Array
    fd_tree: jax.Array
    ud_tree: jax.Array
    domain_nodes: jax.Array
    domain_first: jax.Array
    node_move_factor: jax.Array


class ClassArrays(NamedTuple):
    """The placement classes on the device."""

    service_class: jax.Array
    class_nodes: jax.Array
    class_node_count: jax.Array
    class_allowed: jax.Array
    fd_children: jax.Array
    ud_children: jax.Array
    fd_usable: jax.Array
    ud_usable: jax.Array
    domain_quorum: jax.Array
    quorum_level: jax.Array


class WeightArrays(NamedTuple):
    """The energy weights on the device."""

    service_metrics: jax.Array
    local_weight: jax.Array
    global_weight: jax.Array
    metric_nodes: jax.Array
    metric_node_count: jax.Array
    metric_defrag: jax.Array
    energy_terms: jax.Array


class ReplicaArrays(NamedTuple):
    """The replica rows and the stages that read them, on the device."""

    # the rows
    replica_partition: jax.Array
    replica_service: jax.Array
    load_primary: jax.Array
    load_secondary: jax.Array
    move_cost: jax.Array
    partition_replicas: jax.Array
    partition_service: jax.Array
    initial_node: jax.Array
    initial_primary: jax.Array
    replica_count: jax.Array
    # affinity and domain policies
    replica_parent: jax.Array
    children_of: jax.Array
    replica_aligned: jax.Array
    service_nonpacking: jax.Array
    primary_preferred: jax.Array
    # upgrade homes, History, replicas in transition
    replica_home: jax.Array
    replica_upgraded: jax.Array
    node_upgraded: jax.Array
    history: jax.Array
    replica_stays: jax.Array
    # penalties
    penalty: jax.Array
    swap_cost: jax.Array
    # application groups (None: none limits anything)
    apps: AppGroups | None


class Shares(NamedTuple):
    """`Problem`'s arrays, stage by stage."""

    nodes: NodeArrays
    classes: ClassArrays
    weights: WeightArrays
    replicas: ReplicaArrays


def node_arrays(nodes: Nodes, cluster: Entities) -> NodeArrays:
    N, M, n = cluster.N, cluster.M, cluster.n_nodes
    return NodeArrays(
        node_up=on_device(pad(nodes.up, (N,), False)),
        node_kept=on_device(pad(nodes.kept, (N,), False)),
        capacity=on_device(pad(nodes.capacity, (N, M), np.float32(np.inf))),
        threshold_load=on_device(pad(nodes.threshold_load, (N, M), np.float32(np.inf))),
        fd_leaf_up=on_device(np.isin(np.arange(nodes.Df), nodes.fd_tree[:n][nodes.up, -1])),
        ud_up=on_device(np.isin(np.arange(nodes.Du), nodes.ud_tree[:n][nodes.up, -1])),
        fd_tree=on_device(nodes.fd_tree),
        ud_tree=on_device(nodes.ud_tree),
        **_domain_cells(nodes, N, n),
        node_move_factor=on_device(pad(nodes.move_factor, (N,), np.float32(1))),
    )


def _domain_cells(nodes: Nodes, N: int, n: int) -> dict[str, jax.Array]:
    """The Up nodes ordered by (top fault domain, upgrade domain) cell, and where each cell starts
    (cell f x Du + u; a top fault domain's cells are contiguous): `Problem.domain_nodes`."""
    up = np.flatnonzero(nodes.up[:n])
    cell = top_fault_domain(nodes.fd_tree)[up].astype(np.int64) * nodes.Du + nodes.ud_tree[up, -1]
    order = np.argsort(cell, kind="stable")
    first = np.searchsorted(cell[order], np.arange(nodes.Df * nodes.Du + 1))
    return dict(
        domain_nodes=on_device(pad(up[order].astype(np.int32), (N,), 0)),
        domain_first=on_device(first.astype(np.int32)),
    )


def class_arrays(classes: Classes, N: int) -> ClassArrays:
    padding = [np.zeros(N, bool)] * (classes.nodes.shape[0] - len(classes.masks))
    return ClassArrays(
        service_class=on_device(classes.service_class),
        class_nodes=on_device(classes.nodes),
        class_node_count=on_device(classes.count),
        class_allowed=on_device(np.stack([pad(m, (N,), False) for m in classes.masks] + padding)),
        fd_children=on_device(classes.fd_children),
        ud_children=on_device(classes.ud_children),
        fd_usable=on_device(classes.fd_usable),
        ud_usable=on_device(classes.ud_usable),
        domain_quorum=on_device(classes.quorum),
        quorum_level=on_device(classes.quorum_level),
    )


def weight_arrays(weights: Weights) -> WeightArrays:
    return WeightArrays(
        service_metrics=on_device(weights.service_metrics),
        local_weight=on_device(weights.local.astype(np.float32)),
        global_weight=on_device(weights.global_.astype(np.float32)),
        metric_nodes=on_device(weights.metric_nodes),
        metric_node_count=on_device(weights.metric_nodes.sum(axis=1).astype(np.float32)),
        metric_defrag=on_device(weights.defrag),
        energy_terms=on_device(weights.terms),
    )


def replica_arrays(cluster: Entities, rows: Rows, stages: ReplicaStages) -> ReplicaArrays:
    R, P, M, N = rows.R, rows.P, cluster.M, cluster.N
    policies, upgrade = stages.policies, stages.upgrade
    parent = policies.parent[rows.service]
    return ReplicaArrays(
        replica_partition=on_device(pad(rows.partition, (R,), 0)),
        replica_service=on_device(pad(rows.service, (R,), 0)),
        load_primary=on_device(pad(rows.load_primary, (R, M), np.float32(0))),
        load_secondary=on_device(pad(rows.load_secondary, (R, M), np.float32(0))),
        move_cost=on_device(pad(rows.move_cost, (R,), np.float32(0))),
        partition_replicas=on_device(partition_table(rows, P)),
        partition_service=on_device(pad(rows.partition_service, (P,), 0)),
        initial_node=on_device(pad(rows.initial_node, (R,), -1)),
        initial_primary=on_device(pad(rows.initial_primary, (P,), -1)),
        replica_count=on_device(float(rows.n_replicas), np.float32),
        replica_parent=on_device(pad(parent, (R,), -1)),
        children_of=on_device(children_of(parent, P)),
        replica_aligned=on_device(pad(policies.aligned[rows.service], (R,), False)),
        service_nonpacking=on_device(policies.nonpacking),
        primary_preferred=on_device(policies.preferred),
        replica_home=on_device(pad(upgrade.home, (R,), -1)),
        replica_upgraded=on_device(pad(upgrade.prefers, (R,), False)),
        node_upgraded=on_device(pad(upgrade.upgraded, (N,), False)),
        history=on_device(stages.history),
        replica_stays=on_device(pad(stages.stays, (R,), False)),
        penalty=on_device(stages.penalty, np.float32),
        swap_cost=on_device(stages.swap_cost, np.float32),
        apps=stages.apps,
    )


def _tight_domains(nodes: Nodes, rows: Rows) -> bool:
    """Some partition has a multiple of the Up nodes' top fault domains or upgrade domains (two or
    more) in replicas: every domain holds as many, so no single replica can move to another one."""
    up = nodes.up
    sizes = rows.sizes[~rows.everywhere]
    for ids in (top_fault_domain(nodes.fd_tree)[: up.size][up], nodes.ud_tree[: up.size][up, -1]):
        domains = np.unique(ids).size
        if domains >= 2 and np.any((sizes >= domains) & (sizes % domains == 0)):
            return True
    return False


def features_of(stages: Stages, replicas: ReplicaStages, rows: Rows) -> Features:
    """The optional rules the stages use."""
    policies, upgrade = replicas.policies, replicas.upgrade
    return Features(
        compound=_tight_domains(stages.nodes, rows),
        affinity=bool((policies.parent >= 0).any()),
        higher_child=stages.cluster.higher_child,
        defrag=bool(stages.weights.defrag.any()),
        thresholds=bool(np.isfinite(stages.nodes.threshold_load).any()),
        preferred=bool((upgrade.home >= 0).any() or upgrade.prefers.any() or not policies.preferred.all()),
        applications=replicas.apps is not None,
    )


def shares_of(problem: Problem) -> Shares:
    """The shares of an encoded problem (an update keeps those whose stages did not change)."""

    def held(kind):
        return kind(*(getattr(problem, name) for name in kind._fields))

    return Shares(held(NodeArrays), held(ClassArrays), held(WeightArrays), held(ReplicaArrays))


def problem_of(features: Features, shares: Shares) -> Problem:
    """`Problem` from its shares: the one place it is assembled."""
    nodes, classes, weights, replicas = shares
    return Problem(
        features=features,
        # nodes
        node_up=nodes.node_up,
        node_kept=nodes.node_kept,
        capacity=nodes.capacity,
        threshold_load=nodes.threshold_load,
        fd_leaf_up=nodes.fd_leaf_up,
        ud_up=nodes.ud_up,
        fd_tree=nodes.fd_tree,
        ud_tree=nodes.ud_tree,
        domain_nodes=nodes.domain_nodes,
        domain_first=nodes.domain_first,
        node_move_factor=nodes.node_move_factor,
        # placement classes
        service_class=classes.service_class,
        class_nodes=classes.class_nodes,
        class_node_count=classes.class_node_count,
        class_allowed=classes.class_allowed,
        fd_children=classes.fd_children,
        ud_children=classes.ud_children,
        fd_usable=classes.fd_usable,
        ud_usable=classes.ud_usable,
        domain_quorum=classes.domain_quorum,
        quorum_level=classes.quorum_level,
        # energy weights
        service_metrics=weights.service_metrics,
        local_weight=weights.local_weight,
        global_weight=weights.global_weight,
        metric_nodes=weights.metric_nodes,
        metric_node_count=weights.metric_node_count,
        metric_defrag=weights.metric_defrag,
        energy_terms=weights.energy_terms,
        # replica rows
        replica_partition=replicas.replica_partition,
        replica_service=replicas.replica_service,
        load_primary=replicas.load_primary,
        load_secondary=replicas.load_secondary,
        move_cost=replicas.move_cost,
        partition_replicas=replicas.partition_replicas,
        partition_service=replicas.partition_service,
        initial_node=replicas.initial_node,
        initial_primary=replicas.initial_primary,
        replica_count=replicas.replica_count,
        # affinity and domain policies
        replica_parent=replicas.replica_parent,
        children_of=replicas.children_of,
        replica_aligned=replicas.replica_aligned,
        service_nonpacking=replicas.service_nonpacking,
        primary_preferred=replicas.primary_preferred,
        # upgrade homes, History, replicas in transition, penalties
        replica_home=replicas.replica_home,
        replica_upgraded=replicas.replica_upgraded,
        node_upgraded=replicas.node_upgraded,
        history=replicas.history,
        replica_stays=replicas.replica_stays,
        penalty=replicas.penalty,
        swap_cost=replicas.swap_cost,
        apps=replicas.apps,
    )
