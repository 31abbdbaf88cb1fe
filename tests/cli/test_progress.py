"""What `plbjax` says while it gets the compiled search: loading or compiling until it knows, then
which it was (seconds JAX spent tracing and compiling outside its persistent cache decide)."""

from __future__ import annotations

import time

import pytest

from plbjax import cli


@pytest.mark.parametrize("fresh, said", [(0.0, "loaded the compiled search in 1.2 s"), (5.0, "compiled in 1.2 s")])
def test_the_compile_line_says_loaded_or_compiled_after_the_fact(fresh, said, capsys, monkeypatch):
    monkeypatch.setattr(cli._compilations, "seconds", 10.0)
    progress = cli.Progress(compile_quiet_for=0.0)
    progress.compiling(None)
    time.sleep(0.2)  # the announcement's timer
    cli._compilations.seconds += fresh
    progress.compiling(1.2)
    assert capsys.readouterr().err.splitlines() == [
        "plbjax: loading or compiling the search for this cluster's shape (compiled once, then loaded from the cache)",
        f"plbjax: {said}; searching",
    ]


def test_a_quick_load_says_nothing(capsys):
    progress = cli.Progress(compile_quiet_for=5.0)
    progress.compiling(None)
    progress.compiling(0.3)
    assert capsys.readouterr().err == ""


def test_jax_events_count_only_what_the_cache_did_not_supply():
    counted = cli._Compilations()
    counted.duration(counted.FRESH[0], 0.5)  # tracing
    counted.event("/jax/compilation_cache/cache_hits")
    counted.duration(counted.BACKEND_COMPILE, 3.0)  # loaded from the cache
    counted.duration(counted.BACKEND_COMPILE, 2.0)  # compiled
    assert counted.seconds == 2.5
