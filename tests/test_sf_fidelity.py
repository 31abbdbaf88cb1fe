"""Zero and special values of SF's throttle settings, placement with moves, PreferUpgradedUDs and
affinity groups in balancing (issue 21.3, 21.8),
as SF's PLB reads them (PLBScheduler.cpp, Searcher.cpp, PlacementAndLoadBalancing.cpp):

- every GlobalMovementThrottleThreshold* of 0 is no limit; they throttle balancing and placement
  with moves, never the constraint check;
- MaxPercentageToMove 0 skips balancing (tests/test_policies.py), MaxPercentageToMoveForPlacement 0
  keeps placement from moving existing replicas, as does MoveExistingReplicaForPlacement false;
- MovementPerPartitionThrottleThreshold freezes, for balancing, the partitions with that many recent
  movements (History), 0 every partition that moved recently;
- ScoreImprovementThreshold: balancing is kept only when AvgStdDev improves by at least that much.
"""

from __future__ import annotations

import pytest
from test_policies import NODES, _stacked, document, movements, node_of, nodes, part, phase, run, service


def _overloaded(**settings) -> dict:
    """N0 (capacity 100) holds 160 + 1: two of its instances must leave."""
    return document(
        [service("fabric:/App/X", 1, 40), service("fabric:/App/Y", 1, 40), service("fabric:/App/Z", -1, 1)],
        [
            *[part("fabric:/App/X", f"x{i}", "N0") for i in range(4)],
            *[part("fabric:/App/Y", f"y{i}", f"N{i + 1}") for i in range(3)],
            part("fabric:/App/Z", "f", *NODES),
        ],
        nodes(capacity=100),
        frame=False,
        Settings=settings,
    )


@pytest.mark.parametrize("threshold", [0, 1])
def test_global_throttle_never_limits_the_constraint_check(threshold):
    result, after = run(_overloaded(GlobalMovementThrottleThreshold=threshold, MaxPercentageToMove=0.01))
    assert phase(result, "ConstraintCheck")["Ran"]
    assert [m["Action"] for m in movements(result)] == ["MoveInstance"] * 2  # 160 -> 80 + 1
    assert sum(1 for n in node_of(after).values() if n == "N0") == 2 + 1


def test_global_throttle_of_zero_is_no_limit():
    free, _ = run(_stacked(GlobalMovementThrottleThreshold=0, MaxPercentageToMove=1.0))
    assert len(movements(free)) > 2


def _full_nodes(**settings) -> dict:
    """Five nodes of capacity 10, each holding two load-2 instances; a new instance of load 9 fits
    only once both leave one node (SF's PlacementWithExistingReplicaMoveTest)."""
    five = nodes(5, capacity=10)
    return document(
        [service("fabric:/App/X", 1, 2), service("fabric:/App/Big", 1, 9)],
        [
            *[part("fabric:/App/X", f"x{i}", f"N{i // 2}") for i in range(10)],
            {"ServiceName": "fabric:/App/Big", "PartitionId": "big", "Replicas": []},
        ],
        five,
        frame=False,
        Settings=settings,
    )


def test_placement_moves_existing_replicas_to_make_room():
    result, after = run(_full_nodes(MaxPercentageToMoveForPlacement=0.5))
    assert not result["Unplaced"]
    assert "existing replicas moved" in phase(result, "Placement")["Reason"]
    assert [m["Action"] for m in movements(result)] == ["MoveInstance"] * 2


@pytest.mark.parametrize(
    "settings",
    [
        {"MaxPercentageToMoveForPlacement": 0.1},  # 1 movement of 10: too few
        {"MaxPercentageToMoveForPlacement": 0},
        {"MoveExistingReplicaForPlacement": False},
    ],
)
def test_placement_with_moves_is_bounded(settings):
    result, _ = run(_full_nodes(**settings))
    assert [u["ServiceName"] for u in result["Unplaced"]] == ["fabric:/App/Big"]
    assert not movements(result)


@pytest.mark.parametrize("threshold, frozen", [(2, False), (1, True), (0, True)])
def test_per_partition_throttle_freezes_partitions_that_moved_recently(threshold, frozen):
    """x0's instance on N0 left N5 recently (History): with a threshold of 1 (or 0) x0 stays."""
    doc = _stacked(MaxPercentageToMove=1.0, MovementPerPartitionThrottleThreshold=threshold)
    doc["History"] = {"x0.0": ["N5"]}
    result, _ = run(doc)
    moved = {a["PartitionId"] for a in movements(result)}
    assert movements(result) and ("x0" not in moved if frozen else True)


def test_score_improvement_threshold_keeps_balancing_that_gains_too_little():
    kept, _ = run(_stacked(MaxPercentageToMove=1.0))
    gain = kept["Score"]["Before"] - kept["Score"]["After"]
    refused, _ = run(_stacked(MaxPercentageToMove=1.0, ScoreImprovementThreshold=gain * 1.5))
    assert not movements(refused) and "no better placement" in phase(refused, "Balancing")["Reason"]


def test_new_replicas_prefer_upgraded_domains():
    """During an upgrade that is done with UD1 and UD2, PreferUpgradedUDs sends a missing secondary
    there (SF's PlacementWithUpgradeCompletedUDsTest1)."""
    stateful = {
        "ServiceName": "fabric:/App/S",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 3,
        "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 5, "SecondaryDefaultLoad": 5}],
    }
    replicas = [
        {"ReplicaId": "s.0", "Role": "Primary", "NodeName": "N0"},
        {"ReplicaId": "s.1", "Role": "Secondary", "NodeName": "N5"},
    ]
    upgrade = {"InProgress": True, "Scope": "Cluster", "UpgradeDomainsDone": ["UD1", "UD2"]}
    doc = document(
        [stateful, service("fabric:/App/X", 1, 1)],
        [{"ServiceName": "fabric:/App/S", "PartitionId": "s", "Replicas": replicas}, part("fabric:/App/X", "x", "N3")],
        frame=False,
        Upgrade=upgrade,
        Settings={"PreferUpgradedUDs": True},
    )
    result, _ = run(doc)
    added = [a["TargetNode"] for a in result["Actions"] if a["Action"].startswith("Add")]
    assert len(added) == 1 and added[0] in ("N1", "N2"), result["Actions"]


def test_aligned_affinity_groups_move_together_in_balancing():
    """Two parents and their aligned children, all with the primary on N0 and the secondary on N1
    (SF's BalancingWithAffinityTest): balancing moves parent and child replicas together, so every
    child replica ends beside its parent's replica of the same role."""

    def stateful(name, parent=None):
        svc = {
            "ServiceName": name,
            "ServiceKind": "Stateful",
            "TargetReplicaSetSize": 2,
            "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 10}],
        }
        if parent:
            svc["Correlations"] = [{"ServiceName": parent, "Scheme": "AlignedAffinity"}]
        return svc

    names = ["fabric:/App/P0", "fabric:/App/C0", "fabric:/App/P1", "fabric:/App/C1"]
    services = [stateful(names[0]), stateful(names[1], names[0]), stateful(names[2]), stateful(names[3], names[2])]
    partitions = [
        {
            "ServiceName": n,
            "PartitionId": f"p{i}",
            "Replicas": [
                {"ReplicaId": f"p{i}.0", "Role": "Primary", "NodeName": "N0"},
                {"ReplicaId": f"p{i}.1", "Role": "Secondary", "NodeName": "N1"},
            ],
        }
        for i, n in enumerate(names)
    ]
    doc = document(services, partitions, nodes(4), activity=None, frame=False, Settings={"MaxPercentageToMove": 1.0})
    result, after = run(doc)
    assert movements(result) and result["Score"]["After"] < result["Score"]["Before"]
    where = {r["ReplicaId"]: (r["NodeName"], r["Role"]) for p in after["Partitions"] for r in p["Replicas"]}
    for parent, child in ((0, 1), (2, 3)):
        for k in (0, 1):
            assert where[f"p{parent}.{k}"] == where[f"p{child}.{k}"], where


def test_new_parent_replicas_go_beside_their_children():
    """A parent with three replicas to place and an aligned child already placed on N1-N3 (SF's
    PlacementWithAffinityTest3): three adds, primary beside the child's primary; no child moves."""

    def stateful(name, **extra):
        return {
            "ServiceName": name,
            "ServiceKind": "Stateful",
            "TargetReplicaSetSize": 3,
            "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 10}],
        } | extra

    child = [
        {"ReplicaId": f"c.{k}", "Role": role, "NodeName": f"N{k + 1}"}
        for k, role in enumerate(["Primary", "Secondary", "Secondary"])
    ]
    doc = document(
        [
            stateful("fabric:/App/P"),
            stateful("fabric:/App/C", Correlations=[{"ServiceName": "fabric:/App/P", "Scheme": "AlignedAffinity"}]),
        ],
        [
            {"ServiceName": "fabric:/App/P", "PartitionId": "p", "Replicas": []},
            {"ServiceName": "fabric:/App/C", "PartitionId": "c", "Replicas": child},
        ],
        nodes(5),
        activity=None,
        frame=False,
    )
    result, _ = run(doc)
    adds = sorted((a["Action"], a["TargetNode"]) for a in result["Actions"])
    assert adds == [("AddPrimary", "N1"), ("AddSecondary", "N2"), ("AddSecondary", "N3")], result["Actions"]
