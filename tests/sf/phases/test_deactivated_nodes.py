"""Node deactivation intents (issue 37.6), as SF's PLB and Failover Manager honour them.

SF's PLB (BalanceCheckerCreator.cpp, IConstraint.cpp AllowedPlacementOnDeactivatedNode) places and
moves no replica onto a deactivated node, moves none off it on its own, and leaves its load out of
the balance (BalanceChecker.cpp skips IsDeactivated nodes). A `Disabled` node's `DeactivationIntent`
says what else happens: Pause (the default) keeps its replicas; Restart swaps its primaries out
(the Failover Manager's WaitForPrimarySwap); RemoveData and RemoveNode have its replicas built
elsewhere. SF tests translated: node i of SF's CreateNodeDescription* is `N{i}`; CreateMetrics
"MyMetric/1.0/20/20" is weight 1.0 (High), primary and secondary load 20; a FailoverUnit with
replica difference INT_MAX is a service on every node (InstanceCount -1). SF's deactivation status
(safety checks in progress or done) is not modelled: a Disabled node is one SF's PLB counts among
its deactivated nodes.
"""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, fu, movements, node_of, phase, run

from plbjax.errors import BadInput
from plbjax.sf import parse_state

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

METRIC = "MyMetric"


def _nodes(n: int, capacity: float | None = None, **disabled: str) -> list[dict]:
    """N0..N{n-1}, each alone in its fault (dc0/r{i}) and upgrade domain; `disabled` {node: intent}."""
    out = []
    for i in range(n):
        node: dict = {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc0/r{i}", "UpgradeDomain": f"UD{i}"}
        if capacity is not None:
            node["Capacities"] = {METRIC: capacity}
        if f"N{i}" in disabled:
            node |= {"NodeStatus": "Disabled", "DeactivationIntent": disabled[f"N{i}"]}
        out.append(node)
    return out


def _stateful(name: str, target: int, load: float) -> dict:
    metric = {"Name": METRIC, "Weight": "High", "PrimaryDefaultLoad": load, "SecondaryDefaultLoad": load}
    return {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": [metric]}


def _helper(load: float, layout: list[str]) -> dict:
    """SF's BalancingWithDeactivatedNodeHelper (PLBBalancing.Test.cpp:10339): N0 paused, N1 and N2
    (capacity 200) hold five 20-load partitions P/1,S/2; then the test's 1-replica partitions `layout`."""
    services = [_stateful("Initial", 2, 20), _stateful("Test", 1, load)]
    partitions = [fu("Initial", f"i{k}", "P/1, S/2") for k in range(5)]
    partitions += [fu("Test", f"t{k}", spec) for k, spec in enumerate(layout)]
    return document(services, partitions, _nodes(3, 200, N0="Pause"), None, False)


@pytest.mark.parametrize(
    "sf_test, load, layout, moves",
    [
        ("BalancingNotNeededWithDeactivatedNodeBelowAvgTest (:3693)", 10, ["P/0"], 0),
        ("BalancingNotNeededWithDeactivatedNodeAboveAvgTest (:3720)", 20, ["P/0"] * 10, 0),
        ("BalancingNeededWithDeactivatedNodeBelowAvgTest (:3750)", 10, ["P/2"] * 3 + ["P/0"], 1),
        ("BalancingNeededWithDeactivatedNodeAboveAvgTest (:3783)", 20, ["P/0"] * 10 + ["P/2"] * 2, 1),
    ],
)
def test_balancing_leaves_a_paused_node_out(sf_test, load, layout, moves):
    """SF's PLBBalancing.Test.cpp tests named: the paused N0's load is not balanced and its replicas
    stay; balancing runs only when N1 and N2 differ, with SF's single move N2 => N1 (BalanceChecker
    skips deactivated nodes; IConstraint.cpp: no replica moves onto one)."""
    result, after = run(_helper(load, layout), DEFAULT)
    assert len(movements(result)) == moves, (sf_test, result["Actions"])
    assert all(a["SourceNode"] == "N2" and a["TargetNode"] == "N1" for a in movements(result)), sf_test
    assert not result["Unplaced"] and not [a for a in result["Actions"] if a not in movements(result)]
    on_n0 = sum(spec == "P/0" for spec in layout)
    assert sum(n == "N0" for n in node_of(after).values()) == on_n0, sf_test
    if not moves:
        assert not phase(result, "Balancing")["Ran"], sf_test


@pytest.mark.parametrize(
    "sf_test, layout, moves",
    [
        ("DefragNotNeededWithEmptyDeactivatedNodeTest (:3820)", [], 0),
        ("DefragNotNeededWithNotEmptyDeactivatedNodeTest (:3847)", ["P/0"], 0),
        ("DefragNeededWithEmptyDeactivatedNodeTest (:3878)", ["P/1"], 1),
        ("DefragNeededWithNotEmptyDeactivatedNodeTest (:3910)", ["P/0", "P/1"], 1),
    ],
)
def test_defragmentation_leaves_a_paused_node_out(sf_test, layout, moves):
    """SF's PLBBalancing.Test.cpp tests named, on DefragWithDeactivatedNodeHelper (:10374): N0
    paused, N1 and N2 (capacity 100, one fault and upgrade domain); four 10-load primaries on N2,
    then `layout`; MyMetric defragmented with balancing threshold 10. The empty N1 keeps
    defragmentation from triggering; once N1 holds one, SF moves it to N2 (1=>2), N0 left alone."""
    nodes = [dict(n, FaultDomain="fd:/dc0/r0", UpgradeDomain="0") for n in _nodes(3, 100, N0="Pause")]
    partitions = [fu("S", f"p{k}", "P/2") for k in range(4)] + [fu("S", f"q{k}", s) for k, s in enumerate(layout)]
    doc = document([_stateful("S", 1, 10)], partitions, nodes, None, False)
    doc |= {"DefragmentationMetrics": {METRIC: True}, "MetricBalancingThresholds": {METRIC: 10}}
    result, _ = run(doc, DEFAULT)
    assert [(a["Action"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]] == [
        ("MovePrimary", "N1", "N2")
    ] * moves, (sf_test, result["Actions"])


def test_no_balancing_move_goes_to_a_deactivated_node():
    """SF's BalancingWithNodeDeactivationTest (PLBBalancing.Test.cpp:3608): N0-N2 (capacity 200)
    hold six P/0,S/1,S/2 partitions; N3-N27 (capacity 100) take every intent in turn (None, Pause,
    Restart, RemoveData, RemoveNode) under SF's five deactivation statuses. No move goes to a node
    with an intent; those without one (Up here) take the load."""
    intents = ["None", "Pause", "Restart", "RemoveData", "RemoveNode"]
    nodes = _nodes(28, 200)
    for i in range(3, 28):
        nodes[i]["Capacities"] = {METRIC: 100}
        if intents[(i - 3) % 5] != "None":
            nodes[i] |= {"NodeStatus": "Disabled", "DeactivationIntent": intents[(i - 3) % 5]}
    partitions = [fu("S", f"p{k}", "P/0, S/1, S/2") for k in range(6)]
    doc = document([_stateful("S", 3, 20)], partitions, nodes, None, False, Settings={"MaxPercentageToMove": 1.0})
    result, _ = run(doc, DEFAULT)
    disabled = {n["NodeName"] for n in nodes if n.get("NodeStatus") == "Disabled"}
    assert movements(result) and not {a["TargetNode"] for a in movements(result)} & disabled, result["Actions"]


def test_instances_on_every_node_skip_deactivated_nodes_and_keep_theirs():
    """SF's PlacementOnEveryNodeWithDeactivatedNodes (PLBPlacement.Test.cpp:3883): N3 and N4 paused
    (deactivation complete); type T1 blocklisted on N3. Instances go only to the active nodes that
    lack one (SF: "1 add instance 2", "2 add instance 1", two actions); those on N3 and N4 stay."""
    services = [
        {"ServiceName": f"S{k}", "ServiceTypeName": f"T{k}", "ServiceKind": "Stateless", "InstanceCount": -1}
        for k in range(2)
    ]
    partitions = [
        fu("S0", "1", "I/0, I/1, I/2"),
        fu("S0", "2", "I/0, I/1, I/3"),
        fu("S1", "3", "I/0, I/2, I/3, I/4"),
    ]
    doc = document(services, partitions, _nodes(5, N3="Pause", N4="Pause"), None, False)
    doc["BlockList"] = [{"NodeName": "N3", "ServiceTypeName": "T1"}]  # SF's T2, blocked everywhere, has no service
    result, _ = run(doc, DEFAULT)
    actions = sorted((a["PartitionId"], a["Action"], a["TargetNode"]) for a in result["Actions"])
    assert actions == [("2", "AddInstance", "N2"), ("3", "AddInstance", "N1")], result["Actions"]


def _three(intent: str) -> dict:
    """Three partitions P/0,S/1 on N0-N2 and a fourth node N3; N0 deactivated with `intent`."""
    partitions = [fu("S", f"p{k}", "P/0, S/1") for k in range(3)]
    return document([_stateful("S", 2, 10)], partitions, _nodes(4, 100, N0=intent), None, False)


def test_pause_keeps_the_nodes_replicas():
    """Pause: no new replica, nothing moved or shut down (SF's NodeDeactivationIntent.Pause)."""
    result, _ = run(_three("Pause"), DEFAULT)
    assert not [a for a in result["Actions"] if a["SourceNode"] == "N0" or a["TargetNode"] == "N0"]


def test_restart_swaps_the_primaries_out():
    """Restart: the Failover Manager swaps the node's primaries out (safety check WaitForPrimarySwap;
    the PLB's swap of an IsPrimaryToBeSwappedOut primary, PlacementCreator.cpp:532); the secondaries
    stay for the node's return."""
    result, after = run(_three("Restart"), DEFAULT)
    swaps = [a for a in result["Actions"] if a["Action"] == "SwapPrimarySecondary"]
    assert len(swaps) == 3 and all(a["SourceNode"] == "N0" and a["TargetNode"] == "N1" for a in swaps), swaps
    assert {a["Phase"] for a in swaps} == {"Placement"} and "Restart" in swaps[0]["Reason"]
    roles = {(r["NodeName"], r["Role"]) for p in after["Partitions"] for r in p["Replicas"]}
    assert ("N0", "Secondary") in roles and ("N0", "Primary") not in roles


@pytest.mark.parametrize("intent", ["RemoveData", "RemoveNode"])
def test_remove_moves_the_replicas_off(intent):
    """RemoveData / RemoveNode: the node's replicas are built elsewhere before it goes."""
    result, after = run(_three(intent), DEFAULT)
    assert "N0" not in node_of(after).values() and not result["Unplaced"], result["Actions"]
    off = [a for a in result["Actions"] if a["SourceNode"] == "N0"]
    assert {a["Phase"] for a in off} == {"Placement"} and all(intent in a["Reason"] for a in off), off


def test_absent_intent_is_pause_and_only_a_disabled_node_has_one():
    doc = _three("Pause")
    del doc["Nodes"][0]["DeactivationIntent"]
    assert parse_state(doc).nodes[0].deactivation_intent == "Pause"
    doc["Nodes"][0]["NodeStatus"] = "Up"
    doc["Nodes"][0]["DeactivationIntent"] = "Restart"
    with pytest.raises(BadInput, match=r"Nodes\[0\].DeactivationIntent"):
        parse_state(doc)


def test_a_paused_nodes_replica_is_neither_moved_nor_joined():
    """SF's PlacementWithNodeDeactivationTest2 (PLBPlacement.Test.cpp:6896): N0-N4 in dc{i%2}/r{i/2},
    N5 (dc1/r2) paused; a RequireDomainDistribution partition P/0,S/2,S/5 lacks a fourth replica with
    FaultDomainConstraintPriority 0. SF makes no action: no new replica fits the spread, and the
    paused N5's secondary stays."""
    nodes = [dict(n, FaultDomain=f"fd:/dc{i % 2}/r{i // 2}") for i, n in enumerate(_nodes(6, 100, N5="Pause"))]
    service = dict(_stateful("S", 4, 0), PlacementPolicies=[{"Type": "RequireDomainDistribution"}])
    doc = document([service], [fu("S", "p", "P/0, S/2, S/5")], nodes, None, False)
    doc["Settings"] = {"FaultDomainConstraintPriority": 0}
    result, _ = run(doc, DEFAULT)
    assert not result["Actions"], result["Actions"]


def test_instances_on_every_node_skip_a_paused_node():
    """SF's PlacementWithNodeDeactivationTest3 (PLBPlacement.Test.cpp:6927): N3 paused, instances on
    N0, N1 and N3 of a service on every node (SF's test writes them P/0, S/1, S/3 of a stateless
    service with replica difference INT_MAX): SF adds one, "0 add instance 2"."""
    service = {"ServiceName": "S", "ServiceKind": "Stateless", "InstanceCount": -1}
    doc = document([service], [fu("S", "0", "I/0, I/1, I/3")], _nodes(4, N3="Pause"), None, False)
    result, _ = run(doc, DEFAULT)
    assert [(a["Action"], a["TargetNode"]) for a in result["Actions"]] == [("AddInstance", "N2")], result["Actions"]
