"""Resource governance (reference 003): node capacities, service loads, CPU split, health."""

import copy
import json

import jsonschema
import pytest
from paths import ROOT

from plbjax.errors import BadInput
from plbjax.sf import parse_state
from plbjax.sf._state.governance import CPU, MEMORY, apply_resource_governance, cpu_shares_split

RG_SERVICE = {
    "ServiceName": "fabric:/App/Svc",
    "ServiceKind": "Stateful",
    "TargetReplicaSetSize": 2,
    "ResourceGovernance": {
        "CpuCores": 1,
        "CodePackages": [
            {"Name": "CodeA1", "CpuShares": 512, "MemoryInMB": 1000},
            {"Name": "CodeA2", "CpuShares": 256, "MemoryInMB": 1000},
        ],
    },
}


def doc(nodes=None, services=None, settings=None, partitions=None, **extra):
    """A small state document: nodes N0.. (each dict is merged into a default node)."""
    nodes = nodes if nodes is not None else [{}]
    return {
        "SchemaVersion": 1,
        "Settings": settings or {},
        "Nodes": [
            {"NodeName": f"N{i}", "FaultDomain": f"fd:/{i}", "UpgradeDomain": str(i)} | n for i, n in enumerate(nodes)
        ],
        "Services": services if services is not None else [copy.deepcopy(RG_SERVICE)],
        "Partitions": partitions or [],
        **extra,
    }


def governed(*args, **kwargs):
    return apply_resource_governance(parse_state(doc(*args, **kwargs)))


def capacity(state, node, metric=CPU):
    return next(n for n in state.nodes if n.name == node).capacities.get(metric)


# ------------------------------------------------------------------------- node capacities


def test_detected_capacity_is_80_percent_of_available():
    state, health = governed([{"AvailableResources": {"CpuCores": 10, "MemoryInMB": 2000}}])
    assert capacity(state, "N0") == 8  # 80 % of 10 detected cores
    assert capacity(state, "N0", MEMORY) == 1600
    assert health == []


def test_manual_capacity_below_available_gets_the_percentage_too():
    # Reference 003: before SF 7.0 a manual 5 on a 10-core node gave 5 cores, from 7.0 it gives 4.
    state, _ = governed([{"Capacities": {CPU: 5}, "AvailableResources": {"CpuCores": 10}}])
    assert capacity(state, "N0") == 4


def test_manual_capacity_above_available_is_capped_first():
    state, _ = governed([{"Capacities": {CPU: 12}, "AvailableResources": {"CpuCores": 10}}])
    assert capacity(state, "N0") == 8  # min(12, 10) x 0.8


def test_node_type_capacity_counts_as_manual():
    state, _ = governed(
        [{"NodeType": "T", "AvailableResources": {"CpuCores": 10}}], NodeTypes=[{"Name": "T", "Capacities": {CPU: 5}}]
    )
    assert capacity(state, "N0") == 4


def test_custom_percentages_from_settings():
    settings = {"CpuPercentageNodeCapacity": 0.5, "MemoryPercentageNodeCapacity": 0.7}
    state, _ = governed([{"AvailableResources": {"CpuCores": 10, "MemoryInMB": 1000}}], settings=settings)
    assert capacity(state, "N0") == 5
    assert capacity(state, "N0", MEMORY) == 700


def test_capacities_are_whole_numbers_and_a_single_core_node_keeps_its_core():
    state, _ = governed(
        [{"AvailableResources": {"CpuCores": 3, "MemoryInMB": 1001}}, {"AvailableResources": {"CpuCores": 1}}]
    )
    assert capacity(state, "N0") == 2  # int(2.4), as SF's uint capacities
    assert capacity(state, "N0", MEMORY) == 800  # int(800.8)
    assert capacity(state, "N1") == 1


def test_without_available_resources_manual_capacity_is_used_as_given():
    state, _ = governed([{"Capacities": {CPU: 5}}, {}])
    assert capacity(state, "N0") == 5
    assert capacity(state, "N1") is None  # unlimited
    assert capacity(state, "N1", MEMORY) is None


def test_auto_detection_off_ignores_available_resources():
    state, _ = governed(
        [{"Capacities": {CPU: 5}, "AvailableResources": {"CpuCores": 10}}, {"AvailableResources": {"CpuCores": 10}}],
        settings={"AutoDetectAvailableResources": False},
    )
    assert capacity(state, "N0") == 5
    assert capacity(state, "N1") is None


def test_other_metrics_are_untouched():
    state, _ = governed([{"Capacities": {"Disk": 100}, "AvailableResources": {"CpuCores": 10}}])
    assert state.nodes[0].capacities == {"Disk": 100, CPU: 8}


# --------------------------------------------------------------------------- service loads


def test_governed_service_gets_cpu_and_memory_metrics():
    state, _ = governed()
    metrics = {m.name: m for m in state.service("fabric:/App/Svc").metrics}
    assert list(metrics) == ["PrimaryCount", "ReplicaCount", "Count", CPU, MEMORY]
    cpu, memory = metrics[CPU], metrics[MEMORY]
    assert (cpu.primary_load, cpu.secondary_load, cpu.weight, cpu.weight_name) == (1, 1, 1.0, "High")
    assert (memory.primary_load, memory.secondary_load) == (2000, 2000)  # 1000 + 1000
    assert CPU in state.metric_names() and MEMORY in state.metric_names()
    for table, default in (
        (state.balancing_thresholds, 1.0),
        (state.activity_thresholds, 0.0),
        (state.defragmentation_metrics, False),
        (state.node_buffer_percentage, 0.0),
    ):
        assert table[CPU] == default and table[MEMORY] == default


def test_per_metric_settings_of_the_document_are_kept():
    state, _ = governed(MetricActivityThresholds={CPU: 2}, NodeBufferPercentage={MEMORY: 0.1})
    assert state.activity_thresholds[CPU] == 2 and state.activity_thresholds[MEMORY] == 0
    assert state.node_buffer_percentage[MEMORY] == 0.1 and state.balancing_thresholds[MEMORY] == 1


def test_metric_weights_from_settings():
    state, _ = governed(settings={"CpuCoresMetricWeight": 0.3, "MemoryInMBMetricWeight": 0.5})
    metrics = {m.name: m for m in state.service("fabric:/App/Svc").metrics}
    assert (metrics[CPU].weight, metrics[CPU].weight_name) == (0.3, "Medium")
    assert (metrics[MEMORY].weight, metrics[MEMORY].weight_name) == (0.5, "MemoryInMBMetricWeight")


def test_cpu_cores_omitted_is_zero_and_memory_needs_every_code_package():
    memory_only = {
        "ServiceName": "fabric:/App/M",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "ResourceGovernance": {"CodePackages": [{"Name": "A", "MemoryInMB": 300}, {"Name": "B", "MemoryInMB": 200}]},
    }
    cpu_only = {
        "ServiceName": "fabric:/App/C",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "ResourceGovernance": {"CpuCores": 2, "CodePackages": [{"Name": "A", "MemoryInMB": 300}, {"Name": "B"}]},
    }
    ungoverned = {
        "ServiceName": "fabric:/App/U",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "ResourceGovernance": {"CodePackages": [{"Name": "A", "CpuShares": 10}, {"Name": "B", "MemoryInMB": 64}]},
    }
    state, _ = governed(services=[memory_only, cpu_only, ungoverned])
    loads = lambda name: {m.name: m.primary_load for m in state.service(name).metrics}
    assert loads("fabric:/App/M")[CPU] == 0 and loads("fabric:/App/M")[MEMORY] == 500
    assert loads("fabric:/App/C")[CPU] == 2 and loads("fabric:/App/C")[MEMORY] == 0
    assert CPU not in loads("fabric:/App/U") and MEMORY not in loads("fabric:/App/U")


def test_declared_resource_metric_is_kept():
    service = copy.deepcopy(RG_SERVICE) | {"Metrics": [{"Name": CPU, "Weight": "Low", "DefaultLoad": 3}]}
    state, _ = governed(services=[service])
    metrics = {m.name: m for m in state.service("fabric:/App/Svc").metrics}
    assert (metrics[CPU].weight_name, metrics[CPU].primary_load) == ("Low", 3)
    assert metrics[MEMORY].primary_load == 2000


def test_reported_loads_for_resource_metrics_are_ignored():
    service = copy.deepcopy(RG_SERVICE) | {"Metrics": [{"Name": CPU}, {"Name": "Disk"}]}
    partitions = [
        {
            "ServiceName": "fabric:/App/Svc",
            "PartitionId": 1,
            "Replicas": [
                {"ReplicaId": 1, "Role": "Primary", "NodeName": "N0", "Loads": {CPU: 7, "Disk": 4}},
                {"ReplicaId": 2, "Role": "Secondary", "NodeName": "N1", "Loads": {"Disk": 2}},
            ],
        }
    ]
    state, _ = governed([{}, {}], services=[service], partitions=partitions)
    primary, secondary = state.partitions[0].replicas
    assert primary.loads == {"Disk": 4} and secondary.loads == {"Disk": 2}


# ------------------------------------------------------------------------------ CPU split


def test_cpu_shares_split_by_shares():
    state = parse_state(doc())
    split = cpu_shares_split(state.service("fabric:/App/Svc"))
    assert split == pytest.approx({"CodeA1": 2 / 3, "CodeA2": 1 / 3})


def test_cpu_shares_split_equal_without_shares():
    service = copy.deepcopy(RG_SERVICE)
    service["ResourceGovernance"] = {
        "CpuCores": 2,
        "CodePackages": [{"Name": "A", "CpuShares": 512}, {"Name": "B"}, {"Name": "C"}, {"Name": "D"}],
    }
    split = cpu_shares_split(parse_state(doc(services=[service])).service("fabric:/App/Svc"))
    assert split == pytest.approx({"A": 0.5, "B": 0.5, "C": 0.5, "D": 0.5})  # one missing: all equal


def test_cpu_shares_split_without_governance_or_cores():
    plain = {"ServiceName": "fabric:/App/P", "ServiceKind": "Stateless", "InstanceCount": 1}
    memory = {
        "ServiceName": "fabric:/App/M",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "ResourceGovernance": {"CodePackages": [{"Name": "A", "CpuShares": 1, "MemoryInMB": 5}]},
    }
    state = parse_state(doc(services=[plain, memory]))
    assert cpu_shares_split(state.service("fabric:/App/P")) == {}
    assert cpu_shares_split(state.service("fabric:/App/M")) == {"A": 0.0}


# ---------------------------------------------------------------------------------- health


def test_enforce_without_capacity_warns_per_node():
    settings = {"EnforceUserServiceMetricCapacities": True}
    _, health = governed(
        [
            {"AvailableResources": {"CpuCores": 4, "MemoryInMB": 100}},
            {"AvailableResources": {"CpuCores": 4}},
            {"Capacities": {CPU: 2, MEMORY: 10}},
            {"NodeStatus": "Down"},
        ],
        settings=settings,
    )
    assert [h["Entity"] for h in health] == ["N1"]
    report = health[0]
    assert {k: report[k] for k in ("SourceId", "Property", "HealthState")} == {
        "SourceId": "System.PLB",
        "Property": "ResourceGovernance",
        "HealthState": "Warning",
    }
    assert MEMORY in report["Description"] and CPU not in report["Description"]
    assert "EnforceUserServiceMetricCapacities" in report["Description"]


def test_enforce_with_detection_off_warns_despite_available_resources():
    settings = {"EnforceUserServiceMetricCapacities": True, "AutoDetectAvailableResources": False}
    _, health = governed([{"AvailableResources": {"CpuCores": 4, "MemoryInMB": 100}}], settings=settings)
    assert len(health) == 1 and CPU in health[0]["Description"] and MEMORY in health[0]["Description"]


def test_no_warning_when_enforcement_is_off():
    _, health = governed([{}])
    assert health == []


def test_manual_capacity_above_available_warns_when_a_service_is_governed():
    nodes = [{"Capacities": {CPU: 12}, "AvailableResources": {"CpuCores": 10}}]
    _, health = governed(nodes)
    assert len(health) == 1 and "12 > 10 available" in health[0]["Description"]
    _, health = governed(
        nodes, services=[{"ServiceName": "fabric:/App/P", "ServiceKind": "Stateless", "InstanceCount": 1}]
    )
    assert health == []


def test_health_reports_fit_the_plan_schema():
    schema = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())
    health_schema = schema["properties"]["Health"] | {"$defs": schema["$defs"]}
    _, health = governed(
        [{}, {"Capacities": {CPU: 12}, "AvailableResources": {"CpuCores": 10}}],
        settings={"EnforceUserServiceMetricCapacities": True},
    )
    assert len(health) == 2 and "; " in health[1]["Description"]  # both reasons on N1
    jsonschema.validate(health, health_schema)


def test_negative_percentage_is_rejected():
    with pytest.raises(BadInput, match="CpuPercentageNodeCapacity"):
        governed(settings={"CpuPercentageNodeCapacity": -0.1})


# --------------------------------------------------------------------------------- purity


def test_input_state_is_unchanged():
    document = doc(
        [{"Capacities": {CPU: 5}, "AvailableResources": {"CpuCores": 10}}, {}],
        services=[copy.deepcopy(RG_SERVICE) | {"Metrics": [{"Name": CPU}, {"Name": "Disk"}]}],
        partitions=[
            {
                "ServiceName": "fabric:/App/Svc",
                "PartitionId": 1,
                "Replicas": [{"ReplicaId": 1, "Role": "Primary", "NodeName": "N0", "Loads": {CPU: 7}}],
            }
        ],
    )
    state = parse_state(document)
    before = copy.deepcopy(state)
    result, _ = apply_resource_governance(state)
    assert state == before
    assert state.nodes[0].capacities == {CPU: 5} and state.partitions[0].replicas[0].loads == {CPU: 7}
    assert MEMORY not in state.balancing_thresholds
    assert result.document == state.document
    assert result.nodes[0].capacities == {CPU: 4}
    assert result.service("fabric:/App/Svc") is not state.service("fabric:/App/Svc")
