"""`plbjax-warm`: a warmed cache gives a plan that traces and compiles nothing; bad input exits 2."""

from __future__ import annotations

import json
from collections import Counter

import jax
import pytest
from conftest import cluster
from jax._src import compilation_cache  # reset_cache: JAX binds its cache once a process

from plbjax import warm
from plbjax.anneal import _driver, _store
from plbjax.sf import load_state, plan


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """PLBJAX_CACHE_DIR a fresh directory, JAX's cache reset to it (its setting is the process's:
    restored after, with the floor `warm` lowers while it runs)."""
    before = {
        k: jax.config.values[k] for k in ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    }
    cache = tmp_path / "cache"
    monkeypatch.setenv("PLBJAX_CACHE_DIR", str(cache))
    compilation_cache.reset_cache()
    _driver.clear_compiled()
    yield cache
    for name, value in before.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()
    _driver.clear_compiled()


def test_a_warmed_state_plans_without_tracing_or_compiling(cache_dir, tmp_path, capsys):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(cluster(5)))
    assert warm.main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}: ") and "traced and stored" in lines[0] and lines[0].endswith(" s")
    assert lines[-1].startswith(f"cache {cache_dir}: ") and "file(s)" in lines[-1]
    assert jax.config.values["jax_persistent_cache_min_compile_time_secs"] == 0.5  # the plan's floor again

    _driver.clear_compiled()  # as a new process: nothing compiled in memory
    heard: Counter[str] = Counter()
    count = lambda event, *_, **__: heard.update([event])
    jax.monitoring.register_event_listener(count)
    jax.monitoring.register_event_duration_secs_listener(count)
    traced = _store.counts["traced"]
    try:
        plan(load_state(str(path)))  # the default search, as `plbjax state=...` runs it
    finally:
        jax.monitoring.unregister_event_listener(count)
        jax.monitoring.unregister_event_duration_listener(count)
    assert _store.counts["traced"] == traced, "a program was traced again"
    compiled = heard["/jax/core/compile/backend_compile_duration"] - heard["/jax/compilation_cache/cache_hits"]
    assert compiled == 0, f"{compiled} program(s) compiled after warming"


@pytest.mark.parametrize(
    "argv, says",
    [
        ([], "nothing to warm"),
        (["no-such-state.yaml"], "no such state document"),
        (["--replicas", "many"], "invalid int value"),
        (["--replicas", "0"], "at least 1 replica"),
        (["--no-such-flag"], "unrecognized arguments"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, says, capsys):
    assert warm.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("plbjax-warm: ") and says in err and err.count("\n") == 1


def test_a_bad_state_document_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("Nodes: [\n")
    assert warm.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"plbjax-warm: {bad}") and err.count("\n") == 1


def test_sizes_are_the_benchmarks_clusters():
    spec = warm.spec_for(10_000)
    assert abs(spec.total_replicas - 10_000) / 10_000 < 0.05 and spec.metrics == 4
