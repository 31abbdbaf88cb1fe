"""A search's scope: what one phase decides, apart from the cluster it searches.

`Scope` is the host-side spec a phase writes (bool masks, budgets, flags); `scope` turns it into a
`SearchScope` (device arrays, padded like the `Problem`) and pairs it with the cluster as the
`Search` the annealer runs (its opaque `problem`). Two scopes of one cluster share its arrays.
`full_scope` is the widest scope, for callers that do not run SF's phases.

Where a replica starts, in a search: its `origin` is the placement movements are counted from (the
phase's placement; an undo goes back there) and its `start` the placement the chains start from
(the origin unless the phase says otherwise); the plan's initial placement is the cluster's
(`Problem.initial_node`, `Index.initial_node`).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from plbjax.sf._encoding import CONSTRAINTS, OFFSET, UNPLACED, Index, Problem, energy_unit, on_device, pad

UNDO_SHARE = 0.0  # replica moves that cancel an earlier one (1 in the minimal-movement pass)
UNLIMITED = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Scope:
    """What one phase's search may do: move the replicas in the bool mask `movable` [R], swap primaries
    of the partitions in `swappable` [P], never make the constraints in `enforce` [CONSTRAINTS] worse;
    charge `move_weight` AvgStdDev units per move on top of SF's energy (constraint checks: as few
    moves as possible); place replicas only on `open_nodes` [N] (None: every Up node); make at most
    `budget` movements in all and `partition_budget` moved replicas per partition (throttles); with
    `history`, never return a replica to a node it left; count the violations' energy `violation_weight`
    times (0 in balancing: SF's balancing energy is AvgStdDev and the move costs; a standing violation
    may not get worse, `enforce`, but fixing it is the constraint check's). The search starts from `start` (node_of,
    primary_of) when given, else from its origin (the placement `scope` counts movements from); an
    `undo_share` of replica moves go back to the origin; a movable replica may trade nodes with one
    of `partners` [R] (None: the movable ones). With `transient` (SF's PreventTransientOvercommit) a
    node's capacity also holds the load moving away from it until those movements finish."""

    movable: np.ndarray
    swappable: np.ndarray
    enforce: np.ndarray
    move_weight: float = 0.0
    open_nodes: np.ndarray | None = None
    budget: int | None = None
    partition_budget: int | None = None
    history: bool = False
    transient: bool = False  # PreventTransientOvercommit: load moving out stays counted for capacity
    start: tuple[np.ndarray, np.ndarray] | None = None
    undo_share: float = UNDO_SHARE
    partners: np.ndarray | None = None
    violation_weight: float = 1.0


class SearchScope(eqx.Module):
    """A `Scope` on the device, padded like its cluster (R replicas, P partitions, N nodes)."""

    history: bool = eqx.field(static=True)  # History applies: the phase honours it and some replica has one
    transient: bool = eqx.field(static=True)  # PreventTransientOvercommit applies and some node has a capacity
    # what the search may touch
    movable: Int[Array, " R"]  # replica indices that may move, padded
    n_movable: Int[Array, ""]
    may_move: Bool[Array, " R"]  # the same replicas as a mask
    swappable: Int[Array, " P"]  # partitions whose primary may swap, padded
    n_swappable: Int[Array, ""]
    by_node: Int[Array, " R"]  # exchange partners ordered by their origin node, padded
    node_first: Int[Array, " N+1"]  # by_node[node_first[n]:node_first[n+1]] started on node n
    node_open: Bool[Array, " N"]  # Up nodes that may receive replicas
    enforce: Bool[Array, " 8"]  # a move may not make this constraint worse (CAPACITY ... UNPLACED)
    # what movements cost and how many there may be
    move_penalty: Float[Array, ""]  # energy per unit of movement cost, on top of SF's
    violation_weight: Float[Array, ""]  # how much the violations' energy counts
    move_budget: Int[Array, ""]  # most movements (moves and swaps): throttles
    partition_budget: Int[Array, ""]  # most moved replicas per partition
    undo_share: Float[Array, ""]  # share of replica moves that go back to the origin
    # where replicas start
    origin_node: Int[Array, " R"]  # where movements are counted from (-1: unplaced or padding)
    origin_primary: Int[Array, " P"]
    start_node: Int[Array, " R"]  # where the chains start
    start_primary: Int[Array, " P"]


class Search(eqx.Module):
    """One phase's search, the annealer's `problem`: the cluster and what the phase may do in it."""

    cluster: Problem
    scope: SearchScope


def _open(problem: Problem, open_nodes: np.ndarray | None):
    """The Up nodes that may receive replicas (`open_nodes` None: every one); host work, no program."""
    return problem.node_up if open_nodes is None else on_device(np.asarray(problem.node_up) & open_nodes)


def scope(problem: Problem, origin_node: np.ndarray, origin_primary: np.ndarray, what: Scope) -> Search:
    """The search of one phase that counts movements from (origin_node, origin_primary) and may do
    `what`; `problem` is shared, not copied."""
    r, p = what.movable.shape[0], what.swappable.shape[0]
    moving = np.flatnonzero(what.movable).astype(np.int32)
    swapping = np.flatnonzero(what.swappable).astype(np.int32)
    pool = np.flatnonzero(what.movable if what.partners is None else what.partners).astype(np.int32)
    placed = pool[origin_node[pool] >= 0]
    by_node = placed[np.argsort(origin_node[placed], kind="stable")]
    node_first = np.searchsorted(origin_node[by_node], np.arange(problem.node_up.shape[0] + 1)).astype(np.int32)
    start_node, start_primary = what.start if what.start is not None else (origin_node, origin_primary)
    unit = energy_unit(float(problem.replica_count), float(problem.energy_terms[OFFSET]))
    within = SearchScope(
        history=what.history and bool((np.asarray(problem.history) >= 0).any()),  # host work: no program
        transient=what.transient and bool(np.isfinite(np.asarray(problem.capacity)).any()),
        movable=on_device(pad(moving, (r,), 0)),
        n_movable=on_device(len(moving), np.int32),
        may_move=on_device(what.movable, bool),
        swappable=on_device(pad(swapping, (p,), 0)),
        n_swappable=on_device(len(swapping), np.int32),
        by_node=on_device(pad(by_node.astype(np.int32), (r,), 0)),
        node_first=on_device(node_first),
        node_open=problem.node_up
        if what.open_nodes is None
        else on_device(np.asarray(problem.node_up) & what.open_nodes),
        enforce=on_device(what.enforce, bool),
        move_penalty=on_device(what.move_weight * unit, np.float32),
        violation_weight=on_device(what.violation_weight, np.float32),
        move_budget=on_device(min(what.budget if what.budget is not None else UNLIMITED, UNLIMITED), np.int32),
        partition_budget=on_device(min(what.partition_budget or UNLIMITED, UNLIMITED), np.int32),
        undo_share=on_device(what.undo_share, np.float32),
        origin_node=on_device(origin_node, np.int32),
        origin_primary=on_device(origin_primary, np.int32),
        start_node=on_device(start_node, np.int32),
        start_primary=on_device(start_primary, np.int32),
    )
    return Search(problem, within)


def full_scope(problem: Problem, index: Index, enforce: bool = True) -> Scope:
    """Everything may move: every placed replica, and the primary of every stateful partition that
    has a placed primary and another placed replica to hand over to, but for affinity parents' (which
    never swap, as in every phase). With `enforce`, no constraint may get worse but unplaced replicas
    (only placement places them); without it, none is enforced (violations only cost energy).

    The search starts from the plan's initial placement: `scope(problem, index.initial_node,
    index.initial_primary, full_scope(problem, index))`. Used by the tests and the numba baseline as
    the widest search.
    """
    node_of, primary_of = index.initial_node, index.initial_primary
    movable = node_of >= 0
    movable[index.n_replicas :] = False
    swappable = np.zeros(primary_of.shape[0], bool)
    for p in range(index.n_partitions):
        primary = primary_of[p]
        others = any(node_of[r] >= 0 and r != primary for r in index.partition_rows[p])
        swappable[p] = bool(index.stateful[p]) and primary >= 0 and node_of[primary] >= 0 and others
    parents = np.unique(np.asarray(problem.replica_parent))
    swappable[parents[parents >= 0]] = False
    enforced = np.full(CONSTRAINTS, bool(enforce))
    enforced[UNPLACED] = False
    return Scope(movable, swappable, enforced)
