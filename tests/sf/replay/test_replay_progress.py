"""A replay's progress lines (plbjax.sf.replay.record.progress): the last round's phase, and each round that
compiled its search or loaded it compiled from JAX's cache, told from JAX's own events."""

from __future__ import annotations

import io

import jax

from plbjax.sf import Phase
from plbjax.sf.replay.record.progress import BACKEND_COMPILE, CACHE_HIT, ReplayProgress

B, P = Phase.BALANCING, Phase.PLACEMENT


def test_a_round_says_whether_it_compiled_or_loaded_its_search():
    """A cold round's compile (tracing and XLA's, no cache hit) is "compiled"; a warm round's
    executable answered by the persistent cache is "loaded ... from the cache", not "compiling";
    one traced again before XLA's cache answered says so; small compiles are not worth a line."""
    shown = io.StringIO()
    progress = ReplayProgress(630, quiet_for=3600, every=3600, stream=shown)
    jax.monitoring.record_event_duration_secs(BACKEND_COMPILE, 0.2)
    progress(0, {}, {}, 0)
    jax.monitoring.record_event_duration_secs("/jax/core/compile/jaxpr_trace_duration", 2.0)
    jax.monitoring.record_event_duration_secs(BACKEND_COMPILE, 9.5)
    progress(5, {}, {B: 1}, 7)
    jax.monitoring.record_event(CACHE_HIT)
    jax.monitoring.record_event_duration_secs(BACKEND_COMPILE, 0.3)
    progress(30, {}, {B: 1, P: 1}, 7)
    jax.monitoring.record_event_duration_secs("/jax/core/compile/jaxpr_trace_duration", 9.6)
    jax.monitoring.record_event(CACHE_HIT)
    jax.monitoring.record_event_duration_secs(BACKEND_COMPILE, 1.3)
    progress(35, {}, {B: 2, P: 1}, 7)
    assert shown.getvalue().splitlines() == [
        "plbjax-replay: Balancing round at 5 s: compiled its code in 11.5 s (once per cluster shape: later runs "
        "load it from the cache)",
        "plbjax-replay: Placement round at 30 s: loaded its compiled code from the cache in 0.3 s",
        "plbjax-replay: Balancing round at 35 s: loaded its compiled code from the cache in 1.3 s, after tracing it "
        "again for 9.6 s",
    ]


def test_the_progress_line_names_the_last_rounds_phase():
    progress = ReplayProgress(7200, quiet_for=3600, every=3600, stream=io.StringIO())
    progress(3600, {}, {B: 12, P: 3}, 5)
    progress(3700, {}, {B: 12, P: 4}, 5)
    line = progress.line(3700, {B: 12, P: 4}, 5, 60.0, {"search": 1.0})
    assert (
        "simulated 3,700 s of 7,200 (51%); last round Placement at 3,700 s; rounds: Balancing 12, Placement 4" in line
    )
