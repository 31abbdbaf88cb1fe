"""The minimal-movement pass: from the final placement, movements undone and chains of moves
collapsed while neither SF's energy nor any constraint gets worse."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from plbjax.anneal import AnnealResult, Schedule, anneal
from plbjax.sf._encoding import settle
from plbjax.sf._model import Placement, Scope, assessed, movements, no_worse, scope
from plbjax.sf._phases.phase import Run

TIDY_PROPOSALS = 64  # proposals per movement the minimal-movement pass makes


def tidy(run: Run, final: Placement, schedule: Schedule) -> tuple[Placement, int, AnnealResult | None, bool]:
    """The fewest movements for the result: from the final placement, undo movements and collapse
    chains of moves (an exchange of two moved replicas sends one home) while neither SF's energy,
    which charges every movement, nor any constraint gets worse. Returns the placement, how many
    movements went, the search, and whether it ran to its end. It runs after a stop too, for
    `AFTER_STOP_SECONDS` at most."""
    problem, index, priorities = run.problem, run.index, run.priorities
    n = index.n_partitions
    moved = (final.node_of != index.initial_node) & (index.initial_node >= 0) & (final.node_of >= 0)
    swapped = np.zeros_like(moved, shape=final.primary_of.shape)
    head = index.initial_primary[:n]  # swaps back only to a primary that was running
    swapped[:n] = (final.primary_of[:n] != head) & (head >= 0) & index.stateful[:n]
    swapped[:n] &= index.initial_node[np.maximum(head, 0)] >= 0
    count = int(moved.sum() + swapped.sum())
    if not count:
        return final, 0, None, True
    before = movements(index, index.initial_node, index.initial_primary, final)
    what = Scope(
        moved & run.free,
        swapped & run.free_partitions,
        priorities >= 0,
        budget=before,
        history=True,
        start=(final.node_of, final.primary_of),
        undo_share=1.0,
    )
    scoped = scope(problem, index.initial_node, index.initial_primary, what)
    blocks = math.ceil(TIDY_PROPOSALS * count / (run.kernel.tries * run.kernel.block_steps))
    steps = blocks * run.kernel.block_steps
    schedule = dataclasses.replace(schedule, steps=steps, initial_temperature=1e-9, final_ratio=1.0)
    result = anneal(run.model, scoped, run.kernel, schedule, run.progress, finish=True)
    node_of, primary_of = settle(index, *result.solution)
    tidied = assessed(problem, node_of, primary_of)
    removed = before - movements(index, index.initial_node, index.initial_primary, tidied)
    finished = result.steps >= steps
    if removed > 0 and no_worse(final.report.violations, tidied.report.violations, priorities):
        return tidied, removed, result, finished
    return final, 0, result, finished
