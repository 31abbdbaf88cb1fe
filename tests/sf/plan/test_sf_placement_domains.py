"""SF's placement unit tests on domains of issue 60 (item 6), translated into the contract with SF's
assertions (microsoft/service-fabric, src/prod/src/Reliability/LoadBalancing/PLBPlacement.Test.cpp;
each test names the one it mirrors; SF's tests run with LoadBalancing.Test.exe.cfg). One SF refresh
is `refresh`; the vocabulary is tests/sf_affinity_cases.py's. SF's `FaultDomain ^P fd:/dc0` is the
`PreferPrimaryDomain` policy (ServicePlacementPolicyHelper.cpp writes the policy as that
expression), `FaultDomain ^ fd:/dc2` the `RequiredDomain` one.
"""

from __future__ import annotations

import pytest
from sf_affinity_cases import count, document, fu, node, refresh, shown, stateful, stateless

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

_DC0 = [{"Type": "PreferPrimaryDomain", "DomainName": "fd:/dc0"}]


def test_a_primary_kept_out_of_its_primary_domain_is_not_placed_elsewhere():
    """SF's PlacementWithPrimaryReplicaFaultDomainConstraintsTest2 (PLBPlacement.Test.cpp:4095): four
    new partitions of three replicas with primary domain dc0 (N0) get their primaries on N0; partition
    5 (Required dc2, primary domain dc0) and partition 4 (its type blocked on N0, N2, N3; primary domain
    dc0) may have no primary: SF's `^P` is a block list for the primary (ServiceDomain.cpp:2230,
    NodeBlockListConstraint.cpp:37), never a preference. SF asserts 14 actions, 4 `add primary 0` and
    no `add primary` of partitions 4 and 5: its PLB also offers partition 4 a secondary on N1 and
    partition 5 one on N3, which its Failover Manager drops, an empty partition being built from its
    primary only (MovementTask.cpp: AddReplica on an empty configuration, CurrentConfigurationEmpty);
    plbjax's plan is what the Failover Manager carries out (issue 37.9), so those two are listed in
    Unplaced with their primaries: 12 actions."""
    nodes = [node(0, "dc0/rack0"), node(1, "dc1/rack0"), node(2, "dc1/rack1"), node(3, "dc2/rack0")]
    services = [
        stateful("TestService", 3, PlacementPolicies=_DC0),
        stateful("TestService2", 2, PlacementPolicies=[{"Type": "RequiredDomain", "DomainName": "fd:/dc2"}, *_DC0]),
        stateful("TestService3", 2, ServiceTypeName="TestType2", PlacementPolicies=_DC0),
    ]
    partitions = [fu("TestService", i) for i in range(4)] + [fu("TestService2", 5), fu("TestService3", 4)]
    doc = document(services, partitions, nodes)
    doc["BlockList"] = [{"NodeName": f"N{i}", "ServiceTypeName": "TestType2"} for i in (0, 2, 3)]
    result = refresh(doc)
    assert count(result, "* add primary 0") == 4, shown(result)
    assert count(result, "4 add primary *") == 0 and count(result, "5 add primary *") == 0, shown(result)
    assert len(result["Actions"]) == 12, shown(result)
    unplaced = {(u["PartitionId"], u["Role"]) for u in result["Unplaced"]}
    assert {("4", "Primary"), ("4", "Secondary"), ("5", "Primary"), ("5", "Secondary")} <= unplaced, unplaced


def test_a_new_replica_goes_only_to_an_underloaded_domain():
    """SF's PlacementWithNewReplicaToUnderloadedDomainTest (PLBPlacement.Test.cpp:7658),
    FaultDomainConstraintPriority 0: replicas on N0, N1 (fd:/0) and N2 (fd:/1); fd:/2's nodes have
    room for 50 of the replica's 60. SF places a new replica only in a domain below the even spread
    (FaultDomainSubspace::IsValidDomain: with a domain under the floor, a target at the floor or over
    it is invalid), and fd:/1 is at the floor: no action."""
    nodes = [node(i, str(i // 2), Capacities={"myMetric": 100 if i < 4 else 50}) for i in range(6)]
    metric = [{"Name": "myMetric", "Weight": "High", "PrimaryDefaultLoad": 60, "SecondaryDefaultLoad": 60}]
    doc = document([stateful("S", 4, Metrics=metric)], [fu("S", 0, "P/0, S/1, S/2")], nodes)
    doc["Settings"] = {"FaultDomainConstraintPriority": 0}
    result = refresh(doc)
    assert result["Actions"] == [], shown(result)


def test_a_new_replica_fills_the_underloaded_domain():
    """The same partition with room in fd:/2 (capacity 100 everywhere): the new replica goes there."""
    nodes = [node(i, str(i // 2), Capacities={"myMetric": 100}) for i in range(6)]
    metric = [{"Name": "myMetric", "Weight": "High", "PrimaryDefaultLoad": 60, "SecondaryDefaultLoad": 60}]
    doc = document([stateful("S", 4, Metrics=metric)], [fu("S", 0, "P/0, S/1, S/2")], nodes)
    doc["Settings"] = {"FaultDomainConstraintPriority": 0}
    result = refresh(doc)
    assert count(result, "0 add secondary 4|5") == 1 and len(result["Actions"]) == 1, shown(result)


def test_new_partitions_spread_one_replica_a_datacenter():
    """SF's PlacementWithFaultDomainTest (PLBPlacement.Test.cpp:1801), FaultDomainConstraintPriority
    0: ten new partitions of three instances over dc0 (two racks: N0, N1), dc1 (N2), dc2 (N3): one
    instance each in dc0, dc1, dc2, dc0's split between its racks: 30 adds, 5 on N0, 5 on N1, 10 on
    N2, 10 on N3 (each new replica a valid target beside the others, IsValidDomain)."""
    nodes = [node(0, "dc0/rack0"), node(1, "dc0/rack1"), node(2, "dc1/rack0"), node(3, "dc2/rack0")]
    doc = document([stateless("S", 3)], [fu("S", i) for i in range(10)], nodes)
    doc["Settings"] = {"FaultDomainConstraintPriority": 0}
    result = refresh(doc)
    assert len(result["Actions"]) == 30, shown(result)
    assert [count(result, f"* add instance {n}") for n in range(4)] == [5, 5, 10, 10], shown(result)


def test_new_partitions_fill_skewed_fault_and_upgrade_domains():
    """SF's PlacementWithSkewFaultDomainAndUpgradeDomainTest (PLBPlacement.Test.cpp:1919): ten nodes,
    five fault and five upgrade domains paired two ways; five new partitions of five replicas are
    all placed: 25 actions."""
    pairs = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    nodes = [node(i, f"fd{f}", f"ud{u}") for i, (f, u) in enumerate(pairs)]
    result = refresh(document([stateful("S", 5)], [fu("S", i) for i in range(5)], nodes))
    assert len(result["Actions"]) == 25, shown(result)
