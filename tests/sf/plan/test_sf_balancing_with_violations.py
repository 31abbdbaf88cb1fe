"""Service Fabric's balancing beside a standing violation (PLBBalancingWithConstraintViolation.Test.cpp),
translated with SF's test configuration (LoadBalancing.Test.exe.cfg: MaxPercentageToMove 1) and the
tests' ConstraintCheckSearchTimeout 0: the constraint check fixes nothing, the violation stands, and
balancing still balances with moves that do not make it worse. SF's balancing energy is AvgStdDev
and the move costs: fixing the violation earns it nothing (the constraint check's work)."""

from __future__ import annotations

from collections import Counter

import pytest
from checker import checked_plan
from sf_cases import DEFAULT, document, fu, movements, phase, sf_nodes

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

SF_TEST = {"MaxPercentageToMove": 1.0, "ConstraintCheckSearchTimeout": 0}


def _capacity_violation() -> dict:
    """BalancingWithCapacityViolationTest: N0 of Count capacity 25, N1 unlimited; 100 singleton
    stateless partitions, 60 on N0 (over its capacity) and 40 on N1."""
    nodes = sf_nodes(2)
    nodes[0]["Capacities"] = {"Count": 25}
    svc = {"ServiceName": "TestService", "ServiceKind": "Stateless", "InstanceCount": 1}
    parts = [fu("TestService", f"p{i}", "I/0" if i < 60 else "I/1") for i in range(100)]
    return document([svc], parts, nodes, None, False, Settings=SF_TEST)


@pytest.mark.parametrize("refresh", [False, "LoadBalancing"])
def test_balancing_with_a_capacity_violation_moves_ten_instances(refresh):
    """SF: the second refresh (balancing) makes 10 actions, all "move instance 0=>1" (50 and 50: the
    excess falls from 35 to 25, no worse). One plan runs the check (no search) and balancing; one
    refresh of SF's LoadBalancing runs balancing alone; both make SF's 10."""
    options = {"refresh": refresh} if refresh else {}
    result, _, _ = checked_plan(_capacity_violation(), DEFAULT, **options)
    assert Counter((a["Action"], a["SourceNode"], a["TargetNode"]) for a in movements(result)) == {
        ("MoveInstance", "N0", "N1"): 10
    }, result["Actions"]
    assert phase(result, "Balancing")["Ran"]


def _affinity_violations() -> dict:
    """BalancingWithAffinityViolationsTest: five nodes; TestService1 (aligned affinity to
    TestService0) and TestService3 (to TestService2), two-replica partitions on other nodes than
    their parents'; SF's default metrics with global weights 1."""
    metrics = [{"Name": m, "Weight": "Zero"} for m in ("PrimaryCount", "ReplicaCount", "Count")]

    def svc(name: str, parent: str | None = None) -> dict:
        out = {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": 2, "Metrics": metrics}
        if parent:
            out["Correlations"] = [{"ServiceName": parent, "Scheme": "AlignedAffinity"}]
        return out

    services = [svc("TestService0"), svc("TestService1", "TestService0"), svc("TestService2")]
    services.append(svc("TestService3", "TestService2"))
    layouts = ["P/0, S/1", "P/1, S/3", "P/3, S/1", "P/0, S/2"]
    parts = [fu(f"TestService{i}", f"p{i}", layout) for i, layout in enumerate(layouts)]
    weights = {"PrimaryCount": 1.0, "ReplicaCount": 1.0, "Count": 1.0}
    return document(services, parts, sf_nodes(5), None, False, Settings=SF_TEST, GlobalMetricWeights=weights)


def test_balancing_with_affinity_violations_still_moves():
    """SF: the second refresh (balancing) makes at least one action although the affinity
    violations stand (the check had no time to fix them)."""
    result, _, _ = checked_plan(_affinity_violations(), DEFAULT, refresh="LoadBalancing")
    assert movements(result), result["Phases"]
