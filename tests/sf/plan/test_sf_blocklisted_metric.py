"""SF's metrics blocklisted on some nodes, translated (PLBBalancing.Test.cpp): a metric is balanced
and defragmented over the nodes its services may use; services on every node do not widen that
set (ServiceDomainMetric::GetBlockNodeList, ServiceDomain::IsServiceAffectingBalancing)."""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, movements, phase, run

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

TENANT = "NodeType==Tenant"


def _nodes(metric: str) -> list[dict]:
    """Two Tenant nodes (upgrade domain 0) and two Other ones (1), capacity 100 of `metric`."""
    return [
        {
            "NodeName": f"N{i}",
            "FaultDomain": "fd:/dc0",
            "UpgradeDomain": "0" if i < 2 else "1",
            "NodeType": "Tenant" if i < 2 else "Other",
            "Capacities": {metric: 100},
        }
        for i in range(4)
    ]


def _service(name: str, kind: str, metric: str, load: float, **extra) -> dict:
    svc = {"ServiceName": name, "ServiceKind": kind, "Metrics": [{"Name": metric, "Weight": "High"}]} | extra
    key = {"Stateful": ("PrimaryDefaultLoad", "SecondaryDefaultLoad"), "Stateless": ("DefaultLoad",)}[kind]
    svc["Metrics"][0] |= dict.fromkeys(key, load)
    return svc


def _on_every_node(metric: str, load: float) -> tuple[dict, dict]:
    svc = _service("StatelessOnEveryNode", "Stateless", metric, load, InstanceCount=-1)
    replicas = [{"ReplicaId": f"e{i}", "Role": "Instance", "NodeName": f"N{i}"} for i in range(4)]
    return svc, {"ServiceName": "StatelessOnEveryNode", "PartitionId": "4", "Replicas": replicas}


def _defrag(every_node: bool) -> dict:
    """PLBBalancing.Test.cpp:6129 DefragNeededWithBlocklistedMetricTest: DefragMetric (threshold
    10) on the Tenant nodes only: a stateful singleton P/0 and a stateless instance on N1 (10
    each); its second refresh adds a stateless service on every node (load 0)."""
    services = [
        _service(
            "StatefulService", "Stateful", "DefragMetric", 10, TargetReplicaSetSize=1, PlacementConstraints=TENANT
        ),
        _service("StatelessService", "Stateless", "DefragMetric", 10, InstanceCount=1, PlacementConstraints=TENANT),
    ]
    partitions = [
        {
            "ServiceName": "StatefulService",
            "PartitionId": "0",
            "Replicas": [{"ReplicaId": "0a", "Role": "Primary", "NodeName": "N0"}],
        },
        {
            "ServiceName": "StatelessService",
            "PartitionId": "1",
            "Replicas": [{"ReplicaId": "1a", "Role": "Instance", "NodeName": "N1"}],
        },
    ]
    if every_node:
        svc, part = _on_every_node("DefragMetric", 0)
        services, partitions = services + [svc], partitions + [part]
    return document(
        services,
        partitions,
        _nodes("DefragMetric"),
        None,
        False,
        Settings={"MaxPercentageToMove": 1.0},
        DefragmentationMetrics={"DefragMetric": True},
        MetricBalancingThresholds={"DefragMetric": 10},
    )


@pytest.mark.parametrize("every_node", [False, True])
def test_defragmentation_over_the_metrics_nodes(every_node):
    """SF, both refreshes: "LoadBalancing", 1 action, "0|1 move * 0|1=>0|1" (the two replicas
    packed on one Tenant node); the service on every node does not change it."""
    result, _ = run(_defrag(every_node), DEFAULT)
    moved = [(a["PartitionId"], a["SourceNode"], a["TargetNode"]) for a in movements(result)]
    assert len(result["Actions"]) == 1, result["Actions"]
    assert moved and moved[0][0] in ("0", "1") and {moved[0][1], moved[0][2]} == {"N0", "N1"}, moved


def test_balancing_not_needed_beside_a_service_on_every_node():
    """PLBBalancing.Test.cpp:6407 BalancingNotNeededWithBlocklistedMetricStatelessOnEveryNodeTest:
    MyMetric's services on the Tenant nodes are balanced there (two stateful partitions P/0,S/1
    and S/0,P/1, two stateless ones on N0 and N1, 10 each); a stateless service on every node
    (10 on each of the four) is added: SF, "NoActionNeeded", no action."""
    services = [
        _service("StatefulService", "Stateful", "MyMetric", 10, TargetReplicaSetSize=2, PlacementConstraints=TENANT),
        _service("StatelessService", "Stateless", "MyMetric", 10, InstanceCount=2, PlacementConstraints=TENANT),
    ]
    roles = [("Primary", "Secondary"), ("Secondary", "Primary")]
    partitions = [
        {
            "ServiceName": "StatefulService",
            "PartitionId": str(k),
            "Replicas": [
                {"ReplicaId": f"{k}{i}", "Role": role, "NodeName": f"N{i}"} for i, role in enumerate(roles[k])
            ],
        }
        for k in range(2)
    ]
    partitions += [
        {
            "ServiceName": "StatelessService",
            "PartitionId": str(k),
            "Replicas": [{"ReplicaId": f"{k}{i}", "Role": "Instance", "NodeName": f"N{i}"} for i in range(2)],
        }
        for k in (2, 3)
    ]
    svc, part = _on_every_node("MyMetric", 10)
    doc = document(services + [svc], partitions + [part], _nodes("MyMetric"), None, False)
    result, _ = run(doc, DEFAULT)
    assert result["Actions"] == []
    assert not phase(result, "Balancing")["Ran"], phase(result, "Balancing")  # SF's "NoActionNeeded"
