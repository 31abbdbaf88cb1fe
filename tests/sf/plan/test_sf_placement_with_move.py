"""Service Fabric's placement with moves of existing replicas under the movement throttles
(PLBPlacement.Test.cpp:5150-5240, PlacementWithExistingReplicaMoveThrottleTestHelper at 13498),
translated with SF's assertions: a new replica of load 9 fits a node of capacity 10 only once both of
its two replicas (load 2 each) have moved out: two movements, which the throttle allows or not.
Two of SF's four pairs run here, the placement throttle's count and the global throttle's
percentage; the other two (the placement percentage, the global count) went through the same
throttle reading and passed when translated, and are left out to keep the slow set within CI's time."""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, fu, run

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

_PLACEMENTS = ["P/0, S/1, S/2", "P/3, S/4", "P/1, S/0, S/2", "P/4, S/3"]


def _stateful(name: str, target: int, load: float) -> dict:
    metric = {"Name": "MyMetric", "Weight": "High", "PrimaryDefaultLoad": load, "SecondaryDefaultLoad": load}
    return {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": [metric]}


def _cluster(**throttle) -> dict:
    """Five nodes of MyMetric capacity 10, each holding two replicas of TestService1 (load 2 each);
    TestService2's partition 4 (one replica of load 9) to place. SF's FailoverUnits of two replicas
    miss none (their replica difference is 0): here they are TestService1b's, of target 2. MoveExistingReplicaForPlacement,
    MaxPercentageToMoveForPlacement 0.5, PreventTransientOvercommit false, as SF's helper sets them."""
    nodes = [
        {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i}", "Capacities": {"MyMetric": 10}}
        for i in range(5)
    ]
    parts = [fu("TestService1" if p.count("/") == 3 else "TestService1b", str(k), p) for k, p in enumerate(_PLACEMENTS)]
    parts.append({"ServiceName": "TestService2", "PartitionId": "4", "Replicas": []})
    settings = {
        "MaxPercentageToMove": 1.0,
        "MoveExistingReplicaForPlacement": True,
        "MaxPercentageToMoveForPlacement": 0.5,
        "PreventTransientOvercommit": False,
    } | throttle
    services = [_stateful("TestService1", 3, 2), _stateful("TestService1b", 2, 2), _stateful("TestService2", 1, 9)]
    return document(services, parts, nodes, None, False, Settings=settings)


@pytest.mark.parametrize(
    ("throttle", "placed"),
    [
        ({"GlobalMovementThrottleThresholdForPlacement": 1}, False),  # ...MoveThrottleTestNegative
        ({"GlobalMovementThrottleThresholdForPlacement": 2}, True),  # ...MoveThrottleTestPositive
        ({"GlobalMovementThrottleThresholdPercentage": 0.1}, False),  # ...PercentageGlobalThrottleTestNegative
        ({"GlobalMovementThrottleThresholdPercentage": 0.2}, True),  # ...PercentageGlobalThrottleTestPositive
    ],
)
def test_placement_with_move_within_the_movement_throttles(throttle, placed):
    """SF: with room for two movements, "4 add primary *" (and the two moves); with room for one,
    no action at all."""
    result, _ = run(_cluster(**throttle), DEFAULT)
    adds = [a for a in result["Actions"] if a["Action"] == "AddPrimary" and a["PartitionId"] == "4"]
    if placed:
        assert len(adds) == 1, result["Actions"]
    else:
        assert result["Actions"] == [], result["Actions"]
