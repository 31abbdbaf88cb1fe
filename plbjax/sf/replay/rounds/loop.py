"""The PLB loop on a simulated clock (timeline.md §2), with the planner and the probe injected.

The clock jumps: from one round to the next event, action completion, throttle-window or delay
expiry, or the next tick at which a timer with work is due (`scheduler`); timers that would have
restarted at the ticks skipped over are advanced as they would have been. At each time processed,
the actions due complete (`inflight`), the events due are applied (`pending`, `events`), and at a
refresh the scheduler picks the round's phase.

What the planner and the probe receive (see `Planner`, `Probe`):
- the typed state as the Failover Manager has it (in-flight actions not yet applied), its
  History carried from the last plan, cleared when a (metric, node type) becomes imbalanced, and
  without a partition's entries once its last balancing movement is MovementPerPartitionThrottle-
  CountingInterval old (`history`, SF's PLBScheduler::RefreshTimedCounters);
- for the planner, Settings adjusted for the throttle windows: each global throttle pair
  (GlobalMovementThrottleThreshold[ForBalancing|ForPlacement] and its Percentage) becomes the
  absolute allowance left in GlobalMovementThrottleCountingInterval (Percentage 0); a placement with
  no allowance left gets MaxPercentageToMoveForPlacement 0 (it places without moving);
- `frozen`: partitions the search must not touch (no move, swap, promotion, add or drop): those
  with an action in flight, and, for Balancing, those moved by MovementPerPartitionThrottleThreshold
  balancing rounds within MovementPerPartitionThrottleCountingInterval;
- `effort`: how much the round's search should take on (`round_search`: SF's quick or slow balancing,
  the share of partitions changed since the last balancing round).
Movements (moves and swaps) count against the throttles when issued: balancing's against the
balancing and global windows, placement's against the placement and global windows; the
constraint check is not throttled. A round's History (`PlannedRound`) replaces the state's. The
planner's seed is the replay's seed plus the number of planner calls so far. Actions are applied
with `plbjax.sf.completed` when their ActionSeconds have passed, one after the other per
partition; one that no longer fits then (its target is not Up, its replica is gone) is cancelled; a
replica an Add creates is named `replay-N`.

Cost: the state between rounds is typed and resident (`state.resident`): the events due at a time
are applied as one batch (`events.apply_events`: a run of load reports gives new records for the
replicas it touches; a node or cluster event edits the state's document, read again) and the
actions completing at a time to their own partitions' records, so neither costs a pass over the
cluster; the probe and the planner update their encoding from the partitions that are new records
(`sf.Session`); the probe runs once per state version (and set of frozen partitions), the planner
once per round that has work. `Replay.timings` says where the wall time went.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Sequence

from plbjax.sf import Action, ClusterState, Phase, state_document
from plbjax.sf.replay.rounds.search import Touched, effort
from plbjax.sf.replay.scheduler.history import HistoryAge
from plbjax.sf.replay.scheduler.inflight import InFlight
from plbjax.sf.replay.scheduler.phases import Scheduler, tick_at_or_after
from plbjax.sf.replay.scheduler.throttles import Window
from plbjax.sf.replay.state.invariants import Corrupted, check
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.state.resident import Resident
from plbjax.sf.replay.timeline.decay import LoadDecay
from plbjax.sf.replay.timeline.events import Event, Unread, apply_events, describe
from plbjax.sf.replay.timeline.pending import Pending
from plbjax.sf.replay.timeline.reading import Timeline
from plbjax.sf.replay.types import (
    TIME_EPS,
    Counts,
    Planner,
    Probe,
    Progress,
    Replay,
    Row,
    Stopwatch,
    as_action,
    partition_of,
)


class _Stopped(Exception):
    """`stop()` held after a planner call: its plan is dropped and the clock stops."""


class _Before:
    """The record as it stood before the time being processed: what a replay whose state broke an
    invariant keeps (`Corrupted`: the record up to there, marked interrupted)."""

    def __init__(self, loop: _Loop) -> None:
        self.state, self.places = loop.state.state, loop.state.places
        self.now, self.rows, self.actions = loop.now, len(loop.rows), len(loop.actions)
        self.rounds, self.cumulative, self.cancelled = dict(loop.rounds), loop.cumulative, loop.flight.cancelled


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
        return _Loop(timeline, planner, probe, seed, progress, stop).run()
    finally:
        gc.unfreeze()


class _Loop:
    """One replay: the clock, its parts (the document, the events to come, the actions in flight,
    the throttle window, the scheduler) and the record so far."""

    def __init__(
        self,
        timeline: Timeline,
        planner: Planner,
        probe: Probe,
        seed: int,
        progress: Progress | None = None,
        stop: Callable[[], bool] | None = None,
    ):
        self.timeline, self.planner, self.seed = timeline, planner, seed
        self.progress, self.stop = progress, stop or (lambda: False)
        self.stopwatch = Stopwatch()
        self.state = Resident(timeline.state, probe, self.stopwatch)
        self.decay = LoadDecay.of(timeline.state.settings)  # SF's LoadDecayFactor: Static, read once
        self.pending, self.flight, self.window = Pending(timeline.events), InFlight(), Window()
        self.scheduler = Scheduler(self.state, self.flight, self.window)
        self.history = HistoryAge(timeline.state)  # when History's partitions last moved (bounds it)
        self.touched = Touched()  # partitions changed since the last balancing round (its search's effort)
        self.now = 0.0  # the time last processed
        self.rows: list[Row] = []
        self.actions: list[dict] = []
        self.rounds: dict[Phase, int] = {}
        self.calls = self.cumulative = 0  # planner calls, movements issued

    def run(self) -> Replay:
        end, interrupted, fault = self.timeline.duration, False, None
        while True:
            t = min([*self._wakes(), self.scheduler.next_round(self.now)], default=math.inf)
            if t > end + TIME_EPS:
                break
            if self.stop():
                end, interrupted = self.now, True
                break
            before = _Before(self)
            try:
                stopped = self._step(t)
            except Corrupted as exc:
                end, interrupted, fault = before.now, True, f"at {t:g} s: {exc}"
                self._restore(before)
                break
            if stopped:
                end, interrupted = t, True
                break
            if self.progress is not None:
                self.progress(t, self.stopwatch.timings(), dict(self.rounds), self.cumulative)
        self._bound_history(end)
        seconds = self.stopwatch.elapsed()
        return Replay(
            tuple(self.rows),
            tuple(self.actions),
            state_document(self.state.state),
            dict(self.rounds),
            self.flight.cancelled,
            end,
            seconds,
            self.stopwatch.timings(),
            interrupted,
            self.scheduler.story(end),
            fault,
        )

    def _restore(self, before: _Before) -> None:
        """The record back to `before` (the state broke an invariant while `now` was processed)."""
        self.state.state, self.state.places = before.state, before.places
        self.state.changed()
        del self.rows[before.rows :]
        del self.actions[before.actions :]
        self.rounds, self.cumulative, self.flight.cancelled = before.rounds, before.cumulative, before.cancelled
        self.now = before.now

    def _step(self, t: float) -> bool:
        """Process time `t`: completions, events, a round; True when `stop()` cut its round short."""
        self.scheduler.catch_up(self.now, t)
        self.now = t
        self._complete(t)
        if self.pending.next_time() <= t + TIME_EPS:
            self._apply_events(t)
        if t > self.scheduler.timers.round + TIME_EPS and abs(t - tick_at_or_after(t, self.scheduler.gap())) < TIME_EPS:
            try:
                self._round(t)
            except _Stopped:
                return True
        return False

    def _wakes(self) -> list[float]:
        """Times something happens by itself: the next event and the next completion."""
        pending, done = self.pending.next_time(), self.flight.next_done()
        return ([pending] if math.isfinite(pending) else []) + ([done] if done is not None else [])

    def _changed(self, now: float) -> None:
        self.state.changed()
        self.scheduler.woken(now)

    # ---------------------------------------------------------------- rounds

    def _round(self, now: float) -> None:
        choice = self.scheduler.begin_round(now)
        self._bound_history(now)
        if choice is not None:
            self._run_phase(now, *choice)
        self.scheduler.end_round()

    def _bound_history(self, now: float) -> None:
        """History without the partitions whose last balancing movement left the counting window."""
        history = self.state.state.history
        expired = self.history.expired(history, now, self.state.settings().partition_interval)
        if expired:
            self.state.forget_history(expired)

    def _run_phase(self, now: float, phase: Phase, node_types: tuple[str | None, ...]) -> None:
        share = self.touched.share(self.state.state.partitions)
        asked = effort(phase, self.scheduler.balancing.action, share, self.state.settings())
        if phase == Phase.BALANCING:
            self.touched.clear()
        issued = 0
        for node_type in node_types:
            view, frozen = self.scheduler.view(phase, now), self.scheduler.frozen(phase)
            planned = self.stopwatch.timed(
                "planner", self.planner, view, phase, node_type, self.seed + self.calls, frozen, asked
            )
            self.stopwatch.moved("planner", "search", planned.search_seconds)
            if self.stop():  # the search was cut short: its plan is not issued
                raise _Stopped
            self.calls += 1
            counts = self._issue(now, phase, node_type, planned.actions)
            self.state.replace_history(planned.history)
            self._complete(now)
            self.state.clean_history()
            issued += counts.actions
            self._row(now, phase, phase, node_type, counts)
        self.rounds[phase] = self.rounds.get(phase, 0) + 1
        self.scheduler.ran(phase, issued)

    def _issue(self, now: float, phase: Phase, node_type: str | None, actions: Sequence[Action | dict]) -> Counts:
        """Record a round's actions and put them in flight (per partition one after the other)."""
        issued, moved = [as_action(action) for action in actions], set()
        for action in issued:
            fields = {k: v for k, v in action.document().items() if k != "Phase"}  # the round's phase names it
            typed = {"NodeType": node_type} if node_type else {}
            self.actions.append({"Time": now, "Phase": phase, **typed, **fields})
            partition = partition_of(action)
            self.touched.moved(partition)
            if action.kind.is_movement:
                self.cumulative += 1
                self.window.moved(now, phase)
                if phase == Phase.BALANCING:
                    moved.add(partition)
                    self.history.moved(action, now)
            self.flight.issue(action, now, self.timeline.action_seconds.of(action.kind))
        self.window.partitions_moved(now, moved)
        return Counts.of(issued)

    def _complete(self, now: float) -> None:
        """Apply the actions whose time has come, as the Failover Manager completes them."""
        state, touched, applied = self.flight.complete(self.state.state, self.state.places, now)
        self.state.replace(state, touched)
        if applied:
            self.scheduler.state_changed(now)
            self._changed(now)

    # ---------------------------------------------------------------- events

    def _apply_events(self, now: float) -> None:
        """Every event due by `now`, in order (one batch: `apply_events`), then one Event row naming them."""
        applied = self.stopwatch.timed("events", self._apply_due, now)
        self._row(now, "Event", None, None, Counts(), describe(applied))

    def _apply_due(self, now: float) -> list[Event]:
        before, places, due = self.state.state, self.state.places, self.pending.due(now)
        try:
            batch = apply_events(before, places, due, now, skip_gone=True, decay=self.decay)
            if batch.reread:  # load reports change only loads, checked finite and non-negative at the door
                check(before, batch.state, "the events")
        except (Corrupted, Unread):
            _culprit(before, places, due, now)
            raise
        self.state.replace(batch.state, None if batch.reread else ())
        applied = batch.events
        for event in applied:
            self.pending.applied(event)
            self.touched.event(event.change)
        self.scheduler.applied(now, applied)
        if applied:
            self._changed(now)
        self.state.clean_history()
        return applied

    def _row(
        self,
        now: float,
        trigger: str,
        phase: Phase | None,
        node_type: str | None,
        counts: Counts,
        events: tuple[tuple[str, str], ...] = (),
    ) -> None:
        needs = self.state.needs(self.flight.frozen())
        self.rows.append(Row(now, trigger, phase, node_type, counts, self.cumulative, needs, events))


def _culprit(state: ClusterState, places: Places, events: Sequence[Event], now: float) -> None:
    """Raise `Corrupted` naming the first of `events` (applied one by one to `state`) that breaks
    the state's invariants (only when a batch broke them: the cost of a fault, not of a replay)."""
    for event in events:
        what = f"event Events[{event.index}] ({event.change.KIND} {event.change.subject})"
        try:
            batch = apply_events(state, places, [event], now, skip_gone=True)
        except Unread as exc:
            raise Corrupted(f"{what} broke the replay's state: {exc}") from None
        if batch.events:
            check(state, batch.state, what)
        state = batch.state
        places = Places.of(state.partitions) if batch.reread else places
