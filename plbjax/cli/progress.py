"""Progress lines on stderr while a plan searches, and what JAX compiled outside its cache."""

from __future__ import annotations

import sys
import threading


class Compilations:
    """Seconds JAX spent tracing, lowering and compiling what its persistent cache did not supply,
    from `jax.monitoring` events (a compile's cache hit comes before its duration, in one thread),
    so that a progress line can tell a search compiled now from one loaded from the cache."""

    FRESH = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
    BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

    def __init__(self):
        self.seconds, self.hit, self.registered = 0.0, False, False

    def event(self, event: str, **kwargs: str | int) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self.hit = True

    def duration(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event in self.FRESH or (event == self.BACKEND_COMPILE and not self.hit):
            self.seconds += duration_secs
        if event == self.BACKEND_COMPILE:
            self.hit = False

    def register(self) -> None:
        if not self.registered:
            import jax

            jax.monitoring.register_event_listener(self.event)
            jax.monitoring.register_event_duration_secs_listener(self.duration)
            self.registered = True


compilations = Compilations()
COMPILED = 1.0  # seconds of tracing and compiling (not from the cache) that make a search 'compiled', not 'loaded'


class Progress:
    """Prints a line to stderr every couple of seconds once a search has run for a few seconds, and,
    when getting the compiled search takes more than `compile_quiet_for` seconds, that it is getting
    it ready, then which it was: compiled now (a cold run) or loaded from the cache. Each line names
    the phase searching (`phase_begins`)."""

    def __init__(self, quiet_for: float = 3.0, every: float = 2.0, compile_quiet_for: float = 1.0):
        self.quiet_for, self.every, self.last = quiet_for, every, 0.0
        self.compile_quiet_for, self.told = compile_quiet_for, threading.Event()
        self.timer: threading.Timer | None = None
        self.compiled_before = 0.0
        self.phase: str | None = None
        compilations.register()

    def phase_begins(self, phase: str) -> None:
        """The plan's next phase (its lines name it)."""
        self.phase = phase

    def _say(self, text: str) -> None:
        named = f"{self.phase}: " if self.phase else ""
        print(f"plbjax: {named}{text}", file=sys.stderr, flush=True)

    def compiling(self, seconds: float | None) -> None:
        """Setting up and compiling (or loading) the search starts (None) or ended after `seconds`."""
        if seconds is None:  # a search starts: its lines come by its own clock
            self.told.clear()
            self.last = 0.0
            self.compiled_before = compilations.seconds
            self.timer = threading.Timer(self.compile_quiet_for, self._tell)
            self.timer.daemon = True
            self.timer.start()
            return
        if self.timer is not None:
            self.timer.cancel()
        if self.told.is_set():
            # loaded: little was traced or compiled (the program store and XLA's cache gave it; a hit
            # on a small program beside a compiled block program is still a compilation)
            loaded = compilations.seconds - self.compiled_before < COMPILED
            done = f"loaded the compiled search in {seconds:.1f} s" if loaded else f"compiled in {seconds:.1f} s"
            self._say(f"{done}; searching")

    def _tell(self) -> None:
        self.told.set()
        self._say("getting the search for this cluster's shape ready (a cold run compiles it, a warm one loads it)")

    def __call__(self, done: int, total: int, elapsed: float, best_energy: float) -> None:
        if elapsed >= self.quiet_for and (elapsed - self.last >= self.every or done == total):
            self.last = elapsed
            self._say(f"search {done}/{total} blocks, {elapsed:.1f} s, best energy {best_energy:.6g}")
