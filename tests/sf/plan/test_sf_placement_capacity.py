"""Service Fabric's placement against node capacities (PLBPlacement.Test.cpp PlacementWithCapacityTest,
PlacementWithCapacityTest2), translated with SF's assertions."""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, fu, run

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def test_placement_fills_a_node_to_its_count_capacity():
    """SF's PlacementWithCapacityTest: N0 with Count capacity 25, N1 unlimited, 100 new stateless
    singletons of SF's default metrics: 100 actions, 25 of them "add instance 0"."""
    nodes = [
        {"NodeName": "N0", "FaultDomain": "fd:/dc0", "UpgradeDomain": "UD0", "Capacities": {"Count": 25}},
        {"NodeName": "N1", "FaultDomain": "fd:/dc1", "UpgradeDomain": "UD1"},
    ]
    svc = {"ServiceName": "TestService", "ServiceKind": "Stateless", "InstanceCount": 1}
    parts = [{"ServiceName": "TestService", "PartitionId": str(i), "Replicas": []} for i in range(100)]
    result, _ = run(document([svc], parts, nodes, None, False), DEFAULT)
    assert len(result["Actions"]) == 100
    assert sum(a["Action"] == "AddInstance" and a["TargetNode"] == "N0" for a in result["Actions"]) == 25


def test_no_replica_is_placed_where_no_node_has_room():
    """SF's PlacementWithCapacityTest2: nodes of MyMetric capacity 4000 / 6000 / 6000 / 4000 / 4000,
    every replica of load 5000; TestService1 on N3 and N2, TestService2's primary on N2 missing its
    secondary, TestService3's singleton to place: no node has 5000 left, no action."""
    capacities = {1: 4000, 2: 6000, 3: 6000, 4: 4000, 5: 4000}
    nodes = [
        {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i}", "Capacities": {"MyMetric": c}}
        for i, c in capacities.items()
    ]
    metric = [{"Name": "MyMetric", "Weight": "High", "PrimaryDefaultLoad": 5000, "SecondaryDefaultLoad": 5000}]
    services = [
        {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": metric}
        for name, target in (("TestService1", 2), ("TestService2", 2), ("TestService3", 1))
    ]
    parts = [
        fu("TestService1", "0", "P/3, S/2"),
        fu("TestService2", "1", "P/2"),
        {"ServiceName": "TestService3", "PartitionId": "2", "Replicas": []},
    ]
    result, _ = run(document(services, parts, nodes, None, False), DEFAULT)
    assert result["Actions"] == []
