"""SF's PLB unit tests for issue 37 (items 2, 7, 8, 9), translated into the contract:

- local balancing domains: each service with two or more partitions is checked against
  LocalBalancingThreshold on its own loads (BalanceCheckerCreator::CreateLoadBalancingDomainEntries,
  LoadBalancingDomainEntry::RefreshIsBalanced);
- `refresh=True`: one SF refresh, the first of placement, constraint check and balancing that has
  work (PLBScheduler::RefreshAction); with PlaceChildWithoutParent false a child waits for its parent;
- new partitions as the Failover Manager builds them: secondaries only with a primary.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from checker import checked_plan
from sf_cases import DEFAULT, document, fu, movements, phase, run, sf_nodes

from plbjax.sf import ClusterSpec, SearchConfig, generate

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def test_an_imbalanced_local_domain_triggers_balancing():
    """SF's BalancingWithImbalancedLocalDomains (PLBBalancing.Test.cpp:4744), following
    BalanceCheckerCreator::CreateLoadBalancingDomainEntries: two services of two one-replica
    partitions on two nodes with SF's default metrics, each service's primaries on one node. The
    cluster is balanced (two primaries a node); with LocalBalancingThreshold 1 each service's own
    domain is not: SF moves one primary of each service (0|1 move primary 0=>1, 2|3 1=>0)."""
    services = [{"ServiceName": f"S{k}", "ServiceKind": "Stateful", "TargetReplicaSetSize": 1} for k in (1, 2)]
    partitions = [fu("S1", f"p{i}", "P/0") for i in (0, 1)] + [fu("S2", f"p{i}", "P/1") for i in (2, 3)]
    doc = document(services, partitions, sf_nodes(2), None, False, Settings={"LocalBalancingThreshold": 1.0})
    result, _ = run(doc, DEFAULT)
    moves = sorted((a["ServiceName"], a["SourceNode"], a["TargetNode"]) for a in movements(result))
    assert moves == [("S1", "N0", "N1"), ("S2", "N1", "N0")], result["Actions"]
    assert phase(result, "Balancing")["Ran"]
    entry = next(b for b in result["Balance"] if b["Metric"] == "PrimaryCount")
    assert entry["LocallyImbalanced"] == {"Before": ["S1", "S2"], "After": []} and not entry["IsBalancedBefore"]
    off, _ = run(dict(doc, Settings={}), DEFAULT)  # SF's default 0: local domains never trigger
    assert not movements(off) and not phase(off, "Balancing")["Ran"]


# ----------------------------------------------- one refresh (refresh=True): SF's RefreshAction

_ZERO = [{"Name": name, "Weight": "Zero"} for name in ("PrimaryCount", "ReplicaCount", "Count")]
_ONES = {"PrimaryCount": 1.0, "ReplicaCount": 1.0, "Count": 1.0}


def _stateful(name: str, target: int, parent: str | None = None) -> dict:
    """SF's CreateServiceDescription(WithAffinity): stateful, the default metrics at weight 0 and
    load 0 ("PrimaryCount/0.0/0/0, ..."), aligned affinity to `parent`."""
    svc = {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": _ZERO}
    if parent:
        svc["Correlations"] = [{"ServiceName": parent, "Scheme": "AlignedAffinity"}]
    return svc


def _empty(svc: str, pid: str) -> dict:
    return {"ServiceName": svc, "PartitionId": pid, "Replicas": []}


def _refresh(doc: dict, seed: int = 0) -> dict:
    return checked_plan(doc, dataclasses.replace(DEFAULT, seed=seed), refresh=True)[0]


def test_one_refresh_places_parents_before_their_children():
    """SF's PlacementWithAffinityTest (PLBPlacement.Test.cpp:1987), following RefreshAction and
    AffinitySubspace::GetTargetNodes: PlaceChildWithoutParent false, two empty parents of three
    replicas with an aligned child of two each; one refresh adds the parents' six replicas, the
    children wait for a later one."""
    services = [_stateful("S0", 3), _stateful("S1", 2, "S0"), _stateful("S2", 3), _stateful("S3", 2, "S2")]
    partitions = [_empty(f"S{i}", f"p{i}") for i in range(4)]
    settings = {"PlaceChildWithoutParent": False}
    doc = document(services, partitions, sf_nodes(5), None, False, GlobalMetricWeights=_ONES, Settings=settings)
    result = _refresh(doc)
    assert len(result["Actions"]) == 6 and {a["ServiceName"] for a in result["Actions"]} == {"S0", "S2"}
    assert phase(result, "Placement")["Ran"] and not phase(result, "Balancing")["Ran"]
    assert "wait for a later refresh" in phase(result, "Placement")["Reason"]
    assert sorted({u["ServiceName"] for u in result["Unplaced"]}) == ["S1", "S3"]
    whole, _ = run(doc, DEFAULT)  # the whole plan: later refreshes place the children too
    assert len([a for a in whole["Actions"] if a["Action"].startswith("Add")]) == 10 and not whole["Unplaced"]


def test_one_refresh_places_no_child_replica_it_cannot_align():
    """SF's PlacementWithAffinityTest2 (PLBPlacement.Test.cpp:2025), following RefreshAction: the
    parent P/0, S/1; its aligned child has its primary on N1 and a secondary to add, which must go
    beside the parent's secondary on N1, where the child's primary is. Without moving existing
    replicas (MoveExistingReplicaForPlacement false) one refresh does nothing."""
    services = [_stateful("S0", 2), _stateful("S1", 2, "S0")]
    partitions = [fu("S0", "p0", "P/0, S/1"), fu("S1", "p1", "P/1")]
    settings = {"MoveExistingReplicaForPlacement": False}
    doc = document(services, partitions, sf_nodes(5), None, False, GlobalMetricWeights=_ONES, Settings=settings)
    result = _refresh(doc)
    assert result["Actions"] == [] and phase(result, "Placement")["Ran"]
    assert not phase(result, "ConstraintCheck")["Ran"] and not phase(result, "Balancing")["Ran"]


def test_one_refresh_fixes_affinity_without_balancing():
    """SF's ConstraintCheckAffinityViolationsTest (PLBConstraintCheck.Test.cpp:1201), following
    RefreshAction: two parents with an aligned child each, both children away from their parents;
    one refresh is the constraint check alone, four moves (SF: child 1's primary 1=>0 and secondary
    3=>1; parent 2's secondary 1=>4 and child 3's primary 0=>3), no balancing after them. SF's
    count is checked, and that each child ends aligned with its parent (plbjax may align a pair by
    moving the parent's replicas rather than the child's)."""
    services = [_stateful("S0", 2), _stateful("S1", 2, "S0"), _stateful("S2", 2), _stateful("S3", 2, "S2")]
    layout = ["P/0, S/1", "P/1, S/3", "P/3, S/1", "P/0, S/4"]
    partitions = [fu(f"S{i}", f"p{i}", r) for i, r in enumerate(layout)]
    settings = {"PreferredLocationConstraintPriority": -1}
    doc = document(services, partitions, sf_nodes(5), None, False, GlobalMetricWeights=_ONES, Settings=settings)
    result, after, _ = checked_plan(doc, DEFAULT, refresh=True)
    assert len(movements(result)) == 4, result["Actions"]
    assert phase(result, "ConstraintCheck")["Ran"] and not phase(result, "Balancing")["Ran"]
    assert not result["Remaining"]["Violations"]
    layout = {p["ServiceName"]: sorted((r["Role"], r["NodeName"]) for r in p["Replicas"]) for p in after["Partitions"]}
    assert layout["S1"] == layout["S0"] and layout["S3"] == layout["S2"]  # each child aligned with its parent


# ----------------------------------------- new partitions as the Failover Manager builds them

_SMALL = SearchConfig(chains=8, steps=3000, seconds=None, block_steps=500, tries=1, parallel=False)


def _headless(doc: dict) -> set[str]:
    """Stateful partitions with a live secondary and no live primary."""
    stateful = {s["ServiceName"] for s in doc["Services"] if s["ServiceKind"] == "Stateful"}
    out = set()
    for p in doc["Partitions"]:
        roles = {r["Role"] for r in p["Replicas"] if r.get("NodeName")}
        if p["ServiceName"] in stateful and "Secondary" in roles and "Primary" not in roles:
            out.add(p["PartitionId"])
    return out


def _with_new_partitions(seed: int) -> dict:
    """A random cluster (plbjax-generate) with a few stateful partitions emptied (new partitions),
    and some of their services' primaries too heavy for any node."""
    spec = ClusterSpec(
        nodes=6, services=3, partitions_per_service=3, replicas_per_partition=3, metrics=1, stateless_fraction=0.0
    )
    doc = generate(seed, spec)
    emptied = random.Random(seed).sample(doc["Partitions"], 3)
    for p in emptied:
        p["Replicas"] = []
    capacity = max(n["Capacities"]["Metric0"] for n in doc["Nodes"])
    heavy = {p["ServiceName"] for p in emptied[:2]}
    for svc in doc["Services"]:
        if svc["ServiceName"] in heavy:
            svc["Metrics"][0]["PrimaryDefaultLoad"] = capacity + 1
    return doc


@pytest.mark.parametrize("seed", range(4))
def test_no_plan_leaves_secondaries_without_a_primary(seed):
    """Property (issue 37.9), following SF's Failover Manager, which builds a partition from its
    primary: on random clusters with new partitions, some of whose primaries fit nowhere, no plan
    ends with a stateful partition that has live secondaries and no primary unless it began so;
    such a partition is listed whole in Unplaced, its secondaries with the reason."""
    doc = _with_new_partitions(seed)
    result, after, _ = checked_plan(doc, dataclasses.replace(_SMALL, seed=seed))
    assert _headless(after) <= _headless(doc), result["Actions"]
    for entry in result["Unplaced"]:
        if entry["Role"] == "Secondary" and "Reason" in entry:
            assert any(u["PartitionId"] == entry["PartitionId"] and u["Role"] == "Primary" for u in result["Unplaced"])


# ------------------------------------------------ defragmentation by swaps only (issue 37.8)


def _defrag(layout: list[tuple[int, int, str]]) -> dict:
    """SF's DefragShould(Not)SwapTest: four nodes of DefragMetric capacity 100, DefragMetric a
    defragmentation metric with threshold 1, SwapPrimaryProbability 1 (the search only swaps
    primaries), one stateful service per (primary load, secondary load, replicas)."""
    four = [dict(n, FaultDomain=f"fd:/dc0/r{i}", Capacities={"DefragMetric": 100}) for i, n in enumerate(sf_nodes(4))]
    services, partitions = [], []
    for i, (primary, secondary, replicas) in enumerate(layout):
        metric = {
            "Name": "DefragMetric",
            "Weight": "High",
            "PrimaryDefaultLoad": primary,
            "SecondaryDefaultLoad": secondary,
        }
        target = len(replicas.split(","))
        services.append(
            {"ServiceName": f"S{i}", "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": [metric]}
        )
        partitions.append(fu(f"S{i}", f"p{i}", replicas))
    settings = {"PreventTransientOvercommit": True, "SwapPrimaryProbability": 1.0}
    return document(
        services,
        partitions,
        four,
        None,
        False,
        Settings=settings,
        DefragmentationMetrics={"DefragMetric": True},
        MetricBalancingThresholds={"DefragMetric": 1},
    )


def test_defragmentation_swaps_primaries_to_pack_nodes():
    """SF's DefragShouldSwapTest (PLBBalancing.Test.cpp:2646), following Searcher's move choice
    (SwapPrimaryProbability 1: swaps only): loads 60, 50, 60, 50; swapping partition 1's primary
    to N0 and partition 3's to N3 packs them to 100, 10, 100, 10 in SF's two swaps."""
    doc = _defrag([(50, 50, "P/0"), (50, 10, "P/1, S/0"), (50, 50, "P/2"), (10, 50, "P/2, S/3")])
    result, _ = run(doc, DEFAULT)
    swaps = sorted((a["PartitionId"], a["TargetNode"]) for a in result["Actions"])
    assert swaps == [("p1", "N0"), ("p3", "N3")], result["Actions"]
    assert all(a["Action"] == "SwapPrimarySecondary" for a in result["Actions"])


def test_defragmentation_that_needs_a_move_does_nothing_when_only_swaps_are_searched():
    """SF's DefragShouldNotSwapTest (PLBBalancing.Test.cpp:2707), following Searcher's move choice:
    loads 10, 100, 10, 100; only merging the two 10s (a move) would pack more, and
    SwapPrimaryProbability 1 searches swaps only: SF makes no action."""
    doc = _defrag([(50, 50, "P/1"), (50, 10, "P/1, S/0"), (50, 50, "P/3"), (10, 50, "P/2, S/3")])
    result, _ = run(doc, DEFAULT)
    assert result["Actions"] == []
