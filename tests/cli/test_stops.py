"""Stopping `plbjax` with a signal while it compiles (cold: a fresh PLBJAX_CACHE_DIR) and what a cold
run says while it compiles. A compilation cannot be interrupted, so a prompt stop writes the plan of
the input as prepared, nothing searched: `Search.Steps` 0 shows the run did not wait for the compile."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from paths import ROOT

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "small.yaml"
SCHEMA = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())
COMPILE_LINE = re.compile(r"plbjax: \w+: getting the search for this cluster's shape ready")
EXIT_MARGIN = 60.0  # the 5 s promised, with room for a machine 10x slower than a quiet 2-core one


def _cold_run(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """`plbjax` on the example with an empty compilation cache, stopped at its compile line."""
    out = tmp_path / "plan.json"
    env = dict(os.environ, PLBJAX_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "plbjax.cli", str(EXAMPLE), f"out={out}", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if COMPILE_LINE.match(line):
            return process, out
    process.wait()
    pytest.fail("no compile line on a cold run")


@pytest.mark.slow
def test_sigint_while_compiling_writes_the_unsearched_plan_at_once(tmp_path):
    process, out = _cold_run(tmp_path)
    stopped = time.monotonic()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=600)
    assert time.monotonic() - stopped < EXIT_MARGIN
    assert process.returncode == 128 + signal.SIGINT, stderr
    plan = json.loads(out.read_text())
    jsonschema.validate(plan, SCHEMA)
    assert plan["Search"]["Interrupted"] and plan["Search"]["Steps"] == 0  # it did not wait for the compile
    assert plan["Actions"] == [] and plan["Score"]["After"] == plan["Score"]["Before"]
    assert "SIGINT: stopping the search" in stderr and "Traceback" not in stderr
    assert "interrupted" in stdout and (tmp_path / "run" / "plan.json").exists()


@pytest.mark.slow
def test_a_second_signal_exits_at_once_with_one_line_and_nothing_written(tmp_path):
    process, out = _cold_run(tmp_path)
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 128 + signal.SIGINT
    assert stderr.strip().splitlines()[-1] == "plbjax: SIGINT again: exiting now"
    assert "Traceback" not in stderr
    assert not out.exists() and not (tmp_path / "run").exists()  # no run directory without its plan
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".plan.json")]


@pytest.mark.slow
def test_a_cold_run_says_when_it_compiles_and_how_long_it_took_a_warm_one_never_compiling(tmp_path):
    process, out = _cold_run(tmp_path)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    compiled = [line for line in stderr.splitlines() if re.match(r"plbjax: \w+: compiled in ", line)]
    assert "loaded the compiled search" not in stderr  # a cold run compiles
    assert compiled and compiled[0].endswith(" s; searching")
    assert json.loads(out.read_text())["Search"]["Steps"] > 0
    env = dict(os.environ, PLBJAX_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    warm = subprocess.run(
        [sys.executable, "-m", "plbjax.cli", str(EXAMPLE), f"hydra.run.dir={tmp_path / 'warm'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert warm.returncode == 0, warm.stderr
    assert "compiling" not in warm.stderr and "compiled in" not in warm.stderr, warm.stderr


def _example():
    import yaml

    from plbjax import parse_state

    return parse_state(yaml.safe_load(EXAMPLE.read_text()))


STEPS = 3000


def _fast():
    from plbjax import SearchConfig

    return SearchConfig(chains=4, steps=STEPS, block_steps=250)


def test_a_stop_before_the_search_writes_the_prepared_state_and_says_so():
    from plbjax import anneal, plan

    anneal.STOP.set()
    try:
        result = plan(_example(), _fast()).document()
    finally:
        anneal.STOP.clear()
    jsonschema.validate(result, SCHEMA)
    assert result["Search"]["Interrupted"] and result["Search"]["Steps"] == 0 and result["Actions"] == []
    assert not any(p["Ran"] for p in result["Phases"])


def test_a_stop_mid_search_still_gets_the_fewest_movements_pass():
    """STOP at the first block: balancing ends there, then the minimal-movement pass runs to its end
    (`Search.Minimal`); `unsearched` gets the plan of nothing searched first, None once searched."""
    from plbjax import anneal, plan

    fallbacks = []
    stop = lambda done, total, elapsed, best: anneal.STOP.set()
    try:
        result = plan(_example(), _fast(), stop, unsearched=fallbacks.append).document()
    finally:
        anneal.STOP.clear()
    jsonschema.validate(result, SCHEMA)
    search = result["Search"]
    assert search["Interrupted"] and search["Minimal"] and search["Steps"] < 3 * STEPS
    assert result["Actions"] and result["Score"]["After"] < result["Score"]["Before"]
    assert len(fallbacks) == 2 and fallbacks[1] is None
    nothing = fallbacks[0]().document()
    jsonschema.validate(nothing, SCHEMA)
    assert nothing["Actions"] == [] and nothing["Search"]["Steps"] == 0
