"""Surplus drops, services on every node and partitions without a primary, as SF's PLB and Failover
Manager treat them (issue 48.6, 48.7, 48.10), each built from SF's own unit test where one exists
(PLBPlacement.Test.cpp): node i of SF's CreateNodeDescription is `N{i}`; a FailoverUnit's replica
difference INT_MAX is a service on every node (InstanceCount -1).
"""

from __future__ import annotations

import random

import pytest
from checker import checked_plan
from sf_cases import CONFIG, DEFAULT, document, fu, node_of, nodes, part, run, service, sf_nodes

from plbjax.sf import ClusterSpec, generate

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

_STATUSES = 5  # SF's NodeDeactivationStatus values the test walks (their order is not modelled)
_INTENTS = ("None", "Pause", "Restart", "RemoveData", "RemoveNode")


def test_drops_spare_paused_nodes_and_keep_the_primary():
    """SF's DroppingWithDeactivatingNodesTest (PLBPlacement.Test.cpp): N0 active, N1-N25 every
    deactivation intent under each of five statuses; one partition P/0, S/1 .. S/25 whose target is
    lowered below them all. SF drops only the secondaries on nodes not paused (20 actions, "0 drop
    secondary 1|3|4|5|6|8|..."): no replica on a paused node and not the primary (Checker::
    DropExtraReplicas skips primaries; PlacementCreator: a paused node's replicas are not droppable)."""
    node_list = sf_nodes(1 + _STATUSES * len(_INTENTS))
    for i, node in enumerate(node_list[1:], start=1):
        intent = _INTENTS[(i - 1) % len(_INTENTS)]
        if intent != "None":
            node |= {"NodeStatus": "Disabled", "DeactivationIntent": intent}
    svc = {"ServiceName": "S", "ServiceKind": "Stateful", "TargetReplicaSetSize": 1}
    replicas = ", ".join(["P/0"] + [f"S/{i}" for i in range(1, len(node_list))])
    result, after = run(document([svc], [fu("S", "p", replicas)], node_list, None, False), DEFAULT)
    paused = {n["NodeName"] for n in node_list if n.get("DeactivationIntent") == "Pause"}
    assert len(result["Actions"]) == 20, result["Actions"]
    assert all(a["Action"] == "DropSecondary" and a["SourceNode"] not in paused for a in result["Actions"])
    roles = {(r["NodeName"], r["Role"]) for p in after["Partitions"] for r in p["Replicas"]}
    assert roles == {("N0", "Primary")} | {(n, "Secondary") for n in paused}, roles


def _every_node(paused: bool = True) -> dict:
    """SF's PlacementOnEveryNodeNotNeededWithPausedNode: N0-N3 in dc0-dc3, N2 paused; a service on
    every node with "FaultDomain != fd:/dc0" (here a node property, plbjax's constraints do not read
    the fault domain) holds instances on N0, N1 and N2. Not `paused`: SF's
    PlacementOnEveryNodeWithAddAndDrop, the same with N2 active."""
    node_list = [dict(n, PlacementProperties={"Dc": f"dc{i}"}) for i, n in enumerate(sf_nodes(4))]
    if paused:
        node_list[2] |= {"NodeStatus": "Disabled", "DeactivationIntent": "Pause"}
    svc = {
        "ServiceName": "S",
        "ServiceKind": "Stateless",
        "InstanceCount": -1,
        "PlacementConstraints": "Dc != dc0",
    }
    return document([svc], [fu("S", "0", "I/0, I/1, I/2")], node_list, None, False)


@pytest.mark.parametrize("paused", [True, False])
def test_one_refresh_adds_the_missing_instance_and_drops_nothing(paused):
    """SF's PlacementOnEveryNodeNotNeededWithPausedNode (PLBPlacement.Test.cpp), first refresh: a -1
    partition lacking an instance on a node it may use adds it ("0 add instance 3", one action) and
    drops its instance on the blocked N0 only in the next refresh (PlacementCreator: the replica
    difference is the nodes it lacks; the blocked ones' count only at 0)."""
    result, _, _ = checked_plan(_every_node(paused), DEFAULT, refresh=True)
    assert [(a["Action"], a["TargetNode"]) for a in result["Actions"]] == [("AddInstance", "N3")], result["Actions"]


@pytest.mark.parametrize("paused", [True, False])
def test_next_refresh_drops_the_blocked_instance(paused):
    """The same test's second refresh: every node it may use holds one, so N0's goes ("0 drop
    instance 0", one action); N2's, on the paused node, stays."""
    doc = _every_node(paused)
    doc["Partitions"] = [fu("S", "0", "I/0, I/1, I/2, I/3")]
    result, _, _ = checked_plan(doc, DEFAULT, refresh=True)
    assert [(a["Action"], a["SourceNode"]) for a in result["Actions"]] == [("DropInstance", "N0")], result["Actions"]


def test_a_whole_plan_adds_and_drops_for_a_service_on_every_node():
    """A plan runs the refreshes through (docs/contract.md): the add and the drop, N2's kept."""
    result, after = run(_every_node(), DEFAULT)
    actions = sorted((a["Action"], a["SourceNode"] or a["TargetNode"]) for a in result["Actions"])
    assert actions == [("AddInstance", "N3"), ("DropInstance", "N0")], result["Actions"]
    assert sorted(node_of(after).values()) == ["N1", "N2", "N3"]


# ---------------------------------------------- issue 48.10: every partition has a primary or a word


def _stateful(target: int, primary: float, secondary: float) -> dict:
    metric = {"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": primary, "SecondaryDefaultLoad": secondary}
    return {"ServiceName": "S", "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "Metrics": [metric]}


def test_a_lost_primary_no_secondary_can_carry_is_listed_unplaced():
    """The primary of S (target 2) is on the Down N7; its secondaries on N1 and N2 have no room for
    the primary's load (capacity 20, 10 + 5 used, primary 15). No secondary can be promoted, so the
    surplus drop takes a secondary, not the lost primary, and the primary, which fits nowhere, is
    listed in `Unplaced` with its elimination sequence (as SF reports a replica it cannot place)."""
    node_list = nodes(capacity=20)
    node_list[7]["NodeStatus"] = "Down"
    doc = document(
        [_stateful(2, 15, 5), service("F", -1)],
        [fu("S", "s", "P/7, S/1, S/2"), part("F", "f", *[(f"N{i}", 10) for i in range(7)])],
        node_list,
        frame=False,
    )
    result, after = run(doc)
    assert [(u["ServiceName"], u["Role"]) for u in result["Unplaced"]] == [("S", "Primary")], result["Unplaced"]
    assert result["Unplaced"][0]["ConstraintEliminationSequence"]
    assert not [a for a in result["Actions"] if a["Action"] in ("DropPrimary", "PromoteSecondary")], result["Actions"]


_SPEC = ClusterSpec(
    nodes=8,
    fault_domains=4,
    upgrade_domains=4,
    metrics=1,
    services=3,
    partitions_per_service=3,
    replicas_per_partition=4,
    stateless_fraction=0.3,
    capacity_headroom=1.3,
)


def _lost_primaries(seed: int) -> dict:
    """A generated cluster (one shape for every seed) with nodes Down and deactivated, targets
    lowered, and primaries lost: removed, without a node, or listed as secondaries; default loads."""
    rng = random.Random(seed)
    doc = generate(seed, _SPEC)
    for node in rng.sample(doc["Nodes"], 2):
        node["NodeStatus"] = "Down"
    for node in rng.sample([n for n in doc["Nodes"] if "NodeStatus" not in n], 2):
        node |= {"NodeStatus": "Disabled", "DeactivationIntent": rng.choice(["Pause", "Restart"])}
    for svc in doc["Services"]:
        if svc["ServiceKind"] == "Stateful" and rng.random() < 0.5:
            svc["TargetReplicaSetSize"] -= 1
    for partition in doc["Partitions"]:
        for replica in partition["Replicas"]:
            replica.pop("Loads", None)  # the services' default loads: a role's load follows the role
        primary = next((r for r in partition["Replicas"] if r["Role"] == "Primary"), None)
        if primary is not None and rng.random() < 0.4:
            how = rng.randrange(3)
            if how == 0:
                partition["Replicas"].remove(primary)
            elif how == 1:
                primary["NodeName"] = None
            else:
                primary["Role"] = "Secondary"
    return doc


@pytest.mark.parametrize("seed", range(4))
def test_every_partition_with_secondaries_ends_with_a_primary_or_in_unplaced(seed):
    """Issue 48.10: SF's Failover Manager promotes a secondary of a partition that lost its
    primary; where none can carry the primary's load the plan says so in `Unplaced`. Over random
    small clusters, every stateful partition with running secondaries ends with a primary or an
    `Unplaced` entry naming it."""
    doc = _lost_primaries(seed)
    result, after = run(doc, CONFIG)
    down = {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus") == "Down"}
    unplaced = {(u["ServiceName"], str(u["PartitionId"])) for u in result["Unplaced"]}
    for partition in after["Partitions"]:
        running = [r for r in partition["Replicas"] if r.get("NodeName") and r["NodeName"] not in down]
        if any(r["Role"] == "Secondary" for r in running) and not any(r["Role"] == "Primary" for r in running):
            assert (partition["ServiceName"], str(partition["PartitionId"])) in unplaced, (partition, result["Actions"])


# ------------------------------------------------- services on every node: block lists, capacity


def _on_every_node(name: str = "S", **extra) -> dict:
    return {"ServiceName": name, "ServiceKind": "Stateless", "InstanceCount": -1} | extra


def test_instances_on_blocklisted_nodes_are_dropped():
    """SF's PlacementOnAllNodesWithBlockListTest: five nodes, the type blocklisted on N1 and N2; a
    service on every node holds instances on N0, N1, N3 and N4: 1 action, "drop * 1"."""
    doc = document(
        [_on_every_node(ServiceTypeName="TestType")], [fu("S", "0", "I/0, I/1, I/3, I/4")], sf_nodes(5), None, False
    )
    doc["BlockList"] = [{"NodeName": n, "ServiceTypeName": "TestType"} for n in ("N1", "N2")]
    for refresh in (False, True):
        result, _, _ = checked_plan(doc, DEFAULT, refresh=refresh)
        assert [(a["Action"], a["SourceNode"]) for a in result["Actions"]] == [("DropInstance", "N1")], result[
            "Actions"
        ]


def test_instances_on_every_node_where_they_fit():
    """SF's PlacementOnEveryNodeWithCapacity: four nodes of capacity 50; one 40-load instance of
    another service on N0; a service on every node of load 40 adds 3 instances, none on N0."""
    metric = [{"Name": "MyMetric", "Weight": "High", "DefaultLoad": 40}]
    four = [dict(n, Capacities={"MyMetric": 50}) for n in sf_nodes(4)]
    services = [
        {"ServiceName": "T1", "ServiceKind": "Stateless", "InstanceCount": 1, "Metrics": metric},
        _on_every_node("T2", Metrics=metric),
    ]
    doc = document(
        services, [fu("T1", "1", "I/0"), {"ServiceName": "T2", "PartitionId": "2", "Replicas": []}], four, None, False
    )
    result, _ = run(doc, DEFAULT)
    adds = sorted(
        a["TargetNode"] for a in result["Actions"] if a["PartitionId"] == "2" and a["Action"] == "AddInstance"
    )
    assert adds == ["N1", "N2", "N3"], result["Actions"]


def test_instances_outside_the_placement_constraint_are_dropped():
    """SF's ServiceOnEveryNodeReplicaDrop: instances on all four nodes, then the service may use only
    dc0's node (here a node property): 3 actions, "0 drop instance *", none on N0."""
    node_list = [dict(n, PlacementProperties={"Dc": f"dc{i}"}) for i, n in enumerate(sf_nodes(4))]
    svc = _on_every_node(PlacementConstraints="Dc == dc0")
    result, after = run(document([svc], [fu("S", "0", "I/0, I/1, I/2, I/3")], node_list, None, False), DEFAULT)
    assert sorted((a["Action"], a["SourceNode"]) for a in result["Actions"]) == [
        ("DropInstance", "N1"),
        ("DropInstance", "N2"),
        ("DropInstance", "N3"),
    ], result["Actions"]
    assert list(node_of(after).values()) == ["N0"]


def _child_target_larger(parent: str, children: list[str]) -> dict:
    """SF's PlacementWithAffinityChildTargetLarger* tests: five nodes, TestService0 (target 3) and
    TestService1 (target 4, aligned affinity to TestService0), SF's default metrics."""
    svc0 = {"ServiceName": "TestService0", "ServiceKind": "Stateful", "TargetReplicaSetSize": 3}
    svc1 = {"ServiceName": "TestService1", "ServiceKind": "Stateful", "TargetReplicaSetSize": 4}
    svc1["Correlations"] = [{"ServiceName": "TestService0", "Scheme": "AlignedAffinity"}]
    parts = [fu("TestService0", "p0", parent)] + [fu("TestService1", f"c{i}", r) for i, r in enumerate(children)]
    return document([svc0, svc1], parts, sf_nodes(5), None, False, Settings={"MaxPercentageToMove": 1.0})


@pytest.mark.parametrize(
    "parent, children, dropped",
    [
        # PlacementWithAffinityChildTargetLargerDropChildReplicas: "1|2 drop secondary 3|4"
        ("P/0, S/1, S/2", ["P/0, S/1, S/2, S/3, S/4"] * 2, {"c0": {"N3", "N4"}, "c1": {"N3", "N4"}}),
        # ...DropChildAndParentReplicas: "0 drop secondary 1|2|3", "1 drop secondary 4"
        ("P/0, S/1, S/2, S/3", ["P/0, S/1, S/2, S/3, S/4"], {"p0": {"N1", "N2", "N3"}, "c0": {"N4"}}),
    ],
)
def test_a_child_drops_its_replicas_away_from_its_parent_first(parent, children, dropped):
    """SF's Checker::DropExtraReplicas: a child partition above its target drops a secondary that is
    not beside a parent replica (its affinity constraint's drop subspace), not one beside it (which
    would leave the stray in violation); the parent drops any secondary. One refresh: drops only."""
    result, _, _ = checked_plan(_child_target_larger(parent, children), DEFAULT, refresh=True)
    drops = {a["PartitionId"]: a["SourceNode"] for a in result["Actions"] if a["Action"] == "DropSecondary"}
    assert len(result["Actions"]) == len(dropped) and drops.keys() == dropped.keys(), result["Actions"]
    assert all(drops[p] in nodes for p, nodes in dropped.items()), result["Actions"]
