"""SF's AllowHigherChildTargetReplicaCountForAffinity, translated (PLBPlacement.Test.cpp). With the
setting true (SF's default) a child with a larger target than its parent may place its replicas
beyond the parent's anywhere once one is beside every parent replica; with it false every child
replica must be beside a parent replica (AffinityConstraint.cpp:128, AffinitySubspace::GetTargetNodes)."""

from __future__ import annotations

import pytest
from sf_affinity_cases import ONES, ZERO_METRICS, count, document, fu, nodes, refresh, shown, stateful, stateless

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _affinity_test5(**settings) -> dict:
    """PLBPlacement.Test.cpp:2125 PlacementWithAffinityTest5: five nodes; a stateless parent (I/0,
    I/1) and its child (I/1, two more to place); a stateful parent (P/2, S/3) and its child (P/2, two
    more to place). SF's targets of the children are those of their parents (the two extra
    replicas are the failover unit's ReplicaDifference), so SF's test runs the rule of the setting
    false: here the children's larger targets with the setting false."""
    services = [
        stateless("TestService0", 2, Metrics=ZERO_METRICS),
        stateless("TestService1", 3, "TestService0", Metrics=ZERO_METRICS),
        stateful("TestService2", 2, Metrics=ZERO_METRICS),
        stateful("TestService3", 3, "TestService2", Metrics=ZERO_METRICS),
    ]
    partitions = [fu("TestService0", 0, "I/0, I/1"), fu("TestService1", 1, "I/1")]
    partitions += [fu("TestService2", 2, "P/2, S/3"), fu("TestService3", 3, "P/2")]
    return document(services, partitions, nodes(5), GlobalMetricWeights=ONES, Settings=settings)


def test_a_larger_child_places_only_beside_its_parent_with_the_setting_false():
    """SF: 2 actions, one "1 add instance *" and one "3 add secondary *" ("Extra instances/replicas
    of child service should not get placed; replicaDifference is 2, but only 1 is placed"), each
    beside the parent's other replica (N0; N3)."""
    result = refresh(_affinity_test5(AllowHigherChildTargetReplicaCountForAffinity=False))
    assert len(result["Actions"]) == 2, shown(result)
    assert count(result, "1 add instance 0") == 1 and count(result, "3 add secondary 3") == 1, shown(result)


def test_a_larger_child_places_its_extra_replicas_with_the_setting_true():
    """The same cluster with SF's default: once a child replica is beside each parent replica the
    extra one may go anywhere (AffinityConstraint.cpp:128): both children are fully placed."""
    result = refresh(_affinity_test5())
    assert count(result, "1 add instance *") == 2 and count(result, "3 add secondary *") == 2, shown(result)


def _directional_block_list(**settings) -> dict:
    """PLBPlacement.Test.cpp:5026 PlacementWithDirectionalAffinityAndBlockList, its second refresh:
    four nodes; the parent TestService1 (P/0, S/1, S/2), its child TestService2 (P/0, S/1, S/3, no
    metrics) whose type is blocklisted on N2; AffinityConstraintPriority 1. The child's S/3 is
    beside no parent replica, and may not go to N2."""
    services = [
        stateful("TestService1", 3, ServiceTypeName="ParentType"),
        stateful("TestService2", 3, "TestService1", ServiceTypeName="ChildType", Metrics=[]),
    ]
    partitions = [fu("TestService1", 0, "P/0, S/1, S/2"), fu("TestService2", 1, "P/0, S/1, S/3")]
    settings = {"AffinityConstraintPriority": 1} | settings
    doc = document(services, partitions, nodes(4), Settings=settings)
    return doc | {"BlockList": [{"NodeName": "N2", "ServiceTypeName": "ChildType"}]}


def test_move_parent_to_fix_affinity_violation():
    """SF's second refresh (MoveParentToFixAffinityViolation true): the parent's secondary follows
    the child, "0 move secondary 2=>3" (1 action); plbjax moved only children and found no fix."""
    result = refresh(_directional_block_list(MoveParentToFixAffinityViolation=True))
    assert count(result, "0 move secondary 2=>3") == 1, shown(result)
    assert len(result["Actions"]) == 1, shown(result)


def test_the_parent_stays_without_the_setting():
    """SF's default (false): only the child may move, and N2 is closed to it: no fix, no action."""
    result = refresh(_directional_block_list())
    assert count(result, "0 move *") == 0, shown(result)
