"""The executor's decision, pure: which pending steps start now, which are skipped, which time out.

`decide(steps, board, limits, now)` reads a `Board` (each step's status, when each watched step
began, the moves in flight per node and in the cluster) and gives the `Decision` and the board after
it; the executor carries the decision out (reads the cluster, sends, journals, logs). No cluster, no
clock, no thread: its tests give a board and a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from plbjax.sf.live.apply.journal import FINAL, Status
from plbjax.sf.live.apply.steps import Step


@dataclasses.dataclass(frozen=True)
class Limits:
    """Moves into or out of one node and in the cluster at once; seconds a watched step may take."""

    per_node: int
    max_in_flight: int
    step_timeout: float


@dataclasses.dataclass(frozen=True)
class Board:
    """Where the run stands: each step's status, when each watched step began (monotonic seconds),
    the moves in flight per node and in the cluster."""

    state: tuple[Status, ...]
    since: Mapping[int, float]
    load: Mapping[str, int]
    in_flight: int


@dataclasses.dataclass(frozen=True)
class Decision:
    """Steps to begin (a move: checked, then sent; the Failover Manager's: watched), steps skipped
    (with the step they needed that did not get done), and watched steps that took too long."""

    begin: tuple[int, ...] = ()
    skip: tuple[tuple[int, int], ...] = ()
    time_out: tuple[int, ...] = ()


def nodes_of(step: Step) -> list[str]:
    """The nodes a step's move counts against (none for the Failover Manager's steps)."""
    a = step.action
    return [n for n in (a.source, a.target) if n] if step.command else []


def decide(
    steps: Sequence[Step], board: Board, limits: Limits, now: float, starting: bool = True
) -> tuple[Decision, Board]:
    """In the steps' order: a pending step whose needed step ended not done is skipped; one whose needed
    steps are all done starts if its nodes and the cluster have room (`starting`: False once asked to
    stop); then every watched step older than the timeout times out."""
    state, load, in_flight = list(board.state), dict(board.load), board.in_flight
    begin: list[int] = []
    skip: list[tuple[int, int]] = []
    for k, step in enumerate(steps if starting else ()):
        if state[k] != Status.PENDING:
            continue
        bad = next((d for d in step.needs if state[d] in FINAL and state[d] != Status.DONE), None)
        if bad is not None:
            skip.append((k, bad))
            state[k] = Status.SKIPPED
        elif all(state[d] == Status.DONE for d in step.needs) and _room(step, load, in_flight, limits):
            begin.append(k)
            for n in nodes_of(step):
                load[n] = load.get(n, 0) + 1
            in_flight += step.command
            state[k] = Status.CHECKING if step.command else Status.ISSUED
    late = tuple(k for k, since in board.since.items() if now - since > limits.step_timeout)
    for k in late:
        state[k] = Status.TIMED_OUT
    after = Board(tuple(state), {k: s for k, s in board.since.items() if k not in late}, load, in_flight)
    return Decision(tuple(begin), tuple(skip), late), after


def _room(step: Step, load: Mapping[str, int], in_flight: int, limits: Limits) -> bool:
    if not step.command:
        return True
    return in_flight < limits.max_in_flight and all(load.get(n, 0) < limits.per_node for n in nodes_of(step))
