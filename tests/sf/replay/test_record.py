"""A replay's output directory (plbjax.sf.replay.record.writing)."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
from replay_fakes import OneMove, cluster, probe

from plbjax import parse_state
from plbjax.sf.replay.record.writing import COLUMNS, PLOTS, SUMMARY_KEYS, story, time_average, write_outputs
from plbjax.sf.replay.rounds.loop import replay
from plbjax.sf.replay.timeline.reading import parse_timeline
from plbjax.sf.replay.types import Story


@pytest.fixture(scope="module")
def played():
    """The rounds' record, without the cluster's story (test_story.py tells it)."""
    state = cluster({"N0": 5, "N1": 0, "N2": 0}, {})
    events = [
        {"Time": 7.5, "Kind": "ReplicaFailed", "ReplicaId": "r4"},
        {"Time": 17, "Kind": "NodeDown", "NodeName": "N2"},
    ]
    played = replay(parse_timeline({"State": state, "Events": events, "Duration": 25}), OneMove(), probe, 1)
    return dataclasses.replace(played, story=Story())


def test_output_files(played, tmp_path):
    out = write_outputs(played, tmp_path / "run")
    with open(out / "series.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    assert header == [*COLUMNS, "MaxMinRatio.Count", "What", "Held"]
    series = json.loads((out / "series.json").read_text())
    assert [r["Time"] for r in series] == [float(r["Time"]) for r in rows]
    assert [(r["Trigger"], r["Phase"]) for r in series] == [
        ("Balancing", "Balancing"),
        ("Event", ""),
        ("Placement", "Placement"),
        ("Balancing", "Balancing"),
        ("Event", ""),
        ("Placement", "Placement"),
    ]
    assert series[1]["Unplaced"] == 1 and series[2]["Adds"] == 1 and series[-1]["MaxMinRatio.Count"] == 1.5
    assert series[0]["ImbalancedMetrics"] == "Count" and series[-1]["CumulativeMovements"] == 2
    assert [r["What"] for r in series] == [
        "Balancing: 1 move",
        "ReplicaFailed r4",
        "Placement: 1 add",
        "Balancing: 1 move",
        "NodeDown N2",
        "Placement: 1 add",
    ]
    assert series[0]["MaxMinRatio.Count"] == "inf" and rows[0]["MaxMinRatio.Count"] == "inf"  # N2 empty: infinite
    actions = [json.loads(line) for line in (out / "actions.jsonl").read_text().splitlines()]
    assert [(a["Time"], a["Phase"], a["Action"]) for a in actions] == [
        (5, "Balancing", "MoveInstance"),
        (8, "Placement", "AddInstance"),
        (10, "Balancing", "MoveInstance"),
        (17, "Placement", "AddInstance"),
    ]
    parse_state(json.loads((out / "final-state.json").read_text()))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["Rounds"] == {"Balancing": 2, "Placement": 2}
    assert summary["Actions"] == {"MoveInstance": 2, "AddInstance": 2}
    assert summary["CumulativeMovements"] == 2 and summary["SimulatedSeconds"] == 25
    assert summary["MaxViolations"] == 0 and summary["FinalUnplaced"] == 0  # N2's instance placed again
    assert list(summary) == list(SUMMARY_KEYS)
    for name in PLOTS:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_the_story_is_told_in_sentences(played):
    """The end of a run (plbjax-replay's last lines): rounds, actions, imbalance, violations, unplaced."""
    assert story(played) == [
        f"Replayed 25 simulated s in {played.seconds:.1f} s.",
        "The PLB ran 4 rounds: 2 Balancing, 2 Placement.",
        "They issued 4 actions (2 MoveInstance, 2 AddInstance); 2 of them were movements (moves and swaps).",
        "AvgStdDev went from 1.6997 at 5 s to 0.5000 at the end, 0.7029 on average over time.",
        "No replica broke a hard constraint.",
        "Every replica placed at the end.",
    ]


def test_event_rows_name_their_events():
    """`describe`: up to NAMED events of a kind by subject, more counted; kinds in order of appearance."""
    from plbjax.sf.replay.timeline.events import Event, describe

    loads = [Event.read(1, "LoadReport", {"ServiceName": f"s{i}", "Loads": {}}) for i in range(5)]
    downs = [Event.read(1, "NodeDown", {"NodeName": n}) for n in ("N0", "N3")]
    assert describe([downs[0], *loads, downs[1]]) == (
        ("NodeDown", "NodeDown N0, N3"),
        ("LoadReport", "5 LoadReport events"),
    )
    assert describe([Event.read(1, "UpgradeCompleted")]) == (("UpgradeCompleted", "UpgradeCompleted"),)
    same = [Event.read(1, "LoadReport", {"ServiceName": "s", "Loads": {}})] * 2
    assert describe(same) == (("LoadReport", "2 LoadReport events (s)"),)


def test_a_quiet_replay_still_writes_every_file(tmp_path):
    state = cluster({"N0": 1, "N1": 1}, {})
    quiet = replay(parse_timeline({"State": state, "Events": []}), OneMove(), probe, 0)
    assert quiet.rows == () and quiet.duration == 5
    quiet = dataclasses.replace(quiet, story=Story())  # no Start row either
    out = write_outputs(quiet, tmp_path)
    assert (out / "series.csv").read_text().splitlines() == [",".join(COLUMNS)]
    assert json.loads((out / "summary.json").read_text())["Rounds"] == {}
    assert all((out / name).exists() for name in PLOTS)


def test_time_average():
    assert time_average([(0, 2.0), (5, 0.0)], 10) == 1.0
    assert time_average([(2, 3.0)], 2) == 3.0
    assert time_average([], 10) == 0.0


def test_node_loads_of_a_large_cluster_stay_a_readable_size(tmp_path):
    """Past MAX_LABELLED_NODES nodes the heatmap's rows are not labelled and its height is capped."""
    import matplotlib.image

    from plbjax.sf.replay.record.writing import MAX_LABELLED_NODES, plot_node_loads

    state = cluster({f"N{i:03d}": i % 3 for i in range(3 * MAX_LABELLED_NODES)}, {})
    events = [{"Time": 1, "Kind": "ReplicaFailed", "ReplicaId": "r0"}]
    played = replay(parse_timeline({"State": state, "Events": events, "Duration": 3}), OneMove(), probe, 0)
    plot_node_loads(played, tmp_path / "loads.png")
    height, width = matplotlib.image.imread(tmp_path / "loads.png").shape[:2]
    assert height <= (0.3 * MAX_LABELLED_NODES + 2.0 + 1.5) * 110 + 1


# timeline.md §3, word for word.
SECTION_3_COLUMNS = (
    "Time, Trigger, Phase, NodeType, Actions, Moves, Swaps, Adds, Drops, Promotions, CumulativeMovements, "
    "AvgStdDev, ImbalancedMetrics, Violations, Unplaced"
).split(", ")
SECTION_3_SUMMARY = [
    "Rounds",
    "Actions",
    "CumulativeMovements",
    "TimeAveragedAvgStdDev",
    "MaxViolations",
    "FinalUnplaced",
    "Seconds",
    "SimulatedSeconds",
    "Interrupted",
]
SECTION_3_FILES = {"series.csv", "series.json", "actions.jsonl", "final-state.json", "summary.json"}


def test_output_files_and_columns_are_exactly_timeline_md_section_3(tmp_path):
    """series.csv: §3's columns in §3's order, then MaxMinRatio.<metric> per metric (sorted);
    series.json the same rows with the same keys; NodeType set on per-node-type balancing rows;
    actions.jsonl {Time, Phase, NodeType?, ...}; summary.json §3's keys, then CancelledActions."""
    state = cluster(
        {"A0": 8, "A1": 0, "B0": 0, "B1": 0},
        {"SeparateBalancingStrategyPerNodeType": True, "PLBRefreshGap": 0.1},
        node_types={"A0": "A", "A1": "A", "B0": "B", "B1": "B"},
    )
    events = [{"Time": 9.95, "Kind": "ReplicaFailed", "ReplicaId": "r7"}]  # placed at 10: balancing at 10.1
    played = replay(parse_timeline({"State": state, "Events": events, "Duration": 10.15}), OneMove(), probe, 0)
    out = write_outputs(played, tmp_path)
    assert SECTION_3_FILES | set(PLOTS) <= {p.name for p in out.iterdir()}
    assert all(name.endswith(".png") for name in PLOTS)
    header = (out / "series.csv").read_text().splitlines()[0].split(",")
    assert header == [*SECTION_3_COLUMNS, "MaxMinRatio.Count", "What", "Held"] and list(COLUMNS) == SECTION_3_COLUMNS
    rows = json.loads((out / "series.json").read_text())
    assert all(list(r) == header for r in rows)
    with open(out / "series.csv", newline="") as f:
        assert [r["Time"] for r in csv.DictReader(f)] == [str(r["Time"]) for r in rows]
    by_trigger = {(r["Trigger"], r["Phase"], r["NodeType"]) for r in rows}
    assert ("Balancing", "Balancing", "A") in by_trigger and ("Event", "", "") in by_trigger
    assert 10.1 in [r["Time"] for r in rows]  # not 10.100000000000001
    actions = [json.loads(line) for line in (out / "actions.jsonl").read_text().splitlines()]
    assert actions and all(list(a)[:2] == ["Time", "Phase"] for a in actions)
    assert all(a.get("NodeType") == "A" for a in actions if a["Phase"] == "Balancing")
    assert all("NodeType" not in a for a in actions if a["Phase"] != "Balancing")
    story_keys = ["Initial", "ClusterEvents", "LoadReports", "Held"]
    summary_keys = [*SECTION_3_SUMMARY, "CancelledActions", "Version", *story_keys]
    assert list(json.loads((out / "summary.json").read_text())) == summary_keys
    assert json.loads((out / "summary.json").read_text())["SimulatedSeconds"] == 10.15
