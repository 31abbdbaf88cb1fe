"""A long replay's progress on stderr: where the simulated clock is and which phase ran last, every
few wall seconds, and, at once, each round that compiled its search or loaded it compiled from the
cache (JAX's own compile events and persistent-cache hits, `jax.monitoring`)."""

from __future__ import annotations

import functools
import sys
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from plbjax.sf import Phase

CACHE_HIT = "/jax/compilation_cache/cache_hits"  # recorded inside a backend compile that the cache answered
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # XLA's compile, or its load from the cache
COMPILE_EVENTS = (
    BACKEND_COMPILE,
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
)
NOTEWORTHY = 1.0  # seconds of tracing or compiling that a round's notice reports


@dataclass
class Compiles:
    """Wall seconds JAX spent, since the last look, tracing and lowering programs, compiling them
    with XLA, and loading XLA's executables from its persistent cache (and how many it loaded).
    A program kept whole by plbjax's own store (`anneal`) is none of these: it costs no line."""

    traced: float = 0.0
    compiled: float = 0.0
    loaded: float = 0.0
    hits: int = 0
    hit: bool = False  # the backend compile under way is a cache hit

    def took(self, event: str, seconds: float) -> None:
        if event != BACKEND_COMPILE:
            self.traced += seconds
        elif self.hit:
            self.loaded, self.hits, self.hit = self.loaded + seconds, self.hits + 1, False
        else:
            self.compiled += seconds

    def notice(self) -> str | None:
        """What compiling cost, if worth a line: compiled (a cold run), or loaded from the cache (a
        warm one), saying so when it was traced again first."""
        if self.compiled >= NOTEWORTHY:
            loaded = f"; loaded {self.hits} from the cache in {self.loaded:.1f} s" if self.hits else ""
            return (
                f"compiled its code in {self.traced + self.compiled:.1f} s (once per cluster shape: later runs "
                f"load it from the cache){loaded}"
            )
        if self.hits:
            traced = f", after tracing it again for {self.traced:.1f} s" if self.traced >= NOTEWORTHY else ""
            return f"loaded its compiled code from the cache in {self.loaded + self.compiled:.1f} s{traced}"
        if self.traced >= NOTEWORTHY:
            return f"traced its code in {self.traced:.1f} s"
        return None


_LIVE: weakref.WeakSet[ReplayProgress] = weakref.WeakSet()  # the progress objects JAX's events go to


def _on_event(event: str, **_) -> None:
    if event == CACHE_HIT:
        for progress in _LIVE:
            progress.compiles.hit = True


def _on_duration(event: str, duration_secs: float, **_) -> None:
    if event in COMPILE_EVENTS:
        for progress in _LIVE:
            progress.compiles.took(event, duration_secs)


@functools.cache
def _listening() -> None:
    """JAX's compile events go to every live `ReplayProgress` (registered once per process)."""
    import jax

    jax.monitoring.register_event_listener(_on_event)
    jax.monitoring.register_event_duration_secs_listener(_on_duration)


class ReplayProgress:
    """A `replay` progress callback printing, every `every` wall seconds (the first after
    `quiet_for`), the simulated time reached, the last round's phase and time, rounds by phase,
    movements, simulated hours per wall minute and the share of the wall time each part took
    (`types.PARTS`); and, as soon as it is told of it, a round whose search was compiled or loaded
    compiled from the cache (`Compiles`)."""

    def __init__(self, duration: float, quiet_for: float = 5.0, every: float = 5.0, stream: TextIO | None = None):
        self.duration, self.every, self.stream = duration, every, stream
        self.start = time.perf_counter()
        self.next = self.start + quiet_for
        self.rounds: dict[Phase, int] = {}
        self.last: tuple[str, float] | None = None  # the last round's phase(s) and time
        self.compiles = Compiles()
        _listening()
        _LIVE.add(self)

    def __call__(self, now: float, timings: Mapping[str, float], rounds: Mapping[Phase, int], movements: int) -> None:
        ran = [str(phase) for phase, n in rounds.items() if n > self.rounds.get(phase, 0)]
        self.rounds = dict(rounds)
        if ran:
            self.last = (", ".join(ran), now)
        notice, self.compiles = self.compiles.notice(), Compiles()
        if notice is not None:
            where = f"{self.last[0]} round at {now:,.0f} s" if ran and self.last else f"the probe at {now:,.0f} s"
            self._print(f"plbjax-replay: {where}: {notice}")
        wall = time.perf_counter()
        if wall < self.next:
            return
        self.next = wall + self.every
        self._print(self.line(now, rounds, movements, wall - self.start, timings))

    def _print(self, line: str) -> None:
        print(line, file=self.stream or sys.stderr, flush=True)

    def line(
        self, now: float, rounds: Mapping[Phase, int], movements: int, wall: float, timings: Mapping[str, float]
    ) -> str:
        share = f" ({100 * now / self.duration:.0f}%)" if self.duration > 0 else ""
        last = f"last round {self.last[0]} at {self.last[1]:,.0f} s; " if self.last else ""
        phases = ", ".join(f"{phase} {count}" for phase, count in rounds.items()) or "none"
        rate = (now / 3600) / (wall / 60) if wall > 0 else 0.0
        return (
            f"plbjax-replay: simulated {now:,.0f} s of {self.duration:,.0f}{share}; {last}rounds: {phases}; "
            f"{movements} movement(s); {rate:.2f} simulated h per wall minute; {_shares(timings)}"
        )


def _shares(timings: Mapping[str, float]) -> str:
    """Each part's share of the wall time: `events 4%, probe 9%, ...`."""
    total = sum(timings.values()) or 1.0
    return ", ".join(f"{part} {100 * seconds / total:.0f}%" for part, seconds in timings.items())
