"""The executor's decision, pure: which pending steps start now, which are skipped, which time out.

`decide(steps, board, limits, now)` reads a `Board` (each step's status, when each watched step
began, the moves in flight per node and in the cluster) and gives the `Decision` and the board after
it; the executor carries the decision out (reads the cluster, sends, journals, logs). No cluster, no
clock, no thread: its tests give a board and a time.

The health and upgrade gates: with `Gates` (what SF said of its health and upgrades, typed at the REST
door) and a `Policy`, a move whose partition, source or target is in Error (or Warning, strict), or
that a rolling cluster upgrade (or its application's) holds, waits; past the policy's timeout it is
skipped, with the state in SF's words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from plbjax.sf import HealthState
from plbjax.sf.live.apply.journal import FINAL, Status
from plbjax.sf.live.apply.steps import Step
from plbjax.sf.live.rest import application_id


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
    held: Mapping[int, float] = dataclasses.field(default_factory=dict)  # step -> when its gate first held it


@dataclasses.dataclass(frozen=True)
class Gates:
    """What SF says now: the cluster's upgrade state while one rolls ('' when none), the applications'
    (by id) that roll, and the health of partitions (by id) and nodes (by name) read (absent: not read,
    taken as Ok)."""

    upgrade: str = ""
    applications: Mapping[str, str] = dataclasses.field(default_factory=dict)
    partitions: Mapping[str, HealthState] = dataclasses.field(default_factory=dict)
    nodes: Mapping[str, HealthState] = dataclasses.field(default_factory=dict)
    read: frozenset[str] | None = None  # the partitions whose health was read (None: all, the cluster Ok)

    def unread(self, step: Step) -> bool:
        """Whether the step's partition's health is not known yet (it waits, without being held)."""
        return self.read is not None and bool(step.command) and str(step.action.partition) not in self.read


@dataclasses.dataclass(frozen=True)
class Policy:
    """Whether Warning holds a step as Error does (--strict-health), whether a rolling upgrade holds every
    step (--during-upgrade hold), and the seconds a held step waits before it is skipped (--health-timeout)."""

    strict: bool = False
    hold_upgrade: bool = True
    timeout: float = 600.0


def held_by(step: Step, gates: Gates, policy: Policy) -> str:
    """Why the gates hold `step` now, in SF's words ('' when they do not): a rolling upgrade, or its
    partition or one of its nodes unhealthy. The Failover Manager's steps are never held (only watched)."""
    if not step.command:
        return ""
    if policy.hold_upgrade and gates.upgrade:
        return f"a cluster upgrade is {gates.upgrade}"
    app = application_id(step.action.service)
    if policy.hold_upgrade and gates.applications.get(app):
        return f"an upgrade of application fabric:/{app} is {gates.applications[app]}"
    bad = (HealthState.ERROR, HealthState.WARNING) if policy.strict else (HealthState.ERROR,)
    pid = str(step.action.partition)
    if gates.partitions.get(pid) in bad:
        return f"partition {pid} is {gates.partitions[pid]} (SF's health)"
    for node in nodes_of(step):
        if gates.nodes.get(node) in bad:
            return f"node {node} is {gates.nodes[node]} (SF's health)"
    return ""


@dataclasses.dataclass(frozen=True)
class Decision:
    """Steps to begin (a move: checked, then sent; the Failover Manager's: watched), steps skipped
    (with the step they needed that did not get done), and watched steps that took too long."""

    begin: tuple[int, ...] = ()
    skip: tuple[tuple[int, int], ...] = ()
    time_out: tuple[int, ...] = ()
    hold: tuple[tuple[int, str], ...] = ()  # held by a gate now (why, in SF's words)
    gave_up: tuple[tuple[int, str], ...] = ()  # held past the policy's timeout: skipped (why)


def nodes_of(step: Step) -> list[str]:
    """The nodes a step's move counts against (none for the Failover Manager's steps)."""
    a = step.action
    return [n for n in (a.source, a.target) if n] if step.command else []


def decide(
    steps: Sequence[Step],
    board: Board,
    limits: Limits,
    now: float,
    starting: bool = True,
    gates: Gates | None = None,
    policy: Policy = Policy(),
) -> tuple[Decision, Board]:
    """In the steps' order: a pending step whose needed step ended not done is skipped; one whose needed
    steps are all done is held while `gates` hold it (skipped once held longer than the policy's
    timeout), else starts if its nodes and the cluster have room (`starting`: False once asked to stop);
    then every watched step older than the timeout times out."""
    state, load, in_flight, held = list(board.state), dict(board.load), board.in_flight, dict(board.held)
    begin: list[int] = []
    skip: list[tuple[int, int]] = []
    hold: list[tuple[int, str]] = []
    gave_up: list[tuple[int, str]] = []
    for k, step in enumerate(steps if starting else ()):
        if state[k] != Status.PENDING:
            continue
        bad = next((d for d in step.needs if state[d] in FINAL and state[d] != Status.DONE), None)
        ready = bad is None and all(state[d] == Status.DONE for d in step.needs)
        why = held_by(step, gates, policy) if ready and gates is not None else ""
        if bad is not None:
            skip.append((k, bad))
            state[k] = Status.SKIPPED
        elif why and now - held.setdefault(k, now) > policy.timeout:
            gave_up.append((k, why))
            state[k] = Status.SKIPPED
            held.pop(k)
        elif why:
            hold.append((k, why))
        elif ready and gates is not None and gates.unread(step):
            continue
        elif all(state[d] == Status.DONE for d in step.needs) and _room(step, load, in_flight, limits):
            begin.append(k)
            for n in nodes_of(step):
                load[n] = load.get(n, 0) + 1
            in_flight += step.command
            state[k] = Status.CHECKING if step.command else Status.ISSUED
            held.pop(k, None)
    late = tuple(k for k, since in board.since.items() if now - since > limits.step_timeout)
    for k in late:
        state[k] = Status.TIMED_OUT
    since = {k: s for k, s in board.since.items() if k not in late}
    after = Board(tuple(state), since, load, in_flight, held)
    return Decision(tuple(begin), tuple(skip), late, tuple(hold), tuple(gave_up)), after


def _room(step: Step, load: Mapping[str, int], in_flight: int, limits: Limits) -> bool:
    if not step.command:
        return True
    return in_flight < limits.max_in_flight and all(load.get(n, 0) < limits.per_node for n in nodes_of(step))
