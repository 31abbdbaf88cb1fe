"""The replay with the real engine: one code path with `plbjax`, deterministic, and the reference's
fault-domain story (a failed domain gets its share back through balancing)."""

from __future__ import annotations

import csv
import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from paths import ROOT

from plbjax import SearchConfig, load_state, parse_state, plan
from plbjax.sf.replay import load_timeline, parse_timeline, replay, summary, write_outputs
from plbjax.sf.replay.engine import EngineProbe, engine

EXAMPLES = ROOT / "examples"
SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=500, seconds=None, block_steps=250)


def _small() -> dict:
    return load_state(EXAMPLES / "small.yaml").document


def _play(timeline: dict, seed: int = 0):
    """Play a timeline whose State is inline or relative to examples/timelines."""
    return replay(parse_timeline(timeline, EXAMPLES / "timelines"), *engine(SEARCH), seed=seed)


def test_a_single_event_timeline_plans_what_plbjax_plans():
    """The first round's actions (balancing, one MinLoadBalancingInterval after the start) are
    `plbjax`'s plan on that state (same search, same seed)."""
    state = _small()
    record = _play(
        {"State": state, "Duration": 5, "Events": [{"Time": 0, "Kind": "SettingsChanged", "Settings": {}}]}, seed=4
    )
    expected = plan(load_state(EXAMPLES / "small.yaml"), SearchConfig(**{**SEARCH.__dict__, "seed": 4})).document()
    first = [
        {k: v for k, v in a.items() if k not in ("Time", "Phase", "NodeType")} for a in record.actions if a["Time"] == 5
    ]
    # the record's Phase is the action's own (the plan's explanation, tests/sf/plan/test_explain.py)
    assert expected["Actions"] and first == [{k: v for k, v in a.items() if k != "Phase"} for a in expected["Actions"]]


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
    timeline_bytes = (EXAMPLES / "timelines" / "small-fd-failure.yaml").read_bytes()
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
            "record.plans=true",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert timeline_bytes == (EXAMPLES / "timelines" / "small-fd-failure.yaml").read_bytes()  # input unchanged
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"series.csv", "series.json", "actions.jsonl", "final-state.json", "summary.json", "plans"} <= files
    made = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert made["SimulatedSeconds"] == 630
    provenance = made["Provenance"]  # recorded like a plan's: the timeline's bytes, config, versions, seed
    assert provenance["Input"]["Sha256"] == hashlib.sha256(timeline_bytes).hexdigest()
    assert provenance["Config"]["search"]["steps"] == 300 and provenance["Seed"] == 0 and provenance["Numpy"]
    series = json.loads((tmp_path / "r" / "series.json").read_text())
    rounds = [r for r in series if r["Trigger"] not in ("Event", "Start")]  # Start: the state at time 0
    index = json.loads((tmp_path / "r" / "plans" / "index.json").read_text())  # record.plans: each round's plan
    assert [(e["Time"], e["Phase"]) for e in index] == [(r["Time"], r["Phase"]) for r in rounds]
    actions = [json.loads(line) for line in (tmp_path / "r" / "actions.jsonl").read_text().splitlines()]
    planned = [a for e in index for a in json.loads((tmp_path / "r" / "plans" / e["File"]).read_text())["Actions"]]
    assert len(planned) == len(actions)


def _replay_command(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from plbjax.cli import replay_main; replay_main()", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    "events, message",
    [
        ([{"Time": 0, "Kind": "NodeDown", "NodeName": "N99"}], "Events[0].NodeName: 'N99' is not a node"),
        (
            [{"Time": 0, "Kind": "NodeUp", "NodeName": "N0"}, {"Time": 1, "Kind": "Reboot"}],
            "Events[1].Kind: unknown event kind 'Reboot'",
        ),
        ([{"Time": 0, "Kind": "NodeUp", "NodeName": "N0", "Why": 1}], "Events[0].Why: not a field of NodeUp"),
        (
            [{"Time": 4, "Kind": "NodeUp", "NodeName": "N0"}, {"Time": 2, "Kind": "NodeUp", "NodeName": "N0"}],
            "Events[1].Time: 2 is before the previous event's 4",
        ),
    ],
    ids=["unknown-node", "unknown-kind", "unknown-field", "time-decreasing"],
)
def test_replay_command_bad_timeline_exits_2_naming_the_event_and_changes_nothing(tmp_path, events, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"State": "../small.yaml", "Events": events}))
    (tmp_path / "small.yaml").write_bytes((EXAMPLES / "small.yaml").read_bytes())
    (tmp_path / "sub").mkdir()
    moved = tmp_path / "sub" / "bad.yaml"
    bad.rename(moved)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (moved, tmp_path / "small.yaml")}
    done = _replay_command(f"timeline={moved}", f"out={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 2
    assert done.stderr.strip() == f"plbjax-replay: bad input: {message}" or (
        message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    ), done.stderr
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    assert not (tmp_path / "out").exists()


def test_a_state_differing_only_in_throttles_keeps_the_sessions_encoding():
    """The planner's view (the probe's state with throttle settings) reuses the probe's encoding
    with those settings, without replacing it; the plan is the one of the view parsed afresh."""
    import dataclasses

    from plbjax import parse_state
    from plbjax.sf import Session
    from plbjax.sf.replay import with_settings
    from plbjax.sf.replay.state.resident import settings_view

    doc, session = _small(), Session()
    state = parse_state(doc)
    first = session.encoded(state)
    assert session.encoded(state) is first
    throttles = {"GlobalMovementThrottleThreshold": 1, "GlobalMovementThrottleThresholdPercentage": 0}
    view = settings_view(state, throttles)
    seen = session.encoded(view)
    assert seen.problem is first.problem and seen.state.settings == parse_state(with_settings(doc, throttles)).settings
    assert session.encodings == 1 and session.encoded(state) is first  # the view did not replace the held one
    ours = session.plan(view, SearchConfig(**{**SEARCH.__dict__, "seed": 2}), phase="Balancing").actions
    theirs = plan(
        parse_state(with_settings(doc, throttles)), SearchConfig(**{**SEARCH.__dict__, "seed": 2}), phase="Balancing"
    ).actions
    assert ours == theirs and len(ours) <= 1
    other = dataclasses.replace(
        state, nodes=tuple(list(state.nodes))
    )  # equal, but not the same object: a structural change
    assert session.encoded(other) is not first and session.encodings == 2


def test_plbjax_generate_makes_a_timeline_that_plays(tmp_path):
    from plbjax.generate_cli import main

    out = tmp_path / "fd.yaml"
    assert main(["timeline", "fault-domain-failure", "--state", str(EXAMPLES / "small.yaml"), "-o", str(out)]) == 0
    timeline = yaml.safe_load(out.read_text())
    assert [e["Kind"] for e in timeline["Events"]][:1] == ["NodeDown"]
    assert parse_timeline(timeline, tmp_path).duration > 0


@pytest.mark.slow
def test_replay_sweep_ends_with_a_churn_vs_imbalance_summary_and_plot(tmp_path):
    """`plbjax-replay -m`: one replay per job, then summary.csv/.md/.png in the sweep directory with
    each job's CumulativeMovements (churn) against its TimeAveragedAvgStdDev; with `out=DIR` each
    job's record goes to DIR/<job> too."""
    timeline = yaml.safe_load((EXAMPLES / "timelines" / "small-fd-failure.yaml").read_text())
    timeline |= {"State": str(EXAMPLES / "small.yaml"), "Duration": 40}
    timeline["Events"] = [e for e in timeline["Events"] if e["Time"] <= 40]
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(timeline))
    sweep = tmp_path / "sweep"
    done = _replay_command(
        "-m",
        f"timeline={path}",
        "search.seed=0,1",
        "search.steps=300",
        "search.seconds=null",
        "search.chains=1",
        "search.tries=16",
        f"hydra.sweep.dir={sweep}",
        f"out={tmp_path / 'records'}",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name for p in (tmp_path / "records").iterdir()} == {"0", "1"}
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["search.seed"] for r in rows] == ["0", "1"]
    for job, row in zip(("0", "1"), rows):
        record = json.loads((sweep / job / "summary.json").read_text())
        assert int(row["movements"]) == record["CumulativeMovements"] and row["status"] == "ok"
        assert float(row["time_averaged_avg_std_dev"]) == pytest.approx(record["TimeAveragedAvgStdDev"])
        assert float(row["wall_seconds"]) == record["Seconds"] and int(row["max_violations"]) == record["MaxViolations"]
        assert f"search.seed={job}" in record["Provenance"]["Command"]  # the job's own overrides
        assert "search.seed=0,1" not in record["Provenance"]["Command"]
        assert (sweep / job / "series.csv").exists()
    assert (sweep / "summary.png").read_bytes()[:4] == b"\x89PNG" and (sweep / "summary.md").exists()


@pytest.mark.parametrize("kind", ["diurnal", "fault-domain-failure", "rolling-upgrade", "scale-out", "hot-service"])
def test_plbjax_generate_makes_each_kind_of_timeline(tmp_path, kind):
    """`plbjax-generate timeline KIND`: a diurnal load, a fault domain failing and returning, a
    rolling upgrade, a scale-out by a node type, a hot service; valid, its State relative to it."""
    from plbjax.generate_cli import main

    out = tmp_path / "sub" / f"{kind}.json"
    out.parent.mkdir()
    state_path = EXAMPLES / "small.yaml"
    assert main(["timeline", kind, "--state", str(state_path), "--seed", "2", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    timeline = load_timeline(out)
    assert timeline.state == load_state(state_path) and timeline.events
    kinds = [e["Kind"] for e in doc["Events"]]
    small = load_state(state_path).document
    if kind == "diurnal":
        assert set(kinds) == {"LoadReport"} and doc["Duration"] == 86400
        cpu = [e["Loads"]["CPU"] for e in doc["Events"] if e["PartitionId"] == 0 and e["Role"] == "Primary"]
        assert max(cpu) > 10 * 1.3 and min(cpu) < 10 * 0.7  # a daily wave around the default load 10
    elif kind == "fault-domain-failure":
        down = [e["NodeName"] for e in doc["Events"] if e["Kind"] == "NodeDown"]
        up = [e["NodeName"] for e in doc["Events"] if e["Kind"] == "NodeUp"]
        assert down == up and len({n["FaultDomain"] for n in small["Nodes"] if n["NodeName"] in down}) == 1
        assert len(down) == sum(n["FaultDomain"] == small["Nodes"][0]["FaultDomain"] for n in small["Nodes"])
    elif kind == "rolling-upgrade":
        done = [e["UpgradeDomain"] for e in doc["Events"] if e["Kind"] == "UpgradeDomainCompleted"]
        assert kinds[0] == "UpgradeStarted" and kinds[-1] == "UpgradeCompleted" and done == ["UD0", "UD1", "UD2"]
        assert {e["Intent"] for e in doc["Events"] if e["Kind"] == "NodeDisabled"} == {"Restart"}
    elif kind == "scale-out":
        added = [e["Node"] for e in doc["Events"] if e["Kind"] == "NodeAdded"]
        assert len(added) == 3 and len({n["NodeType"] for n in added}) == 1
    else:
        services = {e["ServiceName"] for e in doc["Events"]}
        assert set(kinds) == {"LoadReport"} and len(services) == 1


def test_readme_runs_a_bundled_example():
    """The README names a `plbjax-replay` command on one of the two bundled examples."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    bundled = sorted(p.name for p in (EXAMPLES / "timelines").glob("*.yaml"))
    assert len(bundled) >= 2
    assert any(f"plbjax-replay timeline=examples/timelines/{name}" in readme for name in bundled)


def test_plbjax_generate_sets_a_scenarios_options_and_refuses_unknown_ones(tmp_path, capsys):
    from plbjax.generate_cli import main

    out = tmp_path / "fd.yaml"
    state = str(EXAMPLES / "small.yaml")
    assert (
        main(["timeline", "fault-domain-failure", "--state", state, "-p", "at=5", "-p", "down_for=20", "-o", str(out)])
        == 0
    )
    doc = yaml.safe_load(out.read_text())
    assert sorted({e["Time"] for e in doc["Events"]}) == [5, 25] and isinstance(doc["State"], str)
    assert load_timeline(out).state == load_state(state)
    for bad, message in (
        (["-p", "nope=1"], "--param 'nope=1': not NAME=VALUE"),
        (["-p", "at=soon"], "--param at: 'soon' is not a number"),
    ):
        with pytest.raises(SystemExit) as exited:
            main(["timeline", "fault-domain-failure", "--state", state, *bad])
        assert exited.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["timeline", "hot-service", "--state", state, "-p", "service=fabric:/Nope"])
    assert exited.value.code == 2 and "service: 'fabric:/Nope'" in capsys.readouterr().err


def test_replay_config_overrides_the_initial_settings_and_thresholds_for_sweeps():
    """`+settings.<SF name>=V` and `balancing.threshold=V` (what replay sweeps vary) replace the
    timeline's initial Settings and every metric's threshold; a bad setting is bad input naming it."""
    from plbjax.cli import with_overrides
    from plbjax.config import BalancingConfig, ReplayConfig
    from plbjax.errors import BadInput
    from plbjax.sf.replay import load_timeline

    timeline = load_timeline(EXAMPLES / "timelines" / "small-fd-failure.yaml")
    config = ReplayConfig(
        timeline="x", settings={"minloadbalancinginterval": 10}, balancing=BalancingConfig(threshold=1.5)
    )
    state = with_overrides(timeline, config).state
    assert state.document["Settings"]["minloadbalancinginterval"] == 10 == state.settings["MinLoadBalancingInterval"]
    given = state.document["Settings"]
    assert not {k for k in given if k.lower() == "minloadbalancinginterval"} - {"minloadbalancinginterval"}
    assert set(state.balancing_thresholds.values()) == {1.5}
    assert with_overrides(timeline, ReplayConfig(timeline="x")).state is timeline.state
    with pytest.raises(BadInput, match="Settings.Bogus"):
        with_overrides(timeline, ReplayConfig(timeline="x", settings={"Bogus": 1}))


@pytest.mark.slow
def test_an_interrupted_replay_command_writes_its_record_up_to_there_and_exits_130(tmp_path):
    """SIGINT once progress shows: the simulated clock stops, every output is written up to the time
    reached, summary.json says Interrupted, the exit status is 128 + SIGINT."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from plbjax.cli import replay_main; replay_main()",
            f"timeline={EXAMPLES / 'timelines' / 'small-diurnal.yaml'}",
            f"out={tmp_path / 'r'}",
            "search.steps=300",
            "search.seconds=null",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    progress = process.stderr.readline()
    while progress and "plbjax-replay: simulated" not in progress:
        progress = process.stderr.readline()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, err
    assert "simulated h per wall minute" in progress and "rounds:" in progress
    result = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert result["Interrupted"] is True and 0 < result["SimulatedSeconds"] < 86400
    times = [float(r["Time"]) for r in csv.DictReader(open(tmp_path / "r" / "series.csv"))]
    assert times and max(times) <= result["SimulatedSeconds"]
    assert "interrupted" in out


def test_max_min_ratio_is_per_metric_over_the_whole_cluster_also_when_balancing_per_node_type():
    """timeline.md §3: a MaxMinRatio.<metric> column for every metric, over the whole cluster,
    whether or not SeparateBalancingStrategyPerNodeType splits the balance per node type."""
    from plbjax.sf.replay import with_settings

    doc = _small()
    whole = EngineProbe()(parse_state(doc), frozenset()).max_min_ratio
    separated = parse_state(with_settings(doc, {"SeparateBalancingStrategyPerNodeType": True}))
    separate = EngineProbe()(separated, frozenset())
    assert {m for m, t in separate.imbalanced} and all(t is not None for _, t in separate.imbalanced)
    assert separate.max_min_ratio == whole and set(whole) == set(load_state(EXAMPLES / "small.yaml").metric_names())
