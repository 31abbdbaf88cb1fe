"""The state document: reading, schema and semantic checks, SF defaults, settings."""

import copy
import json

import jsonschema
import pytest
import yaml
from paths import ROOT

from plbjax.errors import BadInput
from plbjax.sf import load_state, parse_state
from plbjax.sf._state.cluster import (
    BlockEntry,
    CodePackage,
    Correlation,
    NodeType,
    PlacementPolicy,
    ResourceGovernance,
    Upgrade,
)
from plbjax.sf._state.schema_check import fast_conforms, plain_copy, state_schema
from plbjax.sf._state.settings import PLB_SETTINGS, resolve_settings

EXAMPLE = ROOT / "examples" / "small.yaml"
SCHEMAS = ROOT / "plbjax" / "schemas"


@pytest.fixture
def doc():
    return yaml.safe_load(EXAMPLE.read_text())


def rejects(doc, *fragments):
    """parse_state(doc) raises BadInput whose message holds every fragment."""
    with pytest.raises(BadInput) as info:
        parse_state(doc, "test.yaml")
    message = str(info.value)
    assert message.startswith("test.yaml: ")
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---------------------------------------------------------------------------- reading


def test_example_loads_with_defaults():
    state = load_state(EXAMPLE)
    assert [n.name for n in state.nodes] == ["N0", "N1", "N2", "N3", "N4", "N5"]
    n0, n5 = state.nodes[0], state.nodes[5]
    assert n0.status == "Up" and n0.priority == 0 and n0.available_resources is None
    assert n0.fault_domain == ("dc0", "r0") and n0.upgrade_domain == "UD0"
    assert n0.properties == {"HasSSD": True, "NodeColor": "Blue", "NodeName": "N0", "NodeType": "FrontEnd"}
    assert n5.capacities == {"CPU": 150.0, "Memory": 4096.0}  # node value overrides its type's
    orders = state.service("fabric:/Shop/Orders")
    assert orders.stateful and orders.target == 3 and orders.balancing_enabled
    assert orders.application == "fabric:/Shop" and orders.priority == 0
    cpu = orders.metrics[0]
    assert (cpu.name, cpu.weight, cpu.weight_name, cpu.primary_load, cpu.secondary_load) == (
        "CPU",
        1.0,
        "High",
        10.0,
        4.0,
    )
    web = state.service("fabric:/Shop/Web")
    assert not web.stateful and web.target == 2 and web.placement_constraints == "NodeType == FrontEnd"
    assert web.default_move_cost == "Low"
    assert state.metric_names() == ("CPU", "Count", "Memory", "PrimaryCount", "ReplicaCount")
    assert state.balancing_thresholds["CPU"] == 1.5 and state.balancing_thresholds["Count"] == 1.0
    assert state.activity_thresholds["Memory"] == 100 and state.activity_thresholds["CPU"] == 0
    assert state.node_buffer_percentage == {
        "CPU": 0.1,
        "Count": 0.0,
        "Memory": 0.0,
        "PrimaryCount": 0.0,
        "ReplicaCount": 0.0,
    }
    assert not any(state.defragmentation_metrics.values())
    assert state.settings["MinLoadBalancingInterval"] == 5.0
    assert state.settings["UseMoveCostReports"] is False
    first = state.partitions[0].replicas[0]
    assert (first.replica_id, first.role, first.node, first.loads) == (100, "Primary", "N0", {"CPU": 12.0})
    assert state.partitions[1].replicas[2].move_cost == "Medium"
    assert state.upgrade is None and state.block_list == () and state.history == {}


def test_json_yaml_and_sniffed_files_agree(tmp_path, doc):
    (tmp_path / "s.json").write_text(json.dumps(doc))
    (tmp_path / "s.state").write_text(json.dumps(doc))
    (tmp_path / "y.state").write_text(yaml.safe_dump(doc))
    reference = load_state(EXAMPLE)
    for name in ("s.json", "s.state", "y.state"):
        state = load_state(tmp_path / name)
        assert (state.nodes, state.services, state.partitions) == (
            reference.nodes,
            reference.services,
            reference.partitions,
        )


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="nope.yaml: no such file"):
        load_state(tmp_path / "nope.yaml")


def test_unparsable_files_name_file_and_line(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"Nodes": [],\n "Services": [,]}')
    with pytest.raises(BadInput, match=r"bad\.json:2:\d+: invalid JSON"):
        load_state(bad_json)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("Nodes: []\nServices: [\n")
    with pytest.raises(BadInput, match=r"bad\.yaml:\d+:\d+: invalid YAML"):
        load_state(bad_yaml)
    dup = tmp_path / "dup.yaml"
    dup.write_text("Nodes: []\nServices: []\nNodes: []\nPartitions: []\n")
    with pytest.raises(BadInput, match=r"dup\.yaml:3:1: invalid YAML: duplicate key 'Nodes'"):
        load_state(dup)
    odd_key = tmp_path / "odd.yaml"
    odd_key.write_text("Nodes: []\n? [a, b]\n: x\n")
    with pytest.raises(BadInput, match=r"odd\.yaml:2:3: invalid YAML: found unhashable key"):
        load_state(odd_key)
    nan = tmp_path / "nan.json"
    nan.write_text('{"Nodes": [], "Services": [], "Partitions": [], "X": NaN}')
    with pytest.raises(BadInput, match=r"nan\.json: invalid JSON: NaN is not a number"):
        load_state(nan)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(BadInput, match="empty.yaml: the document must be a mapping at the top level; it is empty"):
        load_state(empty)
    with pytest.raises(BadInput, match="it is a list"):
        parse_state(["not", "a", "mapping"])


def test_input_is_not_mutated(doc):
    doc["History"] = {100: ["N3"]}  # integer key, as YAML gives
    before = copy.deepcopy(doc)
    state = parse_state(doc)
    assert doc == before
    assert state.history == {"100": ("N3",)}
    state.document["Nodes"].clear()
    assert doc == before


def test_minimal_document():
    state = parse_state({"Nodes": [], "Services": [], "Partitions": []})
    assert state.nodes == () and state.metric_names() == ()
    assert state.settings == PLB_SETTINGS


# ---------------------------------------------------------------------- SF's defaults


def test_default_metrics_for_service_without_metrics(doc):
    doc["Services"].append(
        {"ServiceName": "fabric:/A/Free", "ServiceKind": "Stateless", "InstanceCount": 1, "Metrics": []}
    )
    state = parse_state(doc)
    as_tuples = lambda svc: [(m.name, m.weight_name, m.weight, m.primary_load, m.secondary_load) for m in svc.metrics]
    assert as_tuples(state.service("fabric:/Shop/Sessions")) == [
        ("PrimaryCount", "High", 1.0, 1.0, 0.0),
        ("ReplicaCount", "Medium", 0.3, 1.0, 1.0),
        ("Count", "Low", 0.1, 1.0, 1.0),
    ]
    # A stateless instance counts only in Count (LoadBalancing/Service.cpp).
    assert as_tuples(state.service("fabric:/A/Free")) == [
        ("PrimaryCount", "High", 1.0, 0.0, 0.0),
        ("ReplicaCount", "Medium", 0.3, 0.0, 0.0),
        ("Count", "Low", 0.1, 1.0, 1.0),
    ]


def test_metric_defaults(doc):
    orders = doc["Services"][0]
    orders["Metrics"] = [{"Name": "Disk", "DefaultLoad": 7}, {"Name": "Net", "PrimaryDefaultLoad": 3}]
    doc["Partitions"][0]["Replicas"][0]["Loads"] = {}
    state = parse_state(doc)
    disk, net = state.service("fabric:/Shop/Orders").metrics
    assert (disk.weight_name, disk.weight, disk.primary_load, disk.secondary_load) == ("Low", 0.1, 7.0, 7.0)
    assert (net.primary_load, net.secondary_load) == (3.0, 0.0)
    orders["TargetReplicaSetSize"] = 1  # singleton: secondary default load = primary's
    for part in doc["Partitions"][:4]:
        part["Replicas"] = part["Replicas"][:1]
    assert parse_state(doc).service("fabric:/Shop/Orders").metrics[1].secondary_load == 3.0


def test_service_options(doc):
    web = doc["Services"][1]
    web.update(
        BalancingPolicy="Disabled",
        Priority=3,
        DefaultMoveCost="VeryHigh",
        ApplicationName="fabric:/Other",
        PlacementPolicies=[{"Type": "RequiredDomain", "DomainName": "fd:/dc0"}],
        ResourceGovernance={"CpuCores": 1, "CodePackages": [{"Name": "Code", "MemoryInMB": 512}]},
    )
    doc["Services"][2]["Correlations"] = [{"ServiceName": "fabric:/Shop/Orders", "Scheme": "Affinity"}]
    state = parse_state(doc)
    svc = state.service("fabric:/Shop/Web")
    assert not svc.balancing_enabled and svc.priority == 3 and svc.default_move_cost == "VeryHigh"
    assert svc.application == "fabric:/Other"
    assert svc.placement_policies == (PlacementPolicy("RequiredDomain", "fd:/dc0"),)
    assert svc.resource_governance == ResourceGovernance(1, (CodePackage("Code", 0, 512),))
    assert state.service("fabric:/Shop/Sessions").correlations == (Correlation("fabric:/Shop/Orders", "Affinity"),)


def test_node_types_are_read_once_into_records(doc):
    doc["NodeTypes"][0]["PlacementAndLoadBalancingOverrides"] = {
        "MetricBalancingThresholdsPerNodeType": {"CPU": 2},
        "MetricActivityThresholdsPerNodeType": {"CPU": 5},
        "MinLoadBalancingIntervalPerNodeType": 3,
    }
    state = parse_state(doc)
    first = state.node_types[0]
    assert isinstance(first, NodeType) and first.name == doc["NodeTypes"][0]["Name"]
    assert (first.balancing_thresholds, first.activity_thresholds) == ({"CPU": 2.0}, {"CPU": 5.0})
    assert first.capacities == {k: float(v) for k, v in doc["NodeTypes"][0].get("Capacities", {}).items()}
    assert [t.name for t in state.node_types] == [t["Name"] for t in doc["NodeTypes"]]


def with_optional_sections(doc):
    """`doc` with every optional section and key filled in."""
    doc["Nodes"][3].update(NodeStatus="Down", Priority=2, AvailableResources={"CpuCores": 8})
    doc["Upgrade"] = {
        "InProgress": True,
        "Scope": "Application",
        "ApplicationName": "fabric:/Shop",
        "UpgradeDomainsDone": ["UD0"],
        "Snapshot": {"100": "N0", "w0a": "N0"},
    }
    doc["BlockList"] = [{"NodeName": "N2", "ServiceTypeName": "WebType"}]
    doc["History"] = {"101": ["N3", "N4"]}
    doc["ResourceThresholds"] = {"CPU": 0.8}
    doc["GlobalMetricWeights"] = {"CPU": 2}
    doc["DefragmentationMetrics"] = {"Memory": True}
    return doc


def test_optional_sections(doc):
    state = parse_state(with_optional_sections(doc))
    n3 = state.nodes[3]
    assert (n3.status, n3.priority, n3.available_resources) == ("Down", 2, {"CpuCores": 8.0})
    assert state.upgrade == Upgrade(True, "Application", "fabric:/Shop", ("UD0",), {"100": "N0", "w0a": "N0"})
    assert state.block_list == (BlockEntry("N2", "WebType"),)
    assert state.history == {"101": ("N3", "N4")}
    assert state.resource_thresholds == {"CPU": 0.8} and state.global_metric_weights == {"CPU": 2.0}
    assert state.defragmentation_metrics["Memory"] is True


def test_fault_domain_forms(doc):
    doc["Nodes"][0]["FaultDomain"] = "/dc0/r0"
    doc["Nodes"][1]["FaultDomain"] = "fd:/r1"
    doc["Nodes"][2]["UpgradeDomain"] = 2
    state = parse_state(doc)
    assert state.nodes[0].fault_domain == ("dc0", "r0")
    assert state.nodes[1].fault_domain == ("r1",)
    assert state.nodes[2].upgrade_domain == "2"


# ------------------------------------------------------------------------ schema errors


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d["Nodes"][3].update(FaultDomain=5), "Nodes[3].FaultDomain: 5 is not of type 'string'"),
        (lambda d: d["Services"][0].update(TargetReplicaCount=3), "Services[0]: unknown key 'TargetReplicaCount'"),
        (lambda d: d.update(Node=[]), "top level: unknown key 'Node'"),
        (lambda d: d.pop("Partitions"), "top level: missing required key 'Partitions'"),
        (lambda d: d["Services"][1].pop("ServiceKind"), "Services[1]: missing required key 'ServiceKind'"),
        (lambda d: d["Nodes"][0].update(NodeStatus="Upp"), "Nodes[0].NodeStatus: 'Upp' is not one of"),
        (lambda d: d["Services"][0]["Metrics"][0].update(Weight="Huge"), "Services[0].Metrics[0].Weight: 'Huge'"),
        (
            lambda d: d["Partitions"][0]["Replicas"][0].update(Role="Leader"),
            "Partitions[0].Replicas[0].Role: 'Leader' is not one of",
        ),
        (
            lambda d: d["Partitions"][0]["Replicas"][0].update(ReplicaId=1.5),
            "Partitions[0].Replicas[0].ReplicaId: 1.5 is not of type",
        ),
        (
            lambda d: d["Partitions"][0]["Replicas"][0]["Loads"].update(CPU=-1),
            "Partitions[0].Replicas[0].Loads.CPU: -1 is less than the minimum of 0",
        ),
        (lambda d: d.update(NodeBufferPercentage={"CPU": 1.0}), "NodeBufferPercentage.CPU: 1.0 is greater than"),
        (lambda d: d.update(MetricActivityThresholds={"CPU": -5}), "MetricActivityThresholds.CPU: -5"),
        (
            lambda d: d["NodeTypes"][0].update(PlacementAndLoadBalancingOverrides={"MinLoadBalancingInterval": 5}),
            "NodeTypes[0].PlacementAndLoadBalancingOverrides: unknown key 'MinLoadBalancingInterval'",
        ),
        (lambda d: d.update(SchemaVersion=2), "SchemaVersion: 1 was expected"),
        (lambda d: d["Services"][1]["Metrics"][0].update(Default=3), "Services[1].Metrics[0]: unknown key 'Default'"),
        (lambda d: d.update(SchemaVersion=True), "SchemaVersion: 1 was expected"),
        (
            lambda d: d["Services"][0].update(TargetReplicaSetSize=3.0),
            "Services[0].TargetReplicaSetSize: 3.0 is not of type 'integer'",
        ),
        (lambda d: d["Partitions"][1].update(PartitionId=1.0), "Partitions[1].PartitionId: 1.0 is not of type"),
        (
            lambda d: d["Nodes"][1].update(PlacementProperties={"Color": None}),
            "Nodes[1].PlacementProperties.Color: None is not of type",
        ),
        (
            lambda d: d.update(Upgrade={"InProgress": "yes", "Scope": "Cluster"}),
            "Upgrade.InProgress: 'yes' is not of type",
        ),
    ],
)
def test_schema_errors_name_the_path(doc, mutate, expected):
    mutate(doc)
    assert not fast_conforms(state_schema(), plain_copy(doc, ""))  # the fast path defers to jsonschema
    rejects(doc, expected)


def test_fast_schema_check_accepts_valid_documents(doc):
    assert fast_conforms(state_schema(), plain_copy(doc, ""))
    assert fast_conforms(state_schema(), plain_copy(with_optional_sections(doc), ""))


# ---------------------------------------------------------------------- semantic errors


def _add_node(d, **extra):
    d["Nodes"].append({"NodeName": "N0", "FaultDomain": "fd:/dc0/r0", "UpgradeDomain": "UD0", **extra})


def _replica(d, part, rep):
    return d["Partitions"][part]["Replicas"][rep]


@pytest.mark.parametrize(
    "mutate, fragments",
    [
        (_add_node, ["Nodes[6].NodeName: duplicate NodeName 'N0' (first at Nodes[0].NodeName)"]),
        (lambda d: d["Services"].append(dict(d["Services"][1])), ["Services[3].ServiceName: duplicate ServiceName"]),
        (
            lambda d: _replica(d, 4, 0).update(ReplicaId=100),
            ["Partitions[4].Replicas[0].ReplicaId: duplicate ReplicaId 100"],
        ),
        (lambda d: _replica(d, 0, 1).update(ReplicaId="100"), ["Partitions[0].Replicas[1].ReplicaId: duplicate"]),
        (
            lambda d: d["Partitions"][1].update(PartitionId="0"),
            ["Partitions[1].PartitionId: duplicate PartitionId '0' of service 'fabric:/Shop/Orders'"],
        ),
        (lambda d: _replica(d, 0, 1).update(NodeName="N9"), ["Partitions[0].Replicas[1].NodeName: unknown node 'N9'"]),
        (
            lambda d: d["Partitions"][0].update(ServiceName="fabric:/Nope"),
            ["Partitions[0].ServiceName: unknown service 'fabric:/Nope'"],
        ),
        (
            lambda d: _replica(d, 0, 1).update(Role="Instance"),
            ["Partitions[0].Replicas[1].Role: 'Instance' in stateful"],
        ),
        (
            lambda d: _replica(d, 4, 0).update(Role="Primary"),
            ["Partitions[4].Replicas[0].Role: 'Primary' in stateless"],
        ),
        (lambda d: _replica(d, 0, 1).update(Role="Primary"), ["Partitions[0].Replicas[1].Role: a second Primary"]),
        (
            lambda d: _replica(d, 0, 2).update(NodeName="N1"),
            ["Partitions[0].Replicas[2].NodeName: 'N1' already holds a replica of partition 0"],
        ),
        (
            lambda d: d["Services"][0].pop("TargetReplicaSetSize"),
            ["Services[0]: a stateful service needs TargetReplicaSetSize"],
        ),
        (lambda d: d["Services"][1].pop("InstanceCount"), ["Services[1]: a stateless service needs InstanceCount"]),
        (
            lambda d: d["Services"][1].update(TargetReplicaSetSize=2),
            ["Services[1].TargetReplicaSetSize: not used by a stateless"],
        ),
        (lambda d: d["Services"][1].update(InstanceCount=0), ["Services[1].InstanceCount: 0"]),
        (
            lambda d: d["Nodes"][2].update(FaultDomain="dc0/r2"),
            ["Nodes[2].FaultDomain: 'dc0/r2' is not a fault domain"],
        ),
        (lambda d: d["Nodes"][2].update(FaultDomain="fd:/dc0//r2"), ["Nodes[2].FaultDomain: 'fd:/dc0//r2'"]),
        (lambda d: d["Nodes"][2].update(FaultDomain="fd:/"), ["Nodes[2].FaultDomain: 'fd:/'"]),
        (lambda d: d["Nodes"][2].update(UpgradeDomain=""), ["Nodes[2].UpgradeDomain: must not be empty"]),
        (lambda d: d["Nodes"][2].update(NodeType="Middle"), ["Nodes[2].NodeType: 'Middle' is not among NodeTypes"]),
        (lambda d: d["NodeTypes"].append({"Name": "BackEnd"}), ["NodeTypes[2].Name: duplicate node type 'BackEnd'"]),
        (
            lambda d: d["Nodes"][1].update(PlacementProperties={"NodeName": "x"}),
            ["Nodes[1].PlacementProperties.NodeName"],
        ),
        (
            lambda d: _replica(d, 0, 0)["Loads"].update(Disk=3),
            ["Partitions[0].Replicas[0].Loads.Disk: service 'fabric:/Shop/Orders' has no metric 'Disk'"],
        ),
        (
            lambda d: _replica(d, 7, 0).update(Loads={"Count": 3}),
            ["Partitions[7].Replicas[0].Loads.Count: built-in metric"],
        ),
        (
            lambda d: d["Services"][0]["Metrics"].append({"Name": "CPU"}),
            ["Services[0].Metrics[2].Name: duplicate metric 'CPU'"],
        ),
        (lambda d: d.update(MetricBalancingThresholds={"CPU": 0.5}), ["MetricBalancingThresholds.CPU: 0.5 must be 0"]),
        (
            lambda d: d["NodeTypes"][1].update(
                PlacementAndLoadBalancingOverrides={"MetricBalancingThresholdsPerNodeType": {"CPU": 0.9}}
            ),
            ["NodeTypes[1].PlacementAndLoadBalancingOverrides.MetricBalancingThresholdsPerNodeType.CPU: 0.9"],
        ),
        (
            lambda d: d["Services"][0].update(Correlations=[{"ServiceName": "fabric:/X", "Scheme": "Affinity"}]),
            ["Services[0].Correlations[0].ServiceName: unknown service 'fabric:/X'"],
        ),
        (
            lambda d: d["Services"][0].update(
                Correlations=[{"ServiceName": "fabric:/Shop/Orders", "Scheme": "Affinity"}]
            ),
            ["Services[0].Correlations[0].ServiceName: a service cannot be correlated with itself"],
        ),
        (
            lambda d: (
                d["Services"][0].update(Correlations=[{"ServiceName": "fabric:/Shop/Web", "Scheme": "Affinity"}]),
                d["Services"][1].update(Correlations=[{"ServiceName": "fabric:/Shop/Sessions", "Scheme": "Affinity"}]),
            ),
            ["Services[0].Correlations[0].ServiceName", "affinity chains"],
        ),
        (
            lambda d: d["Services"][1].update(PlacementPolicies=[{"Type": "PreferPrimaryDomain"}]),
            ["Services[1].PlacementPolicies[0]: PreferPrimaryDomain needs DomainName"],
        ),
        (
            lambda d: d.update(Upgrade={"InProgress": True, "Scope": "Cluster", "Snapshot": {"999": "N0"}}),
            ["Upgrade.Snapshot.999: unknown ReplicaId"],
        ),
        (
            lambda d: d.update(Upgrade={"InProgress": True, "Scope": "Cluster", "Snapshot": {"100": "N9"}}),
            ["Upgrade.Snapshot.100: unknown node 'N9'"],
        ),
        (
            lambda d: d.update(Upgrade={"InProgress": True, "Scope": "Cluster", "UpgradeDomainsDone": ["UD7"]}),
            ["Upgrade.UpgradeDomainsDone[0]: unknown upgrade domain 'UD7'"],
        ),
        (
            lambda d: d.update(Upgrade={"InProgress": True, "Scope": "Application"}),
            ["Upgrade.ApplicationName: required when Scope is 'Application'"],
        ),
        (
            lambda d: d.update(Upgrade={"InProgress": True, "Scope": "Application", "ApplicationName": "fabric:/Nope"}),
            ["Upgrade.ApplicationName: no service belongs to 'fabric:/Nope'"],
        ),
        (
            lambda d: d.update(BlockList=[{"NodeName": "N9", "ServiceTypeName": "WebType"}]),
            ["BlockList[0].NodeName: unknown node 'N9'"],
        ),
        (
            lambda d: d.update(BlockList=[{"NodeName": "N1", "ServiceTypeName": "NoType"}]),
            ["BlockList[0].ServiceTypeName: no service has ServiceTypeName 'NoType'"],
        ),
        (lambda d: d.update(History={"999": ["N0"]}), ["History.999: unknown ReplicaId"]),
        (lambda d: d.update(History={"100": ["N9"]}), ["History.100[0]: unknown node 'N9'"]),
        (
            lambda d: d.update(Settings={"MinLoadBalancingIntervl": 3}),
            [
                "Settings.MinLoadBalancingIntervl: unknown PlacementAndLoadBalancing setting",
                "did you mean 'MinLoadBalancingInterval'",
            ],
        ),
        (
            lambda d: d.update(Settings={"UseMoveCostReports": "yes"}),
            ["Settings.UseMoveCostReports: 'yes' is not a valid"],
        ),
        (
            lambda d: d["NodeTypes"][0]["Capacities"].update(CPU=float("nan")),
            ["NodeTypes[0].Capacities.CPU: nan is not a finite"],
        ),
    ],
)
def test_semantic_errors_name_the_key(doc, mutate, fragments):
    mutate(doc)
    rejects(doc, *fragments)


# ------------------------------------------------------------------------------ settings


def test_resolve_settings_defaults_and_coercion():
    settings = resolve_settings(
        {
            "UseMoveCostReports": "TRUE",
            "minloadbalancinginterval": "10",
            "PLBRefreshGap": 0.5,
            "GlobalMovementThrottleThreshold": "0",
            "FaultDomainConstraintPriority": -1,
            "SwapPrimaryProbability": "0.5",
            "CpuPercentageNodeCapacity": 1,
            "InBuildThrottlingAssociatedMetric": "CPU",
            "SeparateBalancingStrategyPerNodeType": False,
            "MaxPercentageToMove": 0.25,
        }
    )
    assert settings["UseMoveCostReports"] is True
    assert settings["MinLoadBalancingInterval"] == 10.0 and "minloadbalancinginterval" not in settings
    assert settings["PLBRefreshGap"] == 0.5
    assert settings["GlobalMovementThrottleThreshold"] == 0 and settings["FaultDomainConstraintPriority"] == -1
    assert settings["SwapPrimaryProbability"] == 0.5 and settings["CpuPercentageNodeCapacity"] == 1.0
    assert settings["InBuildThrottlingAssociatedMetric"] == "CPU"
    assert set(settings) == set(PLB_SETTINGS)
    for name, value in settings.items():
        assert type(value) is type(PLB_SETTINGS[name]), name


def test_setting_defaults_follow_sf():
    expected = {
        "MinLoadBalancingInterval": 5.0,
        "MinPlacementInterval": 1.0,
        "MinConstraintCheckInterval": 1.0,
        "PLBRefreshGap": 1.0,
        "PlacementConstraintPriority": 0,
        "CapacityConstraintPriority": 0,
        "AffinityConstraintPriority": 0,
        "FaultDomainConstraintPriority": 0,
        "UpgradeDomainConstraintPriority": 1,
        "PreferredLocationConstraintPriority": 2,
        "ScaleoutCountConstraintPriority": 0,
        "ApplicationCapacityConstraintPriority": 0,
        "UseMoveCostReports": False,
        "GlobalMovementThrottleThreshold": 1000,
        "GlobalMovementThrottleThresholdPercentage": 0.0,
        "GlobalMovementThrottleThresholdForPlacement": 0,
        "GlobalMovementThrottleThresholdForBalancing": 0,
        "MovementPerPartitionThrottleThreshold": 50,
        "MaxPercentageToMove": 0.3,
        "SeparateBalancingStrategyPerNodeType": False,
        "SubclusteringEnabled": False,
        "SubclusteringReportingPolicy": 1,
        "CpuPercentageNodeCapacity": 0.8,
        "MemoryPercentageNodeCapacity": 0.8,
        "AutoDetectAvailableResources": True,
        "EnforceUserServiceMetricCapacities": False,
        "PreventTransientOvercommit": False,
        "AllowConstraintCheckFixesDuringApplicationUpgrade": True,
        "LocalDomainWeight": 0.25,
        "SwapPrimaryProbability": 0.3,
        "MoveParentToFixAffinityViolation": False,
        "MoveCostOffset": 1000,
        "SwapCost": 0.1,
    }
    assert {name: PLB_SETTINGS[name] for name in expected} == expected


@pytest.mark.parametrize(
    "given, fragment",
    [
        ({"NoSuchSetting": 1}, "Settings.NoSuchSetting: unknown"),
        ({"UseMoveCostReports": 1}, "Settings.UseMoveCostReports: 1 is not a valid boolean"),
        ({"PlacementConstraintPriority": "0.5"}, "Settings.PlacementConstraintPriority: '0.5' is not a valid integer"),
        ({"PlacementConstraintPriority": True}, "Settings.PlacementConstraintPriority: True"),
        ({"SwapCost": "cheap"}, "Settings.SwapCost: 'cheap' is not a valid number"),
        ({"SwapCost": "nan"}, "Settings.SwapCost: 'nan'"),
        ({"GlobalMovementThrottleThreshold": -1}, "Settings.GlobalMovementThrottleThreshold: -1 must not be negative"),
        ({"UseMoveCostReports": "true", "usemovecostreports": "false"}, "Settings.usemovecostreports: given twice"),
    ],
)
def test_resolve_settings_rejects(given, fragment):
    with pytest.raises(BadInput) as info:
        resolve_settings(given)
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------- schemas


def test_schemas_are_valid_draft_2020_12():
    for name in ("state.schema.json", "plan.schema.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / name).read_text()))


def test_example_matches_state_schema(doc):
    schema = json.loads((SCHEMAS / "state.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(doc)), schema, cls=jsonschema.Draft202012Validator)


def test_plan_schema_accepts_a_plan_and_catches_typos():
    plan = {
        "SchemaVersion": 1,
        "Phases": [
            {"Phase": "Placement", "Ran": False, "Reason": "nothing to place"},
            {"Phase": "ConstraintCheck", "Ran": False, "Reason": "no violations"},
            {"Phase": "Balancing", "Ran": True, "Reason": "CPU imbalanced"},
        ],
        "Balance": [
            {
                "Metric": "CPU",
                "NodeType": None,
                "MaxLoad": 90,
                "MinLoad": 0,
                "BalancingThreshold": 1.5,
                "ActivityThreshold": 0,
                "IsBalancedBefore": False,
                "IsBalancedAfter": True,
                "DeviationBefore": 1.1,
                "DeviationAfter": 0.2,
            }
        ],
        "Score": {"Before": 0.8, "After": 0.3},
        "Actions": [
            {
                "ServiceName": "fabric:/Shop/Web",
                "PartitionId": "web-0",
                "ReplicaId": "w0a",
                "Action": "MoveInstance",
                "SourceNode": "N0",
                "TargetNode": "N2",
            },
            {
                "ServiceName": "fabric:/Shop/Orders",
                "PartitionId": 0,
                "ReplicaId": None,
                "Action": "AddSecondary",
                "SourceNode": None,
                "TargetNode": "N3",
            },
        ],
        "Nodes": [
            {
                "NodeName": "N0",
                "Capacities": {"CPU": 90, "Count": None},
                "LoadsBefore": {"CPU": 90},
                "LoadsAfter": {"CPU": 70},
            }
        ],
        "Health": [
            {
                "SourceId": "System.PLB",
                "Property": "NodeCapacityViolation",
                "HealthState": "Warning",
                "Entity": "N0",
                "Description": "CPU over capacity",
            }
        ],
        "Unplaced": [
            {
                "ServiceName": "fabric:/Shop/Web",
                "PartitionId": "web-1",
                "Role": "Instance",
                "ConstraintEliminationSequence": [
                    {"Constraint": "PlacementConstraint", "Eliminated": ["N3"], "Remaining": 0}
                ],
            }
        ],
        "History": {"w0a": ["N0"]},
        "Search": {"Backend": "cpu", "Chains": 4, "Steps": 1000, "Seconds": 0.5, "Seed": 0},
    }
    validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "plan.schema.json").read_text()))
    assert list(validator.iter_errors(plan)) == []
    plan["Actions"][0]["Action"] = "Move"
    plan["Score"]["Befor"] = 1
    assert len(list(validator.iter_errors(plan))) == 2


def test_metric_descriptions_with_all_three_loads_are_read_as_sf_reads_them():
    """SF's ServiceLoadMetricDescription carries PrimaryDefaultLoad, SecondaryDefaultLoad and DefaultLoad
    whatever the kind: an instance uses DefaultLoad, a stateful replica its role's load; an ignored
    non-zero field is noted, not refused."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    for svc in doc["Services"]:
        for metric in svc.get("Metrics", []):
            load = metric.get("DefaultLoad", metric.get("PrimaryDefaultLoad", 0))
            metric.update(
                PrimaryDefaultLoad=metric.get("PrimaryDefaultLoad", load),
                SecondaryDefaultLoad=metric.get("SecondaryDefaultLoad", 0),
                DefaultLoad=load + 1,
            )
    state = parse_state(doc)
    web = state.service("fabric:/Shop/Web").metrics[0]
    orders = state.service("fabric:/Shop/Orders").metrics[0]
    assert (web.primary_load, web.secondary_load) == (21.0, 21.0)
    assert (orders.primary_load, orders.secondary_load) == (10.0, 4.0)
    assert any("Services[1].Metrics[0].PrimaryDefaultLoad = 20 ignored" in n for n in state.notes), state.notes
    assert any("Services[0].Metrics[0].DefaultLoad = 11 ignored" in n for n in state.notes), state.notes


def test_a_built_in_metric_takes_its_load_from_the_role_whatever_defaults_are_given(doc):
    """SF accepts default loads on a built-in metric (its REST descriptions always carry them; its
    unit tests write "ReplicaCount/1.0/0/0") and loads it by role: the state does too, noting any
    non-zero one it ignores."""
    metrics = doc["Services"][0]["Metrics"]
    metrics.append({"Name": "ReplicaCount", "Weight": "Medium", "PrimaryDefaultLoad": 0, "SecondaryDefaultLoad": 0})
    metrics.append({"Name": "Count", "Weight": "Low", "DefaultLoad": 2})
    state = parse_state(doc)
    replica_count, count = state.services[0].metrics[-2:]
    assert (replica_count.primary_load, replica_count.secondary_load, count.primary_load) == (1.0, 1.0, 1.0)
    assert [n for n in state.notes if "built-in" in n] == [
        "Services[0].Metrics[3].DefaultLoad = 2 ignored (Count is a built-in metric: its load is the replica's role)"
    ]


def _replayed(doc: dict) -> dict:
    """`doc` after what a replay changes: loads reported, a replica moved, a History entry, a setting."""
    parts = list(doc["Partitions"])  # the other partitions: the same objects
    for k in (0, 1):
        parts[k] = dict(parts[k], Replicas=[dict(r) for r in parts[k]["Replicas"]])
    first = parts[0]["Replicas"][0]
    first["Loads"] = {k: v * 2 + 1 for k, v in first.get("Loads", {}).items()}
    nodes = [n["NodeName"] for n in doc["Nodes"]]
    moved = parts[1]["Replicas"][0]
    taken = {r["NodeName"] for r in parts[1]["Replicas"]}
    free = next(n for n in nodes if n not in taken)
    history = {str(moved["ReplicaId"]): [moved["NodeName"]]}
    moved["NodeName"] = free
    return {**doc, "Partitions": parts, "History": history, "Settings": {"MinLoadBalancingInterval": 7}}


def test_a_rendered_state_reads_back_as_the_same_state():
    """`state_document` (a replay's final state, a document edit) writes what the state holds."""
    from plbjax.sf import ClusterSpec, generate, state_document

    doc = generate(3, ClusterSpec(nodes=12, services=4, partitions_per_service=3, stateless_fraction=0.3))
    for given in (doc, _replayed(doc)):
        state = parse_state(given)
        assert parse_state(state_document(state)) == state


def _grouped(doc, *apps):
    """`doc` with the application groups `apps` (its services are of fabric:/Shop)."""
    return copy.deepcopy(doc) | {"Applications": list(apps)}


def test_application_groups_are_read_once_as_records(doc):
    """SF's ApplicationCapacity (ApplicationDescription): 0 is no limit, as in SF; a service belongs to
    its ApplicationName, or to the application its name starts with."""
    metric = {"Name": "Memory", "MaximumCapacity": 40, "ReservationCapacity": 10, "TotalApplicationCapacity": 0}
    app = {"ApplicationName": "fabric:/Shop", "MinimumNodes": 1, "MaximumNodes": 3, "Metrics": [metric]}
    state = parse_state(_grouped(doc, app))
    (read,) = state.applications
    assert (read.name, read.minimum_nodes, read.maximum_nodes) == ("fabric:/Shop", 1, 3)
    assert [(m.name, m.node_capacity, m.reservation, m.total_capacity) for m in read.metrics] == [
        ("Memory", 40.0, 10.0, None)
    ]
    assert read.limits and {s.application for s in state.services} == {"fabric:/Shop"}
    assert not parse_state(_grouped(doc, {"ApplicationName": "fabric:/Shop", "MaximumNodes": 0})).applications[0].limits
    assert parse_state(doc).applications == ()


@pytest.mark.parametrize(
    "app, fragments",
    [
        ({"ApplicationName": "fabric:/A", "MinimumNodes": 3, "MaximumNodes": 2}, ["Applications[0].MinimumNodes", "3"]),
        (
            {
                "ApplicationName": "fabric:/A",
                "Metrics": [{"Name": "M", "MaximumCapacity": 5, "ReservationCapacity": 6}],
            },
            ["Applications[0].Metrics[0].ReservationCapacity"],
        ),
        (
            {
                "ApplicationName": "fabric:/A",
                "MaximumNodes": 3,
                "Metrics": [{"Name": "M", "MaximumCapacity": 5, "TotalApplicationCapacity": 10}],
            },
            ["Applications[0].Metrics[0].TotalApplicationCapacity", "5 * 3"],
        ),
        ({"ApplicationName": "fabric:/A", "Metrics": [{"Name": "M"}, {"Name": "M"}]}, ["Metrics[1].Name", "duplicate"]),
        ({"ApplicationName": "fabric:/A", "MaximumNodes": -1}, ["MaximumNodes"]),
        ({"ApplicationName": "fabric:/A", "Bogus": 1}, ["Bogus"]),
    ],
)
def test_bad_application_groups_name_their_key(doc, app, fragments):
    """SF's ApplicationCapacityDescription::TryValidate (applicationcapacitydescription.cpp:109,
    applicationmetricdescription.cpp:95), and the schema."""
    rejects(_grouped(doc, app), *fragments)


def test_application_groups_need_the_priorities_they_are_measured_with(doc):
    """A scaleout count is measured with placement's priority, an application capacity with
    capacity's: a document that sets them apart is refused, naming the setting."""
    app = {"ApplicationName": "fabric:/Shop", "MaximumNodes": 2}
    grouped = _grouped(doc, app, {"ApplicationName": "fabric:/Shop", "MaximumNodes": 3})
    rejects(grouped, "Applications[1].ApplicationName", "duplicate")
    settings = dict(doc.get("Settings", {}), ScaleoutCountConstraintPriority=1)
    rejects(_grouped(doc, app) | {"Settings": settings}, "Settings.ScaleoutCountConstraintPriority")
    assert parse_state(_grouped(doc, {"ApplicationName": "fabric:/Shop"}) | {"Settings": settings}).applications
