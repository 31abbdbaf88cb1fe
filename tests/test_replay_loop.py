"""The PLB loop on a simulated clock with fake planners and probes (plbjax.sf.replay.loop): the
record, determinism, timings, progress and a stopped replay. Its fakes serve the other replay tests."""

from __future__ import annotations

import copy
import io
import random
import statistics
from dataclasses import dataclass, field

from plbjax import parse_state
from plbjax.sf.replay import summary
from plbjax.sf.replay.loop import replay
from plbjax.sf.replay.progress import ReplayProgress
from plbjax.sf.replay.timeline import parse_timeline, settings_of
from plbjax.sf.replay.types import PARTS, Needs, PlannedRound

SERVICE = "fabric:/App/Svc"


def cluster(
    layout: dict[str, int],
    settings: dict,
    node_types: dict[str, str] | None = None,
    intervals: dict[str, float] | None = None,
) -> dict:
    """Nodes named in `layout` (in fault/upgrade domains of their own), one stateless service with
    single-instance partitions p0, p1, ... placed `layout[node]` per node."""
    node_types = node_types or {}
    nodes = [
        {"NodeName": n, "FaultDomain": f"fd:/dc0/r{i}", "UpgradeDomain": f"UD{i}"}
        | ({"NodeType": node_types[n]} if n in node_types else {})
        for i, n in enumerate(layout)
    ]
    types = [
        {"Name": t, "PlacementAndLoadBalancingOverrides": {"MinLoadBalancingIntervalPerNodeType": iv}}
        for t, iv in (intervals or {}).items()
    ]
    partitions, k = [], 0
    for name, count in layout.items():
        for _ in range(count):
            partitions.append(
                {
                    "ServiceName": SERVICE,
                    "PartitionId": f"p{k}",
                    "Replicas": [{"ReplicaId": f"r{k}", "Role": "Instance", "NodeName": name}],
                }
            )
            k += 1
    service = {
        "ServiceName": SERVICE,
        "ServiceTypeName": "SvcType",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "Metrics": [{"Name": "CPU", "Weight": "High", "DefaultLoad": 1}],
    }
    doc = {
        "SchemaVersion": 1,
        "Settings": {
            "PLBRefreshGap": 1,
            "MinPlacementInterval": 1,
            "MinConstraintCheckInterval": 1,
            "MinLoadBalancingInterval": 5,
        }
        | settings,
        "NodeTypes": types,
        "Nodes": nodes,
        "Services": [service],
        "Partitions": partitions,
    }
    parse_state(doc)
    return doc


def counts(doc: dict) -> dict[str, int]:
    up = {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus", "Up") == "Up"}
    out = dict.fromkeys(sorted(up), 0)
    for p in doc["Partitions"]:
        for r in p["Replicas"]:
            if r["NodeName"] in out:
                out[r["NodeName"]] += 1
    return out


def groups(doc: dict) -> dict[str | None, list[str]]:
    """Node names per node type when balancing is separate per node type, else all under None."""
    up = counts(doc)
    if not settings_of(doc)["SeparateBalancingStrategyPerNodeType"]:
        return {None: list(up)}
    out: dict[str | None, list[str]] = {}
    for n in doc["Nodes"]:
        if n["NodeName"] in up:
            out.setdefault(n.get("NodeType"), []).append(n["NodeName"])
    return out


def probe(state_doc: dict, frozen: frozenset) -> Needs:
    """Count per node; imbalanced when max - min > 1 (per node type when separate); CPU is
    imbalanced while some replica reports more than 50."""
    load = counts(state_doc)
    unplaced = sum(
        1 - len(p["Replicas"]) for p in state_doc["Partitions"] if (SERVICE, str(p["PartitionId"])) not in frozen
    )
    imbalanced = {
        ("Count", t)
        for t, names in groups(state_doc).items()
        if max(load[n] for n in names) - min(load[n] for n in names) > 1
    }
    if any(r.get("Loads", {}).get("CPU", 0) > 50 for p in state_doc["Partitions"] for r in p["Replicas"]):
        imbalanced.add(("CPU", None))
    values = list(load.values())
    return Needs(
        unplaced,
        0,
        frozenset(imbalanced),
        statistics.pstdev(values),
        {"Count": max(values) / min(values) if min(values) else float("inf")},
        {n: {"Count": float(c)} for n, c in load.items()},
    )


@dataclass
class OneMove:
    """Placement adds every missing instance on the least loaded node; Balancing moves one instance
    from the most to the least loaded node (of `node_type`), never back to a History node."""

    calls: list[tuple[str, str | None, dict, frozenset]] = field(default_factory=list)
    pick: random.Random | None = None

    def __call__(self, state_doc, phase, node_type, seed, frozen, effort=None):
        self.calls.append((phase, node_type, state_doc, frozen))
        load, history = counts(state_doc), {k: list(v) for k, v in state_doc.get("History", {}).items()}
        if phase == "Placement":
            actions = []
            for p in state_doc["Partitions"]:
                if not p["Replicas"] and (SERVICE, str(p["PartitionId"])) not in frozen:
                    target = min(load, key=lambda n: (load[n], n))
                    load[target] += 1
                    actions.append(action(p, None, "AddInstance", None, target))
            return planned(actions, history)
        names = groups(state_doc)[node_type]
        order = sorted(names, key=lambda n: (load[n], n))
        if self.pick is not None:
            self.pick.seed(seed)
            self.pick.shuffle(order[:-1])
        source = order[-1]
        for p in state_doc["Partitions"]:
            r = p["Replicas"][0] if p["Replicas"] else None
            if r and r["NodeName"] == source and (SERVICE, str(p["PartitionId"])) not in frozen:
                target = next((n for n in order if n not in history.get(r["ReplicaId"], []) and n != source), None)
                if target is not None and load[target] + 1 < load[source]:
                    history.setdefault(r["ReplicaId"], []).append(source)
                    return planned([action(p, r["ReplicaId"], "MoveInstance", source, target)], history)
        return planned([], history)


def planned(actions: list[dict], history: dict[str, list[str]]) -> PlannedRound:
    """A fake planner's round: its actions and History."""
    return PlannedRound(tuple(actions), {k: tuple(v) for k, v in history.items()})


def action(partition: dict, rid, kind: str, source, target) -> dict:
    return {
        "ServiceName": SERVICE,
        "PartitionId": partition["PartitionId"],
        "ReplicaId": rid,
        "Action": kind,
        "SourceNode": source,
        "TargetNode": target,
    }


def ran(result, phase: str | None = None) -> list[tuple[float, str, str | None]]:
    return [
        (r.time, r.phase, r.node_type)
        for r in result.rows
        if r.trigger != "Event" and (phase is None or r.phase == phase)
    ]


def play(state: dict, events=(), planner=None, duration=None, seed=0, **extra):
    doc = {"State": state, "Events": list(events)} | ({"Duration": duration} if duration is not None else {}) | extra
    return replay(parse_timeline(doc), planner or OneMove(), probe, seed)


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
