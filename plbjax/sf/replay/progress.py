"""A long replay's progress on stderr: where the simulated clock is, every few wall seconds."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TextIO

from plbjax.sf import Phase


class ReplayProgress:
    """A `replay` progress callback printing, every `every` wall seconds (the first after
    `quiet_for`), the simulated time reached, rounds by phase, movements, simulated hours per wall
    minute and the share of the wall time each part took (`types.PARTS`)."""

    def __init__(self, duration: float, quiet_for: float = 5.0, every: float = 5.0, stream: TextIO | None = None):
        self.duration, self.every, self.stream = duration, every, stream
        self.start = time.perf_counter()
        self.next = self.start + quiet_for

    def __call__(self, now: float, timings: Mapping[str, float], rounds: Mapping[Phase, int], movements: int) -> None:
        wall = time.perf_counter()
        if wall < self.next:
            return
        self.next = wall + self.every
        line = self.line(now, rounds, movements, wall - self.start, timings)
        print(line, file=self.stream or sys.stderr, flush=True)

    def line(
        self, now: float, rounds: Mapping[Phase, int], movements: int, wall: float, timings: Mapping[str, float]
    ) -> str:
        share = f" ({100 * now / self.duration:.0f}%)" if self.duration > 0 else ""
        phases = ", ".join(f"{phase} {count}" for phase, count in rounds.items()) or "none"
        rate = (now / 3600) / (wall / 60) if wall > 0 else 0.0
        return (
            f"plbjax-replay: simulated {now:,.0f} s of {self.duration:,.0f}{share}; rounds: {phases}; "
            f"{movements} movement(s); {rate:.2f} simulated h per wall minute; {_shares(timings)}"
        )


def _shares(timings: Mapping[str, float]) -> str:
    """Each part's share of the wall time: `events 4%, probe 9%, ...`."""
    total = sum(timings.values()) or 1.0
    return ", ".join(f"{part} {100 * seconds / total:.0f}%" for part, seconds in timings.items())
