"""Hand-checkable scenarios: small clusters where the plan Service Fabric would produce is known.

Each test builds a tiny cluster document, runs `plan` and asserts SF's behaviour (the issue's "must
show" list): capacity fixed by exactly the needed moves, a capacity violation only a primary swap
fixes, an upgrade-domain violation, stateless placement over a hierarchical fault-domain tree,
placement constraints, aligned affinity, block lists, unplaceable replicas with their constraint
elimination sequence, and random clusters with injected violations. Every plan is also validated
against plan.schema.json, and its Actions are applied to the input and must reproduce the plan's
LoadsAfter.

Compilation dominates the run time, so most scenarios share one shape (the FRAME): 6 nodes, each in
its own fault domain fd:/dc<i>, upgrade domains UD<i mod 3> (UD0 = {N0, N3}, UD1 = {N1, N4},
UD2 = {N2, N5}), one metric "Load", two services, at most 8 partitions and 11-12 replicas (counting
replicas still to place), partitions of at most 3 replicas. Unless balancing is the point, a huge
MetricActivityThreshold keeps the cluster balanced by SF's trigger, so only placement and the
constraint check may move anything.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import Counter

import pytest
from checker import checked_plan, no_new_violations, node_loads, placement_of, violations
from conftest import cluster

from plbjax.sf import SearchConfig, parse_state
from plbjax.sf._state import expressions as expressions

pytestmark = pytest.mark.slow  # a plan (and its compilation) each

CONFIG = SearchConfig(chains=8, steps=3000, seconds=None, block_steps=500, tries=1, parallel=False)
NODES = [f"N{i}" for i in range(6)]
BALANCED = {"Load": 10**6}  # MetricActivityThresholds: max load never above it, so never imbalanced

# SF's Checker (Reliability/LoadBalancing/Checker.cpp) builds its constraints in this order, and the
# constraint elimination sequence walks them in it. (NodeBlockListConstraint reports as PlacementConstraint.)
SF_CHECKER_ORDER = [
    "ReplicaExclusionStatic",
    "PlacementConstraint",
    "PreferredLocation",
    "FaultDomain",
    "UpgradeDomain",
    "ReplicaExclusionDynamic",
    "NodeCapacity",
    "ScaleoutCount",
    "ApplicationCapacity",
    "Affinity",
]


# ------------------------------------------------------------------------------ documents


def frame(
    services: list[dict],
    partitions: list[dict],
    capacities: dict[str, float] | None = None,
    colors: dict[str, str] | None = None,
    activity: dict | None = BALANCED,
    **extra,
) -> dict:
    """A FRAME cluster document (see the module docstring)."""
    nodes = []
    for i, name in enumerate(NODES):
        node = {"NodeName": name, "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i % 3}"}
        if capacities and name in capacities:
            node["Capacities"] = {"Load": capacities[name]}
        if colors:
            node["PlacementProperties"] = {"NodeColor": colors[name]}
        nodes.append(node)
    doc = {"SchemaVersion": 1, "Nodes": nodes, "Services": services, "Partitions": partitions}
    if activity:
        doc["MetricActivityThresholds"] = activity
    doc.update(extra)
    n_replicas = sum(max(len(p["Replicas"]), target(doc, p["ServiceName"])) for p in partitions)
    assert len(services) == 2 and len(partitions) <= 8 and 11 <= n_replicas <= 12, "keep the FRAME shape"
    return doc


def target(doc: dict, service: str) -> int:
    svc = next(s for s in doc["Services"] if s["ServiceName"] == service)
    return svc.get("TargetReplicaSetSize", svc.get("InstanceCount"))


def stateful(name: str, primary: float, secondary: float, **extra) -> dict:
    return {
        "ServiceName": name,
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 3,
        "Metrics": [
            {"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": primary, "SecondaryDefaultLoad": secondary}
        ],
    } | extra


def stateless(name: str, load: float, count: int = 1, **extra) -> dict:
    return {
        "ServiceName": name,
        "ServiceKind": "Stateless",
        "InstanceCount": count,
        "Metrics": [{"Name": "Load", "Weight": "High", "DefaultLoad": load}],
    } | extra


def partition(service: str, pid: str, primary: str | None = None, *secondaries: str) -> dict:
    """A stateful partition: primary node, then secondary nodes (ReplicaIds <pid>.0, <pid>.1, ...)."""
    roles = ([("Primary", primary)] if primary else []) + [("Secondary", n) for n in secondaries]
    return {
        "ServiceName": service,
        "PartitionId": pid,
        "Replicas": [
            {"ReplicaId": f"{pid}.{k}", "Role": role, "NodeName": node} for k, (role, node) in enumerate(roles)
        ],
    }


def instances(service: str, pid: str, *nodes: str) -> dict:
    return {
        "ServiceName": service,
        "PartitionId": pid,
        "Replicas": [{"ReplicaId": f"{pid}.{k}", "Role": "Instance", "NodeName": n} for k, n in enumerate(nodes)],
    }


# ---------------------------------------------------------------------------- plan checks


def run(doc: dict, config: SearchConfig = CONFIG) -> tuple[dict, dict, object]:
    """plan(doc), with checker.checked_plan's checks; returns (plan, document after, state)."""
    return checked_plan(doc, config)


def where(document: dict, service: str | None = None) -> dict[str, list[tuple[str, str]]]:
    """{partition id: [(role, node)]} of the placed replicas (of one service)."""
    return {
        str(p["PartitionId"]): sorted((r["Role"], r["NodeName"]) for r in p["Replicas"] if r["NodeName"])
        for p in document["Partitions"]
        if service is None or p["ServiceName"] == service
    }


def health(result: dict, prop: str) -> list[dict]:
    return [h for h in result["Health"] if h["Property"] == prop]


def over_capacity(result: dict, which: str = "LoadsAfter") -> list[tuple[str, str]]:
    return [
        (n["NodeName"], m)
        for n in result["Nodes"]
        for m, cap in n["Capacities"].items()
        if cap is not None and n[which].get(m, 0.0) > cap + 1e-6
    ]


# ------------------------------------------------------------------------------ scenarios


def test_capacity_violation_fixed_by_exactly_one_move():
    """N0 holds 4 replicas of 30 (120 > capacity 100): one replica too many. The only move that
    breaks nothing takes a UD0 replica to N3, the other UD0 node; moving a second one would balance
    the cluster better, but balancing is not triggered, so SF's constraint check stops at one."""
    doc = frame(
        [stateful("fabric:/App/A", 30, 30), stateful("fabric:/App/B", 30, 30)],
        [
            partition("fabric:/App/A", "a0", "N0", "N1", "N2"),
            partition("fabric:/App/A", "a1", "N4", "N0", "N5"),
            partition("fabric:/App/B", "b0", "N1", "N0", "N5"),
            partition("fabric:/App/B", "b1", "N0", "N4", "N2"),
        ],
        capacities={n: 100 for n in NODES},
    )
    result, after, state = run(doc)
    assert over_capacity(result, "LoadsBefore") == [("N0", "Load")]
    assert [
        (a["Action"] in ("MovePrimary", "MoveSecondary"), a["SourceNode"], a["TargetNode"]) for a in result["Actions"]
    ] == [(True, "N0", "N3")], result["Actions"]
    assert over_capacity(result) == []
    assert health(result, "NodeCapacityViolation") == []
    assert violations(state, placement_of(after)) == {k: set() for k in violations(state, placement_of(doc))}
    assert result["Phases"][1]["Ran"] and not result["Phases"][2]["Ran"]


def test_capacity_violation_only_a_primary_swap_fixes():
    """N0 (capacity 100) holds A's primary (90) and a B replica (20): 110. Nothing fits elsewhere:
    N3-N5 have 10 free, N1 and N2 already hold b0 and a0. Swapping a0's primary with its secondary
    on N1 (capacity 120) leaves N0 at 30 and N1 at 110; on N2 (capacity 100) it would not fit."""
    doc = frame(
        [stateful("fabric:/App/A", 90, 10), stateful("fabric:/App/B", 20, 20)],
        [
            partition("fabric:/App/A", "a0", "N0", "N1", "N2"),
            partition("fabric:/App/B", "b0", "N1", "N0", "N2"),
            partition("fabric:/App/B", "b1", "N3", "N4", "N5"),
            partition("fabric:/App/B", "b2", "N4", "N3", "N5"),
        ],
        capacities={"N0": 100, "N1": 120, "N2": 100, "N3": 50, "N4": 50, "N5": 50},
    )
    result, after, state = run(doc)
    assert over_capacity(result, "LoadsBefore") == [("N0", "Load")]
    assert [
        (a["Action"], a["PartitionId"], a["ReplicaId"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]
    ] == [("SwapPrimarySecondary", "a0", "a0.0", "N0", "N1")]
    loads = {n["NodeName"]: n["LoadsAfter"]["Load"] for n in result["Nodes"]}
    assert loads == {"N0": 30, "N1": 110, "N2": 30, "N3": 40, "N4": 40, "N5": 40}
    assert where(after)["a0"] == [("Primary", "N1"), ("Secondary", "N0"), ("Secondary", "N2")]
    assert health(result, "NodeCapacityViolation") == []


def test_upgrade_domain_violation_fixed_by_one_move():
    """a0 has replicas on N0 and N3 (both UD0) and N1 (UD1), none in UD2: one of the UD0 replicas
    moves to N2 or N5 (UD2)."""
    doc = frame(
        [stateful("fabric:/App/A", 10, 10), stateful("fabric:/App/B", 10, 10)],
        [
            partition("fabric:/App/A", "a0", "N0", "N3", "N1"),
            partition("fabric:/App/B", "b0", "N0", "N1", "N2"),
            partition("fabric:/App/B", "b1", "N3", "N4", "N5"),
            partition("fabric:/App/B", "b2", "N4", "N0", "N5"),
        ],
    )
    state = parse_state(doc)
    assert violations(state, placement_of(doc))["upgrade_domain"] == {("fabric:/App/A", "a0")}
    result, after, state = run(doc)
    assert len(result["Actions"]) == 1, result["Actions"]
    move = result["Actions"][0]
    assert move["PartitionId"] == "a0" and move["Action"] in ("MovePrimary", "MoveSecondary")
    assert move["SourceNode"] in ("N0", "N3") and move["TargetNode"] in ("N2", "N5")
    assert violations(state, placement_of(after))["upgrade_domain"] == set()
    assert health(result, "ReplicaConstraintViolation_UpgradeDomain") == []


def test_stateless_placement_over_hierarchical_fault_domains():
    """10 partitions x 3 instances onto dc0/rack0, dc0/rack1, dc1, dc2: one instance per top-level
    fault domain, so dc1 and dc2 get 10 and dc0's two racks share 10 evenly (5/5)."""
    fds = {"N0": "fd:/dc0/rack0", "N1": "fd:/dc0/rack1", "N2": "fd:/dc1", "N3": "fd:/dc2"}
    doc = {
        "SchemaVersion": 1,
        "Nodes": [
            {"NodeName": n, "FaultDomain": fd, "UpgradeDomain": f"UD{i}"} for i, (n, fd) in enumerate(fds.items())
        ],
        "Services": [{"ServiceName": "fabric:/App/Web", "ServiceKind": "Stateless", "InstanceCount": 3}],
        "Partitions": [{"ServiceName": "fabric:/App/Web", "PartitionId": f"w{i}", "Replicas": []} for i in range(10)],
    }
    result, after, _ = run(doc)
    assert {a["Action"] for a in result["Actions"]} == {"AddInstance"} and len(result["Actions"]) == 30
    assert result["Unplaced"] == []
    per_node = Counter(node for reps in where(after).values() for _, node in reps)
    assert per_node == {"N0": 5, "N1": 5, "N2": 10, "N3": 10}
    for pid, reps in where(after).items():
        top = [fds[node].split("/")[1] for _, node in reps]
        assert sorted(top) == ["dc0", "dc1", "dc2"], (pid, reps)
    count = {n["NodeName"]: n["LoadsAfter"]["Count"] for n in result["Nodes"]}
    assert count == {"N0": 5, "N1": 5, "N2": 10, "N3": 10}
    assert [h for h in result["Health"] if h["Property"].startswith("ReplicaConstraintViolation")] == []


def test_placement_constraint_violation_moves_replicas_to_allowed_nodes():
    """Blue (NodeColor == Blue) has a replica on N0 (Blue) and two on N4, N5 (Red): both move to
    the free Blue nodes N1 and N2; the unconstrained service stays where it is."""
    colors = {n: "Blue" if i < 3 else "Red" for i, n in enumerate(NODES)}
    doc = frame(
        [
            stateful("fabric:/App/Blue", 10, 10, PlacementConstraints="NodeColor == Blue"),
            stateful("fabric:/App/Any", 10, 10),
        ],
        [
            partition("fabric:/App/Blue", "u0", "N0", "N4", "N5"),
            partition("fabric:/App/Any", "o0", "N0", "N1", "N2"),
            partition("fabric:/App/Any", "o1", "N3", "N4", "N5"),
            partition("fabric:/App/Any", "o2", "N3", "N1", "N5"),
        ],
        colors=colors,
    )
    state = parse_state(doc)
    assert violations(state, placement_of(doc))["placement"] == {
        ("fabric:/App/Blue", "u0", "u0.1"),
        ("fabric:/App/Blue", "u0", "u0.2"),
    }
    result, after, state = run(doc)
    assert sorted((a["Action"], a["SourceNode"]) for a in result["Actions"]) == [
        ("MoveSecondary", "N4"),
        ("MoveSecondary", "N5"),
    ], result["Actions"]
    assert {a["TargetNode"] for a in result["Actions"]} == {"N1", "N2"}
    assert {node for _, node in where(after)["u0"]} == {"N0", "N1", "N2"}
    assert where(after, "fabric:/App/Any") == where(doc, "fabric:/App/Any")
    assert health(result, "ReplicaConstraintViolation_PlacementConstraint") == []
    assert no_new_violations(violations(state, placement_of(doc)), violations(state, placement_of(after))) == []
    assert violations(state, placement_of(after))["placement"] == set()


def test_aligned_affinity_restored_by_one_swap():
    """Child c0 is on the parent's three nodes but its primary sits with a parent secondary (N1)
    and a child secondary with the parent primary (N0): one swap of c0's primary to N0 aligns it.
    c1 and c2 are aligned already."""
    parent, child = "fabric:/App/Parent", "fabric:/App/Child"
    doc = frame(
        [
            stateful(parent, 10, 10),
            stateful(child, 10, 10, Correlations=[{"ServiceName": parent, "Scheme": "AlignedAffinity"}]),
        ],
        [
            partition(parent, "p0", "N0", "N1", "N2"),
            partition(child, "c0", "N1", "N0", "N2"),
            partition(child, "c1", "N0", "N1", "N2"),
            partition(child, "c2", "N0", "N2", "N1"),
        ],
    )
    result, after, _ = run(doc)
    assert [
        (a["Action"], a["ServiceName"], a["PartitionId"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]
    ] == [("SwapPrimarySecondary", child, "c0", "N1", "N0")], result["Actions"]
    assert dict(where(after)["c0"])["Primary"] == "N0"
    assert [h for h in result["Health"] if "Affinity" in h["Property"]] == []


def test_blocklisted_node_is_never_used_by_its_service_type():
    """N5 is empty but blocklisted for WebType: the six Web instances go elsewhere, while balancing
    fills N5 with replicas of the other service type."""
    doc = frame(
        [
            stateless("fabric:/App/Web", 10, ServiceTypeName="WebType"),
            stateful("fabric:/App/Other", 10, 10, ServiceTypeName="OtherType"),
        ],
        [{"ServiceName": "fabric:/App/Web", "PartitionId": f"w{i}", "Replicas": []} for i in range(6)]
        + [
            partition("fabric:/App/Other", "o0", "N0", "N1", "N2"),
            partition("fabric:/App/Other", "o1", "N3", "N4", "N2"),
        ],
        activity=None,
        BlockList=[{"NodeName": "N5", "ServiceTypeName": "WebType"}],
    )
    result, after, _ = run(doc)
    assert result["Unplaced"] == []
    adds = [a for a in result["Actions"] if a["ServiceName"] == "fabric:/App/Web"]
    assert sorted(a["Action"] for a in adds) == ["AddInstance"] * 6
    web_nodes = [node for reps in where(after, "fabric:/App/Web").values() for _, node in reps]
    assert len(web_nodes) == 6 and "N5" not in web_nodes
    other_nodes = [node for reps in where(after, "fabric:/App/Other").values() for _, node in reps]
    assert "N5" in other_nodes
    assert result["Phases"][0]["Ran"] and result["Phases"][2]["Ran"]


def _elimination_checks(entry: dict, holding: set[str], forbidden: set[str]) -> None:
    """SF's checker order; each step eliminates nodes still remaining; the counts add up; replica
    exclusion removes the partition's nodes, the placement constraint the forbidden ones; none remain."""
    sequence = entry["ConstraintEliminationSequence"]
    names = [s["Constraint"] for s in sequence]
    known = [n for n in names if n in SF_CHECKER_ORDER]
    assert known == sorted(known, key=SF_CHECKER_ORDER.index), names
    assert "ReplicaExclusionStatic" in names and "PlacementConstraint" in names
    remaining = set(NODES)
    for step in sequence:
        gone = set(step["Eliminated"])
        assert gone <= remaining, step
        remaining -= gone
        assert step["Remaining"] == len(remaining), step
    steps = {s["Constraint"]: set(s["Eliminated"]) for s in sequence}
    assert steps["ReplicaExclusionStatic"] == holding
    assert steps["PlacementConstraint"] == forbidden - holding
    assert sequence[-1]["Remaining"] == 0


BLUE_ONLY = {n: "Blue" if n in ("N0", "N1") else "Red" for n in NODES}


def _unplaceable(blue_partition: dict) -> dict:
    return frame(
        [
            stateful("fabric:/App/Blue", 10, 10, PlacementConstraints="NodeColor == Blue"),
            stateful("fabric:/App/Any", 10, 10),
        ],
        [
            blue_partition,
            partition("fabric:/App/Any", "o0", "N0", "N1", "N2"),
            partition("fabric:/App/Any", "o1", "N3", "N4", "N5"),
            partition("fabric:/App/Any", "o2", "N3", "N1", "N5"),
        ],
        colors=BLUE_ONLY,
    )


def test_unplaceable_replica_reported_with_elimination_sequence():
    """TargetReplicaSetSize 3, but only N0 and N1 are Blue and both hold a replica already."""
    doc = _unplaceable(partition("fabric:/App/Blue", "u0", "N0", "N1"))
    result, after, _ = run(doc)
    assert result["Actions"] == []
    assert len(result["Unplaced"]) == 1
    entry = result["Unplaced"][0]
    assert (entry["ServiceName"], entry["PartitionId"], entry["Role"]) == ("fabric:/App/Blue", "u0", "Secondary")
    _elimination_checks(entry, {"N0", "N1"}, {"N2", "N3", "N4", "N5"})
    reports = [h for h in result["Health"] if "u0" in h["Entity"] or "u0" in h["Description"]]
    assert reports and all(h["SourceId"] == "System.PLB" and h["HealthState"] in ("Warning", "Error") for h in reports)
    assert "Placement" in [p["Phase"] for p in result["Phases"] if p["Ran"]]


@pytest.mark.parametrize("seed", [0, 2])
def test_new_partition_places_what_it_can_and_reports_the_rest(seed):
    """The same partition with no replicas yet: the primary and one secondary go on the two Blue
    nodes, the third replica (a secondary: SF never leaves a partition without its primary while
    placing secondaries) is reported unplaced. Any seed must give this; seed 2 costs one compile."""
    doc = _unplaceable({"ServiceName": "fabric:/App/Blue", "PartitionId": "u0", "Replicas": []})
    result, after, _ = run(doc, dataclasses.replace(CONFIG, seed=seed))
    assert sorted((a["Action"], a["TargetNode"] in ("N0", "N1")) for a in result["Actions"]) == [
        ("AddPrimary", True),
        ("AddSecondary", True),
    ], result["Actions"]
    assert {node for _, node in where(after)["u0"]} == {"N0", "N1"}
    assert [(u["PartitionId"], u["Role"]) for u in result["Unplaced"]] == [("u0", "Secondary")]
    _elimination_checks(result["Unplaced"][0], {"N0", "N1"}, {"N2", "N3", "N4", "N5"})
    assert [h for h in result["Health"] if "u0" in h["Entity"] or "u0" in h["Description"]]


# ------------------------------------------------------------------- random clusters


def _inject(doc: dict, seed: int) -> tuple[dict, tuple[str, str], tuple[str, str, str]]:
    """The generated cluster with one node's capacity lowered below its load and one replica of a
    constrained service moved onto a node its placement constraint forbids."""
    doc = copy.deepcopy(doc)
    state = parse_state(doc)
    loads = node_loads(state, doc)
    caps = {n.name: n.capacities for n in state.nodes}
    # capacity: the node with the most load (relative to its capacity) on a metric with a capacity
    node, metric = max(
        ((n, m) for n in caps for m in caps[n] if loads[n][m] > 0),
        key=lambda nm: loads[nm[0]][nm[1]] / caps[nm[0]][nm[1]],
    )
    entry = next(n for n in doc["Nodes"] if n["NodeName"] == node)
    entry["Capacities"] = dict(caps[node]) | {metric: math.floor(loads[node][metric] * 0.75)}
    # placement: a replica of a constrained service onto a node outside its constraint
    allowed = {}
    for svc in state.services:
        if svc.placement_constraints:
            mask = expressions.node_mask(svc.placement_constraints, [n.properties for n in state.nodes])
            allowed[svc.name] = {n.name for n, ok in zip(state.nodes, mask) if ok}
    part = next(p for p in doc["Partitions"] if p["ServiceName"] in allowed and len(p["Replicas"]) > 1)
    taken = {r["NodeName"] for r in part["Replicas"]}
    rep = part["Replicas"][-1]
    forbidden = sorted(n.name for n in state.nodes if n.name not in allowed[part["ServiceName"]] | taken)
    rep["NodeName"] = forbidden[seed % len(forbidden)]
    return doc, (node, metric), (part["ServiceName"], str(part["PartitionId"]), str(rep["ReplicaId"]))


@pytest.mark.parametrize("seed", [0, 1])
def test_random_cluster_with_injected_violations_is_repaired_without_breaking_anything(seed):
    doc, capacity, misplaced = _inject(cluster(seed), seed)
    state = parse_state(doc)
    before = violations(state, placement_of(doc))
    assert capacity in before["capacity"] and misplaced in before["placement"]
    result, after_doc, state = run(doc)
    after = violations(state, placement_of(after_doc))
    assert no_new_violations(before, after) == []
    node, metric = capacity
    if capacity in after["capacity"]:
        assert any(
            h["Entity"] == node and metric in h["Description"] for h in health(result, "NodeCapacityViolation")
        ), result["Health"]
    if misplaced in after["placement"]:
        assert any(
            misplaced[2] in h["Entity"] for h in health(result, "ReplicaConstraintViolation_PlacementConstraint")
        ), result["Health"]
    # and here both are fixable: the generator leaves every node type 2x headroom, the lowered node
    # sheds a quarter of its load, and the misplaced replica's service has allowed nodes to spare
    assert capacity not in after["capacity"] and misplaced not in after["placement"]
