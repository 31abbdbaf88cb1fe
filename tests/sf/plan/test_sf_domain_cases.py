"""SF's PLB unit tests on fault and upgrade domains (issue 48: items 3, 5 and more), translated into
the contract with SF's assertions (microsoft/service-fabric, src/prod/src/Reliability/LoadBalancing/
*.Test.cpp; each test names the one it mirrors). One SF refresh is `refresh=True`; the vocabulary
is tests/sf_affinity_cases.py's.
"""

from __future__ import annotations

import pytest
from sf_affinity_cases import count, document, fu, node, refresh, shown, stateful

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


@pytest.mark.parametrize("one", [True, False], ids=["refresh", "plan"])
def test_an_upgrade_domain_violation_beside_a_fault_domain_rule_is_fixed_by_one_move(one):
    """SF's ConstraintCheckUpgradeDomainViolationWithFaultDomainTest (PLBConstraintCheck.Test.cpp:592):
    26 nodes over five two-level fault domains and nine upgrade domains; the partition's five
    replicas are one per top fault domain, two in UD2 (N3, N7). One move fixes the upgrade domains
    and keeps the fault domains (the constraint check's; the whole plan balances nothing after it)."""
    layout = {
        1: ("0/10", "1"), 2: ("0/15", "6"), 3: ("0/20", "2"), 4: ("0/25", "7"), 5: ("0/5", "5"),
        6: ("1/1", "1"), 7: ("1/11", "2"), 8: ("1/16", "7"), 10: ("1/26", "8"), 11: ("1/6", "6"),
        12: ("2/12", "3"), 13: ("2/17", "8"), 14: ("2/2", "2"), 15: ("2/22", "4"), 16: ("2/27", "9"),
        17: ("2/7", "7"), 18: ("3/13", "4"), 19: ("3/18", "9"), 20: ("3/23", "5"), 22: ("3/3", "3"),
        23: ("3/8", "8"), 24: ("4/14", "5"), 26: ("4/24", "6"), 27: ("4/29", "1"), 28: ("4/4", "4"),
        29: ("4/9", "9"),
    }  # fmt: skip
    nodes = [node(i, fd, ud) for i, (fd, ud) in layout.items()]
    doc = document([stateful("S", 5)], [fu("S", 0, "P/7, S/3, S/17, S/23, S/27")], nodes)
    result = refresh(doc, one=one)
    assert len(result["Actions"]) == 1, shown(result)
    assert not result["Remaining"]["Violations"], result["Remaining"]


def test_balancing_moves_replicas_onto_empty_nodes_across_domains():
    """SF's BalancingWithFaultAndUpgradeDomainTest1 (PLBBalancing.Test.cpp:710): nine nodes over four
    fault and four upgrade domains, ten four-replica partitions all on N0, N3, N6, N8 (one per fault
    and upgrade domain), five nodes empty; SF's balancing moves replicas onto them. No replica can
    move alone: SF's compound move (Checker::MoveSolution) moves three, as N0=>N1 (crowding dc3),
    N8=>N4 (back to dc0, crowding UD2), N6=>N7 (back to UD3). The other pairings of fault and upgrade
    domains are N1, N3, N4, N7 (three moves) and N1, N2, N5, N7 (four)."""
    layout = [("dc0", "0"), ("dc3", "0"), ("dc0", "1"), ("dc1", "1"), ("dc0", "2"), ("dc1", "2"), ("dc2", "2")]
    layout += [("dc2", "3"), ("dc3", "3")]
    nodes = [node(i, fd, ud) for i, (fd, ud) in enumerate(layout)]
    doc = document([stateful("S", 4)], [fu("S", i, "P/0, S/3, S/6, S/8") for i in range(10)], nodes)
    result = refresh(doc)
    assert count(result, "* move * *=>*") > 0, shown(result)
    moved = {a["PartitionId"] for a in result["Actions"] if a["Action"] in ("MovePrimary", "MoveSecondary")}
    assert all(count(result, f"{p} move * *=>*") in (3, 4) for p in moved), shown(result)
    assert not result["Remaining"]["Violations"], result["Remaining"]


def test_replicas_on_blocklisted_nodes_cause_no_fault_domain_violation():
    """SF's ConstraintCheckDomainBlockList (PLBConstraintCheck.Test.cpp:700): seven replicas on
    seven nodes of two datacenters, the type blocklisted on N2: no action."""
    layout = ["dc0/r1", "dc0/r2", "dc0/r3", "dc1/r1", "dc1/r2", "dc1/r3", "dc1/r4"]
    nodes = [node(i, fd) for i, fd in enumerate(layout)]
    doc = document([stateful("S", 7)], [fu("S", 0, "P/0, S/1, S/2, S/3, S/4, S/5, S/6")], nodes)
    doc["BlockList"] = [{"NodeName": "N2", "ServiceTypeName": "TestType"}]
    assert refresh(doc)["Actions"] == []


def test_domains_without_active_nodes_are_not_counted():
    """SF's ConstraintCheckFaultUpgradeDomainEmptyDeactivation (PLBConstraintCheck.Test.cpp:812): a
    one-replica partition on N2, the only node of dc1/ud1, deactivated with Restart: no action."""
    nodes = [node(0, "dc0", "ud0"), node(1, "dc0", "ud0")]
    nodes.append(node(2, "dc1", "ud1", NodeStatus="Disabled", DeactivationIntent="Restart"))
    assert refresh(document([stateful("S", 1)], [fu("S", 0, "P/2")], nodes))["Actions"] == []


def test_non_packing_moves_a_replica_out_of_a_full_datacenter():
    """SF's ConstraintCheckFaultDomainNonpackingDistributionTest (PLBConstraintCheck.Test.cpp:2904):
    FDPolicy Nonpacking (RequireDomainDistribution): two of three replicas in dc0; one moves to dc1."""
    layout = ["dc0/rack0", "dc0/rack1", "dc1/rack0", "dc1/rack1", "dc2/rack0", "dc2/rack1"]
    svc = stateful("S", 3, PlacementPolicies=[{"Type": "RequireDomainDistribution"}])
    doc = document([svc], [fu("S", 0, "P/4, S/0, S/1")], [node(i, fd) for i, fd in enumerate(layout)])
    result = refresh(doc)
    assert count(result, "0 move secondary 0|1=>2|3") == 1, shown(result)


def test_non_packing_ignores_domains_the_service_may_not_use():
    """SF's ConstraintCheckDomainEmptyNonpacking (PLBConstraintCheck.Test.cpp:773): Color==red keeps
    the service on N0 only (PlacementConstraintPriority -1); its replicas on N1 and N2 share dc1,
    where it may not go: no action."""
    colors = ["red", "blue", "blue"]
    layout = ["dc0/r0", "dc1/r0", "dc1/r1"]
    nodes = [node(i, fd, PlacementProperties={"Color": c}) for i, (fd, c) in enumerate(zip(layout, colors))]
    policy = [{"Type": "RequireDomainDistribution"}]
    svc = stateful("S", 3, PlacementConstraints="Color == red", PlacementPolicies=policy)
    doc = document([svc], [fu("S", 0, "P/0, S/1, S/2")], nodes, Settings={"PlacementConstraintPriority": -1})
    assert refresh(doc)["Actions"] == []
