"""What `plbjax` says while it searches: each line names the phase; while it gets the compiled search,
that it is getting it ready, then whether it compiled or loaded it (seconds JAX spent tracing and
compiling outside its persistent cache decide): a warm run never says "compiling"."""

from __future__ import annotations

import re
import time

import pytest

from plbjax.cli import progress as cli


@pytest.mark.parametrize("fresh, said", [(0.0, "loaded the compiled search in 1.2 s"), (5.0, "compiled in 1.2 s")])
def test_the_compile_line_says_loaded_or_compiled_after_the_fact(fresh, said, capsys, monkeypatch):
    monkeypatch.setattr(cli.compilations, "seconds", 10.0)
    progress = cli.Progress(compile_quiet_for=0.0)
    progress.phase_begins("Balancing")
    progress.compiling(None)
    time.sleep(0.2)  # the announcement's timer
    cli.compilations.seconds += fresh
    progress.compiling(1.2)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "plbjax: Balancing: getting the search for this cluster's shape ready (a cold run compiles it, a warm one "
        "loads it)",
        f"plbjax: Balancing: {said}; searching",
    ]
    assert fresh or "compiling" not in "".join(lines)  # loaded from the cache: nothing says compiling


def test_every_search_line_names_its_phase(capsys):
    """A plan's searches report to the progress each phase's name first."""
    import yaml
    from paths import ROOT

    from plbjax import SearchConfig, parse_state, plan

    state = parse_state(yaml.safe_load((ROOT / "examples" / "small.yaml").read_text()))
    plan(state, SearchConfig(chains=4, steps=1000, block_steps=250), cli.Progress(quiet_for=0.0, every=0.0))
    lines = [line for line in capsys.readouterr().err.splitlines() if " blocks, " in line]
    named = {line.split(":")[1].strip() for line in lines}
    assert named == {"Balancing", "FewestMovements"}, lines
    assert all(re.fullmatch(r"plbjax: \w+: search \d+/\d+ blocks, [\d.]+ s, best energy \S+", line) for line in lines)


def test_a_quick_load_says_nothing(capsys):
    progress = cli.Progress(compile_quiet_for=5.0)
    progress.compiling(None)
    progress.compiling(0.3)
    assert capsys.readouterr().err == ""


def test_jax_events_count_only_what_the_cache_did_not_supply():
    counted = cli.Compilations()
    counted.duration(counted.FRESH[0], 0.5)  # tracing
    counted.event("/jax/compilation_cache/cache_hits")
    counted.duration(counted.BACKEND_COMPILE, 3.0)  # loaded from the cache
    counted.duration(counted.BACKEND_COMPILE, 2.0)  # compiled
    assert counted.seconds == 2.5


def test_a_cache_hit_beside_a_compilation_still_says_compiled(capsys):
    """A first run loads a small program from the cache and compiles the block program: "compiled"
    (issue 62: it said "loaded the compiled search in 20.7 s" while it compiled for 18.4 s)."""
    progress = cli.Progress(compile_quiet_for=0.0)
    progress.phase_begins("Balancing")
    progress.compiling(None)
    time.sleep(0.2)  # the announcement's timer
    cli.compilations.event("/jax/compilation_cache/cache_hits")
    cli.compilations.duration(cli.Compilations.BACKEND_COMPILE, 0.3)  # the hit's retrieval
    cli.compilations.duration(cli.Compilations.BACKEND_COMPILE, 18.4)  # the block program, compiled
    progress.compiling(20.7)
    assert capsys.readouterr().err.splitlines()[-1] == "plbjax: Balancing: compiled in 20.7 s; searching"
