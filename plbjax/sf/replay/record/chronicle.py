"""The cluster's story as a replay plays it (`types.Story`): the events applied, load reports summed
by service and time, and the stretches in which the scheduler held a phase back (`Hold`), merged
from the reasons it gives at each round (`Scheduler.end_round`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from plbjax.sf import Phase
from plbjax.sf.replay.timeline.changes import LoadReport
from plbjax.sf.replay.timeline.events import Event, describe
from plbjax.sf.replay.types import TIME_EPS, ClusterEvent, Hold, LoadChange, Needs, Story


class Reason(NamedTuple):
    """Why the scheduler holds a phase back: SF's setting (or rule) and a sentence."""

    setting: str
    why: str


class Chronicle:
    """What a replay's `Story` is made of, gathered as it plays."""

    def __init__(self, initial: Needs | None = None) -> None:
        self.initial = initial
        self.events: list[ClusterEvent] = []
        self.loads: dict[tuple[float, str], tuple[list[int], dict[str, float]]] = {}  # (reports, summed loads)
        self.holds: list[Hold] = []
        self.held: dict[Phase, tuple[float, Reason]] = {}  # the open stretch per phase

    def applied(self, now: float, events: Sequence[Event]) -> None:
        """Events applied at `now`: each named, load reports summed per service."""
        for event in events:
            report = event.change
            if not isinstance(report, LoadReport):
                text = describe([event])[0][1]
                self.events.append(ClusterEvent(now, event.kind, text[len(event.kind) :].strip()))
                continue
            reports, loads = self.loads.setdefault((now, str(report.service)), ([0], {}))
            reports[0] += 1
            for metric, value in report.loads.items():
                loads[metric] = loads.get(metric, 0.0) + float(value)

    def hold(self, now: float, phase: Phase, reason: Reason | None) -> None:
        """What holds `phase` back from `now` on (None: nothing: its open stretch ends)."""
        current = self.held.get(phase)
        if current is not None and current[1] == reason:
            return
        if current is not None:
            since, (setting, why) = self.held.pop(phase)
            if now > since + TIME_EPS:
                self.holds.append(Hold(phase, since, now, setting, why))
        if reason is not None:
            self.held[phase] = (now, reason)

    def story(self, end: float) -> Story:
        """The story up to `end`; stretches still open end there, marked `open`."""
        still = [Hold(p, since, max(end, since), r.setting, r.why, True) for p, (since, r) in self.held.items()]
        holds = tuple(sorted([*self.holds, *still], key=lambda h: (h.since, h.phase)))
        loads = tuple(LoadChange(t, service, n[0], dict(m)) for (t, service), (n, m) in self.loads.items())
        return Story(self.initial, tuple(self.events), loads, holds)
