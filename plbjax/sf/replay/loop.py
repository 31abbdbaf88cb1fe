"""The PLB loop on a simulated clock (timeline.md §2), with the planner and the probe injected.

The scheduler is SF's PLBScheduler::RefreshAction: at a refresh (every PLBRefreshGap) the timers
whose interval has passed are visited from the one that waited longest (ties: Placement,
ConstraintCheck, Balancing); a visited timer restarts, and the first visited phase that has work
runs, so a round runs at most one phase. The placement and constraint-check timers start expired,
the balancing timers at t = 0 (ServiceDomain creates its scheduler with lastBalancing = now), and
the initial state is a change at t = 0. Balancing is not visited when LoadBalancingEnabled is
false, during a cluster upgrade, or during an application upgrade without
AllowBalancingDuringApplicationUpgrade (the constraint check not when ConstraintCheckEnabled is
false); it is skipped without restarting its timer within BalancingDelayAfterNodeDown/NewNode of a
node event, when a global throttle is reached or too many imbalanced partitions are at the
per-partition throttle (ThrottleBalancingForPerFUMovements), and is skipped (timer restarted) when
nothing changed since the last balancing. Under SeparateBalancingStrategyPerNodeType each node
type has its own timer (MinLoadBalancingIntervalPerNodeType, default MinLoadBalancingInterval); the
planner is called once per imbalanced node type whose timer has passed. Placement searches without
moving existing replicas PLBActionRetryTimes times, then once with moves (`_next_placement`); a
constraint check with only fault/upgrade domain violations waits out ConstraintFixPartialDelay-
AfterNodeDown/NewNode.

The clock jumps: from one round to the next event, action completion, throttle-window or delay
expiry, or the next tick at which a timer with work is due; timers that would have restarted at
the ticks skipped over are advanced as they would have been. A Placement or ConstraintCheck that
changed nothing is not re-run until the state changes (SF would search the same state again).

What the planner and the probe receive (see `Planner`, `Probe`):
- the state document as the Failover Manager has it (in-flight actions not yet applied), its
  History carried from the last plan and cleared when a (metric, node type) becomes imbalanced;
- for the planner, Settings adjusted for the throttle windows: each global throttle pair
  (GlobalMovementThrottleThreshold[ForBalancing|ForPlacement] and its Percentage) becomes the
  absolute allowance left in GlobalMovementThrottleCountingInterval (Percentage 0); a placement with
  no allowance left gets MaxPercentageToMoveForPlacement 0 (it places without moving);
- `frozen`: partitions the search must not touch (no move, swap, promotion, add or drop): those
  with an action in flight, and, for Balancing, those moved by MovementPerPartitionThrottleThreshold
  balancing rounds within MovementPerPartitionThrottleCountingInterval.
Movements (moves and swaps) count against the throttles when issued: balancing's against the
balancing and global windows, placement's against the placement and global windows; the
constraint check is not throttled. A plan's History replaces the document's. The planner's seed
is the replay's seed plus the number of planner calls so far. Plan actions are applied with
`plbjax.apply_actions` when their ActionSeconds have passed, one after the other per partition;
one that no longer fits then (its target is not Up, its replica is gone) is cancelled; a replica an
Add creates is named `replay-N`.

Cost: the events due at a time are applied as one batch (`events.apply_events`: a run of load
reports on one copy of the document) and the actions completing at a time on one copy too, each to
a copy of its own partition, so neither costs a copy of the whole document per event or action; the
probe runs once per state version (and set of frozen partitions), the planner once per round that
has work. `Replay.timings` says where the wall time went.
"""

from __future__ import annotations

import gc
import heapq
import math
import time as wallclock
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from plbjax.sf import apply_actions
from plbjax.sf._state import DEFAULT_METRICS
from plbjax.sf.replay.events import BLOCK_LIST_EXPIRED, Event, apply_events, describe
from plbjax.sf.replay.timeline import Timeline, settings_of

PartitionKey = tuple[str, str]  # (ServiceName, str(PartitionId))
PHASES = ("Placement", "ConstraintCheck", "Balancing")
_EPS = 1e-9
_NODE_DOWN = {"NodeDown", "NodeRemoved"}
_NEW_NODE = {"NodeUp", "NodeAdded"}


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


class Probe(Protocol):
    def __call__(self, state_doc: dict, frozen: frozenset[PartitionKey]) -> Needs:
        """What `state_doc` needs, counting nothing in the `frozen` partitions."""
        ...


class Planner(Protocol):
    def __call__(
        self, state_doc: dict, phase: str, node_type: str | None, seed: int, frozen: frozenset[PartitionKey]
    ) -> dict:
        """A plan document for one phase; Balancing moves only replicas on `node_type`'s nodes
        when it is given; nothing in the `frozen` partitions changes."""
        ...


@dataclass(frozen=True)
class Row:
    """One row of the series: a round that ran a phase (per node type), or an event time."""

    time: float
    trigger: str
    phase: str
    node_type: str | None
    counts: Mapping[str, int]  # Actions, Moves, Swaps, Adds, Drops, Promotions of this round
    cumulative_movements: int
    needs: Needs
    events: tuple[tuple[str, str], ...] = ()  # an event row's (kind, what happened): `events.describe`


@dataclass(frozen=True)
class Replay:
    """The record of a replay."""

    rows: tuple[Row, ...]
    actions: tuple[dict, ...]  # {Time, Phase, NodeType?, ...the plan's action fields}
    final_state: dict
    rounds: Mapping[str, int]
    cancelled: int  # in-flight actions that no longer fitted when they completed
    duration: float
    seconds: float
    timings: Mapping[str, float] = field(default_factory=dict)  # wall seconds by part (see `PARTS`)
    interrupted: bool = False  # stopped early: `duration` is the simulated time reached


@dataclass(frozen=True, order=True)
class _InFlight:
    done: float
    seq: int
    action: dict = field(compare=False)


@dataclass(frozen=True)
class _Movement:
    time: float
    phase: str


# Where a replay's wall time goes (Replay.timings): applying events, the probe, the planner, and
# the rest (the scheduler, throttles, applying completed actions: "loop").
PARTS = ("events", "probe", "planner", "loop")
Progress = Callable[[float, Mapping[str, float], Mapping[str, int], int], None]


class _Stopped(Exception):
    """`stop()` held after a planner call: its plan is dropped and the clock stops."""


def replay(
    timeline: Timeline,
    planner: Planner,
    probe: Probe,
    seed: int = 0,
    progress: Progress | None = None,
    stop: Callable[[], bool] | None = None,
) -> Replay:
    """Play `timeline`: events, PLB rounds and action completions up to its Duration. `progress`,
    if given, is called after every processed time with (simulated time, timings so far, rounds,
    cumulative movements). `stop`, if given, is asked before every processed time and after every
    planner call: once it holds, the clock stops there (a round whose search it cut short is
    not issued) and the record, valid up to that time, is `interrupted`.

    The objects alive when it starts (the timeline: millions of events on a large cluster) are
    exempt from the garbage collector while it plays (`gc.freeze`), so that the collections the
    rounds trigger do not traverse them again and again."""
    gc.freeze()
    try:
        return _Sim(timeline, planner, probe, seed, progress, stop).run()
    finally:
        gc.unfreeze()


def action_kind(action: str) -> str:
    """Counting column of a plan action: Moves, Swaps, Adds, Drops or Promotions."""
    return next(
        column
        for prefix, column in (
            ("Move", "Moves"),
            ("Swap", "Swaps"),
            ("Add", "Adds"),
            ("Drop", "Drops"),
            ("Promote", "Promotions"),
        )
        if action.startswith(prefix)
    )


def tick_at_or_after(t: float, gap: float) -> float:
    """The first refresh time (a multiple of `gap`) at or after `t`, to the nanosecond (101 x 0.1
    is 10.100000000000001 in floating point)."""
    return round(math.ceil(t / gap - _EPS) * gap, 9)


def last_check_before(last: float, interval: float, gap: float, since: float, until: float) -> float:
    """A timer restarted at `last` and again whenever it has expired at a refresh from `since` on:
    its last restart before `until` (`last` itself if none)."""
    first = max(since, tick_at_or_after(last + interval, gap)) if math.isfinite(last) else since
    if first >= until - _EPS:
        return last
    period = max(gap, tick_at_or_after(interval, gap))
    return first + math.floor((until - first - _EPS) / period) * period


def _limit(absolute: float, percentage: float, existing: int) -> int | None:
    """SF's AreMovementsThrottled limit: the stricter of an absolute count and a percentage."""
    limits = ([int(absolute)] if absolute > 0 else []) + ([math.ceil(percentage * existing)] if percentage > 0 else [])
    return min(limits) if limits else None


_THROTTLES = (
    ("GlobalMovementThrottleThreshold", "GlobalMovementThrottleThresholdPercentage", PHASES),
    (
        "GlobalMovementThrottleThresholdForBalancing",
        "GlobalMovementThrottleThresholdPercentageForBalancing",
        ("Balancing",),
    ),
    (
        "GlobalMovementThrottleThresholdForPlacement",
        "GlobalMovementThrottleThresholdPercentageForPlacement",
        ("Placement",),
    ),
)


def throttle_allowance(settings: Mapping, movements: list[_Movement], now: float, existing: int) -> dict[str, int]:
    """{absolute threshold setting: movements left in its window} for every global throttle that is set."""
    window = [m for m in movements if now - m.time < settings["GlobalMovementThrottleCountingInterval"]]
    left = {}
    for absolute, percentage, phases in _THROTTLES:
        limit = _limit(settings[absolute], settings[percentage], existing)
        if limit is not None:
            left[absolute] = limit - sum(m.phase in phases for m in window)
    return left


def with_settings(state_doc: dict, overrides: Mapping) -> dict:
    """`state_doc` with Settings `overrides` (replacing any spelling of the same names)."""
    lower = {k.lower() for k in overrides}
    settings = {k: v for k, v in state_doc.get("Settings", {}).items() if k.lower() not in lower}
    return {**state_doc, "Settings": {**settings, **overrides}}


def _block_key(fields: Mapping) -> tuple[str, str]:
    """A block-list entry's (NodeName, ServiceTypeName): the same entry added again replaces its Until."""
    return fields["NodeName"], fields["ServiceTypeName"]


def partition_key(action_or_partition: Mapping) -> PartitionKey:
    return action_or_partition["ServiceName"], str(action_or_partition["PartitionId"])


class _Sim:
    """The mutable state of one replay: the document, the scheduler's timers, windows, in-flight actions."""

    def __init__(
        self,
        timeline: Timeline,
        planner: Planner,
        probe: Probe,
        seed: int,
        progress: Progress | None = None,
        stop: Callable[[], bool] | None = None,
    ):
        self.timeline, self.planner, self.probe, self.seed = timeline, planner, probe, seed
        self.progress, self.stop = progress, stop or (lambda: False)
        self.timings: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self.doc, self.version = timeline.state, 0
        self.next_event = 0  # the timeline's events are in order: the next one not applied yet
        self.expiries: list[tuple[float, int, Event]] = []  # BlockListExpired events to come
        self.block_until: dict[tuple[str, str], float] = {}  # the latest Until of each entry added
        self.in_flight: list[_InFlight] = []
        self.busy: dict[PartitionKey, float] = {}
        self.flying: dict[PartitionKey, int] = {}  # actions in flight per partition
        self.movements: list[_Movement] = []
        self.partition_moves: list[tuple[float, PartitionKey]] = []
        self.last: dict[str, float] = {"Placement": -math.inf, "ConstraintCheck": -math.inf}
        self.last_balancing: dict[str | None, float] = {}
        self.node_down = self.new_node = self.load_change = -math.inf
        self.state_change = 0.0  # SF's AddService: the initial state is a change at t = 0
        self.now, self.last_round, self.wake = 0.0, -math.inf, 0.0
        self.last_avg: float | None = None
        self.fruitless: dict[str, int] = {}
        self.placement, self.with_move = ("New", 0), False  # SF's placementAction_: mode, iteration
        self.cache: dict[tuple, Any] = {}
        self.replicas_of: tuple[list, set[str], int] | None = None  # (Partitions, their ReplicaIds, placed)
        self.cleaned: tuple | None = None  # (History, Partitions, Nodes) last cleaned
        self.imbalanced_before: frozenset | None = None  # None: not probed yet
        self.rows: list[Row] = []
        self.actions: list[dict] = []
        self.rounds: dict[str, int] = {}
        self.calls = self.cumulative = self.cancelled = self.seq = self.new_ids = 0

    # ---------------------------------------------------------------- driving

    def run(self) -> Replay:
        start, end, interrupted = wallclock.perf_counter(), self.timeline.duration, False
        while True:
            t = min([*self._wakes(), self._next_round()], default=math.inf)
            if t > end + _EPS:
                break
            if self.stop():
                end, interrupted = self.now, True
                break
            self._catch_up(t)
            self.now = t
            self._complete(t)
            if self._next_pending() <= t + _EPS:
                self._apply_events(t)
            if t > self.last_round + _EPS and abs(t - tick_at_or_after(t, self._gap())) < _EPS:
                try:
                    self._round(t)
                except _Stopped:
                    end, interrupted = t, True
                    break
            if self.progress is not None:
                self.progress(t, self._timings(start), dict(self.rounds), self.cumulative)
        return Replay(
            tuple(self.rows),
            tuple(self.actions),
            self.doc,
            dict(self.rounds),
            self.cancelled,
            end,
            wallclock.perf_counter() - start,
            self._timings(start),
            interrupted,
        )

    def _timings(self, start: float) -> dict[str, float]:
        """Wall seconds by part so far; "loop" is the rest."""
        spent = dict(self.timings)
        spent["loop"] = max(wallclock.perf_counter() - start - sum(spent.values()), 0.0)
        return spent

    def _timed(self, part: str, work: Callable, *args):
        begin = wallclock.perf_counter()
        try:
            return work(*args)
        finally:
            self.timings[part] += wallclock.perf_counter() - begin

    def _next_pending(self) -> float:
        """The time of the next event to apply (a timeline event or a block-list expiry)."""
        events = self.timeline.events
        return min(
            events[self.next_event].time if self.next_event < len(events) else math.inf,
            self.expiries[0][0] if self.expiries else math.inf,
        )

    def _wakes(self) -> list[float]:
        """Times something happens by itself: the next event and the next completion."""
        pending = self._next_pending()
        return ([pending] if math.isfinite(pending) else []) + ([self.in_flight[0].done] if self.in_flight else [])

    def _next_round(self) -> float:
        """The next refresh at which a round can do something."""
        gap, s = self._gap(), self._settings()
        after = max(self.last_round + gap if math.isfinite(self.last_round) else 0.0, self.now)
        wakes = [
            w
            for w in (
                self.node_down + s["BalancingDelayAfterNodeDown"],
                self.new_node + s["BalancingDelayAfterNewNode"],
            )
            if w >= after - _EPS
        ]
        wakes += [self.wake] if self.wake is not None else []
        wakes += [m.time + s["GlobalMovementThrottleCountingInterval"] for m in self.movements[:1]]
        wakes += [m + s["MovementPerPartitionThrottleCountingInterval"] for m, _ in self.partition_moves[:1]]
        times = [tick_at_or_after(max(w, after), gap) for w in wakes + self._live_dues(after)]
        return min(times, default=math.inf)

    def _live_dues(self, at: float) -> list[float]:
        """When each timer that has work to do expires."""
        s, needs, dues = self._settings(), self._needs(), []
        for phase in self._phases_on():
            if (needs.unplaced if phase == "Placement" else needs.violations) and self.fruitless.get(
                phase
            ) != self.version:
                dues.append(self.last[phase] + self._interval(phase))
        if self._balancing_enabled() and not self._balancing_throttled(at):
            imbalanced = self._imbalanced_types(needs)
            dues += [
                self._last_balancing(t) + iv
                for t, iv in self._balancing_timers(s).items()
                if t in imbalanced and not self._small_change(t, needs)
            ]
        return dues

    # ---------------------------------------------------------------- the scheduler

    def _round(self, now: float) -> None:
        self.last_round = now
        s = self._settings()
        self.movements = [m for m in self.movements if now - m.time < s["GlobalMovementThrottleCountingInterval"]]
        self.partition_moves = [
            (t, k) for t, k in self.partition_moves if now - t < s["MovementPerPartitionThrottleCountingInterval"]
        ]
        choice = self._decide(now)
        if choice is not None:
            self._run_phase(now, *choice)
        self.wake = None  # this round has seen every change so far, its own included

    def _catch_up(self, now: float) -> None:
        """Restart the timers as the refreshes skipped over since the last time processed (none of
        which ran a phase, the state unchanged) would have."""
        if not math.isfinite(self.last_round):
            return
        gap = self._gap()
        since = max(self.last_round + gap, tick_at_or_after(self.now + _EPS, gap) if self.now > self.last_round else 0)
        for phase in self.last:
            self.last[phase] = last_check_before(self.last[phase], self._interval(phase), gap, since, now)
        if self._balancing_enabled() and not self._balancing_throttled(since):
            for t, iv in self._balancing_timers(self._settings()).items():
                self.last_balancing[t] = last_check_before(self._last_balancing(t), iv, gap, since, now)

    def _decide(self, now: float) -> tuple[str, tuple[str | None, ...]] | None:
        """SF's RefreshAction: the phase to run now (and the node types to balance), or None."""
        needs, expired = self._needs(), []
        for order, phase in enumerate(self._phases_on()):
            due = self.last[phase] + self._interval(phase)
            if now >= due - _EPS:
                expired.append((due, order, phase))
        if self._balancing_enabled():
            timers = self._balancing_timers(self._settings())
            due = min(self._last_balancing(t) + iv for t, iv in timers.items())
            if now >= due - _EPS:
                expired.append((due, 2, "Balancing"))
        for _, _, phase in sorted(expired):
            if phase == "Balancing":
                types = self._balancing_types(now, needs)
                if types:
                    return phase, types
                continue
            self.last[phase] = now
            if (
                not (needs.unplaced if phase == "Placement" else needs.violations)
                or self.fruitless.get(phase) == self.version
            ):
                self.placement = self.placement if phase != "Placement" else ("New", 0)  # SF: "not needed"
            elif phase == "ConstraintCheck" and not self._constraint_check_skipped(now):
                return phase, (None,)
            elif phase == "Placement":
                self.with_move = self._next_placement(now)
                if self.with_move or self.fruitless.get("Placement-New") != self.version:
                    return phase, (None,)
        return None

    def _phases_on(self) -> tuple[str, ...]:
        """Placement, and the constraint check unless ConstraintCheckEnabled is false (SF's RefreshAction)."""
        return ("Placement", "ConstraintCheck") if self._settings()["ConstraintCheckEnabled"] else ("Placement",)

    def _constraint_check_skipped(self, now: float) -> bool:
        """SF's RefreshAction with IsConstraintCheckThrottled: within ConstraintFixPartialDelayAfter-
        NodeDown/NewNode of a node event, a check whose violations are all fault or upgrade domain
        ones (AllViolationsSkippable) is skipped, its timer restarted. (SF runs the others "light",
        with a fifth of its search; the replay runs them in full.)"""
        s = self._settings()
        throttled = (
            now < self.node_down + s["ConstraintFixPartialDelayAfterNodeDown"] - _EPS
            or now < self.new_node + s["ConstraintFixPartialDelayAfterNewNode"] - _EPS
        )
        return throttled and self._domain_violations_only()

    def _domain_violations_only(self) -> bool:
        """Whether every violation is a fault or upgrade domain one: none is left with both off."""
        frozen = frozenset(self.busy)
        key = ("domainless", frozen, self.version)
        if key not in self.cache:
            off = with_settings(self.doc, {"FaultDomainConstraintPriority": -1, "UpgradeDomainConstraintPriority": -1})
            self.cache[key] = self._timed("probe", self.probe, off, frozen).violations == 0
        return self.cache[key]

    def _next_placement(self, now: float) -> bool:
        """SF's placementAction_ (RefreshAction's Placement stage, PLBSchedulerAction::CanRetry): this
        round places with moves or not; PLBActionRetryTimes placements without, then one with moves
        when MoveExistingReplicaForPlacement allows (and IsCreationWithMoveThrottled does not hold),
        then without again. A state change starts over (SystemStateChanged)."""
        s, (mode, iteration) = self._settings(), self.placement
        if mode == "WithMove" and self._creation_with_move_throttled(now):
            mode, iteration = "New", 0
        current, iteration = mode, iteration + 1
        if not (iteration < s["PLBActionRetryTimes"] if mode == "New" else iteration == 0):
            mode = "WithMove" if mode == "New" and s["MoveExistingReplicaForPlacement"] else "New"
            iteration = 0
        self.placement = (mode, iteration)
        return current == "WithMove"

    def _creation_with_move_throttled(self, now: float) -> bool:
        """SF's IsCreationWithMoveThrottled: a global or placement movement throttle reached, or
        MaxPercentageToMoveForPlacement 0."""
        s = self._settings()
        left = throttle_allowance(s, self.movements, now, self._existing())
        reached = any(
            left.get(k, 1) <= 0
            for k in ("GlobalMovementThrottleThreshold", "GlobalMovementThrottleThresholdForPlacement")
        )
        return reached or s["MaxPercentageToMoveForPlacement"] == 0

    def _balancing_types(self, now: float, needs: Needs) -> tuple[str | None, ...]:
        """Node types to balance now (None: the whole cluster); restarts the expired timers."""
        if self._balancing_throttled(now):
            return ()
        imbalanced, timers = self._imbalanced_types(needs), self._balancing_timers(self._settings())
        expired = [t for t, iv in timers.items() if now >= self._last_balancing(t) + iv - _EPS]
        chosen = tuple(t for t in expired if t in imbalanced and not self._small_change(t, needs))
        for t in expired:
            self.last_balancing[t] = now
        return chosen

    def _last_balancing(self, node_type: str | None) -> float:
        """A balancing timer's last restart: SF's ServiceDomain creates its scheduler with
        lastBalancing = now (the start), so the first balancing comes one interval later."""
        return self.last_balancing.get(node_type, 0.0)

    def _balancing_enabled(self) -> bool:
        """SF's RefreshAction: isBalancingEnabled = LoadBalancingEnabled, not paused (a cluster upgrade
        pauses it), and canBalanceDueToAppUpgrade (no application upgrade, or
        AllowBalancingDuringApplicationUpgrade)."""
        s, upgrade = self._settings(), self.doc.get("Upgrade") or {}
        if not s["LoadBalancingEnabled"] or not upgrade.get("InProgress", False):
            return bool(s["LoadBalancingEnabled"])
        return upgrade.get("Scope", "Cluster") != "Cluster" and bool(s["AllowBalancingDuringApplicationUpgrade"])

    def _balancing_throttled(self, now: float) -> bool:
        """SF's IsBalancingThrottled: soon after a node event, a global throttle reached, or nothing to move."""
        s = self._settings()
        left = throttle_allowance(s, self.movements, now, self._existing())
        return (
            now < self.node_down + s["BalancingDelayAfterNodeDown"] - _EPS
            or now < self.new_node + s["BalancingDelayAfterNewNode"] - _EPS
            or any(
                left.get(k, 1) <= 0
                for k in ("GlobalMovementThrottleThreshold", "GlobalMovementThrottleThresholdForBalancing")
            )
            or s["MaxPercentageToMove"] == 0
            or self._per_partition_throttled()
        )

    def _throttled_partitions(self) -> set[PartitionKey]:
        """SF's GetMovementThrottledFailoverUnits: partitions balancing moved as many times as
        MovementPerPartitionThrottleThreshold within MovementPerPartitionThrottleCountingInterval."""
        threshold = self._settings()["MovementPerPartitionThrottleThreshold"]
        counts: dict[PartitionKey, int] = {}
        for _, key in self.partition_moves:
            counts[key] = counts.get(key, 0) + 1
        return {k for k, c in counts.items() if c >= threshold}

    def _per_partition_throttled(self) -> bool:
        """SF's ThrottleBalancingForPerFUMovements: more of the imbalanced partitions (those of a
        service with an imbalanced metric: SystemState::GetImbalancedFailoverUnits) throttled than
        MovementThrottledPartitionsPercentageThreshold of them."""
        throttled = self._throttled_partitions()
        if not throttled:
            return False
        metrics = {m for m, _ in self._needs().imbalanced}
        of_service = {
            s["ServiceName"]: {m["Name"] for m in s.get("Metrics") or []} or {m for m, _ in DEFAULT_METRICS}
            for s in self.doc["Services"]
        }
        imbalanced = {
            partition_key(p) for p in self.doc["Partitions"] if of_service.get(p["ServiceName"], set()) & metrics
        }
        share = self._settings()["MovementThrottledPartitionsPercentageThreshold"]
        return len(throttled & imbalanced) > len(imbalanced) * share

    def _small_change(self, node_type: str | None, needs: Needs) -> bool:
        """SF's ThrottleBalancingForSmallStdDevChange for the timer of `node_type`."""
        last = self._last_balancing(node_type)
        if self.state_change > last:
            return False
        if self.state_change < last and self.load_change < last:
            return True
        threshold = self._settings()["AvgStdDevDeltaThrottleThreshold"]
        return threshold >= 0 and self.last_avg is not None and needs.avg_std_dev <= self.last_avg * (1 + threshold)

    def _balancing_timers(self, s: Mapping) -> dict[str | None, float]:
        """{node type: MinLoadBalancingInterval(PerNodeType)}, or {None: ...} for the whole cluster."""
        if not s["SeparateBalancingStrategyPerNodeType"]:
            return {None: float(s["MinLoadBalancingInterval"])}
        overrides = {t["Name"]: t.get("PlacementAndLoadBalancingOverrides", {}) for t in self.doc.get("NodeTypes", [])}
        names = sorted({n.get("NodeType") for n in self.doc["Nodes"]}, key=lambda t: (t is not None, t or ""))
        return {
            t: float(overrides.get(t, {}).get("MinLoadBalancingIntervalPerNodeType", s["MinLoadBalancingInterval"]))
            for t in names
        }

    def _imbalanced_types(self, needs: Needs) -> set[str | None]:
        if not self._settings()["SeparateBalancingStrategyPerNodeType"]:
            return {None} if needs.imbalanced else set()
        return {t for _, t in needs.imbalanced}

    def _interval(self, phase: str) -> float:
        return float(self._settings()["MinPlacementInterval" if phase == "Placement" else "MinConstraintCheckInterval"])

    def _gap(self) -> float:
        return float(self._settings()["PLBRefreshGap"])

    # ---------------------------------------------------------------- phases and actions

    def _run_phase(self, now: float, phase: str, node_types: tuple[str | None, ...]) -> None:
        issued = 0
        for node_type in node_types:
            plan = self._timed(
                "planner",
                self.planner,
                self._view(phase, now),
                phase,
                node_type,
                self.seed + self.calls,
                self._frozen(phase, now),
            )
            if self.stop():  # the search was cut short: its plan is not issued
                raise _Stopped
            self.calls += 1
            counts = self._issue(now, phase, node_type, plan["Actions"])
            if "History" in plan:
                self.doc = {**self.doc, "History": plan["History"]}
            self._complete(now)
            self._clean_history()
            issued += counts["Actions"]
            self._row(now, phase, phase, node_type, counts)
        self.rounds[phase] = self.rounds.get(phase, 0) + 1
        if phase == "Balancing":
            self.last_avg = self._needs().avg_std_dev
        elif (
            not issued
            and phase == "Placement"
            and not self.with_move
            and self._settings()["MoveExistingReplicaForPlacement"]
        ):
            self.fruitless["Placement-New"] = self.version  # not searched again; the retries still count
        elif not issued:
            self.fruitless[phase] = self.version

    def _issue(self, now: float, phase: str, node_type: str | None, actions: list[dict]) -> dict[str, int]:
        """Put a plan's actions in flight (per partition one after the other); count them."""
        counts = {"Actions": len(actions), "Moves": 0, "Swaps": 0, "Adds": 0, "Drops": 0, "Promotions": 0}
        moved: set[PartitionKey] = set()
        for action in actions:
            kind, key = action_kind(action["Action"]), partition_key(action)
            counts[kind] += 1
            fields = {k: v for k, v in action.items() if k != "Phase"}  # the round's phase names it (timeline.md)
            self.actions.append(
                {"Time": now, "Phase": phase, **({"NodeType": node_type} if node_type else {}), **fields}
            )
            if kind in ("Moves", "Swaps"):
                self.cumulative += 1
                if phase in ("Balancing", "Placement"):
                    self.movements.append(_Movement(now, phase))
                if phase == "Balancing":
                    moved.add(key)
            done = max(now + self.timeline.action_seconds.of(action["Action"]), self.busy.get(key, -math.inf))
            self.busy[key] = done
            self.seq += 1
            heapq.heappush(self.in_flight, _InFlight(done, self.seq, action))
            self.flying[key] = self.flying.get(key, 0) + 1
        self.partition_moves += [(now, key) for key in sorted(moved)]
        return counts

    def _complete(self, now: float) -> None:
        """Apply the actions whose time has come, as the Failover Manager completes them (one after
        the other, on one copy of the document: `_Completions`)."""
        batch = None
        while self.in_flight and self.in_flight[0].done <= now + _EPS:
            done = heapq.heappop(self.in_flight)
            key = partition_key(done.action)
            self.flying[key] -= 1
            if not self.flying[key]:
                del self.flying[key]
                if self.busy.get(key) == done.done:
                    del self.busy[key]
            batch = batch or _Completions(self.doc, self)
            if not batch.apply(done.action):
                self.cancelled += 1
                continue
            self._state_changed(now)
            self._changed(now)
        if batch is not None:
            self.doc = batch.document()

    # ---------------------------------------------------------------- events

    def _apply_events(self, now: float) -> None:
        """Every event due by `now`, in order (one batch: `apply_events`), then one Event row naming them."""
        applied = self._timed("events", self._apply_due, now)
        counts: dict[str, int] = dict.fromkeys(("Actions", "Moves", "Swaps", "Adds", "Drops", "Promotions"), 0)
        self._row(now, "Event", "", None, counts, describe(applied))

    def _due(self, now: float) -> list[Event]:
        """The events due by `now`, taken from the timeline and the expiries, in (time, order)."""
        events, due = self.timeline.events, []
        while self._next_pending() <= now + _EPS:
            n = self.next_event
            if n < len(events) and (not self.expiries or (events[n].time, n) < self.expiries[0][:2]):
                end = n + 1
                while (
                    end < len(events)
                    and events[end].time <= now + _EPS
                    and (not self.expiries or (events[end].time, end) < self.expiries[0][:2])
                ):
                    end += 1
                due += events[n:end]
                self.next_event = end
            else:
                expiry = heapq.heappop(self.expiries)[2]
                if self.block_until.get(_block_key(expiry.fields)) == expiry.time:  # not extended since
                    due.append(expiry)
        return due

    def _apply_due(self, now: float) -> list[Event]:
        self.doc, applied = apply_events(self.doc, self._due(now), now, skip_gone=True)
        for event in applied:
            if event.kind == "BlockListAdded":
                until = float(event.fields.get("Until", math.inf))
                self.block_until[_block_key(event.fields)] = until
                if math.isfinite(until):
                    expiry = Event(until, BLOCK_LIST_EXPIRED, event.fields, event.index)
                    heapq.heappush(self.expiries, (until, len(self.timeline.events) + self.seq, expiry))
                    self.seq += 1
            self.node_down = now if event.kind in _NODE_DOWN else self.node_down
            self.new_node = now if event.kind in _NEW_NODE else self.new_node
            if event.kind == "LoadReport":
                self.load_change = now
            else:
                self._state_changed(now)
        if applied:
            self._changed(now)
        self._clean_history()
        return applied

    def _state_changed(self, now: float) -> None:
        """SF's SystemStateChanged: a change other than a load report; placement starts over without moves."""
        self.state_change = now
        self.placement = ("New", 0)

    def _changed(self, now: float) -> None:
        self.version += 1
        self.wake = now if self.wake is None else min(self.wake, now)

    # ---------------------------------------------------------------- views of the state

    def _settings(self) -> dict:
        key = ("settings", None, self.version)
        if key not in self.cache:
            self.cache = {k: v for k, v in self.cache.items() if k[2] == self.version}
            self.cache[key] = settings_of(self.doc)
        return self.cache[key]

    def _needs(self) -> Needs:
        """The probe's answer for the current document (cached); History is cleared when a
        (metric, node type) becomes imbalanced, a new balancing trigger."""
        frozen = frozenset(self.busy)
        key = ("needs", frozen, self.version)
        if key not in self.cache:
            needs = self._timed("probe", self.probe, self.doc, frozen)
            if (
                self.imbalanced_before is not None
                and needs.imbalanced - self.imbalanced_before
                and self.doc.get("History")
            ):
                self.doc = {**self.doc, "History": {}}
            self.imbalanced_before = needs.imbalanced
            self.cache[key] = needs
        return self.cache[key]

    def _existing(self) -> int:
        return self._replicas()[1]

    def _replicas(self) -> tuple[set[str], int]:
        """Every str(ReplicaId) of the document and how many replicas are placed (read once per
        Partitions list: the loop replaces it, never changes it)."""
        parts = self.doc["Partitions"]
        if self.replicas_of is None or self.replicas_of[0] is not parts:
            replicas = [r for p in parts for r in p["Replicas"]]
            ids = {str(r["ReplicaId"]) for r in replicas}
            self.replicas_of = (parts, ids, sum(r.get("NodeName") is not None for r in replicas))
        return self.replicas_of[1], self.replicas_of[2]

    def _clean_history(self) -> None:
        """The document's History without entries of replicas and nodes it no longer has."""
        doc = self.doc
        history = doc.get("History")
        seen = (history, doc["Partitions"], doc["Nodes"])
        if not history or (self.cleaned is not None and all(a is b for a, b in zip(self.cleaned, seen))):
            return
        replicas, nodes = self._replicas()[0], {n["NodeName"] for n in doc["Nodes"]}
        cleaned = {k: [n for n in v if n in nodes] for k, v in history.items() if k in replicas}
        cleaned = {k: v for k, v in cleaned.items() if v}
        if cleaned != history:
            self.doc = doc = {**doc, "History": cleaned}
        self.cleaned = (doc["History"], doc["Partitions"], doc["Nodes"])

    def _frozen(self, phase: str, now: float) -> frozenset[PartitionKey]:
        """Partitions with an action in flight; for Balancing also those at the per-partition throttle."""
        frozen = set(self.busy)
        if phase == "Balancing":
            frozen |= self._throttled_partitions()
        return frozenset(frozen)

    def _view(self, phase: str, now: float) -> dict:
        """The document handed to the planner: Settings carry the throttle allowance left."""
        left = throttle_allowance(self._settings(), self.movements, now, self._existing())
        overrides: dict[str, object] = {}
        for absolute, percentage, phases in _THROTTLES:
            if absolute in left and left[absolute] > 0:
                overrides |= {absolute: left[absolute], percentage: 0}
            elif absolute in left and phase == "Placement" and phase in phases:
                overrides["MaxPercentageToMoveForPlacement"] = 0
        if phase == "Placement" and not self.with_move:
            overrides["MoveExistingReplicaForPlacement"] = False
        return with_settings(self.doc, overrides) if overrides else self.doc

    def _row(
        self,
        now: float,
        trigger: str,
        phase: str,
        node_type: str | None,
        counts: dict[str, int],
        events: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.rows.append(Row(now, trigger, phase, node_type, counts, self.cumulative, self._needs(), events))


class _Completions:
    """Completed actions applied one after the other on one copy of the document: each action to a
    copy of its partition only (`apply_actions` on that partition), so a round's actions cost what
    they touch. An action that no longer fits (its target is not Up, its replica is gone, ...) is
    not applied; a replica an Add creates is named `replay-N` (unused in the document)."""

    def __init__(self, doc: dict, sim: _Sim):
        self.doc, self.sim = doc, sim
        self.parts = list(doc["Partitions"])
        self.at = {partition_key(p): k for k, p in enumerate(self.parts)}
        self.status = {n["NodeName"]: n.get("NodeStatus", "Up") for n in doc["Nodes"]}
        self.taken: set[str] | None = None

    def apply(self, action: dict) -> bool:
        if action["Action"][:4] in ("Move", "Add") and self.status.get(action["TargetNode"]) != "Up":
            return False
        k = self.at.get(partition_key(action))
        if k is None:
            return False
        try:
            part = apply_actions({"Partitions": [self.parts[k]]}, [action])["Partitions"][0]
        except (ValueError, KeyError, StopIteration):
            return False
        if action["ReplicaId"] is None:
            part = dict(part, Replicas=[self._named(r) for r in part["Replicas"]])
        self.parts[k] = part
        return True

    def _named(self, replica: dict) -> dict:
        if replica["ReplicaId"] is not None:
            return replica
        if self.taken is None:
            self.taken = {str(r["ReplicaId"]) for p in self.parts for r in p["Replicas"]}
        sim = self.sim
        sim.new_ids += 1
        while f"replay-{sim.new_ids}" in self.taken:
            sim.new_ids += 1
        self.taken.add(f"replay-{sim.new_ids}")
        return dict(replica, ReplicaId=f"replay-{sim.new_ids}")

    def document(self) -> dict:
        return {**self.doc, "Partitions": self.parts}
