"""Zero and special values of SF's throttle settings, placement with moves, PreferUpgradedUDs and
affinity groups in balancing (issue 21.3, 21.8),
as SF's PLB reads them (PLBScheduler.cpp, Searcher.cpp, PlacementAndLoadBalancing.cpp):

- every GlobalMovementThrottleThreshold* of 0 is no limit; they throttle balancing and placement
  with moves, never the constraint check;
- MaxPercentageToMove 0 skips balancing (tests/sf/phases/test_balancing_policies.py), MaxPercentageToMoveForPlacement 0
  keeps placement from moving existing replicas, as does MoveExistingReplicaForPlacement false;
- MovementPerPartitionThrottleThreshold freezes, for balancing, the partitions with that many recent
  movements (History), 0 every partition that moved recently;
- ScoreImprovementThreshold: balancing is kept only when AvgStdDev improves by at least that much.
"""

from __future__ import annotations

import dataclasses

import pytest
from sf_cases import (
    DEFAULT,
    NODES,
    document,
    fu,
    movements,
    node_of,
    nodes,
    part,
    phase,
    run,
    service,
    sf_nodes,
    stacked,
)

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


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
    free, _ = run(stacked(GlobalMovementThrottleThreshold=0, MaxPercentageToMove=1.0))
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
    doc = stacked(MaxPercentageToMove=1.0, MovementPerPartitionThrottleThreshold=threshold)
    doc["History"] = {"x0.0": ["N5"]}
    result, _ = run(doc)
    moved = {a["PartitionId"] for a in movements(result)}
    assert movements(result) and ("x0" not in moved if frozen else True)


def test_score_improvement_threshold_keeps_balancing_that_gains_too_little():
    kept, _ = run(stacked(MaxPercentageToMove=1.0))
    gain = kept["Score"]["Before"] - kept["Score"]["After"]
    refused, _ = run(stacked(MaxPercentageToMove=1.0, ScoreImprovementThreshold=gain * 1.5))
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


# ------------------------------------------- issue 33: SF's unit-test situations, default search


@pytest.mark.parametrize("seed", [0, 2])
def test_basic_balancing_makes_sfs_three_movements(seed):
    """SF's BalancingBasicTest (PLBBalancing.Test.cpp): five nodes, five two-replica partitions with
    SF's default metrics; SF moves two primaries (to N2 and N4) and a secondary (to N0), a perfect
    spread in three movements. One wide chain used to stop at a swap and two moves short of it."""
    layout = ["P/0, S/3", "P/1, S/2", "P/3, S/1", "P/3, S/1", "P/1, S/4"]
    svc = {"ServiceName": "TestService", "ServiceKind": "Stateful", "TargetReplicaSetSize": 2}
    doc = document([svc], [fu("TestService", f"p{i}", r) for i, r in enumerate(layout)], sf_nodes(5), None, False)
    result, _ = run(doc, dataclasses.replace(DEFAULT, seed=seed))
    assert len(movements(result)) == 3 and result["Score"]["After"] < 1e-6, result["Actions"]
    assert sorted((a["Action"], a["TargetNode"]) for a in movements(result) if a["Action"] == "MovePrimary") == [
        ("MovePrimary", "N2"),
        ("MovePrimary", "N4"),
    ]


def test_balancing_with_a_blocklist_makes_sfs_twelve_movements():
    """SF's BalancingWithServiceTypeBlockListTest: six nodes, both service types blocklisted on N4
    and N5, eight two-replica partitions and four two-instance ones all on N0 and N1; SF spreads them
    over N0-N3 in 12 movements, none to a blocklisted node."""
    services = [
        {"ServiceName": "S0", "ServiceTypeName": "T1", "ServiceKind": "Stateful", "TargetReplicaSetSize": 2},
        {"ServiceName": "S1", "ServiceTypeName": "T2", "ServiceKind": "Stateless", "InstanceCount": 2},
    ]
    partitions = [fu("S0", f"p{i}", "P/0, S/1" if i % 2 == 0 else "S/0, P/1") for i in range(8)]
    partitions += [fu("S1", f"q{i}", "I/0, I/1") for i in range(4)]
    doc = document(services, partitions, sf_nodes(6), None, False, Settings={"MaxPercentageToMove": 1.0})
    doc["BlockList"] = [{"NodeName": f"N{n}", "ServiceTypeName": t} for n in (4, 5) for t in ("T1", "T2")]
    result, _ = run(doc, DEFAULT)
    assert len(movements(result)) == 12 and result["Score"]["After"] < 1e-6, result["Actions"]
    assert {a["TargetNode"] for a in movements(result)} <= {"N2", "N3"}


def _move_costs(low: int) -> dict:
    """SF's ConstraintCheckRespectMoveCostMedium*: `low` one-load primaries of Low move cost and one
    30-load primary of Medium cost (15) on N0 of capacity 50; CPU's weight is 0 (no balancing)."""
    two = [dict(n, Capacities={"CPU": 50}) for n in sf_nodes(2)]
    services, partitions = [], []
    for i in range(low + 1):
        large = i == low
        name = "Large" if large else f"S{i}"
        load = 30 if large else 1
        services.append(
            {
                "ServiceName": name,
                "ServiceKind": "Stateful",
                "TargetReplicaSetSize": 1,
                "Metrics": [
                    {"Name": "CPU", "Weight": "Zero", "PrimaryDefaultLoad": load, "SecondaryDefaultLoad": load}
                ],
                "DefaultMoveCost": "Medium" if large else "Low",
            }
        )
        partitions.append(fu(name, f"p{i}", "P/0"))
    doc = document(services, partitions, two, None, False, GlobalMetricWeights={"CPU": 0.0})
    doc["Settings"] = {"UseMoveCostReports": True}
    return doc


@pytest.mark.parametrize("low, moved", [(30, 10), (40, 1)])
def test_constraint_check_minimises_the_cost_of_its_fix(low, moved):
    """SF's ConstraintCheckRespectMoveCostMediumPositive / Negative (PLBConstraintCheck.Test.cpp):
    10 Low moves (cost 10) beat the Medium one (15); the Medium one beats 20 Low moves (20)."""
    result, _ = run(_move_costs(low), dataclasses.replace(DEFAULT, seed=1))  # seed 1: one wide chain moved 20
    ids = {a["PartitionId"] for a in movements(result)}
    assert len(ids) == moved and ((f"p{low}" in ids) == (moved == 1)), result["Actions"]


def test_new_primaries_go_to_the_preferred_primary_domain():
    """PreferPrimaryDomain (SF's PreferredLocation constraint for primaries, optimization priority):
    ten new three-replica partitions over three fault domains of two nodes each; every primary is
    added in fd:/dc0, which always holds one of the partition's replicas. Choosing which new replica
    is the primary is no movement (SF's adds), so placement may hand the role to the one in dc0."""
    svc = {
        "ServiceName": "S",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 3,
        "PlacementPolicies": [{"Type": "PreferPrimaryDomain", "DomainName": "fd:/dc0"}],
    }
    empty = [{"ServiceName": "S", "PartitionId": f"p{i}", "Replicas": []} for i in range(10)]
    result, _ = run(document([svc], empty, sf_nodes(6, [0, 0, 1, 1, 2, 2]), None, False), DEFAULT)
    primaries = [a["TargetNode"] for a in result["Actions"] if a["Action"] == "AddPrimary"]
    assert len(primaries) == 10 and set(primaries) <= {"N0", "N1"}, result["Actions"]


def test_fault_domain_spread_counts_a_misplaced_replica_in_a_usable_domain():
    """SF's FaultDomainConstraint::HasDomainViolation leaves out of the spread only replicas in
    domains with no node the service may use. Four fault domains of two nodes; a four-replica
    partition has one replica in each, its primary on N0, which its placement constraint excludes
    (N1 in the same domain is allowed): the spread holds, and the fix moves the primary to N1 rather
    than emptying a domain into another."""
    eight = [
        dict(n, FaultDomain=f"fd:/dc{i // 2}", PlacementProperties={"Home": "Bad" if i == 0 else "Ok"})
        for i, n in enumerate(nodes())
    ]
    svc = {
        "ServiceName": "fabric:/App/S",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 4,
        "PlacementConstraints": "Home != Bad",
        "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 1, "SecondaryDefaultLoad": 1}],
    }
    doc = document([svc], [fu("fabric:/App/S", "s", "P/0, S/2, S/4, S/6")], eight, frame=False)
    result, after = run(doc)
    assert "violations reduced" in phase(result, "ConstraintCheck")["Reason"]
    assert node_of(after) == {"s.0": "N1", "s.1": "N2", "s.2": "N4", "s.3": "N6"}, result["Actions"]


def test_aligned_parent_and_child_primaries_swap_together():
    """SF's BalancingWithAffinityTest2 (PLBBalancing.Test.cpp): six parent/child pairs on three
    nodes, parents weighted by PrimaryCount and SecondaryCount, three pairs with their primaries on
    N0 and three on N1: SF swaps two parents' primaries to N2, each child's with its parent's (four
    swaps), so every aligned child keeps its primary beside its parent's."""
    services, partitions = [], []
    for i in range(6):
        parent, child = f"fabric:/App/P{i}", f"fabric:/App/C{i}"
        counts = [{"Name": "PrimaryCount", "Weight": "High"}, {"Name": "SecondaryCount", "Weight": "High"}]
        services.append(
            {"ServiceName": parent, "ServiceKind": "Stateful", "TargetReplicaSetSize": 3, "Metrics": counts}
        )
        services.append(
            {
                "ServiceName": child,
                "ServiceKind": "Stateful",
                "TargetReplicaSetSize": 3,
                "Metrics": [{"Name": "Count", "Weight": "Zero"}],
                "Correlations": [{"ServiceName": parent, "Scheme": "AlignedAffinity"}],
            }
        )
        layout = "P/0, S/1, S/2" if i < 3 else "P/1, S/0, S/2"
        partitions += [fu(parent, f"p{i}", layout), fu(child, f"c{i}", layout)]
    result, after = run(document(services, partitions, sf_nodes(3), None, False), DEFAULT)
    swaps = [(a["PartitionId"][1], a["TargetNode"]) for a in result["Actions"] if a["Action"] == "SwapPrimarySecondary"]
    assert len(result["Actions"]) == 4 and len(swaps) == 4, result["Actions"]
    assert {node for _, node in swaps} == {"N2"} and sorted(i for i, _ in swaps) == sorted([*{i for i, _ in swaps}] * 2)
    primary = {
        p["PartitionId"]: r["NodeName"] for p in after["Partitions"] for r in p["Replicas"] if r["Role"] == "Primary"
    }
    assert all(primary[f"p{i}"] == primary[f"c{i}"] for i in range(6))


def _move_cost_singletons(cost: str) -> dict:
    """SF's BalancingWithMoveCost: two nodes (MyMetric capacity 100), three singleton partitions on
    N0 with loads 50, 25, 25; the 50 one reports MoveCost `cost`. SF's test configuration moves up
    to all replicas (MaxPercentageToMove 1, LoadBalancing.Test.exe.cfg)."""
    two = [dict(n, Capacities={"MyMetric": 100}) for n in sf_nodes(2)]
    metric = {"Name": "MyMetric", "Weight": "High", "PrimaryDefaultLoad": 0, "SecondaryDefaultLoad": 0}
    svc = {"ServiceName": "TestService", "ServiceKind": "Stateful", "TargetReplicaSetSize": 1, "Metrics": [metric]}
    partitions = [fu("TestService", f"p{i}", "P/0") for i in range(3)]
    for partition, load in zip(partitions, (50, 25, 25)):
        partition["Replicas"][0]["Loads"] = {"MyMetric": load}
    partitions[0]["Replicas"][0]["MoveCost"] = cost
    doc = document([svc], partitions, two, None, False)
    doc["Settings"] = {"UseMoveCostReports": True, "MaxPercentageToMove": 1}
    return doc


@pytest.mark.parametrize("cost, moved", [("High", ["p1", "p2"]), ("Zero", ["p0"])])
def test_balancing_moves_the_cheap_replicas_when_the_large_one_is_dear(cost, moved):
    """SF's BalancingWithMoveCost (PLBBalancing.Test.cpp): with the 50 one's MoveCost High, SF moves
    the two cheap ones (2 actions, none of partition 0); with it Zero, partition 0 alone. Both
    balance exactly: SF's energy, which charges the move costs, decides, not the count of
    movements (a search allowed fewer movements wins only at no higher energy)."""
    result, _ = run(_move_cost_singletons(cost), DEFAULT)
    assert sorted(a["PartitionId"] for a in movements(result)) == moved, result["Actions"]
    assert result["Score"]["After"] < 1e-6


def test_ignoring_the_cost_in_scoring_the_dear_replica_moves_alone():
    """BalancingWithMoveCost's cluster (MoveCost High on the 50 one) with IgnoreCostInScoring: SF's
    energy is AvgStdDev alone (Score.cpp:577), so moving partition 0 (cost 40) and moving the two
    cheap ones (cost 2) score the same, and the fewer movements win: partition 0 alone moves."""
    doc = _move_cost_singletons("High")
    doc["Settings"]["IgnoreCostInScoring"] = True
    result, _ = run(doc, DEFAULT)
    assert [a["PartitionId"] for a in movements(result)] == ["p0"], result["Actions"]
    assert result["Score"]["After"] < 1e-6
