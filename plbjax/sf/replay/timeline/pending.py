"""The events still to apply: the timeline's, in order, and the block-list expiries that the entries
added schedule (an entry added again lasts until its later Until)."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from operator import attrgetter

from plbjax.sf.replay.timeline.changes import BlockListAdded, BlockListExpired
from plbjax.sf.replay.timeline.events import Event
from plbjax.sf.replay.types import TIME_EPS

_time = attrgetter("time")


class Pending:
    """The timeline's events not applied yet and the block-list expiries to come."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.next = 0  # the timeline's events are in time order: the next one not applied yet
        # (time, after every timeline event, the expiry, its entry)
        self.expiries: list[tuple[float, int, Event, tuple[str, str]]] = []
        self.block_until: dict[tuple[str, str], float] = {}  # the latest Until of each entry added
        self.seq = 0

    def next_time(self) -> float:
        """The time of the next event to apply (a timeline event or a block-list expiry)."""
        return min(
            self.events[self.next].time if self.next < len(self.events) else math.inf,
            self.expiries[0][0] if self.expiries else math.inf,
        )

    def due(self, now: float) -> list[Event]:
        """The events due by `now`, taken from the timeline and the expiries, in (time, order)."""
        events, due = self.events, []
        while self.next_time() <= now + TIME_EPS:
            n = self.next
            if n < len(events) and (not self.expiries or (events[n].time, n) < self.expiries[0][:2]):
                # the timeline's events up to `now` and to the next expiry (which follows the events of its time)
                limit = min(now + TIME_EPS, self.expiries[0][0]) if self.expiries else now + TIME_EPS
                end = bisect.bisect_right(events, limit, lo=n + 1, key=_time)
                due += events[n:end]
                self.next = end
            else:
                _, _, expiry, entry = heapq.heappop(self.expiries)
                if self.block_until.get(entry) == expiry.time:  # not extended since
                    due.append(expiry)
        return due

    def applied(self, event: Event) -> None:
        """An event was applied: a block-list entry added schedules its expiry."""
        added = event.change
        if not isinstance(added, BlockListAdded):
            return
        until = math.inf if added.until is None else added.until
        self.block_until[added.entry] = until
        if math.isfinite(until):
            expiry = Event(until, BlockListExpired(added.node, added.service_type), event.index)
            heapq.heappush(self.expiries, (until, len(self.events) + self.seq, expiry, added.entry))
            self.seq += 1
