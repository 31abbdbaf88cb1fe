"""Issue 61: every stateful partition ends a plan with a running primary, or the plan says why.

A partition whose input lists secondaries only (its primary lost) gets one of them promoted by
placement (SF's Failover Manager promotes; the one its placement would pick for a primary), or, once
the constraint check or balancing made room, by that phase. Where none may become primary (capacity,
constraints, a node deactivated with Restart) the partition is listed in `Unplaced` (a `Primary`
with its `Reason` and the elimination sequence over its secondaries' nodes) and in `Health`, and
the later phases leave its replicas where they are. The property test plans small random clusters
(tests/validity.py's `tiny_cluster`: primary-less partitions at, below and above their target, on
Up, Disabled with each intent, and Down nodes, with and without one refresh) and counts the
partitions left with neither a primary nor a report (validity's `unled`): never one.
"""

from __future__ import annotations

import pytest
from validity import apply, breaks, tiny_cluster, unled

from plbjax import SearchConfig, parse_state, plan

CONFIG = SearchConfig(chains=2, steps=200, seconds=None, block_steps=100, tries=1, parallel=False)
REFRESH = (False, True, "NewReplicaPlacement", "ConstraintCheck", "LoadBalancing")


def _node(i: int, capacity: int, **extra) -> dict:
    node = {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i}"}
    return node | {"Capacities": {"Load": capacity}} | extra


def _secondaries_only(primary_load: float = 10, **first_nodes) -> dict:
    """Target 2, its two replicas secondaries on N0 and N1 (capacity 12, an instance of load 5 on
    each: a primary's 10 does not fit beside it), four empty nodes of capacity 100."""
    load = {"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": primary_load, "SecondaryDefaultLoad": 5}
    return {
        "SchemaVersion": 1,
        "Nodes": [_node(0, 12, **first_nodes), _node(1, 12, **first_nodes)] + [_node(i, 100) for i in range(2, 6)],
        "Services": [
            {"ServiceName": "fabric:/A/S", "ServiceKind": "Stateful", "TargetReplicaSetSize": 2, "Metrics": [load]},
            {
                "ServiceName": "fabric:/A/F",
                "ServiceKind": "Stateless",
                "InstanceCount": 1,
                "Metrics": [{"Name": "Load", "Weight": "High", "DefaultLoad": 5}],
            },
        ],
        "Partitions": [
            {
                "ServiceName": "fabric:/A/S",
                "PartitionId": "p",
                "Replicas": [
                    {"ReplicaId": "a", "Role": "Secondary", "NodeName": "N0"},
                    {"ReplicaId": "b", "Role": "Secondary", "NodeName": "N1"},
                ],
            },
            *(
                {
                    "ServiceName": "fabric:/A/F",
                    "PartitionId": f"f{i}",
                    "Replicas": [{"ReplicaId": f"f{i}", "Role": "Instance", "NodeName": f"N{i}"}],
                }
                for i in (0, 1)
            ),
        ],
    }


def _checked(doc: dict, refresh: bool | str = False) -> dict:
    result = plan(parse_state(doc), CONFIG, refresh=refresh).document()
    assert unled(doc, result) == [], result
    assert breaks(doc, {s["ServiceName"]: (lambda n: True) for s in doc["Services"]}, result) == [], result
    return result


def test_a_promotion_waits_for_the_room_balancing_makes():
    """Neither secondary has room for the primary's load until balancing moves the instances off
    N0 and N1: then one is promoted, labelled with balancing, the phase that ran it (before: no
    promotion and nothing reported)."""
    result = _checked(_secondaries_only())
    promoted = [a for a in result["Actions"] if a["Action"] == "PromoteSecondary"]
    assert len(promoted) == 1 and promoted[0]["Phase"] == "Balancing", result["Actions"]
    assert "made room" in promoted[0]["Reason"]
    assert result["Unplaced"] == [] and result["Health"] == []


@pytest.mark.parametrize("refresh", [False, True])
def test_a_partition_no_secondary_may_lead_is_reported(refresh):
    """A primary's load (20) exceeds both secondaries' nodes' capacity (12): no promotion; the
    partition is in `Unplaced` (a Primary with its Reason, NodeCapacity eliminating N0 and N1) and
    in `Health` (an Error), and its secondaries stay where they are (before: nothing reported)."""
    result = _checked(_secondaries_only(primary_load=20), refresh)
    actions = [a for a in result["Actions"] if a["ServiceName"] == "fabric:/A/S"]
    assert actions == [], actions
    [entry] = result["Unplaced"]
    assert (entry["ServiceName"], entry["PartitionId"], entry["Role"]) == ("fabric:/A/S", "p", "Primary")
    assert "no running secondary may become primary" in entry["Reason"]
    capacity = next(c for c in entry["ConstraintEliminationSequence"] if c["Constraint"] == "NodeCapacity")
    assert capacity == {"Constraint": "NodeCapacity", "Eliminated": ["N0", "N1"], "Remaining": 0}
    [health] = [h for h in result["Health"] if h["Entity"] == "fabric:/A/S/p"]
    assert health["HealthState"] == "Error" and health["Property"] == "PrimaryReplicaUnplaced"


def test_secondaries_on_nodes_restarting_are_reported():
    """Both secondaries run on nodes deactivated with Intent Restart, which take no primary: the
    partition is reported, the restart named first in its elimination sequence."""
    doc = _secondaries_only(primary_load=1, NodeStatus="Disabled", DeactivationIntent="Restart")
    result = _checked(doc)
    [entry] = [u for u in result["Unplaced"] if u["Role"] == "Primary"]
    first = entry["ConstraintEliminationSequence"][0]
    assert first == {"Constraint": "NodeDeactivation", "Eliminated": ["N0", "N1"], "Remaining": 0}
    assert apply(doc, result["Actions"])["Partitions"][0]["Replicas"][0]["NodeName"] == "N0"


def _unled_count(seeds: range) -> tuple[int, int, list]:
    """(clusters, partitions without a primary in the input, failures) over `seeds`."""
    failures, headless = [], 0
    for seed in seeds:
        doc = tiny_cluster(seed)
        headless += sum(
            1
            for p in doc["Partitions"]
            if p["ServiceName"] != "fabric:/A/F" and not any(r["Role"] == "Primary" for r in p["Replicas"])
        )
        result = plan(parse_state(doc), CONFIG, refresh=REFRESH[seed % len(REFRESH)]).document()
        found = unled(doc, result)
        if found:
            failures.append((seed, found))
    return len(seeds), headless, failures


def test_every_partition_is_led_or_reported():
    """40 small random clusters (one compiled search): no partition ends with neither."""
    clusters, headless, failures = _unled_count(range(40))
    assert headless > 40 and not failures, failures


@pytest.mark.slow
def test_every_partition_is_led_or_reported_on_500_clusters():
    clusters, headless, failures = _unled_count(range(1000, 1500))
    assert clusters == 500 and headless > 500 and not failures, failures
