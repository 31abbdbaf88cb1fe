"""Ready-made `Scope`s: what a search may touch, for callers that do not run SF's phases."""

from __future__ import annotations

import numpy as np

from plbjax.sf._encoding import CONSTRAINTS, UNPLACED, Index, Problem, Scope


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
