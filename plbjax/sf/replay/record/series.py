"""What the record's files share: the rows (the state at time 0, then the replay's), times and
numbers as written, and the time average of a value that holds from its sample to the next."""

from __future__ import annotations

import math

from plbjax.sf.replay.types import Counts, Replay, Row


def rows_of(replay: Replay) -> tuple[Row, ...]:
    """The record's rows: the state at time 0 (a `Start` row, when the story has it), then the replay's."""
    initial = replay.story.initial
    start = (Row(0.0, "Start", None, None, Counts(), 0, initial),) if initial is not None else ()
    return start + replay.rows


def simulated_time(t: float) -> float:
    """A simulated time as written: refresh times are multiples of PLBRefreshGap computed in
    floating point (101 × 0.1 = 10.100000000000001), written to the nanosecond (10.1)."""
    return round(float(t), 9)


def number(value: float | None) -> float | None:
    """JSON has no infinity: such a value is written as null."""
    return None if value is None or not math.isfinite(value) else float(value)


def time_average(samples: list[tuple[float, float]], duration: float) -> float:
    """Average over [first sample, duration] of a value that holds from its sample to the next."""
    if not samples:
        return 0.0
    ends = [t for t, _ in samples[1:]] + [max(duration, samples[-1][0])]
    span = ends[-1] - samples[0][0]
    if span <= 0:
        return float(samples[-1][1])
    return float(sum(v * (end - t) for (t, v), end in zip(samples, ends)) / span)
