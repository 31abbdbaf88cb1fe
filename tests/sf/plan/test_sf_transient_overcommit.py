"""SF's PreventTransientOvercommit, translated (PLBBalancing.Test.cpp, PLBPlacement.Test.cpp): a
node's capacity holds the load moving away from it until those movements finish, so no move or swap
may overcommit a node in the intermediate state (NodeCapacityConstraint.cpp:486, the moving-in
changes only). SF's default (false) counts the load moving away as gone at once."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from sf_cases import DEFAULT, document, fu, movements, run, sf_nodes

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

SF_TEST = {"MaxPercentageToMove": 1.0}  # LoadBalancing.Test.exe.cfg
DEFRAG = {"DefragmentationMetrics": {"DefragMetric": True}}


def _stateful(name: str, target: int, metrics: Mapping[str, tuple[str, float, float]]) -> dict:
    """CreateServiceDescription(name, type, true, CreateMetrics("M/weight/p/s, ...")): {M: (weight, p, s)}."""
    return {
        "ServiceName": name,
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": target,
        "Metrics": [
            {"Name": m, "Weight": w, "PrimaryDefaultLoad": p, "SecondaryDefaultLoad": s}
            for m, (w, p, s) in metrics.items()
        ],
    }


def _nodes(n: int, rack, capacities: dict) -> list[dict]:
    """CreateNodeDescriptionWithFaultDomainAndCapacity(i, "dc0/r{rack(i)}", capacities)."""
    return [dict(node, FaultDomain=f"fd:/dc0/r{rack(i)}", Capacities=capacities) for i, node in enumerate(sf_nodes(n))]


def _defrag_move(**settings) -> dict:
    """PLBBalancing.Test.cpp:3084 DefragMoveOvercommitInIntermediateStateTest: two nodes (rack r0,
    DefragMetric capacity 70); singleton primaries of DefragMetric 40 and 10 on N0 (load 50), 30 and
    10 on N1 (40). Defragmentation aims at 70 and 20."""
    loads = [40, 10, 30, 10]
    services = [_stateful(f"S{i}", 1, {"DefragMetric": ("High", load, 0)}) for i, load in enumerate(loads)]
    partitions = [fu(f"S{i}", str(i), f"P/{i // 2}") for i in range(4)]
    return document(
        services,
        partitions,
        _nodes(2, lambda i: 0, {"DefragMetric": 70}),
        None,
        False,
        Settings=SF_TEST | settings,
        MetricBalancingThresholds={"DefragMetric": 1},
        **DEFRAG,
    )


def test_defragmentation_moves_nothing_that_overcommits_a_node_on_the_way():
    """SF with PreventTransientOvercommit: no "0 move primary 0 => 1" (N1 would hold 40 + 40 while
    N0's 40 is on its way) and no "2 move primary 1 => 0" (N0: 50 + 30), one action in all."""
    result, _ = run(_defrag_move(PreventTransientOvercommit=True), DEFAULT)
    moved = [(a["PartitionId"], a["SourceNode"], a["TargetNode"]) for a in movements(result)]
    assert ("0", "N0", "N1") not in moved and ("2", "N1", "N0") not in moved, moved
    assert len(result["Actions"]) == 1, result["Actions"]


def test_the_deprecated_name_prevents_it_too():
    """PreventIntermediateOvercommit, SF's earlier name (SearcherSettings.h:42: either turns it on)."""
    result, _ = run(_defrag_move(PreventIntermediateOvercommit=True), DEFAULT)
    moved = [(a["PartitionId"], a["SourceNode"], a["TargetNode"]) for a in movements(result)]
    assert ("0", "N0", "N1") not in moved and ("2", "N1", "N0") not in moved, moved


def test_defragmentation_swaps_nothing_that_overcommits_a_node_on_the_way():
    """PLBBalancing.Test.cpp:3139 DefragSwapOvercommitInIntermediateStateTest: two nodes (racks r0,
    r1; BalancingMetric capacity 200, DefragMetric 1000); two partitions (BalancingMetric 80/10 at
    weight 0.1, DefragMetric 10/10) P/0,S/1 and P/1,S/0; fourteen singletons (10/10 each), six on
    N0 and eight on N1. Loads: BalancingMetric 150 and 170. SF's target (a swap of a primary to N0
    and six moves away from it) would take N0 to 220 on the way: SF makes 1 to 5 actions, no swap."""
    metrics = lambda p: {"BalancingMetric": ("Low", p, 10), "DefragMetric": ("High", 10, 10)}
    services = [_stateful(f"S{i}", 2, metrics(80)) for i in range(2)]
    services += [_stateful(f"S{i}", 1, metrics(10)) for i in range(2, 16)]
    partitions = [fu("S0", "0", "P/0, S/1"), fu("S1", "1", "P/1, S/0")]
    partitions += [fu(f"S{i}", str(i), f"P/{0 if i < 8 else 1}") for i in range(2, 16)]
    doc = document(
        services,
        partitions,
        _nodes(2, lambda i: i % 2, {"BalancingMetric": 200, "DefragMetric": 1000}),
        None,
        False,
        Settings=SF_TEST | {"PreventTransientOvercommit": True},
        MetricBalancingThresholds={"DefragMetric": 1, "BalancingMetric": 1},
        **DEFRAG,
    )
    result, _ = run(doc, DEFAULT)
    assert 0 < len(result["Actions"]) < 6, result["Actions"]
    assert not [a for a in result["Actions"] if a["Action"] == "SwapPrimarySecondary"], result["Actions"]


def _no_room(**settings) -> dict:
    """PLBPlacement.Test.cpp:10206 ImprovePlacementWithMovePreventTransientOverCommitNoMovement: N0
    (TypeA) and N1 (TypeB), capacity 100 each; TestService0's primary (load 100) on N0; TestService1
    (load 100, "Type == TypeA") to place. Only N0 may hold it, and only once TestService0 has left."""
    nodes = [
        dict(node, Capacities={"MyMetric": 100}, PlacementProperties={"Type": kind})
        for node, kind in zip(sf_nodes(2), ("TypeA", "TypeB"))
    ]
    load = {"MyMetric": ("High", 100, 100)}
    services = [_stateful("TestService0", 1, load), _stateful("TestService1", 1, load)]
    services[1]["PlacementConstraints"] = "Type == TypeA"
    partitions = [fu("TestService0", "0", "P/0"), {"ServiceName": "TestService1", "PartitionId": "1", "Replicas": []}]
    settings = {
        "MoveExistingReplicaForPlacement": True,
        "MaxPercentageToMoveForPlacement": 1.0,
        "ConstraintCheckEnabled": False,
        "LoadBalancingEnabled": False,
    } | settings
    return document(services, partitions, nodes, None, False, Settings=SF_TEST | settings)


def test_placement_moves_nothing_to_make_room_it_would_overcommit():
    """SF: no action in either refresh (placement with moves would put the new replica on N0 while
    TestService0's load is still leaving it)."""
    result, _ = run(_no_room(PreventTransientOvercommit=True), DEFAULT)
    assert result["Actions"] == []


def test_placement_makes_room_without_the_setting():
    """SF's default: TestService0 moves to N1 and TestService1 is placed on N0."""
    result, _ = run(_no_room(), DEFAULT)
    kinds = sorted((a["Action"], a["TargetNode"]) for a in result["Actions"])
    assert kinds == [("AddPrimary", "N0"), ("MovePrimary", "N1")], result["Actions"]
