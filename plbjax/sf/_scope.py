"""What one phase's search may touch (`Scope`), and the ready-made scopes for callers that do not
run SF's phases (`full_scope`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.sf._arrays import on_device, pad
from plbjax.sf._problem import CONSTRAINTS, UNPLACED, Index, Problem

UNDO_SHARE = 0.0  # replica moves that cancel an earlier one (1 in the minimal-movement pass)


@dataclasses.dataclass(frozen=True)
class Scope:
    """What one phase's search may do: move the replicas in the bool mask `movable` [R], swap primaries
    of the partitions in `swappable` [P], never make the constraints in `enforce` [CONSTRAINTS] worse;
    charge `move_weight` AvgStdDev units per move on top of SF's energy (constraint checks: as few
    moves as possible); place replicas only on `open_nodes` [N] (None: every Up node); make at most
    `budget` movements in all and `partition_budget` moved replicas per partition (throttles); with
    `history`, never return a replica to a node it left. The search starts from `start` (node_of,
    primary_of) when given, counting movements from the phase's placement all the same; an
    `undo_share` of replica moves go back to where they started; a movable replica may trade nodes
    with one of `partners` [R] (None: the movable ones)."""

    movable: np.ndarray
    swappable: np.ndarray
    enforce: np.ndarray
    move_weight: float = 0.0
    open_nodes: np.ndarray | None = None
    budget: int | None = None
    partition_budget: int | None = None
    history: bool = False
    start: tuple[np.ndarray, np.ndarray] | None = None
    undo_share: float = UNDO_SHARE
    partners: np.ndarray | None = None


def scope(problem: Problem, node_of: np.ndarray, primary_of: np.ndarray, what: Scope) -> Problem:
    """The problem for one phase that starts from (node_of, primary_of) and may do `what`."""
    r, p = what.movable.shape[0], what.swappable.shape[0]
    moving = np.flatnonzero(what.movable).astype(np.int32)
    swapping = np.flatnonzero(what.swappable).astype(np.int32)
    pool = np.flatnonzero(what.movable if what.partners is None else what.partners).astype(np.int32)
    placed = pool[node_of[pool] >= 0]
    by_node = placed[np.argsort(node_of[placed], kind="stable")]
    node_first = np.searchsorted(node_of[by_node], np.arange(problem.node_up.shape[0] + 1)).astype(np.int32)
    start_node, start_primary = what.start if what.start is not None else (node_of, primary_of)
    unlimited = 2**31 - 1
    return dataclasses.replace(
        problem,
        initial_node=on_device(node_of, np.int32),
        initial_primary=on_device(primary_of, np.int32),
        start_node=on_device(start_node, np.int32),
        start_primary=on_device(start_primary, np.int32),
        by_node=on_device(pad(by_node.astype(np.int32), (r,), 0)),
        node_first=on_device(node_first),
        undo_share=on_device(what.undo_share, np.float32),
        movable=on_device(pad(moving, (r,), 0)),
        n_movable=on_device(len(moving), np.int32),
        swappable=on_device(pad(swapping, (p,), 0)),
        n_swappable=on_device(len(swapping), np.int32),
        enforce=on_device(what.enforce, bool),
        node_open=problem.node_up if what.open_nodes is None else problem.node_up & on_device(what.open_nodes),
        move_budget=on_device(min(what.budget if what.budget is not None else unlimited, unlimited), np.int32),
        partition_budget=on_device(min(what.partition_budget or unlimited, unlimited), np.int32),
        history=problem.history if what.history else on_device(np.full(problem.history.shape, -1, np.int32)),
        features=dataclasses.replace(problem.features, history=what.history and bool((problem.history >= 0).any())),
        move_penalty=on_device(what.move_weight * float(problem.replica_count + 1000.0), np.float32),
    )


def full_scope(problem: Problem, index: Index, enforce: bool = True) -> Scope:
    """Everything may move: every placed replica, and the primary of every stateful partition that
    has a placed primary and another placed replica to hand over to, but for affinity parents' (which
    never swap, as in every phase). With `enforce`, no constraint may get worse but unplaced replicas
    (only placement places them); without it, none is enforced (violations only cost energy).

    The search starts from the encoded placement: `scope(problem, index.node_of, index.primary_of,
    full_scope(problem, index))`. Used by the tests and the numba baseline as the widest search.
    """
    node_of, primary_of = index.node_of, index.primary_of
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
