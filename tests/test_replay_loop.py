"""The PLB loop on a simulated clock with fake planners and probes (plbjax.sf.replay.loop)."""

from __future__ import annotations

import copy
import random
import statistics
from dataclasses import dataclass, field

import pytest

from plbjax import parse_state
from plbjax.sf.replay.loop import replay
from plbjax.sf.replay.scheduler import last_check_before, tick_at_or_after
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

    def __call__(self, state_doc, phase, node_type, seed, frozen):
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


def test_timer_helpers():
    assert tick_at_or_after(2.5, 1) == 3 and tick_at_or_after(3.0, 1) == 3 and tick_at_or_after(0.1, 0.1) == 0.1
    assert last_check_before(0, 1, 1, since=1, until=8) == 7  # restarts at 1..7
    assert last_check_before(0, 5, 1, since=1, until=12) == 10  # restarts at 5 and 10
    assert last_check_before(0, 5, 1, since=1, until=5) == 0  # not expired before 5


def test_placement_and_balancing_timers_run_in_sfs_order():
    """A 1-s placement timer and a 5-s balancing timer: balancing runs every 5 s while the cluster
    is imbalanced, the first one interval after the start (SF's ServiceDomain starts its scheduler's
    lastBalancing at its creation); a failed instance is placed at the first refresh after it
    failed; rounds never run two phases."""
    state = cluster({"N0": 6, "N1": 0, "N2": 0, "N3": 0}, {})
    result = play(state, [{"Time": 7.5, "Kind": "ReplicaFailed", "ReplicaId": "r5"}], duration=40)
    assert ran(result) == [
        (5, "Balancing", None),
        (8, "Placement", None),
        (10, "Balancing", None),
        (15, "Balancing", None),
    ]
    assert [r.time for r in result.rows if r.trigger == "Event"] == [7.5]
    assert result.rounds == {"Balancing": 3, "Placement": 1}
    assert counts(result.final_state) == {"N0": 2, "N1": 2, "N2": 1, "N3": 1}


def test_balancing_waits_for_placement_on_the_same_tick_then_takes_its_turn():
    """SF visits expired timers from the one that waited longest: when both are due at 5,
    placement (needed) runs; balancing, due since 5, goes before placement due at 6."""
    state = cluster({"N0": 4, "N1": 0, "N2": 0}, {})
    events = [
        {"Time": 4.5, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
        {"Time": 5.5, "Kind": "ReplicaFailed", "ReplicaId": "r1"},
    ]
    result = play(state, events, duration=7)
    assert ran(result) == [
        (5, "Placement", None),
        (6, "Balancing", None),
        (7, "Placement", None),
    ]


def test_node_type_whose_interval_has_not_passed_is_not_balanced():
    state = cluster(
        {"A0": 6, "A1": 0, "B0": 6, "B1": 0},
        {"SeparateBalancingStrategyPerNodeType": True},
        node_types={"A0": "A", "A1": "A", "B0": "B", "B1": "B"},
        intervals={"A": 5, "B": 20},
    )
    result = play(state, duration=45)
    assert ran(result) == [  # each timer starts at 0: A's first balancing at 5, B's at 20
        (5, "Balancing", "A"),
        (10, "Balancing", "A"),
        (15, "Balancing", "A"),
        (20, "Balancing", "B"),
        (40, "Balancing", "B"),
    ]
    assert result.rounds == {"Balancing": 5}
    assert {a["NodeType"] for a in result.actions} == {"A", "B"}


def test_throttle_window_admits_movements_again_once_it_slides_past_them():
    state = cluster(
        {"N0": 8, "N1": 0, "N2": 0, "N3": 0},
        {"GlobalMovementThrottleThresholdForBalancing": 2, "GlobalMovementThrottleCountingInterval": 12},
    )
    planner = OneMove()
    result = play(state, planner=planner, duration=45)
    assert ran(result, "Balancing") == [(t, "Balancing", None) for t in (5, 10, 17, 22, 29, 34)]
    for _, _, doc, _ in planner.calls:
        parse_state(doc)
    allowance = [doc["Settings"]["GlobalMovementThrottleThresholdForBalancing"] for _, _, doc, _ in planner.calls]
    assert allowance == [2, 1, 1, 1, 1, 1]
    assert planner.calls[1][2]["Settings"]["GlobalMovementThrottleThreshold"] == 999  # SF's 1000, one used
    assert result.rows[-1].cumulative_movements == 6


def test_partitions_at_the_per_partition_throttle_are_frozen_for_balancing():
    state = cluster(
        {"N0": 4, "N1": 0, "N2": 0},
        {"MovementPerPartitionThrottleThreshold": 1, "MovementPerPartitionThrottleCountingInterval": 7},
    )
    planner = OneMove()
    play(state, planner=planner, duration=10)
    assert [(c[0], sorted(c[3])) for c in planner.calls] == [("Balancing", []), ("Balancing", [(SERVICE, "p0")])]


def test_no_balancing_during_an_upgrade_and_domains_return_to_their_snapshot():
    state = cluster({"N0": 4, "N1": 0, "N2": 0, "N3": 0}, {})

    class MovesForPlacement(OneMove):
        """Placement also moves r1 from N0 to N3 (placement with move)."""

        def __call__(self, state_doc, phase, node_type, seed, frozen):
            plan = super().__call__(state_doc, phase, node_type, seed, frozen)
            if phase == "Placement":
                moved = action({"PartitionId": "p1"}, "r1", "MoveInstance", "N0", "N3")
                return plan._replace(actions=(*plan.actions, moved))
            return plan

    events = [
        {"Time": 2, "Kind": "UpgradeStarted", "Scope": "Cluster", "UpgradeDomains": ["UD0", "UD1"]},
        {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r2"},
        {"Time": 10, "Kind": "UpgradeDomainCompleted", "UpgradeDomain": "UD1"},
        {"Time": 20, "Kind": "UpgradeDomainCompleted", "UpgradeDomain": "UD0"},
        {"Time": 30, "Kind": "UpgradeCompleted"},
    ]
    upgrading = play(state, events[:-1], planner=MovesForPlacement(), duration=29)
    assert ran(upgrading) == [(3, "Placement", None)]
    where = {r["ReplicaId"]: r["NodeName"] for p in upgrading.final_state["Partitions"] for r in p["Replicas"]}
    assert where["r1"] == "N0"  # back on its snapshot node when UD0 completed
    assert upgrading.final_state["Upgrade"]["UpgradeDomainsDone"] == ["UD1", "UD0"]
    done = play(state, events, planner=MovesForPlacement(), duration=31)
    assert ran(done)[-1] == (30, "Balancing", None)  # balancing resumes when the upgrade completes


def test_history_blocks_a_return_until_a_new_trigger():
    state = cluster({"N0": 1, "N1": 0}, {})

    class PingPong(OneMove):
        """Moves the one instance to the other node, unless History forbids it; always 'imbalanced'."""

        def __call__(self, state_doc, phase, node_type, seed, frozen):
            self.calls.append((phase, node_type, state_doc, frozen))
            r = state_doc["Partitions"][0]["Replicas"][0]
            history = {k: list(v) for k, v in state_doc.get("History", {}).items()}
            target = "N1" if r["NodeName"] == "N0" else "N0"
            if target in history.get("r0", []):
                return planned([], history)
            history.setdefault("r0", []).append(r["NodeName"])
            return planned([action(state_doc["Partitions"][0], "r0", "MoveInstance", r["NodeName"], target)], history)

    def always(state_doc, frozen):
        return (
            probe(state_doc, frozen)
            if probe(state_doc, frozen).imbalanced
            else Needs(imbalanced=frozenset({("Count", None)}))
        )

    events = [{"Time": 17, "Kind": "LoadReport", "ServiceName": SERVICE, "ReplicaId": "r0", "Loads": {"CPU": 90}}]
    planner = PingPong()
    result = replay(parse_timeline({"State": state, "Events": events, "Duration": 21}), planner, always, 0)
    assert [(a["Time"], a["SourceNode"], a["TargetNode"]) for a in result.actions] == [
        (5, "N0", "N1"),
        (20, "N1", "N0"),
    ]
    assert [doc.get("History", {}) for _, _, doc, _ in planner.calls] == [{}, {"r0": ["N0"]}, {}]
    assert ran(result) == [(5, "Balancing", None), (10, "Balancing", None), (20, "Balancing", None)]  # 15: no change


def test_actions_in_flight_freeze_their_partition_and_land_when_done():
    state = cluster({"N0": 3, "N1": 0}, {})
    planner = OneMove()
    events = [{"Time": 6.5, "Kind": "ReplicaFailed", "ReplicaId": "r1"}]
    result = play(state, events, planner=planner, duration=9, ActionSeconds={"Move": 3})
    assert [(c[0], c[3]) for c in planner.calls] == [
        ("Balancing", frozenset()),
        ("Placement", frozenset({(SERVICE, "p0")})),
    ]
    assert planner.calls[1][2]["Partitions"][0]["Replicas"][0]["NodeName"] == "N0"  # not moved before 8
    assert result.rows[0].needs.node_loads["N0"]["Count"] == 3  # load still on N0 at 5
    where = {r["ReplicaId"]: r["NodeName"] for p in result.final_state["Partitions"] for r in p["Replicas"]}
    assert where["r0"] == "N1" and len(where) == 3 and "replay-1" in where  # the add got an id
    parse_state(result.final_state)


def test_cancelled_when_its_target_went_down():
    state = cluster({"N0": 3, "N1": 0}, {})
    events = [{"Time": 6, "Kind": "NodeDown", "NodeName": "N1"}]
    result = play(state, events, duration=9, ActionSeconds={"Move": 3})
    assert result.cancelled == 1 and counts(result.final_state) == {"N0": 3}


def test_same_timeline_and_seed_give_the_same_series():
    state = cluster({"N0": 9, "N1": 0, "N2": 1, "N3": 0}, {})
    events = [
        {"Time": 6, "Kind": "ReplicaFailed", "ReplicaId": "r3"},
        {"Time": 11, "Kind": "NodeDown", "NodeName": "N2"},
    ]
    first = play(state, events, planner=OneMove(pick=random.Random()), duration=30, seed=4)
    again = play(state, events, planner=OneMove(pick=random.Random()), duration=30, seed=4)
    assert first.rows == again.rows and first.actions == again.actions and first.final_state == again.final_state


def test_a_rounds_adds_complete_together_with_distinct_new_ids():
    state = cluster({"N0": 2, "N1": 2, "N2": 0}, {})
    events = [
        {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
        {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r2"},
    ]
    result = play(state, events, duration=6)
    placed = [a for a in result.actions if a["Phase"] == "Placement"]
    assert len(placed) == 2 and {a["Time"] for a in placed} == {3}
    ids = sorted(str(r["ReplicaId"]) for p in result.final_state["Partitions"] for r in p["Replicas"])
    assert ids == ["r1", "r3", "replay-1", "replay-2"]
    parse_state(result.final_state)


def test_block_list_expiry_is_applied_in_time_order_among_the_events():
    state = cluster({"N0": 2, "N1": 2}, {})
    state["Services"][0]["ServiceTypeName"] = "SvcType"
    seen = []

    def planner(state_doc, phase, node_type, seed, frozen):
        seen.append((phase, [b["NodeName"] for b in state_doc.get("BlockList", [])]))
        return planned([], {})

    events = [
        {"Time": 1, "Kind": "BlockListAdded", "NodeName": "N1", "ServiceTypeName": "SvcType", "Until": 4},
        {"Time": 2, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
        {"Time": 4, "Kind": "ReplicaFailed", "ReplicaId": "r1"},
        {"Time": 6, "Kind": "ReplicaFailed", "ReplicaId": "r2"},
    ]
    result = play(state, events, planner=planner, duration=7)
    assert [s for s in seen if s[0] == "Placement"] == [("Placement", ["N1"]), ("Placement", []), ("Placement", [])]
    assert [r.time for r in result.rows if r.trigger == "Event"] == [1, 2, 4, 6]
    assert "BlockList" not in result.final_state or result.final_state["BlockList"] == []


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


def test_with_sfs_default_timers_phases_run_at_the_refresh_their_timer_expires():
    """SF's defaults (PLBRefreshGap 0.1, MinPlacementInterval 1, MinLoadBalancingInterval 5): a
    replica failing at 7.05 is placed when the placement timer next expires (8.0, not the next
    refresh at 7.1); two failures within a second are placed in one round; balancing runs every 5 s
    while imbalanced; one phase per round, placement first."""
    state = cluster({"N0": 10, "N1": 0, "N2": 0, "N3": 0}, {"PLBRefreshGap": 0.1})
    events = [
        {"Time": 7.05, "Kind": "ReplicaFailed", "ReplicaId": "r9"},
        {"Time": 9.5, "Kind": "ReplicaFailed", "ReplicaId": "r8"},
        {"Time": 9.95, "Kind": "ReplicaFailed", "ReplicaId": "r7"},
    ]
    result = play(state, events, duration=16)
    assert ran(result) == [
        (5, "Balancing", None),
        (8, "Placement", None),
        (10, "Placement", None),
        (pytest.approx(10.1), "Balancing", None),  # due at 10 too: placement went first, then its turn
        (pytest.approx(15.1), "Balancing", None),
    ]
    assert [r.time for r in result.rows if r.trigger == "Event"] == [7.05, 9.5, 9.95]
    assert [a["Action"] for a in result.actions if a["Time"] == 10] == ["AddInstance", "AddInstance"]


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


def test_a_block_list_entry_added_again_lasts_until_the_later_until():
    state = cluster({"N0": 2, "N1": 2}, {})
    seen = []

    def planner(state_doc, phase, node_type, seed, frozen):
        seen.append((phase, [b["NodeName"] for b in state_doc.get("BlockList", [])]))
        return planned([], {})

    entry = {"Kind": "BlockListAdded", "NodeName": "N1", "ServiceTypeName": "SvcType"}
    events = [
        {"Time": 1, **entry, "Until": 5},
        {"Time": 3, **entry, "Until": 10},
        {"Time": 7, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
    ]
    play(state, events, planner=planner, duration=9)
    assert seen == [("Placement", ["N1"])]  # at 7 the entry added again at 3 still holds (until 10)
