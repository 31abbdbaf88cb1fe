"""`record.trace=true`: each phase's blocks in the plan (`Search.Phases[].Trace`: steps so far,
temperature, best energy and its AvgStdDev), drawn beside the `plot=` picture; nothing of it otherwise."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml
from paths import ROOT

from plbjax import SearchConfig, parse_state, plan

EXAMPLE = ROOT / "examples" / "small.yaml"
SCHEMA = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())
FAST = SearchConfig(chains=4, steps=1000, block_steps=250)


@pytest.fixture(scope="module")
def state():
    return parse_state(yaml.safe_load(EXAMPLE.read_text()))


def test_each_phase_searched_has_its_blocks_traced(state):
    document = plan(state, FAST, trace=True).document()
    jsonschema.validate(document, SCHEMA)
    phases = document["Search"]["Phases"]
    assert {"Balancing", "FewestMovements"} <= {p["Phase"] for p in phases}
    for phase in phases:  # every block of the phase's searches (balancing's second, tighter one too)
        trace = phase["Trace"]
        assert [b["Block"] for b in trace] == list(range(1, len(trace) + 1)) and len(trace) >= phase["Blocks"]
        steps = [b["Steps"] for b in trace]
        assert steps == [k * FAST.block_steps for k in range(1, len(trace) + 1)] and steps[-1] >= phase["Steps"]
        assert min(b["BestEnergy"] for b in trace) <= phase["Energy"] * (1 + 1e-6)
        assert all(b["Temperature"] <= phase["InitialTemperature"] for b in trace)
    balancing = next(p for p in phases if p["Phase"] == "Balancing")
    first = balancing["Trace"][: balancing["Blocks"]]  # its search: the probe, T0's cooling, the descent
    assert first[0]["Temperature"] == 0.0 and first[1]["Temperature"] > first[2]["Temperature"] > 0
    best = [b["BestEnergy"] for b in first]
    assert best == sorted(best, reverse=True) and balancing["Energy"] <= best[-1] * (1 + 1e-6)
    assert first[0]["AvgStdDev"] <= document["Score"]["Before"] + 1e-6  # the probe's greedy descent
    assert first[-1]["AvgStdDev"] == pytest.approx(document["Score"]["After"], abs=0.05)  # before the tidy-up


def test_no_trace_unless_asked(state):
    assert all("Trace" not in p for p in plan(state, FAST).document()["Search"]["Phases"])


def test_the_command_writes_the_trace_and_its_plot(tmp_path):
    out, plot = tmp_path / "plan.json", tmp_path / "loads.png"
    args = [str(EXAMPLE), "record.trace=true", f"plot={plot}", f"out={out}", f"hydra.run.dir={tmp_path / 'run'}"]
    args += ["search.chains=4", "search.steps=1000", "search.block_steps=250"]
    done = subprocess.run(
        [sys.executable, "-m", "plbjax.cli", *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    phases = json.loads(out.read_text())["Search"]["Phases"]
    assert phases and all(p["Trace"] for p in phases)
    assert plot.exists() and (tmp_path / "loads-trace.png").stat().st_size > 0
