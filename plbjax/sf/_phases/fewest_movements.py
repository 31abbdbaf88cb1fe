"""The minimal-movement pass, the last phase: from the final placement, movements undone and chains
of moves collapsed while neither SF's energy nor any constraint gets worse."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from plbjax.anneal import KernelConfig, Schedule, anneal
from plbjax.sf._encoding import Index, settle
from plbjax.sf._model import Placement, Scope, assessed, movements, no_worse, scope
from plbjax.sf._phases.phase import Phase, PhaseResult, Reached, Run

TIDY_PROPOSALS = 64  # proposals per movement the minimal-movement pass makes


def fewest_movements_phase(run: Run, reached: Reached, schedule: Schedule) -> PhaseResult:
    """The fewest movements for the result: from the final placement, undo movements and collapse
    chains of moves (an exchange of two moved replicas sends one home) while neither SF's energy,
    which charges every movement, nor any constraint gets worse; `finished`: its search ran to its
    end. It runs after a stop too, for `AFTER_STOP_SECONDS` at most."""
    (_, _, problem, index), priorities, final = run.encoded, run.priorities, reached.now
    moved, swapped = _undoable(index, final)
    count = int(moved.sum() + swapped.sum())
    if not count:
        return PhaseResult(Phase.FEWEST_MOVEMENTS, False, "no movement to undo", final)
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
    steps = tidy_blocks(run.kernel, count) * run.kernel.block_steps
    schedule = dataclasses.replace(schedule, steps=steps, initial_temperature=1e-9, final_ratio=1.0)
    result = anneal(run.model, scoped, run.kernel, schedule, run.progress, finish=True)
    tidied = assessed(problem, *settle(index, *result.solution))
    removed = before - movements(index, index.initial_node, index.initial_primary, tidied)
    finished = result.steps >= steps
    if removed > 0 and no_worse(final.report.violations, tidied.report.violations, priorities):
        return PhaseResult(Phase.FEWEST_MOVEMENTS, True, f"{removed} movement(s) undone", tidied, result, finished)
    return PhaseResult(Phase.FEWEST_MOVEMENTS, True, "no movement could be undone", final, result, finished)


def tidy_blocks(kernel: KernelConfig, count: int) -> int:
    """Blocks the pass searches to undo or collapse `count` movements (`TIDY_PROPOSALS` each)."""
    return max(1, math.ceil(TIDY_PROPOSALS * count / (kernel.tries * kernel.block_steps)))


def _undoable(index: Index, final: Placement) -> tuple[np.ndarray, np.ndarray]:
    """[R] replicas moved from a node and [P] primaries swapped from a running one: what may be undone."""
    n = index.n_partitions
    moved = (final.node_of != index.initial_node) & (index.initial_node >= 0) & (final.node_of >= 0)
    swapped = np.zeros_like(moved, shape=final.primary_of.shape)
    head = index.initial_primary[:n]  # swaps back only to a primary that was running
    swapped[:n] = (final.primary_of[:n] != head) & (head >= 0) & index.stateful[:n]
    swapped[:n] &= index.initial_node[np.maximum(head, 0)] >= 0
    return moved, swapped
