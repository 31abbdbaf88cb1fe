"""Service Fabric's resource governance (SF >= 7.0): the two built-in resource metrics.

`apply_resource_governance(state)` returns the state with SF's rules for the metrics
``servicefabric:/_CpuCores`` and ``servicefabric:/_MemoryInMB`` applied, and the health reports
those rules raise. `cpu_shares_split(service)` gives the cores each code package of a governed
service gets. Sources: SF's resource-governance article (learn.microsoft.com,
service-fabric-resource-governance) and the SF source (microsoft/service-fabric):
Hosting2/LocalResourceManager.cpp (node capacities, CPU split, health warnings),
ServiceModel/ServicePackageResourceGovernanceDescription.cpp (what is governed, MemoryInMB as
the sum of the code packages), Reliability/LoadBalancing/ServiceDescription.cpp and
PlacementAndLoadBalancing.cpp (the metrics added to a governed service), ServiceModel/Constants.cpp
(names).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TypeGuard

from plbjax.errors import BadInput
from plbjax.sf._state.cluster import (
    METRIC_WEIGHTS,
    ClusterState,
    Metric,
    Node,
    Partition,
    ResourceGovernance,
    Service,
)
from plbjax.sf._state.vocabulary import NodeStatus

CPU = "servicefabric:/_CpuCores"
MEMORY = "servicefabric:/_MemoryInMB"
RG_METRICS = (CPU, MEMORY)
# metric -> (AvailableResources key, percentage setting, metric-weight setting)
_RESOURCES = {
    CPU: ("CpuCores", "CpuPercentageNodeCapacity", "CpuCoresMetricWeight"),
    MEMORY: ("MemoryInMB", "MemoryPercentageNodeCapacity", "MemoryInMBMetricWeight"),
}
# ServiceModel/Constants.cpp: ResourceGovernanceReportProperty. SF's hosting reports its two
# resource-governance warnings (capacity mismatch, capacity not defined) under this property.
HEALTH_PROPERTY = "ResourceGovernance"
# SF stores node capacities as whole numbers (LocalResourceManager: uint64 cores and MB); the
# epsilon keeps 100 * 0.29 = 28.999999999999996 from truncating to 28.
_EPSILON = 1e-9


def apply_resource_governance(state: ClusterState) -> tuple[ClusterState, list[dict]]:
    """The state with SF's resource-governance rules applied, and the health reports they raise.

    Nodes get capacities for the resource metrics (`_node_capacities`), governed services get the
    metrics (`_govern_service`), the per-metric maps get SF's defaults for them
    (`_metric_defaults`) and replica load reports for them are dropped (`_drop_reported_loads`).
    The input is not modified; the returned state's `document` is the input's document.
    """
    _check_settings(state.settings)
    services = tuple(_govern_service(s, state.settings) for s in state.services)
    nodes, health = _govern_nodes(state)
    result = dataclasses.replace(
        state,
        nodes=nodes,
        services=services,
        partitions=tuple(_drop_reported_loads(p) for p in state.partitions),
        **_metric_defaults(state, sorted({m.name for s in services for m in s.metrics})),
    )
    return result, health


def governed_again(state: ClusterState, before: ClusterState, governed: ClusterState) -> ClusterState:
    """`apply_resource_governance(state)[0]` for a state with `before`'s nodes, services, per-metric
    maps and settings that governance reads, `governed` being `before`'s: the governed nodes,
    services and maps are kept, and only the partitions that are not `before`'s objects are
    governed again (a replay round's loads and completed actions)."""
    partitions = tuple(
        mine if now is then else _drop_reported_loads(now)
        for now, then, mine in zip(state.partitions, before.partitions, governed.partitions, strict=True)
    )
    maps = _metric_defaults(governed, [])  # the governed per-metric maps, as they are
    return dataclasses.replace(state, nodes=governed.nodes, services=governed.services, partitions=partitions, **maps)


def _check_settings(settings: dict) -> None:
    """The percentage and metric-weight settings may not be negative."""
    for _, percentage, weight in _RESOURCES.values():
        for name in (percentage, weight):
            if settings[name] < 0:
                raise BadInput(f"Settings.{name}: {settings[name]!r} must not be negative")


def _govern_nodes(state: ClusterState) -> tuple[tuple[Node, ...], list[dict]]:
    """The nodes with their resource capacities, and a health warning (Warning, SourceId System.PLB,
    Property "ResourceGovernance", Entity the node) for each node that is not Down with reasons."""
    governed = any(_is_governed(s.resource_governance) for s in state.services)
    nodes, health = [], []
    for node in state.nodes:
        capacities, reasons = _node_capacities(node, state.settings, governed)
        nodes.append(node if capacities == node.capacities else dataclasses.replace(node, capacities=capacities))
        if reasons and node.status is not NodeStatus.DOWN:
            health.append(
                {
                    "SourceId": "System.PLB",
                    "Property": HEALTH_PROPERTY,
                    "HealthState": "Warning",
                    "Entity": node.name,
                    "Description": "; ".join(reasons),
                }
            )
    return tuple(nodes), health


def _metric_defaults(state: ClusterState, metrics: list[str]) -> dict:
    """The per-metric maps (balancing and activity thresholds, defragmentation, node buffer) with SF's
    defaults for the `metrics` the document does not set."""

    def defaults(values: dict, default: float | bool) -> dict:
        return values | {m: default for m in metrics if m not in values}

    return dict(
        balancing_thresholds=defaults(state.balancing_thresholds, 1.0),
        activity_thresholds=defaults(state.activity_thresholds, 0.0),
        defragmentation_metrics=defaults(state.defragmentation_metrics, False),
        node_buffer_percentage=defaults(state.node_buffer_percentage, 0.0),
    )


def cpu_shares_split(service: Service) -> dict[str, float]:
    """Cores each code package of `service` gets: its CpuShares' part of the package's CpuCores.

    SF (LocalResourceManager::GetCpuFraction) splits the service package's cores by CpuShares,
    e.g. 512:256 of 1 core gives 2/3 and 1/3; if any code package has no (or zero) CpuShares the
    cores are split equally. Without CpuCores every code package gets 0 (SF then leaves CPU
    ungoverned). A service without ResourceGovernance or code packages gives {}.
    (This is data, not a health report: the plan's HealthState has no informational "Ok".)
    """
    rg = service.resource_governance
    if rg is None or not rg.code_packages:
        return {}
    packages = rg.code_packages
    cores = float(_cpu_cores(rg))
    shares = [p.cpu_shares for p in packages]
    total = sum(shares) if all(shares) else 0
    return {p.name: cores * (share / total if total else 1 / len(packages)) for p, share in zip(packages, shares)}


# ---------------------------------------------------------------------------------- helpers


def _is_governed(rg: ResourceGovernance | None) -> TypeGuard[ResourceGovernance]:
    """SF's IsGoverned: CpuCores given, or MemoryInMB given (> 0) on every code package."""
    if rg is None:
        return False
    packages = rg.code_packages
    return rg.cpu_cores is not None or (bool(packages) and all(p.memory_in_mb > 0 for p in packages))


def _cpu_cores(rg: ResourceGovernance) -> float:
    """CpuCores, 0 when not given."""
    return 0 if rg.cpu_cores is None else rg.cpu_cores


def _memory_in_mb(rg: ResourceGovernance) -> float:
    """ServicePackageResourceGovernanceDescription::SetMemoryInMB: the sum, if every CP has one."""
    values = [p.memory_in_mb for p in rg.code_packages]
    return float(sum(values)) if values and all(v > 0 for v in values) else 0.0


def _weight_name(weight: float, setting: str) -> str:
    for name, value in METRIC_WEIGHTS.items():
        if math.isclose(weight, value):
            return name
    return setting


def _govern_service(service: Service, settings: dict) -> Service:
    """A governed service (ResourceGovernance with CpuCores, or with MemoryInMB on every code package)
    gets both metrics unless it already declares them (SF keeps a declared one): load CpuCores (0 if
    omitted) and the sum of its code packages' MemoryInMB (0 unless every code package gives one), the
    same for primary, secondary and instance replicas, and weights from CpuCoresMetricWeight /
    MemoryInMBMetricWeight (default 1.0, "High")."""
    rg = service.resource_governance
    if not _is_governed(rg):
        return service
    declared = {m.name for m in service.metrics}
    loads = {CPU: float(_cpu_cores(rg)), MEMORY: _memory_in_mb(rg)}
    added = []
    for metric in RG_METRICS:
        if metric in declared:
            continue  # ServiceDescription::AddRGMetric keeps a metric the service declares
        weight = float(settings[_RESOURCES[metric][2]])
        added.append(Metric(metric, weight, _weight_name(weight, _RESOURCES[metric][2]), loads[metric], loads[metric]))
    return dataclasses.replace(service, metrics=service.metrics + tuple(added)) if added else service


def _truncate(value: float) -> float:
    return float(math.floor(value + _EPSILON))


def _node_capacities(node: Node, settings: dict, governed: bool) -> tuple[dict[str, float], list[str]]:
    """The node's capacities with the resource rules applied, and the reasons for a warning.

    `Node.capacities` already holds the node's or its node type's manual value. With
    AutoDetectAvailableResources and the resource in AvailableResources: no manual capacity ->
    available x percentage; a manual one -> min(manual, available) x percentage (SF >= 7.0: a manual
    5 on a 10-core node is 4, a manual 12 is capped to 10, then 8), with CpuPercentageNodeCapacity /
    MemoryPercentageNodeCapacity (default 0.8), truncated to a whole number (SF keeps integer cores
    and MB); a single-core node keeps its one core. Otherwise a manual capacity is used as given and
    none means unlimited.

    Reasons: EnforceUserServiceMetricCapacities is true but the node has no capacity for a resource
    metric (limits for user services cannot be enforced there); a manual capacity is larger than the
    node's AvailableResources while some service is governed (Hosting_AvailableResourceCapacityMismatch).
    """
    capacities = dict(node.capacities)
    available = node.available_resources or {}
    auto_detect = settings["AutoDetectAvailableResources"]
    unknown, mismatch = [], []
    for metric, (key, percentage_setting, _) in _RESOURCES.items():
        manual = node.capacities.get(metric)
        detected = available.get(key)
        if manual is not None and detected is not None and manual > detected:
            mismatch.append(f"{metric} ({manual:g} > {detected:g} available)")
        if auto_detect and detected is not None:
            base = detected if manual is None else min(manual, detected)
            if metric == CPU and detected == 1:
                capacities[metric] = base  # a single-core node: 100 %
            else:
                capacities[metric] = _truncate(base * settings[percentage_setting])
        elif manual is None:
            unknown.append(metric)
    reasons = []
    if unknown and settings["EnforceUserServiceMetricCapacities"]:
        why = "AutoDetectAvailableResources is false" if not auto_detect else "AvailableResources does not give it"
        reasons.append(
            "EnforceUserServiceMetricCapacities is true but node capacities are not defined for "
            f"{' and '.join(unknown)} (no capacity given and {why}); resource limits for user "
            "services cannot be enforced on this node"
        )
    if mismatch and governed:
        reasons.append(
            "the node capacity defined for "
            + " and ".join(mismatch)
            + " is larger than the node's available resources"
            + (", so it is capped at them" if auto_detect else "")
        )
    return capacities, reasons


def _drop_reported_loads(partition: Partition) -> Partition:
    """Replica load reports for the resource metrics are ignored: SF does not support dynamic load
    reporting for them (their loads are fixed when the service is created)."""
    if not any(m in r.loads for r in partition.replicas for m in RG_METRICS):
        return partition
    replicas = tuple(
        dataclasses.replace(r, loads={k: v for k, v in r.loads.items() if k not in RG_METRICS})
        if any(m in r.loads for m in RG_METRICS)
        else r
        for r in partition.replicas
    )
    return dataclasses.replace(partition, replicas=replicas)
