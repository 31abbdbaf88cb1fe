"""The PLB loop on a simulated clock with fake planners and probes (plbjax.sf.replay.rounds.loop): the
record, determinism, timings, progress and a stopped replay. Its fakes serve the other replay tests."""

from __future__ import annotations

import copy
import io
import random

from replay_fakes import SERVICE, OneMove, cluster, counts, play, probe, ran

from plbjax.sf.replay import summary
from plbjax.sf.replay.record.progress import ReplayProgress
from plbjax.sf.replay.rounds.loop import replay
from plbjax.sf.replay.timeline.reading import parse_timeline
from plbjax.sf.replay.types import PARTS


def test_same_timeline_and_seed_give_the_same_series():
    state = cluster({"N0": 9, "N1": 0, "N2": 1, "N3": 0}, {})
    events = [
        {"Time": 6, "Kind": "ReplicaFailed", "ReplicaId": "r3"},
        {"Time": 11, "Kind": "NodeDown", "NodeName": "N2"},
    ]
    first = play(state, events, planner=OneMove(pick=random.Random()), duration=30, seed=4)
    again = play(state, events, planner=OneMove(pick=random.Random()), duration=30, seed=4)
    assert first.rows == again.rows and first.actions == again.actions and first.final_state == again.final_state


def test_timings_and_progress():
    state = cluster({"N0": 3, "N1": 0}, {})
    reported = []
    doc = {"State": state, "Events": [{"Time": 2, "Kind": "ReplicaFailed", "ReplicaId": "r1"}], "Duration": 12}
    result = replay(
        parse_timeline(doc),
        OneMove(),
        probe,
        0,
        progress=lambda now, timings, rounds, moved: reported.append((now, dict(timings), dict(rounds))),
    )
    assert set(result.timings) == set(PARTS) and all(v >= 0 for v in result.timings.values())
    assert sum(result.timings.values()) <= result.seconds + 1e-3
    times = [now for now, _, _ in reported]
    assert times == sorted(times) and times[-1] <= 12 and 2 in times
    assert reported[-1][2] == result.rounds and all(set(t) == set(PARTS) for _, t, _ in reported)


def test_replay_does_not_change_its_timeline():
    state = cluster({"N0": 4, "N1": 0, "N2": 0}, {})
    doc = {
        "State": state,
        "Events": [
            {"Time": 1, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
            {"Time": 2, "Kind": "LoadReport", "ServiceName": SERVICE, "ReplicaId": "r1", "Loads": {"CPU": 3}},
            {"Time": 3, "Kind": "NodeDown", "NodeName": "N1"},
        ],
        "Duration": 12,
    }
    before = copy.deepcopy(doc)
    timeline = parse_timeline(doc)
    kept = copy.deepcopy(timeline)
    result = replay(timeline, OneMove(), probe, 0)
    assert result.actions and doc == before and timeline == kept


def test_a_fault_domain_that_fails_and_returns_gets_its_share_back_through_balancing():
    """N0 and N1 (one fault domain) go down at 10: their four instances are placed again on N2 and
    N3 by the placement round at 10 (after the events at 10); they come back empty at 30; after BalancingDelayAfterNewNode
    (SF's 120 s) balancing moves load back onto them until the domain holds its share again."""
    state = cluster({"N0": 2, "N1": 2, "N2": 2, "N3": 2}, {})
    for n in state["Nodes"][:2]:
        n["FaultDomain"] = "fd:/dc0/r0"
    events = [
        {"Time": t, "Kind": kind, "NodeName": n} for t, kind in ((10, "NodeDown"), (30, "NodeUp")) for n in ("N0", "N1")
    ]
    result = play(state, events, duration=200)
    assert ran(result, "Placement") == [(10, "Placement", None)]  # the round at 10 follows the events at 10
    assert counts(result.final_state) == {"N0": 2, "N1": 2, "N2": 2, "N3": 2}
    back = [(a["Time"], a["TargetNode"]) for a in result.actions if a["Phase"] == "Balancing"]
    assert back and all(t >= 30 + 120 for t, _ in back) and {n for _, n in back} == {"N0", "N1"}
    assert len(back) == 4  # exactly the share the domain lost


def test_a_stopped_replay_ends_where_it_stopped_and_says_so():
    """The clock stops at the round whose search was cut short (its plan is not issued); the record
    up to there is kept and the summary says Interrupted with the simulated time reached."""
    state = cluster({"N0": 6, "N1": 0, "N2": 0}, {})
    planner = OneMove()
    stop = lambda: len(planner.calls) >= 2
    result = replay(parse_timeline({"State": state, "Events": [], "Duration": 3600}), planner, probe, 0, stop=stop)
    assert result.interrupted and result.duration == 10
    assert [a["Time"] for a in result.actions] == [5]  # the plan of 10 was not issued
    assert all(r.time <= 10 for r in result.rows)
    assert summary(result)["Interrupted"] is True and summary(result)["SimulatedSeconds"] == 10
    whole = replay(parse_timeline({"State": state, "Events": [], "Duration": 20}), OneMove(), probe, 0)
    assert not whole.interrupted and summary(whole)["Interrupted"] is False


def test_progress_line_says_time_rounds_movements_speed_and_each_parts_share():
    shown = io.StringIO()
    progress = ReplayProgress(7200, quiet_for=0, every=0, stream=shown)
    progress(3600, {"events": 1.0, "search": 3.0}, {"Balancing": 12, "Placement": 3}, 5)
    line = shown.getvalue()
    assert "simulated 3,600 s of 7,200 (50%)" in line and "Balancing 12, Placement 3" in line
    assert "5 movement(s)" in line and "simulated h per wall minute" in line
    assert line.rstrip().endswith("events 25%, search 75%")
    assert "1.00 simulated h per wall minute;" in progress.line(3600, {}, 0, 60.0, {"search": 1.0})
