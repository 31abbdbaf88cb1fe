"""Service Fabric's drops of surplus replicas under the domain and affinity rules
(PLBPlacement.Test.cpp: DroppingWithFaultAndUpgradeDomainConstraint, DroppingWithMultipleConstraints,
DropOneInstanceFromEachDomain), translated with SF's assertions, each one SF refresh (`refresh=True`).
A FailoverUnit's negative replica difference is a target below its replicas. (SF's
DroppingWithFaultDomainConstraint puts two instances of a partition on one node, which a cluster's
Failover Manager never does and the state refuses.)"""

from __future__ import annotations

import pytest
from checker import checked_plan
from sf_cases import DEFAULT, document, fu

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _nodes(domains: list[tuple[str, str]]) -> list[dict]:
    return [{"NodeName": f"N{i}", "FaultDomain": f"fd:/{f}", "UpgradeDomain": u} for i, (f, u) in enumerate(domains)]


def run(doc: dict) -> tuple[dict, dict]:
    """One SF refresh of `doc`: its plan, the document after it."""
    result, after, _ = checked_plan(doc, DEFAULT, refresh=True)
    return result, after


def _drops(result: dict) -> list[tuple[str, str]]:
    return sorted((a["Action"], a["SourceNode"]) for a in result["Actions"])


def test_a_surplus_instance_is_dropped_from_the_crowded_upgrade_domain():
    """SF's DroppingWithFaultAndUpgradeDomainConstraint: four racks, upgrade domains ud0, ud1, ud2,
    ud0; four instances of target three: one drop, from N0 or N3 (ud0 holds two)."""
    node_list = _nodes([("rack0", "ud0"), ("rack1", "ud1"), ("rack2", "ud2"), ("rack3", "ud0")])
    svc = {"ServiceName": "S", "ServiceKind": "Stateless", "InstanceCount": 3}
    result, _ = run(document([svc], [fu("S", "0", "I/0, I/1, I/2, I/3")], node_list, None, False))
    drops = _drops(result)
    assert len(drops) == 1 and drops[0] in (("DropInstance", "N0"), ("DropInstance", "N3")), result["Actions"]


def test_a_hard_affinity_wins_over_a_soft_fault_domain_rule_in_a_drop():
    """SF's DroppingWithMultipleConstraints: FaultDomainConstraintPriority 1 (soft), affinity 0
    (hard); dc0 {N0, N1}, dc1 {N2, N3}, dc2 {N4, N5}; the parent's five replicas on N0-N4, target
    four; its child (target four) on N0-N3. The fault domains would drop from N0-N3, the affinity
    only from N4: SF drops there, one action "0 drop secondary 4"."""
    node_list = _nodes([(f"dc{i // 2}", f"UD{i}") for i in range(6)])
    parent = {"ServiceName": "Parent", "ServiceKind": "Stateful", "TargetReplicaSetSize": 4}
    child = {
        "ServiceName": "Child",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 4,
        "Correlations": [{"ServiceName": "Parent", "Scheme": "Affinity"}],
    }
    parts = [fu("Parent", "0", "P/0, S/1, S/2, S/3, S/4"), fu("Child", "1", "P/0, S/1, S/2, S/3")]
    settings = {"FaultDomainConstraintPriority": 1, "AffinityConstraintPriority": 0}
    result, _ = run(document([parent, child], parts, node_list, None, False, Settings=settings))
    assert _drops(result) == [("DropSecondary", "N4")], result["Actions"]


def test_drops_leave_one_instance_in_each_fault_domain():
    """SF's DropOneInstanceFromEachDomain: dc0 {N0, N1}, dc1 {N2, N3}, dc2 {N4, N5}; six instances
    of target three: three drops, one of N0|N1, one of N2|N3, one of N4|N5."""
    node_list = _nodes([(f"dc{i // 2}", f"UD{i}") for i in range(6)])
    svc = {"ServiceName": "S", "ServiceKind": "Stateless", "InstanceCount": 3}
    result, _ = run(document([svc], [fu("S", "0", "I/0, I/1, I/2, I/3, I/4, I/5")], node_list, None, False))
    drops = _drops(result)
    assert len(drops) == 3 and all(action == "DropInstance" for action, _ in drops), result["Actions"]
    assert sorted(int(node[1:]) // 2 for _, node in drops) == [0, 1, 2], drops
