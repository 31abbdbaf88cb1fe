"""SF's PLB unit tests on blocklisted replicas, surplus drops and constraint fixes (issue 37),
translated into the contract with SF's assertions (microsoft/service-fabric,
src/prod/src/Reliability/LoadBalancing/*.Test.cpp; each test names the one it mirrors).

SF's test helpers, as translated: CreateNodeDescription(i, fd) is node Ni in its own upgrade domain;
CreateServiceDescription(name, type, stateful) has SF's default metrics; a FailoverUnit's replica
difference d makes the target len(replicas) - d; ActionMatch("p move * a|b=>c|d") is a movement of
partition p from one of a, b to one of c, d.
"""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, fu, movements, run

pytestmark = pytest.mark.slow  # a plan (and its compilation) each


def _nodes(fds: list[str], **extra) -> list[dict]:
    """SF's CreateNodeDescription(i, fds[i]): node Ni in fault domain fd:/<fds[i]>, upgrade domain UDi."""
    return [
        {"NodeName": f"N{i}", "FaultDomain": f"fd:/{fd}", "UpgradeDomain": f"UD{i}"} | extra for i, fd in enumerate(fds)
    ]


def _stateful(name: str, target: int, type_name: str = "T", **extra) -> dict:
    return {
        "ServiceName": name,
        "ServiceTypeName": type_name,
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": target,
    } | extra


def _stateless(name: str, count: int, type_name: str = "T", **extra) -> dict:
    return {
        "ServiceName": name,
        "ServiceTypeName": type_name,
        "ServiceKind": "Stateless",
        "InstanceCount": count,
    } | extra


def _blocked(nodes: list[int], type_name: str) -> list[dict]:
    return [{"NodeName": f"N{n}", "ServiceTypeName": type_name} for n in nodes]


def _count(actions: list[dict], pids: set[str], sources: set[int], targets: set[int]) -> int:
    """SF's CountIf(ActionMatch("<pids> move * <sources>=><targets>"))."""
    node = lambda name: int(name[1:])
    return sum(
        a["PartitionId"] in pids and node(a["SourceNode"]) in sources and node(a["TargetNode"]) in targets
        for a in movements({"Actions": actions})
        if not a["Action"].startswith("Swap")
    )


# --------------------------------------------------- replicas on a node that blocks their type stay


def test_balancing_leaves_replicas_on_a_blocklisted_node():
    """SF's BalancingWithServiceTypeBlockListTest2 (PLBBalancing.Test.cpp:1984): both service types
    are blocklisted on N0, which holds one replica of all twelve partitions (the rest on N1). SF
    marks them in transition (PlacementCreator::CreatePlacement, IsInBlockList), so balancing moves
    none of them off N0; it moves replicas off N1."""
    services = [_stateful("S0", 2, "T1"), _stateless("S1", 2, "T2")]
    partitions = [fu("S0", f"{i}", "P/0, S/1" if i % 2 == 0 else "S/0, P/1") for i in range(8)]
    partitions += [fu("S1", f"{i}", "I/0, I/1") for i in range(8, 12)]
    doc = document(services, partitions, _nodes([f"dc{i}" for i in range(6)]), None, False)
    doc["BlockList"] = _blocked([0], "T1") + _blocked([0], "T2")
    result, _ = run(doc, DEFAULT)
    ids = {str(i) for i in range(12)}
    assert _count(result["Actions"], ids, {0}, set(range(6))) == 0, result["Actions"]
    assert _count(result["Actions"], ids, {1}, set(range(6))) > 0, result["Actions"]
    assert not [a for a in result["Actions"] if a["Action"] == "SwapPrimarySecondary"], result["Actions"]


def test_constraint_check_fixes_domains_and_leaves_blocklisted_replicas():
    """SF's ConstraintCheckMultipleViolationsTest (PLBConstraintCheck.Test.cpp:2174): partitions 0
    and 1 have both replicas in dc0 (a fault-domain violation); TestService3's type is blocklisted
    on N1, where partitions 9 and 10 have a replica. SF moves one replica of each of 0 and 1 out of
    dc0 and none of 9 and 10 off N1."""
    services = [_stateful(f"S{k}", 2) for k in range(3)] + [_stateful("S3", 2, "T2")]
    layout = {
        "S0": ["P/0, S/1", "P/1, S/0"],
        "S1": ["P/1, S/0", "P/0, S/2", "P/2, S/3", "P/3, S/2"],
        "S2": ["P/4, S/3"],
        "S3": ["P/4, S/0", "P/3, S/4", "P/1, S/4", "P/2, S/1", "P/0, S/2"],
    }
    partitions = [fu(svc, str(i), spec) for i, (svc, spec) in enumerate((s, x) for s in layout for x in layout[s])]
    doc = document(services, partitions, _nodes(["dc0", "dc0", "dc1", "dc1", "dc2"]), None, False)
    doc["BlockList"] = _blocked([1], "T2")
    result, _ = run(doc, DEFAULT)
    assert _count(result["Actions"], {"0"}, {0, 1}, {2, 3, 4}) == 1, result["Actions"]
    assert _count(result["Actions"], {"1"}, {0, 1}, {2, 3, 4}) == 1, result["Actions"]
    assert _count(result["Actions"], {"9", "10"}, {1}, set(range(5))) == 0, result["Actions"]


def test_constraint_check_fixes_placement_but_not_blocklisted_replicas():
    """SF's ConstraintCheckNodePropertyAndServiceTypeBlockList (PLBConstraintCheck.Test.cpp:3452):
    N2-N4 break both services' constraint a==0; T1 is blocklisted on N1 and N3, T2 on N2. The
    replicas on a node that blocks their type stay (in transition, even where the constraint fails
    too); the others move: S0's on N2 and N4 to N0, S1's on N3 and N4 to N0 or N1, four moves."""
    five = _nodes(["dc0"] * 5)
    for i, n in enumerate(five):
        n["PlacementProperties"] = {"a": "1" if i >= 2 else "0"}
    services = [
        _stateful("S0", 1, "T1", PlacementConstraints="a == 0"),
        _stateless("S1", 1, "T2", PlacementConstraints="a == 0"),
    ]
    partitions = [fu("S0", str(i), f"P/{i}") for i in range(5)] + [fu("S1", str(i + 5), f"I/{i}") for i in range(5)]
    doc = document(services, partitions, five, None, False)
    doc["BlockList"] = _blocked([1, 3], "T1") + _blocked([2], "T2")
    result, _ = run(doc, DEFAULT)
    assert len(result["Actions"]) == 4, result["Actions"]
    assert _count(result["Actions"], {"2", "4"}, {2, 4}, {0}) == 2, result["Actions"]
    assert _count(result["Actions"], {"8", "9"}, {3, 4}, {0, 1}) == 2, result["Actions"]


def test_replicas_on_blocklisted_domains_leave_the_spread_and_stay():
    """SF's ConstraintCheckDomainAndBlockListViolationsTest (PLBConstraintCheck.Test.cpp): the type
    is blocklisted on all of dc1 (N6-N8); a six-replica partition has two replicas there and four
    spread over dc0's two racks. dc1 has no node the service may use, so its replicas are out of the
    spread (FaultDomainConstraint's filtered domain tree) and stay (in transition): no action."""
    racks = ["dc0/rack0"] * 3 + ["dc0/rack1"] * 3 + ["dc1/rack0"] * 3
    doc = document([_stateful("S", 6)], [fu("S", "0", "P/0, S/2, S/3, S/5, S/6, S/8")], _nodes(racks), None, False)
    doc["BlockList"] = _blocked([6, 7, 8], "T")
    result, _ = run(doc, DEFAULT)
    assert result["Actions"] == [], result["Actions"]


# ------------------------------------------------------------------------------ surplus drops


def test_instances_on_every_node_drop_outside_a_required_domain():
    """SF's ServiceOnEveryNodeReplicaDrop (PLBPlacement.Test.cpp:3848): a service on every node of
    four fault domains is updated to go only to fd:/dc0 (SF's "FaultDomain ^ fd:/dc0", here its
    RequiredDomain); SF drops its three instances outside dc0 and keeps the one on N0
    (PlacementCreator::CreatePlacement: a -1 partition that covers every node it may use drops its
    replicas on the nodes it may not, ServiceEntry::BlockList)."""
    svc = _stateless("S", -1, PlacementPolicies=[{"Type": "RequiredDomain", "DomainName": "fd:/dc0"}])
    doc = document([svc], [fu("S", "0", "I/0, I/1, I/2, I/3")], _nodes(["dc0", "dc1", "dc2", "dc3"]), None, False)
    result, _ = run(doc, DEFAULT)
    assert len(result["Actions"]) == 3, result["Actions"]
    assert sorted((a["Action"], a["SourceNode"]) for a in result["Actions"]) == [
        ("DropInstance", "N1"),
        ("DropInstance", "N2"),
        ("DropInstance", "N3"),
    ]
    assert not any(v["Count"] for v in result["Remaining"]["Violations"]), result["Remaining"]


@pytest.mark.parametrize("kind", ["PlacementConstraints", "BlockList"])
def test_instances_on_every_node_drop_where_a_constraint_or_the_block_list_keeps_them_off(kind):
    """The same rule for a placement constraint and for the block list: SF's blocked nodes of a
    service (ServiceEntry::BlockList) hold both, and the block list's in-transition replicas of a
    -1 service are dropped rather than kept."""
    svc = _stateless("S", -1)
    if kind == "PlacementConstraints":
        svc["PlacementConstraints"] = "NodeName != N2"
    doc = document([svc], [fu("S", "0", "I/0, I/1, I/2")], _nodes(["dc0", "dc0", "dc1"]), None, False)
    if kind == "BlockList":
        doc["BlockList"] = _blocked([2], "T")
    result, _ = run(doc, DEFAULT)
    assert [(a["Action"], a["SourceNode"]) for a in result["Actions"]] == [("DropInstance", "N2")], result["Actions"]


def test_surplus_drop_keeps_hard_affinity_over_a_soft_domain_spread():
    """SF's DroppingWithMultipleConstraints (PLBPlacement.Test.cpp:5705): the fault-domain
    constraint is soft (1), affinity hard (0); a parent of five replicas (one extra) on N0-N4 over
    three fault domains, its aligned child on N0-N3. The spread allows drops only from N0-N3,
    affinity only from N4: SF's Searcher::SearchForExtraReplicas relaxes the soft constraint and
    drops the secondary on N4 (Checker::DropExtraReplicas), one action in that refresh (the
    placement's: a later constraint check may repair the soft spread)."""
    settings = {"FaultDomainConstraintPriority": 1, "AffinityConstraintPriority": 0}
    services = [
        _stateful("Parent", 4),
        _stateful("Child", 4, Correlations=[{"ServiceName": "Parent", "Scheme": "AlignedAffinity"}]),
    ]
    partitions = [fu("Parent", "0", "P/0, S/1, S/2, S/3, S/4"), fu("Child", "1", "P/0, S/1, S/2, S/3")]
    fds = ["dc0", "dc0", "dc1", "dc1", "dc2", "dc2"]
    doc = document(services, partitions, _nodes(fds), None, False, Settings=settings)
    result, _ = run(doc, DEFAULT)
    placement = [a for a in result["Actions"] if a["Phase"] == "Placement"]
    assert [(a["PartitionId"], a["Action"], a["SourceNode"]) for a in placement] == [("0", "DropSecondary", "N4")], (
        result["Actions"]
    )


# ------------------------------------------------------------------------- constraint-check fixes


def test_domain_fix_is_one_move_despite_a_soft_capacity_violation():
    """SF's ConstraintCheckDomainAndCapacityViolationsTest (PLBConstraintCheck.Test.cpp:2366): the
    fault-domain constraint is hard (0), capacity soft (1). Six replicas of load 50 (40 on N4 and
    N5) fill dc0 four to dc1's two; dc1's nodes hold 30. SF's constraint check fixes the spread with
    one move from dc0 to dc1/rack1 (N6 or N7), though the soft capacity is broken there, and no swap:
    SF swaps a primary only to fix what a role change fixes (a primary on a node over capacity, an
    affinity), not to lighten the move (a former primary carries the secondaries' average load).
    Which dc0 replica goes is SF's random pick (FaultDomainConstraint::GetReplicas; its seed drew a
    secondary). The plan's later balancing is another refresh for SF."""
    caps = [50] * 4 + [30] * 4
    racks = ["dc0/rack0", "dc0/rack0", "dc0/rack1", "dc0/rack1", "dc1/rack0", "dc1/rack0", "dc1/rack1", "dc1/rack1"]
    eight = [dict(n, Capacities={"MyMetric": caps[i]}) for i, n in enumerate(_nodes(racks))]
    metric = {"Name": "MyMetric", "Weight": "High", "PrimaryDefaultLoad": 50, "SecondaryDefaultLoad": 50}
    svc = _stateful("S", 6, Metrics=[metric])
    part = fu("S", "0", "P/0, S/1, S/2, S/3, S/4, S/5")
    for rep in part["Replicas"][4:]:
        rep["Loads"] = {"MyMetric": 40}
    settings = {"FaultDomainConstraintPriority": 0, "CapacityConstraintPriority": 1}
    result, _ = run(document([svc], [part], eight, None, False, Settings=settings), DEFAULT)
    check = [a for a in result["Actions"] if a["Phase"] == "ConstraintCheck"]
    assert len(check) == 1, result["Actions"]
    assert _count(check, {"0"}, {0, 1, 2, 3}, {6, 7}) == 1, result["Actions"]
