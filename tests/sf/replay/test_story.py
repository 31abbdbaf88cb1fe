"""The cluster's story in a replay's record (plbjax.sf.replay.record.narrative, record): the state at time 0,
every event named, load reports by service, and the stretches SF's scheduler held a phase back."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
from replay_fakes import SERVICE, OneMove, cluster, play, probe

from plbjax.sf import Phase
from plbjax.sf.replay.record.writing import story, summary, write_outputs
from plbjax.sf.replay.types import ClusterEvent, Hold, LoadChange, Needs, Replay, Story

NODES = ("N0", "N1", "N2", "N3", "N4")


@pytest.fixture(scope="module")
def played():
    """The rounds of a small replay (five nodes, one NodeDown event per node at 30 s)."""
    events = [{"Time": 30, "Kind": "NodeDown", "NodeName": n} for n in NODES[1:]]
    return play(cluster(dict.fromkeys(NODES, 1) | {"N0": 6}, {}), events, duration=60)


def _with(played: Replay, **story) -> Replay:
    return dataclasses.replace(played, story=Story(**story))


def test_the_record_starts_with_the_state_at_time_0(played, tmp_path):
    """A Start row at 0 (series.csv, summary.json's Initial), the summary's "from X at 0 s", and the
    time average over the whole simulated time."""
    initial = Needs(avg_std_dev=4.0, imbalanced=frozenset({("Count", None)}), node_loads={"N0": {"Count": 6.0}})
    record = _with(played, initial=initial)
    out = write_outputs(record, tmp_path)
    with open(out / "series.csv", newline="") as f:
        first = next(csv.DictReader(f))
    assert (first["Time"], first["Trigger"], first["What"], first["AvgStdDev"]) == (
        "0.0",
        "Start",
        "the initial state",
        "4.0",
    )
    result = json.loads((out / "summary.json").read_text())
    assert result["Initial"] == {"AvgStdDev": 4.0, "ImbalancedMetrics": ["Count"], "Violations": 0, "Unplaced": 0}
    assert "AvgStdDev went from 4.0000 at 0 s (the initial state) to" in story(record)[3]
    first_round = played.rows[0].time
    assert result["TimeAveragedAvgStdDev"] > summary(played)["TimeAveragedAvgStdDev"] and first_round > 0


def test_every_event_is_named_and_load_reports_are_told_by_service(played):
    """Every node of a NodeDown time is named (the loop's own description counts past three), and
    each service's load reports say how much a report carried, its change, and when it ran hottest."""
    events = tuple(ClusterEvent(30.0, "NodeDown", n) for n in NODES[1:])
    loads = (
        LoadChange(10.0, SERVICE, 2, {"CPU": 20.0}),
        LoadChange(20.0, SERVICE, 2, {"CPU": 50.0}),
        LoadChange(20.0, "fabric:/App/Other", 1, {"CPU": 3.0, "Memory": 100.0}),
        LoadChange(40.0, SERVICE, 2, {"CPU": 10.0}),
    )
    record = _with(played, events=events, loads=loads)
    rows = {(r["Time"], r["Trigger"]): r["What"] for r in _series(record)}
    assert rows[30.0, "Event"] == "NodeDown N1, N2, N3, N4"
    assert [r.events for r in played.rows if r.time == 30 and r.trigger == "Event"] == [
        (("NodeDown", "4 NodeDown events"),)
    ]
    result = summary(record)
    assert result["ClusterEvents"] == [{"Time": 30.0, "Kind": "NodeDown", "Subjects": ["N1", "N2", "N3", "N4"]}]
    orders = result["LoadReports"][0]
    assert (orders["Service"], orders["Reports"], orders["Times"], orders["From"], orders["To"]) == (
        SERVICE,
        6,
        3,
        10,
        40,
    )
    assert orders["Metrics"]["CPU"] == {
        "Hottest": {"Time": 20.0, "PerReport": 25.0},
        "Coolest": {"Time": 40.0, "PerReport": 5.0},
    }
    told = story(record)
    assert "Cluster events: 30 s NodeDown N1, N2, N3, N4." in told
    assert (
        f"Load reports: {SERVICE}: 6 reports at 3 times (10-40 s), hottest at 20 s (CPU 25 a report, 5x its "
        "coolest, at 40 s); fabric:/App/Other: 1 reports at 1 time (20 s), CPU 3 a report."
    ) in told


def test_load_report_rows_name_each_service_and_its_change():
    from plbjax.sf.replay.record.narrative import event_texts

    loads = (
        LoadChange(10.0, "a", 2, {"CPU": 20.0}),
        LoadChange(20.0, "a", 2, {"CPU": 30.0}),
        LoadChange(20.0, "b", 1, {"M": 1.0}),
    )
    assert event_texts(Story(loads=loads)) == {
        10.0: "LoadReport a 2 reports (CPU 10 a report)",
        20.0: "LoadReport a 2 reports (CPU 15 +50% a report); LoadReport b 1 report (M 1 a report)",
    }


def test_held_stretches_are_in_the_series_the_summary_and_its_sentences(played):
    """Each hold: the series' Held column on the rows it covers, summary.json's Held with what the
    phase had to do, and a sentence naming the setting and until when."""
    holds = (
        Hold(Phase.BALANCING, 10.0, 20.0, "BalancingDelayAfterNodeDown", "SF waits"),
        Hold(Phase.CONSTRAINT_CHECK, 30.0, 60.0, "ConstraintFixPartialDelayAfterNodeDown", "SF skips", open=True),
    )
    violating = [
        dataclasses.replace(r, needs=dataclasses.replace(r.needs, violations=2, violations_by_kind={"FaultDomain": 2}))
        for r in played.rows
    ]
    record = dataclasses.replace(_with(played, holds=holds), rows=tuple(violating))
    held = {(r["Time"], r["Trigger"]): r["Held"] for r in _series(record)}
    assert held[10.0, "Balancing"] == held[15.0, "Balancing"] == "Balancing: BalancingDelayAfterNodeDown until 20 s"
    assert held[5.0, "Balancing"] == held[20.0, "Balancing"] == ""
    assert held[30.0, "Event"] == "ConstraintCheck: ConstraintFixPartialDelayAfterNodeDown until the end"
    entries = summary(record)["Held"]
    assert entries[1] == {
        "Phase": "ConstraintCheck",
        "Since": 30.0,
        "Until": 60.0,
        "ToTheEnd": True,
        "Setting": "ConstraintFixPartialDelayAfterNodeDown",
        "Why": "SF skips",
        "Violations": 2,
        "ViolationsByKind": {"FaultDomain": 2},
    }
    told = story(record)
    assert (
        "ConstraintCheck held 30-60 s to the end with 2 replicas breaking FaultDomain: ConstraintFixPartialDelayAfterNodeDown: SF skips."
        in told
    )
    assert any(
        line == "Balancing held 10-20 s with Count imbalanced: BalancingDelayAfterNodeDown: SF waits." for line in told
    )


def _series(record) -> list[dict]:
    from plbjax.sf.replay.record.writing import series

    return series(record)


def test_a_played_node_failure_tells_its_story():
    """Through the loop: the state at 0, the events, and the balancing delays after a node went down
    and came back (BalancingDelayAfterNodeDown/NewNode, SF's defaults of 120 s)."""
    events = [{"Time": 30, "Kind": "NodeDown", "NodeName": "N2"}, {"Time": 200, "Kind": "NodeUp", "NodeName": "N2"}]
    record = play(cluster({"N0": 6, "N1": 0, "N2": 0}, {}), events, OneMove(), duration=400)
    assert record.story.initial == probe(cluster({"N0": 6, "N1": 0, "N2": 0}, {}), frozenset())
    assert [(e.time, e.kind, e.subject) for e in record.story.events] == [(30, "NodeDown", "N2"), (200, "NodeUp", "N2")]
    delays = [(h.setting, h.until) for h in record.story.holds if h.setting.startswith("BalancingDelay")]
    assert ("BalancingDelayAfterNewNode", 320.0) in delays


def test_stretches_held_for_one_reason_make_one_sentence():
    from plbjax.sf.replay.record.narrative import SPANS, sentences

    why = ("PLBScheduler::ThrottleBalancingForSmallStdDevChange", "nothing changed")
    holds = tuple(Hold(Phase.BALANCING, 100.0 * k, 100.0 * k + 50, *why) for k in range(SPANS + 1))
    told = sentences(Story(holds=holds), ())
    assert told == [
        "Balancing held 5 times, 250 s in all (0-50 s, 100-150 s, 200-250 s, 300-350 s, ...): "
        "PLBScheduler::ThrottleBalancingForSmallStdDevChange: nothing changed."
    ]
