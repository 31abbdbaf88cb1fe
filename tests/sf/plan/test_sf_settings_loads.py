"""SF's UseDefaultLoadForServiceOnEveryNode, translated: a new instance (or secondary) of a partition
whose replicas report their own loads is placed at the average of those loads (SF's
FailoverUnit::GetSecondaryLoad, PartitionEntry::GetReplicaEntry), except for a service on every node
with the setting true, whose new instance takes the service's default load."""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, part, run

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _on_every_node(**settings) -> dict:
    """PLBPlacement.Test.cpp:1585 PlacementWithServiceOnEveryNodeDefaultLoadConfig, its second and
    third refreshes: a stateless service on every node (CPU default load 15) with instances on N0
    (reporting 25) and N1 (reporting 20), both of capacity 25; N2 (capacity 15) has just come up.
    MoveExistingReplicaForPlacement false."""
    svc = {
        "ServiceName": "TestService",
        "ServiceKind": "Stateless",
        "InstanceCount": -1,
        "Metrics": [{"Name": "CPU", "Weight": "High", "DefaultLoad": 15}],
    }
    capacities = [25, 25, 15]
    nodes = [
        {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i}", "Capacities": {"CPU": c}}
        for i, c in enumerate(capacities)
    ]
    partition = part("TestService", "p0", ("N0", 25), ("N1", 20), metric="CPU")
    settings = {"MoveExistingReplicaForPlacement": False} | settings
    return document([svc], [partition], nodes, None, False, Settings=settings)


def test_a_new_instance_takes_the_average_of_the_reported_loads():
    """SF's second refresh (the setting false): the new instance would load N2 with the average
    22.5 of the reported loads, beyond its capacity 15: SF adds nothing ("0u == actionList.size()");
    plbjax added it at the default load 15 before."""
    result, _ = run(_on_every_node(), DEFAULT)
    assert result["Actions"] == []


def test_use_default_load_for_service_on_every_node():
    """SF's third refresh (UseDefaultLoadForServiceOnEveryNode true): the new instance counts the
    service's default load 15, which fits N2: SF's "0 add instance 2"."""
    result, _ = run(_on_every_node(UseDefaultLoadForServiceOnEveryNode=True), DEFAULT)
    adds = [(a["Action"], a["TargetNode"]) for a in result["Actions"]]
    assert adds == [("AddInstance", "N2")], result["Actions"]
