"""The session's update path: the encoding of a state that differs from an encoded one only in its
replicas (surplus drops, reported loads, completed actions) or in where one-per-node parents'
children may go, derived again only where it changed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.sf._encoding.arrays import on_device
from plbjax.sf._encoding.assembly import class_arrays, problem_of, shares_of, weight_arrays
from plbjax.sf._encoding.encoder import assemble
from plbjax.sf._encoding.problem import Index, Problem
from plbjax.sf._encoding.replica_stages import history
from plbjax.sf._encoding.rows import Rows, replica_rows
from plbjax.sf._encoding.stages import Stages, energy_weights, in_order, partition_order, placement_classes
from plbjax.sf._state import ClusterState, gc_paused


def without_dropped(state: ClusterState, index: Index) -> tuple[Problem, Index]:
    """The encoding of `state`, the encoded state less some replicas (surplus drops): only the
    replica stages run again, on the encoded cluster's entities, nodes, classes and weights."""
    stages = _staged(index)
    order = partition_order(state, stages.cluster.service_ix)
    cluster = dataclasses.replace(stages.cluster, partitions=in_order(state, order), order=order)
    with gc_paused():
        return assemble(state, dataclasses.replace(stages, cluster=cluster))


def with_partitions(
    state: ClusterState, problem: Problem, index: Index, changed: list[int]
) -> tuple[Problem, Index] | None:
    """The encoding of `state`, a state whose nodes, services and settings are those encoded in
    `problem` and `index` and whose partitions are the encoded ones, in the same order, but for
    those at positions `changed` of `state.partitions` (loads reported, actions completed; History
    may differ too): only those partitions' replica rows are derived again, and the replica stages
    that read the rows (policies, upgrade homes, history) run on them; the device arrays of the
    cluster stages are `problem`'s. None when a changed partition is another one or its number of
    rows changed (a drop below a surplus): then `without_dropped`."""
    stages, rows = _staged(index), index.rows
    if rows is None:
        raise ValueError("the index carries no replica rows (it was not made by `encode`)")
    order = stages.cluster.order
    if len(state.partitions) != order.size:
        return None
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    at = np.sort(rank[np.asarray(changed, np.int64)])
    partitions = in_order(state, order)
    before = stages.cluster.partitions
    if any(
        (partitions[k].service, partitions[k].partition_id) != (before[k].service, before[k].partition_id) for k in at
    ):
        return None
    cluster = dataclasses.replace(stages.cluster, partitions=partitions)
    if not at.size:  # History only: every other stage gives what it gave
        shares = shares_of(problem)
        replicas = shares.replicas._replace(history=on_device(history(state, cluster, rows)))
        updated = problem_of(problem.features, shares._replace(replicas=replicas))
        return updated, dataclasses.replace(index, stages=dataclasses.replace(stages, cluster=cluster))
    use_costs = bool(state.settings.get("UseMoveCostReports", False))
    sub = dataclasses.replace(cluster, partitions=[partitions[k] for k in at.tolist()])
    fresh = replica_rows(sub, stages.allowed(), stages.nodes, use_costs)
    if not np.array_equal(fresh.sizes, rows.sizes[at]):
        return None
    rows = fresh if at.size == order.size else _spliced(rows, fresh, at)  # a load batch: every one
    with gc_paused():
        return assemble(state, dataclasses.replace(stages, cluster=cluster), rows, problem)


def _spliced(rows: Rows, fresh: Rows, at: np.ndarray) -> Rows:
    """`rows` with the rows of partitions `at` (as many rows each) taken from `fresh`, their rows."""
    dest = (np.cumsum(rows.sizes) - rows.sizes)[at][fresh.partition] + fresh.slot
    ids, roles = list(rows.ids), list(rows.roles)
    for row, rid, role in zip(dest.tolist(), fresh.ids, fresh.roles):
        ids[row], roles[row] = rid, role

    def put(column: np.ndarray, values: np.ndarray, where: np.ndarray = dest) -> np.ndarray:
        column = column.copy()
        column[where] = values
        return column

    primary = np.where(fresh.initial_primary >= 0, dest[fresh.initial_primary], -1)
    return dataclasses.replace(
        rows,
        ids=ids,
        roles=roles,
        input_node=put(rows.input_node, fresh.input_node),
        initial_node=put(rows.initial_node, fresh.initial_node),
        move_cost=put(rows.move_cost, fresh.move_cost),
        load_primary=put(rows.load_primary, fresh.load_primary),
        load_secondary=put(rows.load_secondary, fresh.load_secondary),
        initial_primary=put(rows.initial_primary, primary.astype(rows.initial_primary.dtype), at),
    )


def with_parent_hosts(
    state: ClusterState, problem: Problem, index: Index, parent_hosts: dict[str, set[str]]
) -> tuple[Problem, Index]:
    """The encoding of `state` with `parent_hosts` (see `encode`): only the placement classes, and
    the energy weights' node sets they scope, are derived again and replaced; the replica rows only
    when a one-per-node service's nodes, and so its instance count, changed."""
    stages = _staged(index)
    classes = placement_classes(state, stages.cluster, stages.nodes, parent_hosts)
    updated = dataclasses.replace(stages, classes=classes, weights=energy_weights(state, stages.cluster, classes))
    everywhere = [i for i, s in enumerate(stages.cluster.services) if s.target < 0]
    nodes_of = lambda s: np.array([s.allowed()[i] for i in everywhere])  # its rows: these and its instances elsewhere
    if not np.array_equal(nodes_of(stages), nodes_of(updated)):
        return assemble(state, updated)
    shares = shares_of(problem)._replace(
        classes=class_arrays(classes, stages.cluster.N), weights=weight_arrays(updated.weights)
    )
    return problem_of(problem.features, shares), dataclasses.replace(index, stages=updated)


def _staged(index: Index) -> Stages:
    if index.stages is None:
        raise ValueError("the index carries no encoding stages (it was not made by `encode`)")
    return index.stages
