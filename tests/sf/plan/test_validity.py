"""Every plan keeps every hard rule that held, and applies to its input.

Random clusters with every feature (tests/validity.py) are planned through the public entry point and
checked by a checker that shares no code with the engine. Clusters come in families of one shape, so
a family compiles its search once. The long tier (`scripts/validity_sweep.py`, results in results/)
runs the same check on thousands of clusters. The pinned cases below are the kinds of break the
random suite found.
"""

from __future__ import annotations

import pytest
from validity import apply, breaks, random_cluster

from plbjax import SearchConfig, encode, parse_state, plan
from plbjax.anneal import clear_compiled
from plbjax.sf._encoding.decoding import diff, settle

pytestmark = pytest.mark.slow  # searches on hundreds of random clusters

CONFIGS = {
    "chains": SearchConfig(chains=4, steps=1000, seconds=None, block_steps=250, tries=1, parallel=False),
    "parallel": SearchConfig(chains=1, steps=200, seconds=None, block_steps=50, tries=64, parallel=True),
}
FAMILIES, PER_FAMILY = 4, 40


@pytest.mark.parametrize("family", range(FAMILIES))
def test_random_clusters_break_no_hard_rule(family):
    clear_compiled()  # each family is a new shape: keep the process's compiled programs few
    config = CONFIGS["parallel" if family % 2 else "chains"]
    failures = {}
    for seed in range(family * PER_FAMILY, (family + 1) * PER_FAMILY):
        doc, predicates = random_cluster(seed, family)
        found = breaks(doc, predicates, plan(parse_state(doc), config).document())
        if found:
            failures[seed] = found
    assert not failures, failures


# ------------------------------------------------------------------ pinned cases

CONFIG = CONFIGS["chains"]


def _nodes(capacity: dict[str, float], status: dict[str, str] | None = None) -> list[dict]:
    out = []
    for i in range(6):
        name = f"N{i}"
        node = {
            "NodeName": name,
            "FaultDomain": f"fd:/dc{i}",
            "UpgradeDomain": f"UD{i}",
            "Capacities": {"Load": capacity.get(name, 100)},
        }
        if status and name in status:
            node["NodeStatus"] = status[name]
        out.append(node)
    return out


def _stateful(name: str, target: int, primary: float = 10, secondary: float = 5) -> dict:
    return {
        "ServiceName": name,
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": target,
        "Metrics": [
            {"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": primary, "SecondaryDefaultLoad": secondary}
        ],
    }


def _partition(service: str, pid: str, *replicas: tuple[str, str | None]) -> dict:
    return {
        "ServiceName": service,
        "PartitionId": pid,
        "Replicas": [
            {"ReplicaId": f"{pid}.{k}", "Role": role, "NodeName": node} for k, (role, node) in enumerate(replicas)
        ],
    }


def _document(services: list[dict], partitions: list[dict], nodes: list[dict]) -> dict:
    return {
        "SchemaVersion": 1,
        "MetricActivityThresholds": {"Load": 10**6},
        "Nodes": nodes,
        "Services": services,
        "Partitions": partitions,
    }


def _checked(doc: dict, predicates: dict | None = None) -> dict:
    result = plan(parse_state(doc), CONFIG).document()
    predicates = predicates or {s["ServiceName"]: (lambda n: True) for s in doc["Services"]}
    assert breaks(doc, predicates, result) == [], result["Actions"]
    return result


def test_a_partition_placed_from_nothing_adds_its_primary_where_it_ends():
    """The search placed an empty partition's replicas and made a new secondary the primary: the plan
    adds each replica once, in the role it ends with (no swap of a replica that did not exist)."""
    doc = _document([_stateful("fabric:/A/S", 3)], [_partition("fabric:/A/S", "p")], _nodes({}))
    problem, index = encode(parse_state(doc))
    rows = list(index.partition_rows[0])
    node_of, primary_of = index.initial_node.copy(), index.initial_primary.copy()
    node_of[rows] = [0, 1, 2]
    primary_of[0] = rows[2]
    actions = diff(index, node_of, primary_of)
    assert sorted((a.kind, a.target) for a in actions) == [
        ("AddPrimary", "N2"),
        ("AddSecondary", "N0"),
        ("AddSecondary", "N1"),
    ]
    after = apply(doc, [a.document() for a in actions])
    assert sorted((r["Role"], r["NodeName"]) for r in after["Partitions"][0]["Replicas"]) == [
        ("Primary", "N2"),
        ("Secondary", "N0"),
        ("Secondary", "N1"),
    ]


def test_a_primary_on_a_disabled_node_hands_over_by_a_swap():
    """A replica on a node deactivated with RemoveData is still running: its primary swaps with a
    secondary (a promotion would leave two primaries) and then moves off as a secondary."""
    doc = _document(
        [_stateful("fabric:/A/S", 3)],
        [_partition("fabric:/A/S", "p", ("Primary", "N0"), ("Secondary", "N1"), ("Secondary", "N2"))],
        _nodes({}, {"N0": "Disabled"}),
    )
    doc["Nodes"][0]["DeactivationIntent"] = "RemoveData"
    result = _checked(doc)
    kinds = [a["Action"] for a in result["Actions"]]
    assert kinds == ["SwapPrimarySecondary", "MoveSecondary"], result["Actions"]


def test_one_instance_per_node_only_where_it_fits():
    """InstanceCount -1 with load 30: N1 (capacity 20) and N2 (capacity 40, 15 used) have no room;
    the other nodes get an instance, N1 and N2 none, and the two missing instances are reported."""
    everywhere = {
        "ServiceName": "fabric:/A/E",
        "ServiceKind": "Stateless",
        "InstanceCount": -1,
        "Metrics": [{"Name": "Load", "Weight": "High", "DefaultLoad": 30}],
    }
    doc = _document(
        [everywhere, _stateful("fabric:/A/S", 1, 15, 15)],
        [_partition("fabric:/A/E", "e"), _partition("fabric:/A/S", "s", ("Primary", "N2"))],
        _nodes({"N1": 20, "N2": 40}),
    )
    result = _checked(doc)
    added = sorted(a["TargetNode"] for a in result["Actions"] if a["Action"] == "AddInstance")
    assert added == ["N0", "N3", "N4", "N5"]
    assert [u["ServiceName"] for u in result["Unplaced"]] == ["fabric:/A/E"] * 2


def test_a_surplus_drop_takes_a_secondary_before_a_crowded_primary():
    """Target 2, three running replicas; the primary shares its fault domain with N1 and its upgrade
    domain with N2, and N1 has no room for a primary's load: a secondary goes, nobody is promoted."""
    nodes = _nodes({"N1": 8})
    nodes[1]["FaultDomain"], nodes[2]["UpgradeDomain"] = nodes[0]["FaultDomain"], nodes[0]["UpgradeDomain"]
    doc = _document(
        [_stateful("fabric:/A/S", 2)],
        [_partition("fabric:/A/S", "p", ("Primary", "N0"), ("Secondary", "N1"), ("Secondary", "N2"))],
        nodes,
    )
    result = _checked(doc)
    kinds = [a["Action"] for a in result["Actions"]]
    assert kinds[0] == "DropSecondary" and "PromoteSecondary" not in kinds and "DropPrimary" not in kinds


def test_a_lost_primary_is_replaced_by_the_secondary_with_room():
    """The primary's node is Down; of the secondaries, the one on the emptier node N1 has no room for
    the primary's load (capacity 8, 5 used), so the one on N2 (more loaded, 95 free) is promoted."""
    filler = {
        "ServiceName": "fabric:/A/F",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "Metrics": [{"Name": "Load", "Weight": "High", "DefaultLoad": 5}],
    }
    doc = _document(
        [_stateful("fabric:/A/S", 3), filler],
        [
            _partition("fabric:/A/S", "p", ("Primary", "N0"), ("Secondary", "N1"), ("Secondary", "N2")),
            _partition("fabric:/A/F", "f", ("Instance", "N2")),
        ],
        _nodes({"N1": 8}, {"N0": "Down"}),
    )
    result = _checked(doc)
    promoted = [a for a in result["Actions"] if a["Action"] == "PromoteSecondary"]
    assert [a["TargetNode"] for a in promoted] == ["N2"], result["Actions"]


def test_a_partition_of_secondaries_gets_a_primary():
    """Every replica is a secondary (the primary was lost and its replacement built): one is promoted."""
    doc = _document(
        [_stateful("fabric:/A/S", 3)],
        [_partition("fabric:/A/S", "p", ("Secondary", "N0"), ("Secondary", "N1"), ("Secondary", "N2"))],
        _nodes({}),
    )
    result = _checked(doc)
    assert [a["Action"] for a in result["Actions"]] == ["PromoteSecondary"], result["Actions"]


def test_the_checker_sees_each_kind_of_break():
    """The independent checker flags an unappliable plan, an overload and a move onto a Down node."""
    doc = _document(
        [_stateful("fabric:/A/S", 2)],
        [_partition("fabric:/A/S", "p", ("Primary", "N0"), ("Secondary", "N1"))],
        _nodes({"N2": 9}, {"N3": "Down"}),
    )
    result = plan(parse_state(doc), CONFIG).document()
    always = {"fabric:/A/S": lambda n: True}
    move = {
        "ServiceName": "fabric:/A/S",
        "PartitionId": "p",
        "ReplicaId": "p.0",
        "Action": "MovePrimary",
        "SourceNode": "N0",
    }
    for target, expected in (("N2", "capacity"), ("N3", "placement")):
        bad = dict(result, Actions=[dict(move, TargetNode=target)])
        assert any(b.startswith(expected) for b in breaks(doc, always, bad)), target
    ghost = dict(result, Actions=[dict(move, ReplicaId=None, Action="SwapPrimarySecondary", TargetNode="N1")])
    assert breaks(doc, always, ghost)[0].startswith("apply")


def test_a_settled_rotation_keeps_each_node_s_role():
    """The search rotated a partition's primary and a secondary between their nodes (not executable as
    moves): settling undoes the moves but hands the primary role over, so the node the primary moved to
    carries the primary's load, as the search planned (undoing the moves alone would put the primary's
    load back on a node the search may have filled)."""
    doc = _document(
        [_stateful("fabric:/A/S", 3)],
        [_partition("fabric:/A/S", "p", ("Primary", "N0"), ("Secondary", "N1"), ("Secondary", "N2"))],
        _nodes({}),
    )
    problem, index = encode(parse_state(doc))
    rows = list(index.partition_rows[0])
    primary = int(index.initial_primary[0])
    other = next(r for r in rows if index.initial_node[r] == index.initial_node[primary] + 1)
    node_of = index.initial_node.copy()
    node_of[primary], node_of[other] = index.initial_node[other], index.initial_node[primary]
    settled_nodes, settled_primary = settle(index, node_of, index.initial_primary)
    assert (settled_nodes == index.initial_node).all() and settled_primary[0] == other
    assert [a.kind for a in diff(index, settled_nodes, settled_primary)] == ["SwapPrimarySecondary"]
