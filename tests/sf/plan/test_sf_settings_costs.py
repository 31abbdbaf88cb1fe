"""SF's SwapCost and MoveCost<Cost>Value, translated (PLBBalancing.Test.cpp): with UseMoveCostReports
a swap costs SwapCost in the energy, a move its replica's move cost valued by the MoveCost<Cost>Value
settings (CandidateSolution.cpp:81: SwapCost * swaps + moves; FailoverUnit::GetMoveCostValue)."""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, fu, run, sf_nodes

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _swap_cost(swap_cost: float, **settings) -> dict:
    """PLBBalancing.Test.cpp:10482 SwapCostTestHelper: two nodes; HighLoadService (MyMetric 30/10)
    P/0,S/1; two LowLoadService singletons (10) on N0. Loads 50 and 10: two moves of the low
    primaries or one swap of the high one reach 30 and 30. UseMoveCostReports true."""

    def svc(name: str, target: int, primary: float) -> dict:
        metric = {"Name": "MyMetric", "Weight": "High", "PrimaryDefaultLoad": primary, "SecondaryDefaultLoad": 10}
        return {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": [metric]}

    services = [svc("LowLoadService", 1, 10), svc("HighLoadService", 2, 30)]
    partitions = [
        fu("HighLoadService", "0", "P/0, S/1"),
        fu("LowLoadService", "1", "P/0"),
        fu("LowLoadService", "2", "P/0"),
    ]
    settings = {"MaxPercentageToMove": 1.0, "UseMoveCostReports": True, "SwapCost": swap_cost} | settings
    return document(services, partitions, sf_nodes(2), None, False, Settings=settings)


def test_zero_swap_cost_prefers_the_swap():
    """PLBBalancing.Test.cpp:3319 BalancingWithZeroSwapCost: SwapCost 0: 1 action, "0 swap primary 0<=>1"."""
    result, _ = run(_swap_cost(0.0), DEFAULT)
    actions = [(a["PartitionId"], a["Action"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]]
    assert actions == [("0", "SwapPrimarySecondary", "N0", "N1")], actions


def test_high_swap_cost_moves_instead():
    """PLBBalancing.Test.cpp:3340 BalancingWithHighSwapCost: SwapCost 40 (MoveCostHighValue): some
    action, no swap (plbjax swapped at its fixed 0.1 before)."""
    result, _ = run(_swap_cost(40.0), DEFAULT)
    assert result["Actions"], result
    assert not [a for a in result["Actions"] if a["Action"] == "SwapPrimarySecondary"], result["Actions"]


@pytest.mark.parametrize(("low", "swapped"), [(1, False), (10, True)])
def test_move_cost_low_value_prices_the_moves(low, swapped):
    """SwapCostTestHelper's cluster with SwapCost 5: the two moves of Low-cost primaries cost 2 at
    SF's default MoveCostLowValue 1 (cheaper than the swap: moves), 20 at MoveCostLowValue 10 (the
    swap is cheaper: one swap). Both end at 30 and 30."""
    result, _ = run(_swap_cost(5.0, MoveCostLowValue=low), DEFAULT)
    kinds = {a["Action"] for a in result["Actions"]}
    assert kinds == ({"SwapPrimarySecondary"} if swapped else {"MovePrimary"}), result["Actions"]


def _secondary_costs(separate: bool) -> dict:
    """Four nodes; Shared (stateful, Load 10) P/0, S/1, S/2, its secondary on N1 reporting MoveCost
    High, the one on N2 none (DefaultMoveCost Low); Single (stateless, DefaultMoveCost Medium) one
    instance of Load 10 on N2. Loads 10, 10, 20, 0: moving either replica of N2 to N3 balances
    perfectly. UseMoveCostReports true."""
    metric = {"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 10}
    shared = {"ServiceName": "Shared", "ServiceKind": "Stateful", "TargetReplicaSetSize": 3, "Metrics": [metric]}
    single = {
        "ServiceName": "Single",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "DefaultMoveCost": "Medium",
        "Metrics": [{"Name": "Load", "Weight": "High", "DefaultLoad": 10}],
    }
    shared_part = fu("Shared", "0", "P/0, S/1, S/2")
    shared_part["Replicas"][1]["MoveCost"] = "High"
    settings = {"UseMoveCostReports": True, "UseSeparateSecondaryMoveCost": separate}
    return document(
        [shared, single], [shared_part, fu("Single", "1", "I/2")], sf_nodes(4), None, False, Settings=settings
    )


@pytest.mark.parametrize(("separate", "moved"), [(True, "0"), (False, "1")])
def test_without_separate_secondary_costs_a_partition_secondaries_share_one(separate, moved):
    """UseSeparateSecondaryMoveCost (SF 7.1; default true since 8.0): false is SF's FailoverUnit
    before it, one move cost for all of a partition's secondaries (FailoverUnit.cpp:412
    `secondaryMoveCost_`; FailoverUnit.Test.cpp:110 ReportMoveCostWithoutUseSeparateSecondaryLoadTest:
    a secondary's report Medium is the partition's secondary cost). True: the unreported secondary on
    N2 costs 1 (Low) and moves; false: it costs High (40) like its sibling, so the Medium (15)
    instance of partition 1 moves instead. Either way one move N2 => N3."""
    result, _ = run(_secondary_costs(separate), DEFAULT)
    actions = [(a["PartitionId"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]]
    assert actions == [(moved, "N2", "N3")], result["Actions"]
