"""SF's PLB unit tests on affinity (issue 48: items 1, 8, 9 and more), translated into the contract
with SF's assertions (microsoft/service-fabric, src/prod/src/Reliability/LoadBalancing/*.Test.cpp;
each test names the one it mirrors). One SF refresh is `refresh=True`; the vocabulary (nodes,
services, FailoverUnits, ActionMatch) is tests/sf_affinity_cases.py's.
"""

from __future__ import annotations

import pytest
from sf_affinity_cases import ONES, ZERO_METRICS, count, document, fu, node, nodes, refresh, shown, stateful, stateless

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _weighted(services, partitions, n: int = 5, **settings) -> dict:
    """SF's affinity tests' frame: n nodes, the default metrics at global weight 1 (GlobalMetricWeights)."""
    return document(services, partitions, nodes(n), GlobalMetricWeights=ONES, Settings=settings)


# ----------------------------------------------------------------- item 1: the child follows its parent


def test_constraint_check_moves_children_to_their_parents():
    """SF's ConstraintCheckAffinityViolationsTest (PLBConstraintCheck.Test.cpp:1201), following
    AffinityConstraint::GetInvalidReplicas (only child replicas are invalid) and
    Searcher::SearchForConstraintCheck (the fix, then a balancing of it that moves no more): child 1's
    replicas go to its parent's nodes; child 3's primary to its parent's, and parent 2's secondary
    to child 3's secondary (same movements as the fix, better balanced)."""
    services = [
        stateful("S0", 2, Metrics=ZERO_METRICS),
        stateful("S1", 2, "S0", Metrics=ZERO_METRICS),
        stateful("S2", 2, Metrics=ZERO_METRICS),
        stateful("S3", 2, "S2", Metrics=ZERO_METRICS),
    ]
    layout = ["P/0, S/1", "P/1, S/3", "P/3, S/1", "P/0, S/4"]
    doc = _weighted(services, [fu(f"S{i}", i, r) for i, r in enumerate(layout)], PreferredLocationConstraintPriority=-1)
    result = refresh(doc)
    assert len(result["Actions"]) == 4, shown(result)
    for pattern in ("1 move primary 1=>0", "1 move secondary 3=>1", "2 move secondary 1=>4", "3 move primary 0=>3"):
        assert count(result, pattern) == 1, (pattern, shown(result))


@pytest.mark.parametrize("seed", [0, 1])
def test_constraint_check_swaps_the_childs_primary_to_its_parents(seed):
    """SF's ConstraintCheckAffinityViolationsTest2 (PLBConstraintCheck.Test.cpp:1241): the parent's
    primary on N0, the child's on N1; SF swaps the child's primary onto N0 (AffinitySubspace::
    GetTargetNodes: an aligned child's primary goes to its parent's primary), never the parent's."""
    services = [stateful("S0", 2, Metrics=ZERO_METRICS), stateful("S1", 2, "S0", Metrics=ZERO_METRICS)]
    result = refresh(_weighted(services, [fu("S0", 0, "P/0, S/1"), fu("S1", 1, "P/1, S/0")]), seed)
    assert len(result["Actions"]) == 1 and count(result, "1 swap primary *<=>0") == 1, shown(result)


def test_constraint_check_swaps_one_primary_when_every_node_is_over_capacity():
    """SF's ConstraintCheckAffinityViolationsTest3 (PLBConstraintCheck.Test.cpp:1273): three nodes of
    capacity 100, every parent replica of load 120; one swap fixes the child's alignment."""
    three = [node(i, Capacities={"MyMetric": 100}) for i in range(3)]
    metric = [{"Name": "MyMetric", "Weight": "High", "PrimaryDefaultLoad": 120, "SecondaryDefaultLoad": 120}]
    dummy = [{"Name": "Dummy", "Weight": "High", "PrimaryDefaultLoad": 0, "SecondaryDefaultLoad": 0}]
    services = [stateful("S0", 3, Metrics=metric), stateful("S1", 3, "S0", Metrics=dummy)]
    doc = document(services, [fu("S0", 0, "P/0, S/1, S/2"), fu("S1", 1, "P/1, S/0, S/2")], three)
    result = refresh(doc)
    assert len(result["Actions"]) == 1 and count(result, "* swap primary 0|1<=>1|0") == 1, shown(result)


def test_non_aligned_children_beside_any_parent_replica_are_no_violation():
    """SF's ConstraintCheckAffinityViolationsNonPrimaryAlignmentTest1 (PLBConstraintCheck.Test.cpp:1335):
    non-aligned children whose replicas are all beside parent replicas, whatever their roles: no action."""
    services = [
        stateful("S0", 3, Metrics=ZERO_METRICS),
        stateful("S1", 3, "S0", aligned=False, Metrics=ZERO_METRICS),
        stateful("S2", 2, "S0", aligned=False, Metrics=ZERO_METRICS),
    ]
    layout = [
        ("S0", "P/0, S/2, S/4"),
        ("S1", "S/0, P/2, S/4"),
        ("S1", "S/0, S/2, P/4"),
        ("S2", "P/0, S/2"),
        ("S2", "P/2, S/4"),
    ]
    result = refresh(_weighted(services, [fu(s, i, r) for i, (s, r) in enumerate(layout)]))
    assert result["Actions"] == [], shown(result)


def test_a_child_without_a_parent_partition_is_left_alone():
    """SF's ConstraintCheckAffinityNoParentPartition (PLBConstraintCheck.Test.cpp:1176): the parent
    service has no partition; its child's replicas violate nothing."""
    services = [stateful("S1", 2), stateful("S2", 2, "S1")]
    result = refresh(document(services, [fu("S2", 0, "P/0, S/1")], nodes(2)))
    assert result["Actions"] == [], shown(result)


# ------------------------------------------------------- item 9: a child whose target is larger


def _larger(child_targets: list[int], parent: str, children: list[str], n: int = 5, parent_target: int = 3) -> dict:
    """SF's AffinityChildTargetLarger tests: a parent of `parent_target` replicas (SF's default metrics)
    and aligned children of the given targets."""
    services = [stateful("S0", parent_target)]
    services += [stateful(f"S{k + 1}", t, "S0") for k, t in enumerate(child_targets)]
    partitions = [fu("S0", 0, parent)] + [fu(f"S{k + 1}", k + 1, r) for k, r in enumerate(children)]
    return document(services, partitions, nodes(n))


def test_children_of_larger_target_beside_every_parent_replica_are_no_violation():
    """SF's ConstraintCheckAffinityChildTargetLarger (PLBConstraintCheck.Test.cpp:1554), following
    AllowHigherChildTargetReplicaCountForAffinity (AffinityConstraint::GetInvalidReplicas: a child
    with more replicas than its parent is valid once every parent replica has one beside it)."""
    doc = _larger([4, 5], "P/0, S/1, S/2", ["P/0, S/1, S/2, S/4", "P/0, S/1, S/2, S/3, S/4"])
    result = refresh(doc)
    assert result["Actions"] == [], shown(result)


def test_children_of_larger_target_move_one_replica_beside_the_uncovered_parent():
    """SF's ConstraintCheckAffinityChildTargetLargerInvalidReplicas (PLBConstraintCheck.Test.cpp:1583):
    each child leaves one parent replica without a child beside it; one move each fixes it. (Child 2's
    service asks for 5, its FailoverUnit for its 4: replica difference 0, so nothing to place.)"""
    doc = _larger([4, 4], "P/0, S/1, S/2", ["P/0, S/2, S/3, S/4", "P/0, S/1, S/3, S/4"])
    result = refresh(doc)
    assert len(result["Actions"]) == 2, shown(result)
    assert count(result, "1 move secondary 3|4=>1") == 1 and count(result, "2 move secondary 3|4=>2") == 1, shown(
        result
    )


def test_a_child_of_smaller_target_beside_its_parent_is_no_violation():
    """SF's ConstraintCheckAffinityParentTargetLarger (PLBConstraintCheck.Test.cpp:1644)."""
    doc = _larger([3], "P/0, S/1, S/2, S/3", ["P/0, S/1, S/2"], n=4, parent_target=4)
    assert refresh(doc)["Actions"] == []


def test_a_child_of_smaller_target_moves_its_stray_replica_to_its_parent():
    """SF's ConstraintCheckAffinityParentTargetLargerInvalidReplica (PLBConstraintCheck.Test.cpp:1671)."""
    doc = _larger([3], "P/0, S/1, S/2, S/3", ["P/0, S/3, S/4"], parent_target=4)
    result = refresh(doc)
    assert len(result["Actions"]) == 1 and count(result, "1 move secondary 4=>1|2") == 1, shown(result)


def test_a_larger_child_adds_its_extra_replica_away_from_its_parent():
    """SF's PlacementWithAffinityChildTargetLargerMissingChildReplicas (PLBPlacement.Test.cpp:2533),
    following AffinitySubspace::GetTargetNodes: child 1 (target 4) leaves the parent's N1 uncovered,
    its new replica goes there; child 2 (target 5) covers every parent replica, its new one goes
    anywhere free (N4)."""
    doc = _larger([4, 5], "P/0, S/1, S/2", ["P/0, S/2, S/3", "P/0, S/1, S/2, S/3"])
    result = refresh(doc)
    assert len(result["Actions"]) == 2, shown(result)
    assert count(result, "1 add secondary 1") == 1 and count(result, "2 add secondary 4") == 1, shown(result)


def test_a_larger_child_beside_a_parent_below_its_target_adds_away():
    """SF's PlacementWithAffinityChildTargetLargerMissingChildReplicaParentBelowTarget
    (PLBPlacement.Test.cpp:2564): every existing parent replica is covered, though the parent lacks one."""
    services = [stateful("S0", 3), stateful("S1", 5, "S0")]
    doc = document(services, [fu("S0", 0, "P/0, S/1"), fu("S1", 1, "P/0, S/1, S/2, S/3")], nodes(5))
    result = refresh(doc, one=True)
    placed = [a for a in result["Actions"] if a["PartitionId"] == "1"]
    assert len(placed) == 1 and count(result, "1 add secondary 4") == 1, shown(result)


def test_a_larger_child_in_violation_adds_beside_its_parent():
    """SF's PlacementWithAffinityChildTargetLargerMissingChildReplicaParentBelowTargetAndNotColocated
    (PLBPlacement.Test.cpp:2590): the parent's N1 is uncovered, so the new child replica goes there."""
    services = [stateful("S0", 3), stateful("S1", 5, "S0")]
    doc = document(services, [fu("S0", 0, "P/0, S/1"), fu("S1", 1, "P/0, S/2, S/3, S/4")], nodes(5))
    result = refresh(doc)
    placed = [a for a in result["Actions"] if a["PartitionId"] == "1"]
    assert len(placed) == 1 and count(result, "1 add secondary 1") == 1, shown(result)


def test_a_smaller_child_adds_beside_its_parent():
    """SF's PlacementWithAffinityParentTargetLargerMissingChildReplica (PLBPlacement.Test.cpp:2801)."""
    services = [stateful("S0", 4), stateful("S1", 3, "S0")]
    doc = document(services, [fu("S0", 0, "P/0, S/1, S/3, S/4"), fu("S1", 1, "P/0, S/4")], nodes(5))
    result = refresh(doc)
    assert len(result["Actions"]) == 1 and count(result, "1 add secondary 1|3") == 1, shown(result)


# ------------------------------------------------------------- item 8: affinity during an upgrade


def test_cluster_upgrade_relaxes_affinity_for_placement():
    """SF's PlacementWithClusterUpgradeRelaxAffinity (PLBPlacement.Test.cpp:6961), following
    Searcher::SearchForPlacement (RelaxAffinityConstraintDuringUpgrade, default true: with balancing
    off for a cluster upgrade and nothing placed, placement runs again without affinity): the child's
    new secondary (load 15) fits beside no parent replica (N3 holds 10), so it goes to N1."""
    caps = [20, 20, 20, 10]
    four = [node(i, Capacities={"MyMetric2": c}) for i, c in enumerate(caps)]
    m1 = [{"Name": "MyMetric1", "Weight": "High", "PrimaryDefaultLoad": 0, "SecondaryDefaultLoad": 0}]
    m2 = [{"Name": "MyMetric2", "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 15}]
    services = [stateful("S0", 3, Metrics=m1), stateful("S1", 3, "S0", Metrics=m2)]
    upgrade = {"InProgress": True, "Scope": "Cluster"}
    doc = document(services, [fu("S0", 0, "P/0, S/2, S/3"), fu("S1", 1, "P/0, S/2")], four, Upgrade=upgrade)
    result = refresh(doc)
    assert len(result["Actions"]) == 1 and count(result, "1 add secondary 1") == 1, shown(result)
    off = refresh(dict(doc, Settings={"RelaxAffinityConstraintDuringUpgrade": False}))
    assert off["Actions"] == [] and off["Unplaced"], shown(off)


# ------------------------------------------------------------------------ placement with affinity


def test_new_children_go_beside_their_parents_secondaries():
    """SF's PlacementWithAffinityTest6 (PLBPlacement.Test.cpp:2167): two children with their primary
    beside the parent's on N2 add their secondaries beside the parent's (N3, N4)."""
    services = [stateful("S0", 3, Metrics=ZERO_METRICS), stateful("S1", 3, "S0", Metrics=ZERO_METRICS)]
    partitions = [fu("S0", 0, "P/2, S/3, S/4"), fu("S1", 1, "P/2"), fu("S1", 2, "P/2")]
    result = refresh(_weighted(services, partitions))
    assert len(result["Actions"]) == 4, shown(result)
    assert count(result, "1 add secondary 3|4") == 2 and count(result, "2 add secondary 3|4") == 2, shown(result)


def test_new_non_aligned_children_put_their_primaries_beside_parent_secondaries():
    """SF's PlacementWithAffinityNonPrimaryAlignmentTest (PLBPlacement.Test.cpp:2326): non-aligned
    children of three replicas each over the parent's N2-N4; each primary ends on N3 or N4 (balance:
    PrimaryCount at weight 1, the parent's primary on N2)."""
    services = [stateful("S0", 3, Metrics=ZERO_METRICS), stateful("S1", 3, "S0", aligned=False, Metrics=ZERO_METRICS)]
    partitions = [fu("S0", 0, "P/2, S/3, S/4"), fu("S1", 1), fu("S1", 2)]
    result = refresh(_weighted(services, partitions))
    assert len(result["Actions"]) == 6, shown(result)
    assert count(result, "1 add primary 3|4") == 1 and count(result, "2 add primary 3|4") == 1, shown(result)


def test_a_child_is_added_without_its_parent_when_allowed():
    """SF's PlacementWithAffinityTest9 (PLBPlacement.Test.cpp:2262): PlaceChildWithoutParent true,
    the parent service without a partition: the child's two missing secondaries are added anyway."""
    services = [stateful("S0", 3), stateful("S1", 3, "S0")]
    doc = document(services, [fu("S1", 1, "P/2")], nodes(5), Settings={"PlaceChildWithoutParent": True})
    result = refresh(doc)
    assert len(result["Actions"]) == 2, shown(result)


def test_no_child_is_added_without_its_parent():
    """SF's PlacementWithAffinityTest8 (PLBPlacement.Test.cpp:2238): PlaceChildWithoutParent false."""
    services = [stateful("S0", 3), stateful("S1", 3, "S0")]
    doc = document(services, [fu("S1", 1, "P/2")], nodes(5), Settings={"PlaceChildWithoutParent": False})
    assert refresh(doc)["Actions"] == []


def test_stateless_parent_and_child_instances_stay_together():
    """SF's PlacementWithAffinityTest7 (PLBPlacement.Test.cpp:2202), smaller: the child's partition
    (id 0) comes before its parent's, and the parent's type is blocklisted on N0-N3 of six nodes;
    both new partitions of two replicas are added on N4 and N5, together, none on N0-N3."""
    services = [stateful("S0", 2, ServiceTypeName="Parent"), stateful("S1", 2, "S0", ServiceTypeName="Child")]
    doc = document(services, [fu("S1", 0), fu("S0", 1)], nodes(6))
    doc["BlockList"] = [{"NodeName": f"N{i}", "ServiceTypeName": "Parent"} for i in range(4)]
    result = refresh(doc)
    assert len(result["Actions"]) == 4, shown(result)
    assert count(result, "0 add * 0|1|2|3") == 0 and count(result, "1 add * 0|1|2|3") == 0, shown(result)


def test_stateless_affinity_places_the_instance_beside_the_parent():
    """SF's PlacementWithAffinityTest5 (PLBPlacement.Test.cpp:2125), the stateless half: a child of
    two instances beside a parent on N0 and N1 adds its missing instance on N0."""
    services = [stateless("S0", 2, Metrics=ZERO_METRICS), stateless("S1", 2, "S0", Metrics=ZERO_METRICS)]
    doc = _weighted(services, [fu("S0", 0, "I/0, I/1"), fu("S1", 1, "I/1")])
    result = refresh(doc)
    assert len(result["Actions"]) == 1 and count(result, "1 add instance 0") == 1, shown(result)
