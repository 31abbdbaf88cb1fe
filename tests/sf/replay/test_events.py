"""Timeline events applied to a state document (plbjax.sf.replay.timeline.events)."""

from __future__ import annotations

import copy

import pytest
from paths import ROOT

from plbjax import BadInput, load_state, parse_state
from plbjax.sf import ClusterState, state_document
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.timeline.changes import BlockListExpired
from plbjax.sf.replay.timeline.events import Event, Gone, apply_event, apply_events

SMALL = ROOT / "examples" / "small.yaml"


@pytest.fixture(scope="module")
def small() -> dict:
    return load_state(SMALL).document


def apply(doc: dict, kind: str, **fields) -> dict:
    """Apply one event; the input must not change and the result must stay a valid state."""
    before = copy.deepcopy(doc)
    after = apply_event(doc, Event.read(0.0, kind, fields), 0.0)
    assert doc == before
    parse_state(after)
    return after


def replicas(doc: dict) -> dict[str, dict]:
    return {str(r["ReplicaId"]): r for p in doc["Partitions"] for r in p["Replicas"]}


def node(doc: dict, name: str) -> dict:
    return next(n for n in doc["Nodes"] if n["NodeName"] == name)


def test_node_down_loses_its_replicas_and_promotes_a_secondary(small):
    doc = apply(small, "NodeDown", NodeName="N0")
    assert node(doc, "N0")["NodeStatus"] == "Down"
    reps = replicas(doc)
    assert not any(r["NodeName"] == "N0" for r in reps.values())
    assert "100" not in reps and reps["101"]["Role"] == "Primary"  # Orders/0 lost its primary on N0
    assert [r["Role"] for r in doc["Partitions"][0]["Replicas"]] == ["Primary", "Secondary"]
    doc = apply(doc, "NodeUp", NodeName="N0")
    assert node(doc, "N0")["NodeStatus"] == "Up" and "100" not in replicas(doc)


def test_node_added_and_removed(small):
    new = {"NodeName": "N6", "NodeType": "BackEnd", "FaultDomain": "fd:/dc0/r0", "UpgradeDomain": "UD0"}
    doc = apply(small, "NodeAdded", Node=new)
    assert node(doc, "N6") == new
    with pytest.raises(BadInput, match="Node.NodeName: 'N6' is already a node"):
        apply_event(doc, Event.read(0, "NodeAdded", {"Node": new}), 0)
    doc = apply(
        dict(doc, History={"112": ["N5", "N6"]}, BlockList=[{"NodeName": "N6", "ServiceTypeName": "OrdersType"}]),
        "NodeRemoved",
        NodeName="N5",
    )
    assert "N5" not in {n["NodeName"] for n in doc["Nodes"]}
    assert "112" not in replicas(doc) and "112" not in doc["History"]
    doc = apply(doc, "NodeRemoved", NodeName="N6")
    assert doc["BlockList"] == [] and "N6" not in {n["NodeName"] for n in doc["Nodes"]}


def test_unknown_node_names_the_key(small):
    with pytest.raises(BadInput, match=r"^NodeName: 'N9' is not a node$"):
        apply_event(small, Event.read(0, "NodeDown", {"NodeName": "N9"}), 0)


@pytest.mark.parametrize(
    "intent, lost, primary_stays",
    [("Pause", False, True), ("Restart", False, False), ("RemoveData", True, False), ("RemoveNode", True, False)],
)
def test_node_deactivation_intents(small, intent, lost, primary_stays):
    """NodeDisabled sets the node's DeactivationIntent (the state's, issue 37.6); NodeEnabled clears it."""
    doc = apply(small, "NodeDisabled", NodeName="N0", Intent=intent)
    assert node(doc, "N0")["NodeStatus"] == "Disabled" and node(doc, "N0")["DeactivationIntent"] == intent
    reps = replicas(doc)
    assert ("100" not in reps) == lost
    if not lost:
        assert (reps["100"]["Role"] == "Primary") == primary_stays
    assert sum(r["Role"] == "Primary" for r in doc["Partitions"][0]["Replicas"]) == 1
    assert "DeactivationIntent" not in node(apply(doc, "NodeEnabled", NodeName="N0"), "N0")
    assert "DeactivationIntent" not in node(apply(doc, "NodeDown", NodeName="N0"), "N0")


def test_load_reports_replica_partition_role_and_service_defaults(small):
    doc = apply(small, "LoadReport", ServiceName="fabric:/Shop/Orders", ReplicaId=101, Loads={"CPU": 7})
    assert replicas(doc)["101"]["Loads"] == {"CPU": 7}
    doc = apply(
        doc, "LoadReport", ServiceName="fabric:/Shop/Orders", PartitionId=1, Role="Secondary", Loads={"Memory": 50}
    )
    reps = replicas(doc)
    assert reps["111"]["Loads"] == {"Memory": 50} and reps["112"]["Loads"] == {"Memory": 50}
    assert "Loads" not in reps["110"]
    doc = apply(doc, "LoadReport", ServiceName="fabric:/Shop/Orders", Role="Primary", Loads={"CPU": 30})
    cpu = next(m for m in doc["Services"][0]["Metrics"] if m["Name"] == "CPU")
    assert cpu["PrimaryDefaultLoad"] == 30 and cpu["SecondaryDefaultLoad"] == 4
    doc = apply(doc, "LoadReport", ServiceName="fabric:/Shop/Web", Loads={"CPU": 5})
    assert doc["Services"][1]["Metrics"][0]["DefaultLoad"] == 5
    with pytest.raises(BadInput, match="Loads.Disk: service 'fabric:/Shop/Orders' has no metric 'Disk'"):
        apply_event(doc, Event.read(0, "LoadReport", {"ServiceName": "fabric:/Shop/Orders", "Loads": {"Disk": 1}}), 0)
    with pytest.raises(Gone, match="ReplicaId: 999"):
        apply_event(
            doc,
            Event.read(0, "LoadReport", {"ServiceName": "fabric:/Shop/Orders", "ReplicaId": 999, "Loads": {"CPU": 1}}),
            0,
        )


def test_service_created_updated_deleted(small):
    service = {
        "ServiceName": "fabric:/Shop/Cart",
        "ServiceTypeName": "CartType",
        "ServiceKind": "Stateless",
        "InstanceCount": 2,
        "Metrics": [{"Name": "CPU", "Weight": "High", "DefaultLoad": 5}],
    }
    doc = apply(small, "ServiceCreated", Service=service)
    assert doc["Partitions"][-1] == {"ServiceName": "fabric:/Shop/Cart", "PartitionId": 0, "Replicas": []}
    doc = apply(
        doc,
        "ServiceUpdated",
        ServiceName="fabric:/Shop/Orders",
        Changes={"TargetReplicaSetSize": 5, "Metrics": [{"Name": "Memory", "Weight": "High"}]},
    )
    assert doc["Services"][0]["TargetReplicaSetSize"] == 5
    assert "Loads" not in replicas(doc)["100"]  # its CPU report went with the metric
    correlated = dict(
        service,
        ServiceName="fabric:/Shop/Child",
        ServiceTypeName="ChildType",
        Correlations=[{"ServiceName": "fabric:/Shop/Cart", "Scheme": "Affinity"}],
    )
    doc = apply(doc, "ServiceCreated", Service=correlated)
    doc = apply(
        dict(doc, BlockList=[{"NodeName": "N0", "ServiceTypeName": "CartType"}]),
        "ServiceDeleted",
        ServiceName="fabric:/Shop/Cart",
    )
    assert "fabric:/Shop/Cart" not in {s["ServiceName"] for s in doc["Services"]}
    assert doc["Services"][-1]["Correlations"] == [] and doc["BlockList"] == []
    with pytest.raises(BadInput, match="Changes.ServiceKind: not a field an update may change"):
        apply_event(
            doc,
            Event.read(
                0, "ServiceUpdated", {"ServiceName": "fabric:/Shop/Orders", "Changes": {"ServiceKind": "Stateless"}}
            ),
            0,
        )


def test_replica_failed_promotes_a_secondary(small):
    doc = apply(small, "ReplicaFailed", ReplicaId=110)
    part = doc["Partitions"][1]["Replicas"]
    assert [r["ReplicaId"] for r in part] == [111, 112] and part[0]["Role"] == "Primary"
    doc = apply(doc, "ReplicaFailed", ReplicaId="w0a")
    assert [r["ReplicaId"] for r in doc["Partitions"][4]["Replicas"]] == ["w0b"]
    with pytest.raises(Gone):
        apply_event(doc, Event.read(0, "ReplicaFailed", {"ReplicaId": 110}), 0)


def test_upgrade_snapshot_and_return_per_completed_domain(small):
    doc = apply(small, "UpgradeStarted", Scope="Cluster", UpgradeDomains=["UD0", "UD1", "UD2"])
    upgrade = doc["Upgrade"]
    assert upgrade["InProgress"] and upgrade["Snapshot"]["100"] == "N0" and upgrade["Snapshot"]["w0b"] == "N1"
    moved = copy.deepcopy(doc)  # the planner moved 100 (N0, UD0) and 101 (N1, UD1) away
    moved["Partitions"][0]["Replicas"][0]["NodeName"] = "N3"
    moved["Partitions"][0]["Replicas"][1]["NodeName"] = "N4"
    doc = apply(moved, "UpgradeDomainCompleted", UpgradeDomain="UD0")
    reps = replicas(doc)
    assert reps["100"]["NodeName"] == "N0" and reps["101"]["NodeName"] == "N4"  # only UD0 returns
    assert doc["Upgrade"]["UpgradeDomainsDone"] == ["UD0"]
    doc = apply(doc, "UpgradeDomainCompleted", UpgradeDomain="UD1")
    assert replicas(doc)["101"]["NodeName"] == "N1"
    doc = apply(doc, "UpgradeCompleted")
    assert "Upgrade" not in doc
    with pytest.raises(BadInput, match="no upgrade is in progress"):
        apply_event(doc, Event.read(0, "UpgradeCompleted", {}), 0)


def test_return_skips_a_node_holding_the_partition(small):
    doc = apply(small, "UpgradeStarted", Scope="Application", ApplicationName="fabric:/Shop", UpgradeDomains=["UD0"])
    swapped = copy.deepcopy(doc)  # 100 went N0 -> N3, then 131 took N0... of another partition
    swapped["Partitions"][0]["Replicas"][0]["NodeName"] = "N3"
    swapped["Partitions"][0]["Replicas"][1]["NodeName"] = "N0"  # 101 now sits on 100's snapshot node
    doc = apply(swapped, "UpgradeDomainCompleted", UpgradeDomain="UD0")
    assert replicas(doc)["100"]["NodeName"] == "N3"


def test_settings_merge_and_block_list(small):
    doc = apply(small, "SettingsChanged", Settings={"MinPlacementInterval": "2"}, MetricBalancingThresholds={"CPU": 3})
    assert doc["Settings"]["MinPlacementInterval"] == "2" and doc["Settings"]["MinLoadBalancingInterval"] == "5"
    assert doc["MetricBalancingThresholds"] == {"CPU": 3, "Memory": 2.0}
    doc = apply(doc, "BlockListAdded", NodeName="N1", ServiceTypeName="WebType")
    assert doc["BlockList"] == [{"NodeName": "N1", "ServiceTypeName": "WebType"}]
    doc = apply_event(doc, Event(0.0, BlockListExpired("N1", "WebType")), 0.0)
    assert doc["BlockList"] == []


def _reports(doc: dict) -> list[Event]:
    """A mix: partition-role, partition, replica and service-level load reports around a node going
    down and a replica failing (which the later reports then name)."""
    orders = "fabric:/Shop/Orders"
    spec = [
        ("LoadReport", {"ServiceName": orders, "PartitionId": 1, "Role": "Secondary", "Loads": {"Memory": 50}}),
        ("LoadReport", {"ServiceName": orders, "ReplicaId": 101, "Loads": {"CPU": 7}}),
        ("LoadReport", {"ServiceName": orders, "PartitionId": 0, "Loads": {"CPU": 3}}),
        ("LoadReport", {"ServiceName": orders, "Role": "Primary", "Loads": {"CPU": 30}}),
        ("LoadReport", {"ServiceName": orders, "PartitionId": 0, "Role": "Primary", "Loads": {"CPU": 9}}),
        ("NodeDown", {"NodeName": "N0"}),
        ("LoadReport", {"ServiceName": orders, "ReplicaId": 101, "Loads": {"Memory": 1}}),
        ("ReplicaFailed", {"ReplicaId": 112}),
        ("LoadReport", {"ServiceName": orders, "PartitionId": 1, "Loads": {"CPU": 2, "Memory": 2}}),
        ("LoadReport", {"ServiceName": orders, "PartitionId": 1, "Role": "Primary", "Loads": {"CPU": 4}}),
    ]
    return [Event.read(0.0, kind, fields, i) for i, (kind, fields) in enumerate(spec)]


def batch(doc: dict, events: list[Event], skip_gone: bool = False) -> tuple[ClusterState, list[Event]]:
    """`apply_events` on `doc`'s state: the state after, the events applied."""
    state = parse_state(doc)
    applied = apply_events(state, Places.of(state.partitions), events, 0.0, skip_gone)
    return applied.state, applied.events


def test_apply_events_is_apply_event_one_after_the_other(small):
    events = _reports(small)
    before = copy.deepcopy(small)
    expected = small
    for event in events:
        expected = apply_event(expected, event, 0.0)
    state, applied = batch(small, events)
    assert state == parse_state(expected) and applied == events and small == before
    rest, applied = batch(small, events[:3])  # a run of reports alone, then the rest
    rest, more = batch(state_document(rest), events[3:])
    assert rest == parse_state(expected) and applied + more == events


def test_apply_events_skips_gone_reports_or_names_the_event(small):
    gone = Event.read(
        0.0, "LoadReport", {"ServiceName": "fabric:/Shop/Orders", "ReplicaId": 999, "Loads": {"CPU": 1}}, 7
    )
    events = [*_reports(small)[:2], gone, *_reports(small)[2:3]]
    state, applied = batch(small, events, skip_gone=True)
    assert applied == [events[0], events[1], events[3]]
    assert state == batch(small, applied)[0]
    with pytest.raises(BadInput, match=r"^Events\[7\]\.ReplicaId: 999"):
        batch(small, events)
    bad = [
        Event.read(0.0, "LoadReport", {"ServiceName": "fabric:/Shop/Orders", "PartitionId": 9, "Loads": {"CPU": 1}}, 3)
    ]
    with pytest.raises(BadInput, match=r"^Events\[3\]\.PartitionId: 9 is not a partition of 'fabric:/Shop/Orders'"):
        batch(small, _reports(small)[:2] + bad, skip_gone=True)
    nope = [Event.read(0.0, "LoadReport", {"ServiceName": "fabric:/Nope", "PartitionId": 0, "Loads": {"CPU": 1}}, 4)]
    with pytest.raises(BadInput, match=r"^Events\[4\]\.ServiceName: 'fabric:/Nope' is not a service"):
        batch(small, nope)
    disk = [
        Event.read(0.0, "LoadReport", {"ServiceName": "fabric:/Shop/Orders", "PartitionId": 0, "Loads": {"Disk": 1}}, 5)
    ]
    with pytest.raises(BadInput, match=r"^Events\[5\]\.Loads\.Disk: service 'fabric:/Shop/Orders' has no metric"):
        batch(small, disk)


@pytest.mark.parametrize(
    "field, value",
    [
        ("InstanceCount", 3),
        ("TargetReplicaSetSize", 4),
        ("Metrics", [{"Name": "CPU", "Weight": "Low", "PrimaryDefaultLoad": 1, "SecondaryDefaultLoad": 1}]),
        ("PlacementConstraints", "NodeType == BackEnd"),
        ("PlacementPolicies", [{"Type": "RequireDomainDistribution"}]),
        ("Correlations", [{"ServiceName": "fabric:/Shop/Orders", "Scheme": "Affinity"}]),
        ("DefaultMoveCost", "High"),
        ("Priority", 2),
        ("BalancingPolicy", "Disabled"),
    ],
)
def test_service_updated_accepts_every_listed_field(small, field, value):
    """timeline.md §1: ServiceUpdated changes any of the nine listed service fields."""
    name = "fabric:/Shop/Web" if field in ("InstanceCount", "Correlations") else "fabric:/Shop/Orders"
    doc = apply(small, "ServiceUpdated", ServiceName=name, Changes={field: value})
    service = next(s for s in doc["Services"] if s["ServiceName"] == name)
    assert service[field] == value
    assert small["Services"] != doc["Services"]


def test_node_up_and_enabled_change_only_their_own_status(small):
    """NodeUp brings a Down node back (a deactivated one stays Disabled); NodeEnabled activates a
    Disabled node (a Down one stays down); NodeDisabled of a Down node leaves it Down."""
    down = apply(small, "NodeDown", NodeName="N0")
    assert node(apply(down, "NodeEnabled", NodeName="N0"), "N0")["NodeStatus"] == "Down"
    assert node(apply(down, "NodeDisabled", NodeName="N0", Intent="Restart"), "N0")["NodeStatus"] == "Down"
    disabled = apply(small, "NodeDisabled", NodeName="N1")
    assert node(apply(disabled, "NodeUp", NodeName="N1"), "N1")["NodeStatus"] == "Disabled"
    assert node(apply(disabled, "NodeEnabled", NodeName="N1", Intent="Pause"), "N1")["NodeStatus"] == "Up"
    with pytest.raises(BadInput, match=r"^Intent: 'Reboot' is not one of Pause, Restart, RemoveData, RemoveNode$"):
        apply_event(small, Event.read(0, "NodeDisabled", {"NodeName": "N0", "Intent": "Reboot"}), 0)


def test_node_disabled_pause_keeps_every_replica_where_it_is(small):
    doc = apply(small, "NodeDisabled", NodeName="N0")  # Intent defaults to Pause
    assert doc["Partitions"] == small["Partitions"] and node(doc, "N0")["DeactivationIntent"] == "Pause"


def test_settings_changed_merges_key_by_key_whatever_the_spelling(small):
    """SF's setting names are case-insensitive: a new spelling replaces the old value instead of
    giving the setting twice; the other mappings merge per metric."""
    doc = apply(
        small,
        "SettingsChanged",
        Settings={"minloadbalancinginterval": 9},
        NodeBufferPercentage={"Memory": 0.2},
        DefragmentationMetrics={"Memory": True},
        GlobalMetricWeights={"CPU": 0.5},
        MetricActivityThresholds={"CPU": 10},
        ResourceThresholds={"CPU": 0.9},
    )
    assert doc["Settings"] == {"UseMoveCostReports": "false", "UpgradeDomainConstraintPriority": "1"} | {
        "minloadbalancinginterval": 9
    }
    assert doc["NodeBufferPercentage"] == {"CPU": 0.1, "Memory": 0.2}
    assert doc["MetricActivityThresholds"] == {"Memory": 100, "CPU": 10}
    assert doc["DefragmentationMetrics"] == {"Memory": True} and doc["ResourceThresholds"] == {"CPU": 0.9}
    with pytest.raises(BadInput, match=r"^Settings: a mapping is required$"):
        apply_event(small, Event.read(0, "SettingsChanged", {"Settings": ["MinPlacementInterval"]}), 0)


def test_replica_failed_of_a_primary_promotes_a_secondary_on_a_running_node(small):
    """The Failover Manager promotes a secondary that is still up, not one on a down node."""
    doc = apply(small, "NodeDown", NodeName="N1")  # 101, Orders/0's first secondary, was on N1
    doc = apply(doc, "ReplicaFailed", ReplicaId=100)  # Orders/0's primary
    part = doc["Partitions"][0]["Replicas"]
    assert [(r["ReplicaId"], r["Role"]) for r in part] == [(102, "Primary")]
