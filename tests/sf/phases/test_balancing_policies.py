"""Balancing policies, hand-checked on small clusters (issues 4 and 6, "must show").

Issue 4: balancing per node type (the docs' two examples under the contract's strict reading),
the four-service metric chain, move costs, defragmentation, throttles, upgrades (cluster and
application scope, return to the upgrade snapshot). Issue 6 (reference 004's rules): eviction of
lower-priority replicas for placement, BalancingPolicy "Disabled", History (anti-ping-pong),
ResourceThresholds, plans independent of the order of the input lists, and SF's output order.
Surplus replicas (more than the target): which ones are dropped, and a dropped primary's successor.

Like test_hand_checked_scenarios.py, every plan is validated against plan.schema.json, its Actions are applied to
the input with `apply_actions` and must reproduce the plan's LoadsBefore/LoadsAfter, and the
Actions must be a net diff. Compilation dominates the run time, so almost every document shares
one shape, the FRAME: 8 nodes N0..N7, each in its own fault domain fd:/dc<i> and upgrade domain
UD<i>, one metric "Load", 3 or 4 services (stateless unless said otherwise), at most 8 partitions,
15 or 16 replicas (counting those still to place), largest partition (other than one placed on
every node) of 3 or 4. A service with InstanceCount -1 ("everywhere", one instance per node with
reported loads) gives a background load that no phase moves. Compiles beyond the FRAME's: the
engine compiles optional rules only where used (History, defragmentation, ResourceThresholds,
upgrade snapshots), and the metric chain needs five metrics. Unless balancing is the point, a huge
MetricActivityThreshold keeps SF's trigger quiet.
"""

from __future__ import annotations

import copy
import random
from collections import Counter

import pytest
from sf_cases import (
    MOVES,
    NODES,
    background,
    balance,
    bare,
    document,
    health,
    loads,
    movements,
    node_of,
    nodes,
    part,
    phase,
    run,
    service,
    stacked,
)

# ------------------------------------------------------------------ issue 4: per node type

TYPES = {n: "A" if i < 4 else "B" for i, n in enumerate(NODES)}
PER_NODE_TYPE = {"SeparateBalancingStrategyPerNodeType": "true", "SubclusteringEnabled": "true"}


def node_type(name: str, threshold: float, activity: float) -> dict:
    return {
        "Name": name,
        "PlacementAndLoadBalancingOverrides": {
            "MetricBalancingThresholdsPerNodeType": {"Load": threshold},
            "MetricActivityThresholdsPerNodeType": {"Load": activity},
        },
    }


def test_per_node_type_example_1_balances_only_the_imbalanced_node_type():
    """Docs' Example 1: node type A (N0-N3) has loads 300/100/200/200 (ratio 3 > 2.5, max 300 > 50):
    imbalanced; B (N4-N7) 700/500/600/600 (ratio 1.4, not above 1.4): balanced. Moving load from B to
    the lightly loaded A nodes would lower the cluster-wide deviation, but only replicas on A's
    nodes may move, and only onto A's nodes; one move (N0 -> N1) balances A."""
    doc = document(
        [service("fabric:/App/X", 3, 100), service("fabric:/App/Y"), service("fabric:/App/Z")],
        [
            part("fabric:/App/X", "x0", "N0", "N2", "N4"),
            part("fabric:/App/X", "x1", "N0", "N3", "N5"),
            part("fabric:/App/X", "x2", "N0", "N1", "N6"),
            part("fabric:/App/X", "x3", "N2", "N3", "N7"),
            part("fabric:/App/Y", "y0", ("N4", 600)),
            part("fabric:/App/Y", "y1", ("N5", 400)),
            part("fabric:/App/Y", "y2", ("N6", 500)),
            part("fabric:/App/Z", "z0", ("N7", 500)),
        ],
        nodes(types=TYPES),
        activity=None,
        Settings=PER_NODE_TYPE,
        NodeTypes=[node_type("A", 2.5, 50), node_type("B", 1.4, 400)],
    )
    result, after = run(doc)
    assert loads(result, "LoadsBefore") == {
        "N0": 300,
        "N1": 100,
        "N2": 200,
        "N3": 200,
        "N4": 700,
        "N5": 500,
        "N6": 600,
        "N7": 600,
    }
    a, b = balance(result, node_type="A"), balance(result, node_type="B")
    assert len(result["Balance"]) == 2 and {e["NodeType"] for e in result["Balance"]} == {"A", "B"}
    assert (a["MaxLoad"], a["MinLoad"], a["BalancingThreshold"], a["ActivityThreshold"]) == (300, 100, 2.5, 50)
    assert (b["MaxLoad"], b["MinLoad"], b["BalancingThreshold"], b["ActivityThreshold"]) == (700, 500, 1.4, 400)
    assert not a["IsBalancedBefore"] and b["IsBalancedBefore"]
    assert phase(result, "Balancing")["Ran"]
    assert result["Actions"], "node type A has a better placement"
    on_b = {rid for rid, node in node_of(doc).items() if TYPES[node] == "B"}
    for act in result["Actions"]:
        assert act["Action"] in MOVES, act
        assert TYPES[act["SourceNode"]] == "A" and TYPES[act["TargetNode"]] == "A", act
        assert str(act["ReplicaId"]) not in on_b, act
    after_loads = loads(result)
    assert {n: after_loads[n] for n in NODES[4:]} == {"N4": 700, "N5": 500, "N6": 600, "N7": 600}
    assert a["IsBalancedAfter"] and a["DeviationAfter"] < a["DeviationBefore"]
    assert b["DeviationAfter"] == pytest.approx(b["DeviationBefore"])


def test_per_node_type_example_2_nothing_is_imbalanced_so_balancing_does_not_run():
    """Docs' Example 2: A (N0-N2) max 600 / min 100, threshold 5, activity 700: max not above the
    activity threshold; B (N3-N5) 900/100, threshold 10: ratio 9; C (N6, N7) 600/300, threshold 2:
    ratio 2 is not above 2 (strict, as SF's source: the docs' "violates" is their error). Nothing
    is imbalanced, so balancing does not run, though the cluster as a whole (900/100) would be."""
    types = {n: "A" if i < 3 else "B" if i < 6 else "C" for i, n in enumerate(NODES)}
    doc = document(
        [service("fabric:/App/X", 3), service("fabric:/App/Y"), service("fabric:/App/Z")],
        [
            part("fabric:/App/X", "x0", ("N0", 200), ("N1", 100), ("N2", 100)),
            part("fabric:/App/X", "x1", ("N3", 300), ("N4", 100), ("N5", 200)),
            part("fabric:/App/X", "x2", ("N0", 200), ("N6", 300), ("N7", 150)),
            part("fabric:/App/X", "x3", ("N2", 200), ("N3", 300), ("N6", 300)),
            part("fabric:/App/Y", "y0", ("N0", 200)),
            part("fabric:/App/Y", "y1", ("N3", 300)),
            part("fabric:/App/Y", "y2", ("N5", 300)),
            part("fabric:/App/Z", "z0", ("N7", 150)),
        ],
        nodes(types=types),
        activity=None,
        Settings=PER_NODE_TYPE,
        NodeTypes=[node_type("A", 5, 700), node_type("B", 10, 200), node_type("C", 2, 300)],
    )
    result, _ = run(doc)
    assert loads(result, "LoadsBefore") == {
        "N0": 600,
        "N1": 100,
        "N2": 300,
        "N3": 900,
        "N4": 100,
        "N5": 500,
        "N6": 600,
        "N7": 300,
    }
    expected = {"A": (600, 100, 5, 700), "B": (900, 100, 10, 200), "C": (600, 300, 2, 300)}
    assert {e["NodeType"] for e in result["Balance"]} == set(expected)
    for name, values in expected.items():
        entry = balance(result, node_type=name)
        assert (entry["MaxLoad"], entry["MinLoad"], entry["BalancingThreshold"], entry["ActivityThreshold"]) == values
        assert entry["IsBalancedBefore"] and entry["IsBalancedAfter"], entry
    assert not phase(result, "Balancing")["Ran"]
    assert result["Actions"] == []


# ------------------------------------------------------------------- issue 4: metric chain


def test_metric_chain_never_moves_the_unrelated_service():
    """Service1 (Metric1+Metric2), Service2 (Metric2+Metric3), Service3 (Metric3+Metric4) are chained;
    Service4 (Metric99) is on its own. Metric1 is imbalanced (both Service1 instances on N0).
    Metric99 is spread unevenly (N0 300, the others 100: moving a Service4 instance off N0 would
    lower the deviation) but balanced by its threshold 5. Balancing moves Service1 and never
    Service4. Its own shape (five metrics): one more compile."""
    s1, s2, s3, s4 = (f"fabric:/App/Service{i}" for i in range(1, 5))

    def svc(name, *metrics):
        return {
            "ServiceName": name,
            "ServiceKind": "Stateless",
            "InstanceCount": 1,
            "Metrics": [{"Name": m, "Weight": "High", "DefaultLoad": 0} for m in metrics],
        }

    def single(name, pid, node, **reported):
        return {
            "ServiceName": name,
            "PartitionId": pid,
            "Replicas": [{"ReplicaId": f"{pid}.0", "Role": "Instance", "NodeName": node, "Loads": reported}],
        }

    partitions = [single(s1, "a0", "N0", Metric1=100, Metric2=10), single(s1, "a1", "N0", Metric1=100, Metric2=10)]
    partitions += [single(s2, f"b{i}", n, Metric2=10, Metric3=10) for i, n in enumerate(NODES)]
    partitions += [single(s3, f"c{i}", n, Metric3=10, Metric4=10) for i, n in enumerate(NODES)]
    partitions += [single(s4, f"d{i}", n, Metric99=100) for i, n in enumerate(NODES)]
    partitions += [single(s4, f"d{i}", "N0", Metric99=100) for i in (8, 9)]
    doc = document(
        [
            svc(s1, "Metric1", "Metric2"),
            svc(s2, "Metric2", "Metric3"),
            svc(s3, "Metric3", "Metric4"),
            svc(s4, "Metric99"),
        ],
        partitions,
        activity={"Metric2": 10**6, "Metric3": 10**6, "Metric4": 10**6},
        MetricBalancingThresholds={"Metric99": 5},
        frame=False,
    )
    result, after = run(doc)
    assert not balance(result, "Metric1")["IsBalancedBefore"]
    m99 = balance(result, "Metric99")
    assert (m99["MaxLoad"], m99["MinLoad"], m99["IsBalancedBefore"]) == (300, 100, True)
    assert all(balance(result, m)["IsBalancedBefore"] for m in ("Metric2", "Metric3", "Metric4"))
    assert phase(result, "Balancing")["Ran"]
    assert [a for a in result["Actions"] if a["ServiceName"] == s4] == []
    assert any(a["ServiceName"] == s1 for a in result["Actions"]), result["Actions"]
    assert loads(result, "LoadsAfter", "Metric99") == loads(result, "LoadsBefore", "Metric99")
    assert balance(result, "Metric1")["DeviationAfter"] < balance(result, "Metric1")["DeviationBefore"]


# ----------------------------------------------------------------------- issue 4: move cost

COSTS = {"UseMoveCostReports": "true"}


def _filler() -> list[dict]:
    """Two partitions of three zero-load instances (the FRAME's replica count and partition size)."""
    return [part("fabric:/App/X", "x0", "N1", "N2", "N3"), part("fabric:/App/X", "x1", "N4", "N5", "N6")]


def test_of_two_equal_moves_the_zero_cost_replica_is_the_one_moved():
    """N0 holds two instances of 100 (MoveCost High and Zero) over an immovable background that
    leaves N1-N6 at 100 and N7 empty. Moving either to N7 balances the cluster exactly; only one
    move is worthwhile, and it is the Zero-cost one."""
    doc = document(
        [service("fabric:/App/F", -1), service("fabric:/App/X", 3), service("fabric:/App/Y")],
        [
            background("fabric:/App/F", [0, 100, 100, 100, 100, 100, 100, 0]),
            *_filler(),
            part("fabric:/App/Y", "high", ("N0", 100, {"MoveCost": "High"})),
            part("fabric:/App/Y", "zero", ("N0", 100, {"MoveCost": "Zero"})),
        ],
        activity=None,
        Settings=COSTS,
    )
    result, after = run(doc)
    assert phase(result, "Balancing")["Ran"]
    assert [(a["ReplicaId"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]] == [
        ("zero.0", "N0", "N7")
    ], result["Actions"]
    assert set(loads(result).values()) == {100}


def _one_small_improvement(cost: str) -> dict:
    """N0 is far above the rest (immovable background); the only movable load is r (10, on N1 at
    110), whose only improving move is to N2 (90): a gain of well under 1% of the deviation, less
    than a High move cost (40 on top of 1000 + replicas: ~4%) is worth."""
    return document(
        [service("fabric:/App/F", -1), service("fabric:/App/X", 3), service("fabric:/App/Y")],
        [
            background("fabric:/App/F", [300, 100, 90, 100, 100, 100, 100, 100]),
            *_filler(),
            part("fabric:/App/Y", "r", ("N1", 10, {"MoveCost": cost})),
            part("fabric:/App/Y", "y1", ("N7", 0)),
        ],
        activity=None,
        Settings=COSTS,
    )


def test_high_move_cost_outweighs_a_small_improvement_that_a_zero_cost_replica_takes():
    high, _ = run(_one_small_improvement("High"))
    assert phase(high, "Balancing")["Ran"] and not balance(high)["IsBalancedBefore"]
    assert [a for a in high["Actions"] if a["ReplicaId"] == "r.0"] == [], high["Actions"]
    zero, _ = run(_one_small_improvement("Zero"))
    assert [(a["ReplicaId"], a["SourceNode"], a["TargetNode"]) for a in zero["Actions"]] == [("r.0", "N1", "N2")], zero[
        "Actions"
    ]
    assert zero["Score"]["After"] < zero["Score"]["Before"]


# -------------------------------------------------------------------- issue 4: defragmentation


def test_defragmentation_empties_a_node():
    """Disk is a defragmentation metric; 8 instances of 10 spread evenly over 4 nodes (capacity 100):
    balancing packs them, leaving at least one node empty. Own shape (4 nodes, defragmentation)."""
    svc = "fabric:/App/Store"
    doc = document(
        [service(svc, 1, 10, metric="Disk")],
        [part(svc, f"s{i}", NODES[i % 4], metric="Disk") for i in range(8)],
        nodes(4, capacity=100, metric="Disk"),
        activity=None,
        DefragmentationMetrics={"Disk": True},
        frame=False,
    )
    result, _ = run(doc)
    assert loads(result, "LoadsBefore", "Disk") == {"N0": 20, "N1": 20, "N2": 20, "N3": 20}
    entry = balance(result, "Disk")
    assert not entry["IsBalancedBefore"]  # spread out: defragmentation is triggered
    assert phase(result, "Balancing")["Ran"]
    after = loads(result, "LoadsAfter", "Disk")
    assert min(after.values()) == 0, after
    assert sum(after.values()) == pytest.approx(80) and max(after.values()) <= 100
    assert entry["DeviationAfter"] > entry["DeviationBefore"]  # packed: loads further apart


# ------------------------------------------------------------------------ issue 4: throttles


@pytest.mark.parametrize(
    "settings",
    [
        {"GlobalMovementThrottleThreshold": 2},
        {"GlobalMovementThrottleThresholdForBalancing": 2},
        {"MaxPercentageToMove": 0.125},
    ],
)  # 2 of 16 replicas
def test_throttle_caps_the_movements(settings):
    result, _ = run(stacked(**settings))
    assert phase(result, "Balancing")["Ran"]
    assert 1 <= len(movements(result)) <= 2, result["Actions"]


def test_per_partition_throttle_moves_at_most_one_replica_of_each_partition():
    """Without the per-partition throttle, spreading 16 replicas from 3 nodes over 8 moves at least
    two instances of some X partition; with MovementPerPartitionThrottleThreshold 1, none."""

    def per_partition(result):
        return Counter(a["PartitionId"] for a in movements(result))

    free, _ = run(stacked(MaxPercentageToMove=1.0))
    assert max(per_partition(free).values()) >= 2, free["Actions"]
    throttled, _ = run(stacked(MaxPercentageToMove=1.0, MovementPerPartitionThrottleThreshold=1))
    assert throttled["Actions"] and max(per_partition(throttled).values()) == 1, throttled["Actions"]


# ------------------------------------------------------------------------- issue 4: upgrades


def test_cluster_upgrade_fixes_capacity_but_does_not_balance():
    """N0 (capacity 100) holds 120; N3-N7 are empty, so the cluster is very imbalanced. During a
    cluster upgrade the constraint check moves one instance off N0, and balancing stays off."""
    doc = document(
        [service("fabric:/App/X", 3, 20), service("fabric:/App/Y", 1, 20), service("fabric:/App/Z", 1, 20)],
        [
            *[part("fabric:/App/X", f"x{i}", "N0", "N1", "N2") for i in range(4)],
            part("fabric:/App/Y", "y0", "N0"),
            part("fabric:/App/Y", "y1", "N0"),
            part("fabric:/App/Y", "y2", "N1"),
            part("fabric:/App/Z", "z0", "N2"),
        ],
        nodes(capacity=100),
        activity=None,
        Upgrade={"InProgress": True, "Scope": "Cluster"},
    )
    result, _ = run(doc)
    assert loads(result, "LoadsBefore")["N0"] == 120
    assert phase(result, "ConstraintCheck")["Ran"]
    assert len(movements(result)) == 1 and result["Actions"][0]["SourceNode"] == "N0", result["Actions"]
    assert max(loads(result).values()) <= 100
    assert health(result, "NodeCapacityViolation") == []
    assert not balance(result)["IsBalancedBefore"]
    balancing = phase(result, "Balancing")
    assert not balancing["Ran"] and "upgrade" in balancing["Reason"].lower(), balancing


def test_application_upgrade_freezes_only_that_application():
    """Both applications are stacked on N0-N2; AppA is upgrading: balancing moves AppB only."""
    a, b, c = "fabric:/AppA/X", "fabric:/AppB/Y", "fabric:/AppB/Z"
    doc = document(
        [service(a, 3, 10), service(b, 1, 10), service(c, 1, 10)],
        [
            *[part(a, f"x{i}", "N0", "N1", "N2") for i in range(4)],
            *[part(b, f"y{i}", "N0") for i in range(3)],
            part(c, "z0", "N1"),
        ],
        activity=None,
        Upgrade={"InProgress": True, "Scope": "Application", "ApplicationName": "fabric:/AppA"},
    )
    result, _ = run(doc)
    assert phase(result, "Balancing")["Ran"]
    assert [x for x in result["Actions"] if x["ServiceName"] == a] == []
    assert any(x["ServiceName"] in (b, c) for x in result["Actions"]), result["Actions"]


def test_replicas_return_to_their_snapshot_node_once_its_upgrade_domain_is_done():
    """r (on N5) was on N1 when the upgrade started, and UD1 is done: it goes back to N1. s (on N6)
    was on N2, whose UD2 is not done yet: it stays. Both moves are neutral for balance (equal
    background, equal loads), so only PreferredLocation asks for them. Own compile (snapshots)."""
    doc = document(
        [service("fabric:/App/F", -1), service("fabric:/App/X", 3), service("fabric:/App/Y")],
        [
            background("fabric:/App/F", [50] * 8),
            *_filler(),
            part("fabric:/App/Y", "r", ("N5", 10)),
            part("fabric:/App/Y", "s", ("N6", 10)),
        ],
        Upgrade={
            "InProgress": True,
            "Scope": "Cluster",
            "UpgradeDomainsDone": ["UD0", "UD1"],
            "Snapshot": {"r.0": "N1", "s.0": "N2"},
        },
    )
    result, after = run(doc)
    assert [(a["ReplicaId"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]] == [("r.0", "N5", "N1")], (
        result["Actions"]
    )
    assert node_of(after)["s.0"] == "N6"
    assert not phase(result, "Balancing")["Ran"]


# -------------------------------------------------------------------- issue 6: priorities


def _crowded(priority: int, **settings) -> dict:
    """Every node at 50 of capacity 100 (N0: 10 background + low-priority l, 40); a new instance of
    60 fits nowhere unless l moves away from N0."""
    return document(
        [
            service("fabric:/App/F", -1),
            service("fabric:/App/X", 3),
            service("fabric:/App/Low"),
            service("fabric:/App/High", 1, 60, Priority=priority),
        ],
        [
            background("fabric:/App/F", [10, 50, 50, 50, 50, 50, 50, 50]),
            *_filler(),
            part("fabric:/App/Low", "l", ("N0", 40)),
            part("fabric:/App/High", "h"),
        ],
        nodes(capacity=100),
        Settings=settings,
    )


def test_high_priority_replica_evicts_a_lower_priority_one():
    result, after = run(_crowded(priority=1))
    assert result["Unplaced"] == []
    actions = {a["ReplicaId"] or a["PartitionId"]: a for a in result["Actions"]}
    assert actions["h"]["Action"] == "AddInstance" and actions["h"]["TargetNode"] == "N0", result["Actions"]
    assert actions["l.0"]["Action"] == "MoveInstance" and actions["l.0"]["SourceNode"] == "N0", result["Actions"]
    assert max(loads(result).values()) <= 100


def test_equal_priority_replica_is_reported_unplaced_without_placement_with_moves():
    result, after = run(_crowded(priority=0, MoveExistingReplicaForPlacement=False))
    assert result["Actions"] == []
    assert [(u["ServiceName"], u["PartitionId"], u["Role"]) for u in result["Unplaced"]] == [
        ("fabric:/App/High", "h", "Instance")
    ]
    assert node_of(after)["l.0"] == "N0"


def test_equal_priority_replica_is_placed_by_moving_an_existing_one():
    """SF's placement with moves (MoveExistingReplicaForPlacement, on by default) moves l away."""
    result, after = run(_crowded(priority=0))
    assert result["Unplaced"] == [] and node_of(after)["l.0"] != "N0"
    assert "existing replicas moved" in phase(result, "Placement")["Reason"]


# ------------------------------------------------------------- issue 6: BalancingPolicy


def test_balancing_disabled_replicas_stay_but_count_in_loads():
    """N0 holds three instances (50 each) of a service with BalancingPolicy Disabled and one
    instance of each partition of an enabled service (20 each): the enabled ones move off N0."""
    d, e = "fabric:/App/Disabled", "fabric:/App/Enabled"
    doc = document(
        [service(d, 1, 50, BalancingPolicy="Disabled"), service(e, 3, 20), service("fabric:/App/Z")],
        [
            *[part(d, f"d{i}", "N0") for i in range(3)],
            part(e, "e0", "N0", "N1", "N2"),
            part(e, "e1", "N0", "N1", "N3"),
            part(e, "e2", "N0", "N2", "N3"),
            part(e, "e3", "N0", "N4", "N5"),
            part("fabric:/App/Z", "z0", "N6"),
        ],
        activity=None,
    )
    result, after = run(doc)
    assert loads(result, "LoadsBefore")["N0"] == 230
    assert phase(result, "Balancing")["Ran"]
    assert [a for a in result["Actions"] if a["ServiceName"] == d] == []
    assert any(a["ServiceName"] == e and a["SourceNode"] == "N0" for a in result["Actions"]), result["Actions"]
    assert all(node_of(after)[f"d{i}.0"] == "N0" for i in range(3))
    assert loads(result)["N0"] >= 150


# ----------------------------------------------------------------------- issue 6: History


def _history_doc(history: dict | None) -> dict:
    """N0 holds r (100) and q (50) over a background of 100 everywhere but N7 (0). Moving r to N7 is
    the best move; with N7 in r's History, q goes there instead and r stays."""
    extra = {"History": history} if history is not None else {}
    return document(
        [service("fabric:/App/F", -1), service("fabric:/App/X", 3), service("fabric:/App/Y")],
        [
            background("fabric:/App/F", [100, 100, 100, 100, 100, 100, 100, 0]),
            *_filler(),
            part("fabric:/App/Y", "r", ("N0", 100)),
            part("fabric:/App/Y", "q", ("N0", 50)),
        ],
        activity=None,
        **extra,
    )


def test_history_keeps_a_replica_from_returning_and_records_balancing_moves():
    free, free_after = run(_history_doc(None))  # N7 is r's best target
    assert node_of(free_after)["r.0"] == "N7", free["Actions"]
    result, after = run(_history_doc({"r.0": ["N7"], "x0.0": ["N2"]}))  # own compile (History)
    assert phase(result, "Balancing")["Ran"]
    assert [a for a in result["Actions"] if a["TargetNode"] == "N7" and a["ReplicaId"] == "r.0"] == []
    assert node_of(after)["r.0"] != "N7"
    moves = movements(result)
    assert moves, "q can still go to N7"
    expected = {"r.0": ["N7"], "x0.0": ["N2"]}
    for act in moves:
        expected.setdefault(str(act["ReplicaId"]), []).append(act["SourceNode"])
    assert result["History"] == expected
    assert ("q.0", "N0", "N7") in [(a["ReplicaId"], a["SourceNode"], a["TargetNode"]) for a in moves]


# ---------------------------------------------------------------- issue 6: ResourceThresholds


def _thresholds(background_loads: list[float], y_load: float) -> dict:
    return document(
        [service("fabric:/App/F", -1), service("fabric:/App/X", 3), service("fabric:/App/Y")],
        [
            background("fabric:/App/F", background_loads),
            *_filler(),
            part("fabric:/App/Y", "y0", ("N0", y_load)),
            part("fabric:/App/Y", "y1", ("N1", 0)),
        ],
        nodes(capacity=100),
        ResourceThresholds={"Load": 0.7},
    )


def test_resource_threshold_is_met_where_the_cluster_has_room():
    """N0 is at 90 of 100 (y0: 30 of it); balancing is otherwise quiet. Threshold 0.7: y0 leaves."""
    result, after = run(_thresholds([60, 30, 20, 20, 10, 10, 10, 10], 30))
    assert loads(result, "LoadsBefore")["N0"] == 90
    assert phase(result, "Balancing")["Ran"]
    for node in result["Nodes"]:
        assert node["LoadsAfter"]["Load"] / node["Capacities"]["Load"] <= 0.7 + 1e-9, node
    assert node_of(after)["y0.0"] != "N0"
    assert health(result, "ResourceThresholdExceeded") == []


def test_resource_threshold_without_room_is_reported_per_node_and_metric():
    """Every node at 80 of 100, immovable: nothing can get under 70; each node gets a report."""
    result, _ = run(_thresholds([80] * 8, 0))
    reports = health(result, "ResourceThresholdExceeded")
    over = [n["NodeName"] for n in result["Nodes"] if n["LoadsAfter"]["Load"] > 70]
    assert over == NODES
    for name in over:
        assert any(h["Entity"] == name and "Load" in h["Description"] for h in reports), (name, reports)
    assert all(h["SourceId"] == "System.PLB" and h["HealthState"] in ("Warning", "Error") for h in reports)


# ------------------------------------------------------------------ issue 6: determinism


def test_same_plan_whatever_the_order_of_the_input_lists():
    doc = stacked()
    reference, _ = run(doc)
    assert reference["Actions"]
    rng = random.Random(7)
    for _ in range(2):
        shuffled = copy.deepcopy(doc)
        for key in ("Nodes", "Services", "Partitions"):
            rng.shuffle(shuffled[key])
        for p in shuffled["Partitions"]:
            rng.shuffle(p["Replicas"])
        assert shuffled != doc
        result, _ = run(shuffled)
        for key in ("Actions", "Balance", "Score", "Nodes", "Phases", "Unplaced", "History"):
            assert result[key] == reference[key], key


def test_actions_by_service_priority_then_name_and_nodes_by_priority_then_name():
    """Three services with every instance still to place (B priority 2, C priority 1, A priority 0),
    listed A, B, C; node priorities N3 = N6 = 5, N1 = 2, others 0, listed in reverse."""
    priority = {"fabric:/App/A": 0, "fabric:/App/B": 2, "fabric:/App/C": 1}
    count = {"fabric:/App/A": 3, "fabric:/App/B": 3, "fabric:/App/C": 2}
    doc = document(
        [service(name, count[name], 10, Priority=priority[name]) for name in priority],
        [part(name, f"{name[-1].lower()}{i}") for name in priority for i in range(2)],
        list(reversed(nodes(priorities={"N3": 5, "N6": 5, "N1": 2}))),
    )
    result, _ = run(doc)
    assert len(result["Actions"]) == 16 and result["Unplaced"] == []
    order = [a["ServiceName"] for a in result["Actions"]]
    assert order == sorted(order, key=lambda s: (-priority[s], s))
    assert [n["NodeName"] for n in result["Nodes"]] == ["N3", "N6", "N1", "N0", "N2", "N4", "N5", "N7"]


# ------------------------------------------------------------------ surplus replicas


def _stateful(name: str, target: int) -> dict:
    return {
        "ServiceName": name,
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": target,
        "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 5}],
    }


def _replicas(pid: str, primary: str, *secondaries: str) -> dict:
    return {
        "ServiceName": "fabric:/App/S",
        "PartitionId": pid,
        "Replicas": [
            {"ReplicaId": f"{pid}.p", "Role": "Primary", "NodeName": primary},
            *[{"ReplicaId": f"{pid}.{k}", "Role": "Secondary", "NodeName": n} for k, n in enumerate(secondaries)],
        ],
    }


def test_surplus_replicas_are_dropped_keeping_the_fault_domain_spread():
    """S (target 3) holds 4 replicas, two of them (N4, N5) in one fault domain; X (InstanceCount 2)
    holds 3 instances, N0 the most loaded node. One secondary of N4/N5 and X's instance on N0 go."""
    node_list = nodes()
    node_list[5]["FaultDomain"] = "fd:/dc4"
    doc = document(
        [
            service("fabric:/App/F", -1),
            _stateful("fabric:/App/S", 3),
            service("fabric:/App/X", 2, 10),
            service("fabric:/App/Y"),
        ],
        [
            background("fabric:/App/F", [60, 10, 10, 10, 10, 20, 10, 10]),
            _replicas("s", "N3", "N4", "N5", "N6"),
            part("fabric:/App/X", "x", "N0", "N1", "N2"),
            part("fabric:/App/Y", "y", "N7"),
        ],
        node_list,
    )
    result, after = run(doc)
    drops = [bare(a) for a in result["Actions"] if a["Action"].startswith("Drop")]
    assert drops == [
        {
            "ServiceName": "fabric:/App/S",
            "PartitionId": "s",
            "ReplicaId": "s.1",
            "Action": "DropSecondary",
            "SourceNode": "N5",
            "TargetNode": None,
        },
        {
            "ServiceName": "fabric:/App/X",
            "PartitionId": "x",
            "ReplicaId": "x.0",
            "Action": "DropInstance",
            "SourceNode": "N0",
            "TargetNode": None,
        },
    ], result["Actions"]
    assert [bare(a) for a in result["Actions"][:2]] == drops
    counts = {p["PartitionId"]: len(p["Replicas"]) for p in after["Partitions"]}
    assert (counts["s"], counts["x"]) == (3, 2)
    assert phase(result, "Placement")["Reason"].startswith("2 surplus replica(s) dropped")


def test_surplus_primary_on_a_down_node_is_dropped_and_a_secondary_promoted():
    """S (target 3) holds its primary on Down N7 and three running secondaries: the primary is the
    surplus one, and the secondary on the least loaded node (N4) takes over."""
    node_list = nodes()
    node_list[7]["NodeStatus"] = "Down"
    doc = document(
        [
            _stateful("fabric:/App/S", 3),
            service("fabric:/App/A", 3, 10),
            service("fabric:/App/B", 1, 10),
            service("fabric:/App/Z"),
        ],
        [
            _replicas("s", "N7", "N3", "N4", "N5"),
            *[part("fabric:/App/A", f"a{i}", *[f"N{j}" for j in range(3)]) for i in range(2)],
            part("fabric:/App/A", "a2", "N3", "N5", "N6"),
            part("fabric:/App/B", "b0", "N3"),
            part("fabric:/App/B", "b1", "N5"),
            part("fabric:/App/Z", "z", "N6"),
        ],
        node_list,
    )
    result, after = run(doc)
    assert bare(result["Actions"][0]) == {
        "ServiceName": "fabric:/App/S",
        "PartitionId": "s",
        "ReplicaId": "s.p",
        "Action": "DropPrimary",
        "SourceNode": "N7",
        "TargetNode": None,
    }
    hand_overs = [
        a
        for a in result["Actions"]
        if a["PartitionId"] == "s" and a["Action"] in ("PromoteSecondary", "SwapPrimarySecondary")
    ]
    assert [a["Action"] for a in hand_overs] == ["PromoteSecondary"], result["Actions"]
    s = next(p for p in after["Partitions"] if p["PartitionId"] == "s")
    assert sorted(r["Role"] for r in s["Replicas"]) == ["Primary", "Secondary", "Secondary"]
    assert all(r["NodeName"] != "N7" for r in s["Replicas"])
    assert not [a for a in result["Actions"] if a["Action"].startswith("Add")], result["Actions"]


def test_a_move_never_lowers_the_energy_by_itself():
    """SF's energy counts the cost with the score's sign: below zero (a packed defragmentation metric)
    a move still makes the energy worse (Score::CalculateEnergy)."""
    from plbjax import encode, parse_state
    from plbjax.sf import full_scope, scope
    from plbjax.sf._model.energy import energy

    problem, index = encode(
        parse_state(document([service("fabric:/App/A", 2, 10)], [part("fabric:/App/A", "a", "N0", "N1")], frame=False))
    )
    search = scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index))
    for score in (-0.5, -0.0005, 0.0, 0.4):
        assert float(energy(score, 3.0, search)) > float(energy(score, 2.0, search)), score


def test_max_percentage_to_move_zero_turns_balancing_off():
    """SF's scheduler skips balancing when MaxPercentageToMove is 0 (it is a limit of 0, not no limit)."""
    doc = document(
        [service("fabric:/App/A", 1, 10)],
        [part("fabric:/App/A", f"a{i}", "N0") for i in range(4)],
        activity=None,
        frame=False,
    )
    doc["Settings"] = {"MaxPercentageToMove": 0}
    result, _ = run(doc)
    assert phase(result, "Balancing")["Ran"] is False and not result["Actions"], result["Phases"]
