"""SF's constraint-check unit tests of issue 60 (item 8), translated into the contract with SF's
assertions (microsoft/service-fabric, src/prod/src/Reliability/LoadBalancing/PLBConstraintCheck.Test.cpp;
each test names the one it mirrors; SF's tests run with LoadBalancing.Test.exe.cfg). One SF refresh
is `refresh`; the vocabulary is tests/sf_affinity_cases.py's.
"""

from __future__ import annotations

import pytest
from sf_affinity_cases import ONES, ZERO_METRICS, count, document, fu, node, nodes, refresh, shown, stateful
from sf_cases import phase

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def test_a_replica_on_a_blocklisted_node_does_not_move_for_the_fault_domains():
    """SF's ConstraintCheckFaultDomainShouldRun (PLBConstraintCheck.Test.cpp:743): dc1 holds four of
    five replicas, one on N2, which blocks the type; PlacementConstraintPriority -1. SF's constraint
    check runs, and the replica out of place is the one on N2 (FaultDomainConstraint::GetInvalidReplicas:
    a replica in a domain without a node the service may use leaves first), which is in transition
    and cannot move: no action."""
    layout = ["dc0/r1", "dc1/r1", "dc1/r2", "dc1/r3", "dc1/r4", "dc0/r2"]
    doc = document(
        [stateful("S", 5)], [fu("S", 0, "P/0, S/1, S/2, S/3, S/4")], [node(i, fd) for i, fd in enumerate(layout)]
    )
    doc["BlockList"] = [{"NodeName": "N2", "ServiceTypeName": "TestType"}]
    doc["Settings"] = {"PlacementConstraintPriority": -1}
    result = refresh(doc)
    assert phase(result, "ConstraintCheck")["Ran"], result["Phases"]
    assert result["Actions"] == [], shown(result)


def test_a_fault_domain_violation_with_a_movable_replica_out_of_place_is_fixed():
    """The same cluster without the block list: the replica out of place may move, and one move into
    dc0 fixes the spread (SF's constraint check, FaultDomainConstraint::GetInvalidReplicas)."""
    layout = ["dc0/r1", "dc1/r1", "dc1/r2", "dc1/r3", "dc1/r4", "dc0/r2"]
    doc = document(
        [stateful("S", 5)], [fu("S", 0, "P/0, S/1, S/2, S/3, S/4")], [node(i, fd) for i, fd in enumerate(layout)]
    )
    doc["Settings"] = {"PlacementConstraintPriority": -1}
    result = refresh(doc)
    assert count(result, "0 move * 1|2|3|4=>5") == 1 and len(result["Actions"]) == 1, shown(result)


def test_the_parent_moves_when_that_fixes_both_children_with_fewer_movements():
    """SF's ConstraintCheckAffinityViolationsNonPrimaryAlignmentTest2 (PLBConstraintCheck.Test.cpp:1374):
    parent 0 on N0, N2, N4; a non-aligned child (1) and an aligned one (2), each S/0, P/3, S/4, so
    both have a replica on N3 beside no parent replica. Moving the children fixes it in three
    movements; SF's constraint check then balances its fix (Searcher::SearchForConstraintCheck: the
    annealing from the fix is kept when it makes no more movements and AvgStdDev is no higher), which
    finds two: the parent's secondary 2=>3 and child 2's primary swapped to N0."""
    services = [
        stateful("S0", 3, Metrics=ZERO_METRICS),
        stateful("S1", 3, "S0", aligned=False, Metrics=ZERO_METRICS, DefaultMoveCost="Low"),
        stateful("S2", 3, "S0", Metrics=ZERO_METRICS, DefaultMoveCost="Low"),
    ]
    partitions = [fu("S0", 0, "P/0, S/2, S/4"), fu("S1", 1, "S/0, P/3, S/4"), fu("S2", 2, "S/0, P/3, S/4")]
    settings = {"PreferredLocationConstraintPriority": -1}
    doc = document(services, partitions, nodes(5), GlobalMetricWeights=ONES, Settings=settings)
    result = refresh(doc)
    assert len(result["Actions"]) == 2, shown(result)
    assert count(result, "0 move secondary 2=>3") == 1, shown(result)
    assert count(result, "2 swap primary 3<=>0") == 1, shown(result)


def test_a_deactivated_domain_under_the_quorum_rule_needs_no_fix_and_hands_its_primaries_over():
    """SF's ConstraintCheckQuorumBasedDeactivationCompleteDomainTest (PLBConstraintCheck.Test.cpp:3309):
    the four nodes of dc0 (upgrade domain 0) deactivated with Restart (DeactivationComplete), the
    quorum rule on both domain kinds, four five-replica partitions with their primaries on N0. SF's
    check runs (its scheduler's one action: the placement and balancing intervals are MaxValue) and
    moves nothing: under the quorum rule the spread is no violation (plbjax's refresh finds none, so
    its constraint check has no work). SF's PLB test
    asserts 0 actions because its Failover Manager is not there: the FM marks a primary on a node
    deactivated with Restart IsPrimaryToBeSwappedOut (StateUpdateTask.cpp:137-152, IsSwapPrimaryNeeded
    and FailoverUnit::IsReplicaMoveNeededDuringDeactivateNode: intent Restart, a current primary,
    TargetReplicaSetSize > 1, quorum not lost; whatever the deactivation status), and the PLB then
    swaps it out (PlacementCreator.cpp:532). plbjax plans both, as one cluster does: each primary
    swapped to a secondary on an Up node (Phase Placement, which says it ran), nothing moved."""
    restart = {"NodeStatus": "Disabled", "DeactivationIntent": "Restart"}
    layout = [("dc0/rack0", "0"), ("dc0/rack0", "0"), ("dc0/rack1", "0"), ("dc0/rack1", "0")]
    layout += [("dc1/rack0", "1"), ("dc1/rack0", "1"), ("dc1/rack1", "1")]
    layout += [("dc2/rack0", "2"), ("dc2/rack0", "2"), ("dc2/rack1", "2")]
    node_list = [node(i, fd, ud, **(restart if i < 4 else {})) for i, (fd, ud) in enumerate(layout)]
    replicas = ["P/0, S/1, S/2, S/3, S/4", "P/0, S/1, S/2, S/4, S/5", "P/0, S/1, S/2, S/4, S/7"]
    replicas.append("P/0, S/1, S/4, S/5, S/7")
    settings = {
        "QuorumBasedReplicaDistributionPerUpgradeDomains": True,
        "QuorumBasedReplicaDistributionPerFaultDomains": True,
        "LoadBalancingEnabled": False,  # SF's MinLoadBalancingInterval: TimeSpan::MaxValue
    }
    partitions = [fu("S", i, r) for i, r in enumerate(replicas)]
    result = refresh(document([stateful("S", 5)], partitions, node_list, Settings=settings))
    assert count(result, "* move * *=>*") == 0, shown(result)
    assert count(result, "* swap primary 0<=>4|5|7") == 4 and len(result["Actions"]) == 4, shown(result)
    assert all(a["Phase"] == "Placement" for a in result["Actions"]) and phase(result, "Placement")["Ran"]
    assert not result["Remaining"]["Violations"], result["Remaining"]
