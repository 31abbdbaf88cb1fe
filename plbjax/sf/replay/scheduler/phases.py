"""SF's scheduler (PLBScheduler::RefreshAction) on the replay's clock: the phase timers, the changes
that gate them, placement's retries, and which phase a round runs (timeline.md §2).

At a refresh (every PLBRefreshGap) the timers whose interval has passed are visited from the one
that waited longest (ties: Placement, ConstraintCheck, Balancing); a visited timer restarts, and the
first visited phase that has work runs, so a round runs at most one phase. The placement and
constraint-check timers start expired, the balancing timers at t = 0 (ServiceDomain creates its
scheduler with lastBalancing = now), and the initial state is a change at t = 0. Balancing is not
visited when LoadBalancingEnabled is false, during a cluster upgrade, or during an application
upgrade without AllowBalancingDuringApplicationUpgrade (the constraint check not when
ConstraintCheckEnabled is false); it is skipped without restarting its timer within
BalancingDelayAfterNodeDown/NewNode of a node event, when a global throttle is reached or too many
imbalanced partitions are at the per-partition throttle (ThrottleBalancingForPerFUMovements), and is
skipped (timer restarted) when nothing changed since the last balancing. Under
SeparateBalancingStrategyPerNodeType each node type has its own timer
(MinLoadBalancingIntervalPerNodeType, default MinLoadBalancingInterval); the planner is called once
per imbalanced node type whose timer has passed. Placement searches without moving existing replicas
PLBActionRetryTimes times, then once with moves (`_next_placement`); a constraint check with only
fault/upgrade domain violations waits out ConstraintFixPartialDelayAfterNodeDown/NewNode. A
Placement or ConstraintCheck that changed nothing is not re-run until the state changes (SF would
search the same state again).

After each round the scheduler says what holds back each phase that has work (`_holds`: the first
of SF's reasons above that applies, with its setting), and its `Chronicle` keeps those stretches, the
events applied (`applied`, SF's OnNodeDown/OnNodeUp/OnLoadChanged/SystemStateChanged) and the
state's needs at time 0 for the record (`story`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from plbjax.sf import ClusterState, Phase
from plbjax.sf.replay.record.chronicle import Chronicle, Reason
from plbjax.sf.replay.rounds.search import BalancingAction
from plbjax.sf.replay.scheduler.inflight import InFlight
from plbjax.sf.replay.scheduler.settings import Settings
from plbjax.sf.replay.scheduler.throttles import THROTTLES, Window, throttle_overrides
from plbjax.sf.replay.state.resident import Resident, settings_view
from plbjax.sf.replay.timeline.changes import LoadReport, NodeAdded, NodeDown, NodeRemoved, NodeUp
from plbjax.sf.replay.timeline.events import Event
from plbjax.sf.replay.types import TIME_EPS, Needs, PartitionKey, Story

_NODE_DOWN = (NodeDown, NodeRemoved)  # SF's OnNodeDown
_NEW_NODE = (NodeUp, NodeAdded)  # SF's OnNodeUp


def tick_at_or_after(t: float, gap: float) -> float:
    """The first refresh time (a multiple of `gap`) at or after `t`, to the nanosecond (101 x 0.1
    is 10.100000000000001 in floating point)."""
    return round(math.ceil(t / gap - TIME_EPS) * gap, 9)


def last_check_before(last: float, interval: float, gap: float, since: float, until: float) -> float:
    """A timer restarted at `last` and again whenever it has expired at a refresh from `since` on:
    its last restart before `until` (`last` itself if none)."""
    first = max(since, tick_at_or_after(last + interval, gap)) if math.isfinite(last) else since
    if first >= until - TIME_EPS:
        return last
    period = max(gap, tick_at_or_after(interval, gap))
    return first + math.floor((until - first - TIME_EPS) / period) * period


@dataclass
class Timers:
    """When each timer last restarted, and the last round."""

    phases: dict[Phase, float] = field(
        default_factory=lambda: {Phase.PLACEMENT: -math.inf, Phase.CONSTRAINT_CHECK: -math.inf}
    )
    balancing: dict[str | None, float] = field(default_factory=dict)  # per node type (None: the cluster)
    round: float = -math.inf

    def last_balancing(self, node_type: str | None) -> float:
        """A balancing timer's last restart: SF's ServiceDomain creates its scheduler with
        lastBalancing = now (the start), so the first balancing comes one interval later."""
        return self.balancing.get(node_type, 0.0)


@dataclass
class ChangeTimes:
    """When the cluster last changed, by kind, and the earliest change no round has seen yet."""

    node_down: float = -math.inf
    new_node: float = -math.inf
    load_change: float = -math.inf
    state_change: float = 0.0  # SF's AddService: the initial state is a change at t = 0
    wake: float | None = 0.0


class PlacementMode(NamedTuple):
    """SF's placementAction_: placing without moves ("New") or with them ("WithMove"), and its iteration."""

    mode: str = "New"
    iteration: int = 0


# SF's settings that delay a phase after a node went down or came up
_CHECK_DELAYS = {"down": "ConstraintFixPartialDelayAfterNodeDown", "up": "ConstraintFixPartialDelayAfterNewNode"}
_BALANCING_DELAYS = {"down": "BalancingDelayAfterNodeDown", "up": "BalancingDelayAfterNewNode"}


def after_node_event(
    now: float, changes: ChangeTimes, after_down: float, after_up: float
) -> tuple[str, float, float] | None:
    """The node event whose delay `now` is still within ("down" or "up", when, the delay), a node
    going down first; None when it is past both (SF's IsBalancingThrottled and
    IsConstraintCheckThrottled, with their delays after a node went down and after one came up)."""
    for went, since, delay in (("down", changes.node_down, after_down), ("up", changes.new_node, after_up)):
        if now < since + delay - TIME_EPS:
            return went, since, delay
    return None


def expired_phases(timers: Timers, s: Settings, now: float) -> list[Phase]:
    """The phases whose timer has expired at `now`, the one that waited longest first (ties:
    Placement, ConstraintCheck, Balancing); balancing's when a node type's timer has."""
    expired = []
    for order, phase in enumerate(s.phases_on()):
        due = timers.phases[phase] + s.interval(phase)
        if now >= due - TIME_EPS:
            expired.append((due, order, phase))
    if s.balancing_enabled:
        due = min(timers.last_balancing(t) + iv for t, iv in s.balancing_intervals.items())
        if now >= due - TIME_EPS:
            expired.append((due, 2, Phase.BALANCING))
    return [phase for _, _, phase in sorted(expired)]


def next_placement(
    mode: PlacementMode, retry_times: int, move_for_placement: bool, with_move_throttled: bool
) -> tuple[bool, PlacementMode]:
    """SF's placementAction_ (RefreshAction's Placement stage, PLBSchedulerAction::CanRetry): whether
    this round places with moves, and the mode after it. PLBActionRetryTimes placements without
    moves, then one with moves when MoveExistingReplicaForPlacement allows and IsCreationWithMove-
    Throttled (`with_move_throttled`) does not hold, then without again."""
    kind, iteration = mode
    if kind == "WithMove" and with_move_throttled:
        kind, iteration = "New", 0
    current, iteration = kind, iteration + 1
    if not (iteration < retry_times if kind == "New" else iteration == 0):
        kind = "WithMove" if kind == "New" and move_for_placement else "New"
        iteration = 0
    return current == "WithMove", PlacementMode(kind, iteration)


def small_change(
    last: float, changes: ChangeTimes, threshold: float, last_avg: float | None, avg: float
) -> Reason | None:
    """SF's ThrottleBalancingForSmallStdDevChange for a balancing timer last restarted at `last`:
    why it skips balancing (nothing changed since; or only loads, and AvgStdDev `avg` is at most
    AvgStdDevDeltaThrottleThreshold worse than `last_avg`, after the last balancing), or None."""
    if changes.state_change > last:
        return None
    if changes.state_change < last and changes.load_change < last:
        return Reason(
            "PLBScheduler::ThrottleBalancingForSmallStdDevChange",
            "nothing changed since the last balancing round: SF balances again after a change",
        )
    if threshold >= 0 and last_avg is not None and avg <= last_avg * (1 + threshold):
        return Reason(
            "AvgStdDevDeltaThrottleThreshold",
            f"AvgStdDev is at most {threshold:.0%} worse than after the last balancing round "
            "(PLBScheduler::ThrottleBalancingForSmallStdDevChange)",
        )
    return None


@dataclass
class Fruitless:
    """The document version at which a search found nothing: it is not run again on that version."""

    phases: dict[Phase, int] = field(default_factory=dict)  # Placement, ConstraintCheck
    placement_new: int | None = None  # placement without moves while moves may follow (its retries count)


class Scheduler:
    """Which phase each round runs, from the timers, the changes and the throttles."""

    def __init__(self, state: Resident, flight: InFlight, window: Window) -> None:
        self.state, self.flight, self.window = state, flight, window
        self.timers, self.changes, self.fruitless = Timers(), ChangeTimes(), Fruitless()
        self.placement, self.with_move = PlacementMode(), False
        self.balancing = BalancingAction()  # SF's quick or slow balancing search (`round_search`)
        self.last_avg: float | None = None  # AvgStdDev after the last balancing
        self.chronicle = Chronicle(self._needs())  # the cluster's story, from the state at time 0

    def _settings(self) -> Settings:
        return self.state.settings()

    def _needs(self) -> Needs:
        return self.state.needs(self.flight.frozen())

    def gap(self) -> float:
        return float(self._settings().refresh_gap)

    # ---------------------------------------------------------------- the clock

    def next_round(self, now: float) -> float:
        """The next refresh at which a round can do something (`now`: the time last processed)."""
        gap, s, changes = self.gap(), self._settings(), self.changes
        after = max(self.timers.round + gap if math.isfinite(self.timers.round) else 0.0, now)
        delays = (
            changes.node_down + s.balancing_delay_after_node_down,
            changes.new_node + s.balancing_delay_after_new_node,
        )
        wakes = [w for w in delays if w >= after - TIME_EPS]
        wakes += [changes.wake] if changes.wake is not None else []
        wakes += self.window.wakes(s)
        times = [tick_at_or_after(max(w, after), gap) for w in wakes + self._live_dues(after)]
        return min(times, default=math.inf)

    def _live_dues(self, at: float) -> list[float]:
        """When each timer that has work to do expires."""
        s, needs, dues = self._settings(), self._needs(), []
        for phase in s.phases_on():
            if self._has_work(phase, needs) and self.fruitless.phases.get(phase) != self.state.version:
                dues.append(self.timers.phases[phase] + s.interval(phase))
        if s.balancing_enabled and self._balancing_throttle(at) is None:
            imbalanced = self._imbalanced_types(needs)
            dues += [
                self.timers.last_balancing(t) + iv
                for t, iv in s.balancing_intervals.items()
                if t in imbalanced and self._small_change(t, needs) is None
            ]
        return dues

    def catch_up(self, last: float, now: float) -> None:
        """Restart the timers as the refreshes skipped over since `last`, the time last processed
        (none of which ran a phase, the state unchanged), would have."""
        timers = self.timers
        if not math.isfinite(timers.round):
            return
        gap, s = self.gap(), self._settings()
        since = max(timers.round + gap, tick_at_or_after(last + TIME_EPS, gap) if last > timers.round else 0)
        for phase in timers.phases:
            timers.phases[phase] = last_check_before(timers.phases[phase], s.interval(phase), gap, since, now)
        if s.balancing_enabled and self._balancing_throttle(since) is None:
            for t, iv in s.balancing_intervals.items():
                timers.balancing[t] = last_check_before(timers.last_balancing(t), iv, gap, since, now)

    def state_changed(self, now: float) -> None:
        """SF's SystemStateChanged: a change other than a load report; placement starts over without moves."""
        self.changes.state_change = now
        self.placement = PlacementMode()

    def applied(self, now: float, events: list[Event]) -> None:
        """Events applied at `now`, as SF's scheduler hears of them: OnNodeDown (NodeDown,
        NodeRemoved), OnNodeUp (NodeUp, NodeAdded), OnLoadChanged (LoadReport); every other kind is
        a SystemStateChanged (PLBScheduler.cpp). The chronicle names them."""
        changes = self.changes
        for event in events:
            changes.node_down = now if isinstance(event.change, _NODE_DOWN) else changes.node_down
            changes.new_node = now if isinstance(event.change, _NEW_NODE) else changes.new_node
            if isinstance(event.change, LoadReport):
                changes.load_change = now
            else:
                self.state_changed(now)
        self.chronicle.applied(now, events)

    def woken(self, now: float) -> None:
        """The document changed at `now`: the next round looks again."""
        wake = self.changes.wake
        self.changes.wake = now if wake is None else min(wake, now)

    # ---------------------------------------------------------------- a round

    def begin_round(self, now: float) -> tuple[Phase, tuple[str | None, ...]] | None:
        """A round at `now`: the phase it runs (and the node types to balance), or None."""
        self.timers.round = now
        self.window.slide(now, self._settings())
        return self._decide(now)

    def end_round(self) -> None:
        """The round has seen every change so far, its own included; what holds each phase back
        from now on goes to the chronicle."""
        self.changes.wake = None
        self._holds(self.timers.round)

    def story(self, end: float) -> Story:
        """The cluster's story up to `end` (the record's)."""
        return self.chronicle.story(end)

    def ran(self, phase: Phase, issued: int) -> None:
        """`phase` ran and issued `issued` actions."""
        version = self.state.version
        if phase == Phase.BALANCING:
            self.last_avg = self._needs().avg_std_dev
            self.balancing.ran(self._settings().retry_times)
        elif not issued and phase == Phase.PLACEMENT and not self.with_move and self._settings().move_for_placement:
            self.fruitless.placement_new = version  # not searched again; the retries still count
        elif not issued:
            self.fruitless.phases[phase] = version

    def _decide(self, now: float) -> tuple[Phase, tuple[str | None, ...]] | None:
        """SF's RefreshAction: the phase to run now (and the node types to balance), or None."""
        needs = self._needs()
        for phase in expired_phases(self.timers, self._settings(), now):
            if phase == Phase.BALANCING:
                types = self._balancing_types(now, needs)
                if types:
                    return phase, types
                continue
            self.timers.phases[phase] = now
            if not self._has_work(phase, needs) or self.fruitless.phases.get(phase) == self.state.version:
                self.placement = self.placement if phase != Phase.PLACEMENT else PlacementMode()  # SF: "not needed"
            elif phase == Phase.CONSTRAINT_CHECK and self._check_throttle(now) is None:
                return phase, (None,)
            elif phase == Phase.PLACEMENT:
                self.with_move = self._next_placement(now)
                if self.with_move or self.fruitless.placement_new != self.state.version:
                    return phase, (None,)
        return None

    @staticmethod
    def _has_work(phase: Phase, needs: Needs) -> bool:
        return bool(needs.unplaced if phase == Phase.PLACEMENT else needs.violations)

    # ---------------------------------------------------------------- what holds a phase back

    def _holds(self, now: float) -> None:
        """What holds back each phase that has work, as the refreshes from `now` on will meet it
        (None: nothing but its own interval): balancing while something is imbalanced, the
        constraint check while a hard constraint is broken, placement while replicas wait."""
        needs, s = self._needs(), self._settings()
        imbalanced = self._imbalanced_types(needs) & set(s.balancing_intervals)
        self.chronicle.hold(now, Phase.BALANCING, self._balancing_hold(now, needs, imbalanced) if imbalanced else None)
        check = None
        if needs.violations and Phase.CONSTRAINT_CHECK not in s.phases_on():
            check = Reason(
                "ConstraintCheckEnabled", "is false: SF runs no constraint check (PLBScheduler::RefreshAction)"
            )
        elif needs.violations:
            check = self._check_throttle(now) or self._fruitless(Phase.CONSTRAINT_CHECK)
        self.chronicle.hold(now, Phase.CONSTRAINT_CHECK, check)
        self.chronicle.hold(now, Phase.PLACEMENT, self._fruitless(Phase.PLACEMENT) if needs.unplaced else None)

    def _balancing_hold(self, now: float, needs: Needs, imbalanced: set[str | None]) -> Reason | None:
        """Why balancing, with `imbalanced` node types to balance, will not run: disabled, throttled
        (`_balancing_throttle`) or nothing changed for any of them (`_small_change`)."""
        if not self._settings().balancing_enabled:
            return self._balancing_off()
        small = [self._small_change(t, needs) for t in sorted(imbalanced, key=str)]
        return self._balancing_throttle(now) or (small[0] if all(small) else None)

    def _balancing_off(self) -> Reason:
        """SF's RefreshAction: isBalancingEnabled = LoadBalancingEnabled && balancingEnabled_ (a cluster
        upgrade pauses it) && canBalanceDueToAppUpgrade."""
        state = self.state.state
        if not state.settings["LoadBalancingEnabled"]:
            return Reason("LoadBalancingEnabled", "is false: SF does not balance (PLBScheduler::RefreshAction)")
        if state.upgrade is None or state.upgrade.scope == "Cluster":
            return Reason(
                "cluster upgrade", "SF pauses balancing during a cluster upgrade (PLBScheduler::SetBalancingEnabled)"
            )
        return Reason(
            "AllowBalancingDuringApplicationUpgrade",
            "is false and an application upgrade is in progress (PLBScheduler::RefreshAction)",
        )

    def _fruitless(self, phase: Phase) -> Reason | None:
        """The replay's own rule: a phase that found nothing to do in this state is not searched
        again until the state changes (SF searches again at every MinPlacementInterval or
        MinConstraintCheckInterval, and reports a violation it failed to fix
        ConstraintViolationHealthReportLimit times to health: PLBDiagnostics.cpp)."""
        if self.fruitless.phases.get(phase) != self.state.version:
            return None
        return Reason(
            "replay: no new search of an unchanged state",
            f"the last {phase} round found no action in this state; the replay searches again when the state "
            "changes (SF would search again at every interval)",
        )

    # ---------------------------------------------------------------- what the planner receives

    def view(self, phase: Phase, now: float) -> ClusterState:
        """The state handed to the planner: its settings carry the throttle allowance left."""
        allowance = self.window.allowance(self._settings(), now, self.state.existing())
        overrides = throttle_overrides(allowance, phase)
        if phase == Phase.PLACEMENT and not self.with_move:
            overrides["MoveExistingReplicaForPlacement"] = False
        return settings_view(self.state.state, overrides) if overrides else self.state.state

    def frozen(self, phase: Phase) -> frozenset[PartitionKey]:
        """Partitions with an action in flight; for Balancing also those at the per-partition throttle."""
        frozen = set(self.flight.busy)
        if phase == Phase.BALANCING:
            frozen |= self.window.throttled_partitions(self._settings().partition_threshold)
        return frozenset(frozen)

    # ---------------------------------------------------------------- placement and the constraint check

    def _check_throttle(self, now: float) -> Reason | None:
        """SF's RefreshAction with IsConstraintCheckThrottled: within ConstraintFixPartialDelayAfter-
        NodeDown/NewNode of a node event, a check whose violations are all fault or upgrade domain
        ones (AllViolationsSkippable) is skipped, its timer restarted. (SF runs the others "light",
        with a fifth of its search; the replay runs them in full.)"""
        s = self._settings()
        recent = after_node_event(
            now, self.changes, s.fix_partial_delay_after_node_down, s.fix_partial_delay_after_new_node
        )
        if recent is None or not self.state.domain_violations_only(self.flight.frozen()):
            return None
        went, since, delay = recent
        return Reason(
            _CHECK_DELAYS[went],
            f"SF skips a check whose violations are all fault/upgrade domain ones for {delay:g} s after "
            f"a node went {went} (at {since:g} s): until {since + delay:g} s "
            "(PLBScheduler::IsConstraintCheckThrottled)",
        )

    def _next_placement(self, now: float) -> bool:
        """Whether this round places with moves (`next_placement`); a state change starts over
        (SystemStateChanged)."""
        s = self._settings()
        throttled = self.placement.mode == "WithMove" and self._creation_with_move_throttled(now)
        with_move, self.placement = next_placement(self.placement, s.retry_times, s.move_for_placement, throttled)
        return with_move

    def _creation_with_move_throttled(self, now: float) -> bool:
        """SF's IsCreationWithMoveThrottled: a global or placement movement throttle reached, or
        MaxPercentageToMoveForPlacement 0."""
        s = self._settings()
        reached = self.window.allowance(s, now, self.state.existing()).reached(Phase.PLACEMENT)
        return reached or s.max_percentage_to_move_for_placement == 0

    # ---------------------------------------------------------------- balancing

    def _balancing_types(self, now: float, needs: Needs) -> tuple[str | None, ...]:
        """Node types to balance now (None: the whole cluster); restarts the expired timers."""
        if self._balancing_throttle(now) is not None:
            return ()
        imbalanced, timers = self._imbalanced_types(needs), self._settings().balancing_intervals
        expired = [t for t, iv in timers.items() if now >= self.timers.last_balancing(t) + iv - TIME_EPS]
        chosen = tuple(t for t in expired if t in imbalanced and self._small_change(t, needs) is None)
        for t in expired:
            self.timers.balancing[t] = now
        if expired and not imbalanced:
            self.balancing.balanced()
        return chosen

    def _balancing_throttle(self, now: float) -> Reason | None:
        """SF's IsBalancingThrottled, the first that holds: soon after a node event, a global throttle
        reached, nothing to move, or too many imbalanced partitions at the per-partition throttle."""
        s = self._settings()
        recent = after_node_event(
            now, self.changes, s.balancing_delay_after_node_down, s.balancing_delay_after_new_node
        )
        if recent is not None:
            went, since, delay = recent
            return Reason(
                _BALANCING_DELAYS[went],
                f"SF waits {delay:g} s after a node went {went} (at {since:g} s) before balancing: until "
                f"{since + delay:g} s (PLBScheduler::IsBalancingThrottled)",
            )
        allowance = self.window.allowance(s, now, self.state.existing())
        for throttle, left in zip(THROTTLES[:2], allowance):
            if left is not None and left <= 0:
                return Reason(
                    f"{throttle.absolute}/{throttle.percentage}",
                    f"the movements of the last {s.movement_interval:g} s (GlobalMovementThrottleCountingInterval) "
                    "reached the global throttle (PLBScheduler::ThrottleGlobalMovements)",
                )
        if s.max_percentage_to_move == 0:
            return Reason(
                "MaxPercentageToMove", "is 0: balancing may move nothing (PLBScheduler::IsBalancingThrottled)"
            )
        if self._per_partition_throttled():
            return Reason(
                "MovementThrottledPartitionsPercentageThreshold",
                f"more than {s.throttled_partitions_share:.0%} of the imbalanced partitions moved "
                f"{s.partition_threshold} times (MovementPerPartitionThrottleThreshold) in the last "
                f"{s.partition_interval:g} s (PLBScheduler::ThrottleBalancingForPerFUMovements)",
            )
        return None

    def _per_partition_throttled(self) -> bool:
        """SF's ThrottleBalancingForPerFUMovements: more of the imbalanced partitions (those of a
        service with an imbalanced metric: SystemState::GetImbalancedFailoverUnits) throttled than
        MovementThrottledPartitionsPercentageThreshold of them."""
        s = self._settings()
        throttled = self.window.throttled_partitions(s.partition_threshold)
        if not throttled:
            return False
        imbalanced = self.state.partitions_of({m for m, _ in self._needs().imbalanced})
        return len(throttled & imbalanced) > len(imbalanced) * s.throttled_partitions_share

    def _small_change(self, node_type: str | None, needs: Needs) -> Reason | None:
        """SF's ThrottleBalancingForSmallStdDevChange for the timer of `node_type`: why it skips
        balancing, or None."""
        last, threshold = self.timers.last_balancing(node_type), self._settings().avg_std_dev_delta
        return small_change(last, self.changes, threshold, self.last_avg, needs.avg_std_dev)

    def _imbalanced_types(self, needs: Needs) -> set[str | None]:
        if not self._settings().per_node_type:
            return {None} if needs.imbalanced else set()
        return {t for _, t in needs.imbalanced}
