"""The replay with the real engine: one code path with `plbjax`, deterministic, and the reference's
fault-domain story (a failed domain gets its share back through balancing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from plbjax import SearchConfig, load_state, plan
from plbjax.sf.replay import parse_timeline, replay, summary, write_outputs
from plbjax.sf.replay.engine import EnginePlanner, EngineProbe

EXAMPLES = Path(__file__).parent.parent / "examples"
SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=500, seconds=None, block_steps=250)


def _small() -> dict:
    return load_state(EXAMPLES / "small.yaml").document


def _play(timeline: dict, seed: int = 0):
    """Play a timeline whose State is inline or relative to examples/timelines."""
    return replay(parse_timeline(timeline, EXAMPLES / "timelines"), EnginePlanner(SEARCH), EngineProbe(), seed=seed)


def test_a_single_event_timeline_plans_what_plbjax_plans():
    """The first round's actions are `plbjax`'s plan on that state (same search, same seed)."""
    state = _small()
    record = _play(
        {"State": state, "Duration": 1, "Events": [{"Time": 0, "Kind": "SettingsChanged", "Settings": {}}]}, seed=4
    )
    expected = plan(load_state(EXAMPLES / "small.yaml"), SearchConfig(**{**SEARCH.__dict__, "seed": 4}))
    first = [
        {k: v for k, v in a.items() if k not in ("Time", "Phase", "NodeType")} for a in record.actions if a["Time"] == 0
    ]
    assert expected["Actions"] and first == expected["Actions"]


def test_same_timeline_and_seed_give_the_same_series(tmp_path):
    timeline = yaml.safe_load((EXAMPLES / "timelines" / "small-fd-failure.yaml").read_text())
    timeline["Duration"] = 120
    timeline["Events"] = [e for e in timeline["Events"] if e["Time"] <= 120]
    outs = []
    for run in ("a", "b"):
        write_outputs(_play(timeline, seed=1), tmp_path / run)
        outs.append((tmp_path / run / "series.csv").read_text())
    assert outs[0] == outs[1] and len(outs[0].splitlines()) > 3


def test_a_failed_fault_domain_gets_its_share_back_through_balancing():
    """N0 and N3 (one fault domain) go down: their replicas are rebuilt elsewhere; when they return
    empty, balancing moves load back onto them."""
    timeline = yaml.safe_load((EXAMPLES / "timelines" / "small-fd-failure.yaml").read_text())
    record = _play(timeline, seed=0)
    final = {n["NodeName"]: 0 for n in record.final_state["Nodes"]}
    for part in record.final_state["Partitions"]:
        for r in part["Replicas"]:
            if r["NodeName"]:
                final[r["NodeName"]] += 1
    assert final["N0"] > 0 and final["N3"] > 0
    returned = [
        a for a in record.actions if a["Time"] >= 330 and a["Phase"] == "Balancing" and a["TargetNode"] in ("N0", "N3")
    ]
    assert returned
    assert summary(record)["FinalUnplaced"] == 0


def test_replay_command_writes_the_record(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from plbjax.cli import replay_main; replay_main()",
            f"timeline={EXAMPLES / 'timelines' / 'small-fd-failure.yaml'}",
            f"out={tmp_path / 'r'}",
            "search.steps=300",
            "search.seconds=null",
            "search.chains=1",
            "search.tries=16",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"series.csv", "series.json", "actions.jsonl", "final-state.json", "summary.json"} <= files
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["SimulatedSeconds"] == 630


def test_replay_command_bad_timeline_exits_2_naming_the_event(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {"State": str(EXAMPLES / "small.yaml"), "Events": [{"Time": 0, "Kind": "NodeDown", "NodeName": "N99"}]}
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from plbjax.cli import replay_main; replay_main()",
            f"timeline={bad}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert "Events[0].NodeName" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_document_differing_only_in_settings_is_not_parsed_again():
    """The planner's view (the probe's document with throttle Settings) reuses the probe's parse:
    the state is the one parsing the view gives, and so is the plan."""
    from plbjax import parse_state
    from plbjax.sf.replay import engine
    from plbjax.sf.replay.loop import with_settings

    doc = _small()
    first = engine.parsed(doc)
    assert engine.parsed(doc) is first and engine.parsed(dict(doc)) is first
    view = with_settings(doc, {"GlobalMovementThrottleThreshold": 1, "GlobalMovementThrottleThresholdPercentage": 0})
    assert engine.parsed(view) == parse_state(view) and engine.parsed(view) != first
    assert engine._LAST.doc is doc  # the view did not replace the parsed document
    ours = EnginePlanner(SEARCH)(view, "Balancing", None, 2, frozenset())["Actions"]
    theirs = plan(parse_state(view), SearchConfig(**{**SEARCH.__dict__, "seed": 2}), phase="Balancing")["Actions"]
    assert ours == theirs and len(ours) <= 1
    other = dict(doc, Partitions=list(doc["Partitions"]))  # equal, but not the same object: parsed again
    assert engine.parsed(other) is not first and engine._LAST.doc is other


def test_plbjax_generate_makes_a_timeline_that_plays(tmp_path):
    from plbjax.sf._generator import main

    out = tmp_path / "fd.yaml"
    assert main(["timeline", "fault-domain-failure", "--state", str(EXAMPLES / "small.yaml"), "-o", str(out)]) == 0
    timeline = yaml.safe_load(out.read_text())
    assert [e["Kind"] for e in timeline["Events"]][:1] == ["NodeDown"]
    assert parse_timeline(timeline, tmp_path).duration > 0
