"""The replay's types: what the probe and the planner answer (`Needs`, `PlannedRound`), a round's
counts, the series' rows and the record (`Replay`), where the wall time goes (`Stopwatch`), and
`Gone`, raised by an event whose replica no longer exists."""

from __future__ import annotations

import time as wallclock
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, TypeVar

from plbjax.errors import BadInput
from plbjax.sf import Action, ActionKind, ClusterState, Phase

PartitionKey = tuple[str, str]  # (ServiceName, str(PartitionId))
TIME_EPS = 1e-9  # simulated times closer than this are the same time
# Where a replay's wall time goes (Replay.timings): applying events, the probe, the planner's own
# work (preparing and decoding a plan), its searches, and the rest (the scheduler, throttles,
# applying completed actions: "loop"). All but "search" is the host's share.
PARTS = ("events", "probe", "planner", "search", "loop")
Progress = Callable[[float, Mapping[str, float], Mapping[Phase, int], int], None]
T = TypeVar("T")


class Gone(BadInput):
    """The event names a replica that no longer exists (the loop skips such an event)."""


@dataclass(frozen=True)
class Needs:
    """What the cluster needs, and its statistics for the record (the probe's answer)."""

    unplaced: int = 0  # replicas to place or drop outside frozen partitions
    violations: int = 0  # replicas breaking a hard constraint outside frozen partitions
    imbalanced: frozenset[tuple[str, str | None]] = frozenset()  # (metric, node type; None: cluster)
    avg_std_dev: float = 0.0
    max_min_ratio: Mapping[str, float] = field(default_factory=dict)
    node_loads: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # node -> metric -> load
    violations_by_kind: Mapping[str, int] = field(default_factory=dict)  # the violating replicas by constraint kind


class PlannedRound(NamedTuple):
    """What the planner plans for one phase of a round: its actions (in order) and the History that
    replaces the document's."""

    actions: tuple[Action, ...]
    history: Mapping[str, tuple[str, ...]]  # str(ReplicaId) -> nodes it left
    search_seconds: float = 0.0  # of the planner's wall time, its searches' (compilation excluded)


class Effort(NamedTuple):
    """What a round's search should take on (`round_search`): the share of partitions changed since
    the phase's last round (1: all, or unknown) and SF's caps (seconds: the round's timeout;
    blocks: None, no limit)."""

    share: float = 1.0
    seconds: float | None = None
    blocks: int | None = None


FULL = Effort()  # a round's full search (the planner's search as it is)


class Probe(Protocol):
    def __call__(self, state: ClusterState, frozen: frozenset[PartitionKey]) -> Needs:
        """What `state` needs, counting nothing in the `frozen` partitions."""
        ...


class Planner(Protocol):
    def __call__(
        self,
        state: ClusterState,
        phase: Phase,
        node_type: str | None,
        seed: int,
        frozen: frozenset[PartitionKey],
        effort: Effort = FULL,
    ) -> PlannedRound:
        """One phase's round; Balancing moves only replicas on `node_type`'s nodes when it is given;
        nothing in the `frozen` partitions changes; its search fits `effort`."""
        ...


class Counts(NamedTuple):
    """The actions a round issued, by kind (the series' columns Actions ... Promotions)."""

    actions: int = 0
    moves: int = 0
    swaps: int = 0
    adds: int = 0
    drops: int = 0
    promotions: int = 0

    @classmethod
    def of(cls, actions: Sequence[Action]) -> Counts:
        kinds = Counter(_COUNTED[verb(a.kind)] for a in actions)
        return cls(len(actions), *(kinds[kind] for kind in cls._fields[1:]))


VERBS = ("Move", "Add", "Swap", "Drop", "Promote")  # what an action does, as ActionSeconds names it
_COUNTED: dict[str, str] = dict(zip(VERBS, ("moves", "adds", "swaps", "drops", "promotions"), strict=True))


def verb(kind: ActionKind) -> str:
    """What an action of `kind` does: Move, Add, Swap, Drop or Promote."""
    return next(v for v in VERBS if kind.startswith(v))


def as_action(action: Action | Mapping) -> Action:
    """A plan's action as the loop holds it: typed (a plan document's action is read once)."""
    return action if isinstance(action, Action) else Action.from_document(action)


def partition_of(action: Action) -> PartitionKey:
    """The partition `action` acts on."""
    return action.service, str(action.partition)


@dataclass(frozen=True)
class Row:
    """One row of the series: a round that ran a phase (per node type), or an event time."""

    time: float
    trigger: str
    phase: Phase | None  # None: an event row
    node_type: str | None
    counts: Counts
    cumulative_movements: int
    needs: Needs
    events: tuple[tuple[str, str], ...] = ()  # an event row's (kind, what happened): `events.describe`


@dataclass(frozen=True)
class ClusterEvent:
    """A timeline event as the record names it: its time, kind and subject (a node, a service, an
    upgrade domain, ...: `events.describe`)."""

    time: float
    kind: str
    subject: str


@dataclass(frozen=True)
class LoadChange:
    """The LoadReport events of one service at one time: how many, and the loads they reported
    summed by metric."""

    time: float
    service: str
    reports: int
    loads: Mapping[str, float]


@dataclass(frozen=True)
class Hold:
    """A stretch in which SF's scheduler held a phase back although it had work (an imbalance,
    violations, replicas to place): from `since` to `until` (the replay's end when `open`), the SF
    setting (or rule) that held it and why."""

    phase: Phase
    since: float
    until: float
    setting: str
    why: str
    open: bool = False


@dataclass(frozen=True)
class Story:
    """The cluster's story beside the rounds' (`chronicle`): the state's needs at time 0, every
    event applied (load reports by service and time) and every stretch a phase was held."""

    initial: Needs | None = None
    events: tuple[ClusterEvent, ...] = ()
    loads: tuple[LoadChange, ...] = ()
    holds: tuple[Hold, ...] = ()


@dataclass(frozen=True)
class Replay:
    """The record of a replay."""

    rows: tuple[Row, ...]
    actions: tuple[dict, ...]  # {Time, Phase, NodeType?, ...the plan's action fields}
    final_state: dict
    rounds: Mapping[Phase, int]
    cancelled: int  # in-flight actions that no longer fitted when they completed
    duration: float
    seconds: float
    timings: Mapping[str, float] = field(default_factory=dict)  # wall seconds by part (see `PARTS`)
    interrupted: bool = False  # stopped early: `duration` is the simulated time reached
    story: Story = field(default_factory=Story)  # the cluster's: `Scheduler.story`
    fault: str | None = None  # the replay's own state broke an invariant (`state.invariants`): what and when


class Stopwatch:
    """Wall seconds by part (`PARTS`) since it started; "loop" is the rest."""

    def __init__(self) -> None:
        self.start = wallclock.perf_counter()
        self.spent: dict[str, float] = dict.fromkeys(PARTS, 0.0)

    def timed(self, part: str, work: Callable[..., T], *args) -> T:
        """`work(*args)`, its wall time counted in `part`."""
        begin = wallclock.perf_counter()
        try:
            return work(*args)
        finally:
            self.spent[part] += wallclock.perf_counter() - begin

    def moved(self, source: str, target: str, seconds: float) -> None:
        """`seconds` counted in `source` belong to `target` (the planner's searches)."""
        seconds = min(seconds, self.spent[source])
        self.spent[source] -= seconds
        self.spent[target] += seconds

    def elapsed(self) -> float:
        return wallclock.perf_counter() - self.start

    def timings(self) -> dict[str, float]:
        """Wall seconds by part so far."""
        rest = max(wallclock.perf_counter() - self.start - sum(self.spent.values()), 0.0)
        return {**self.spent, "loop": rest}
