"""Get Node Info List and Get Node Load Info -> the state document's ``Nodes``.

A Disabled node carries its NodeDeactivationInfo.NodeDeactivationIntent as ``DeactivationIntent``.

NodeStatus values (Invalid, Up, Down, Enabling, Disabling, Disabled, Unknown, Removed) and
NodeDeactivationInfo (NodeDeactivationIntent: Invalid, Pause, Restart, RemoveData, RemoveNode;
NodeDeactivationStatus: None, SafetyCheckInProgress, SafetyCheckComplete, Completed) as in SF's REST API
reference (NodeInfo); NodeLoadMetricInformation.NodeCapacity is an int64 written as a string, 0 when
the metric has no capacity on the node (Service Fabric Explorer reads it so: hasCapacity = NodeCapacity > 0;
SF's PlacementAndLoadBalancing.cpp fills it from the node's total capacity, 0 or less when it has none).
Enum values are compared without regard to case, as SF's clients read them; a capacity beyond what
plbjax can search with is treated as no capacity (and reported).
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf import INTENTS
from plbjax.sf.live.reading import fields
from plbjax.sf.live.reading.dumpdir import Dump, at, enum, flag, need, need_name, number
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.reading.report import Report

STATUS = {
    "Up": "Up",
    "Enabling": "Up",
    "Disabling": "Disabled",
    "Disabled": "Disabled",
    "Down": "Down",
    "Unknown": "Down",
    "Invalid": "Down",
    "Removed": "Down",
}
# SF's resource governance metrics: their node capacity is derived (AvailableResources and
# CpuPercentageNodeCapacity / MemoryPercentageNodeCapacity), never given directly.
RESOURCE_METRICS = ("servicefabric:/_CpuCores", "servicefabric:/_MemoryInMB")
LARGEST_CAPACITY = 1e15  # plbjax.sf._state.cluster.LARGEST


def read_nodes(dump: Dump, node_types: list[Json], report: Report) -> list[Json]:
    """Every node of nodes.json, with capacities from node-load/ where they differ from the node type's."""
    types = {t["Name"]: t for t in node_types}
    nodes = []
    for where, item in dump.items("nodes.json"):
        report.walk("nodes.json", item, fields.NODE, "Items[]")
        node = _node(item, where, types, report)
        nodes.append(node)
    report.count("nodes.json")
    names = {n["NodeName"] for n in nodes}
    for rel in dump.files("node-load"):
        name = rel.removeprefix("node-load/").removesuffix(".json")
        if name not in names:
            raise BadInput(f"{rel}: no node {name!r} in nodes.json")
        node = next(n for n in nodes if n["NodeName"] == name)
        _node_load(dump.object(rel), rel, node, types.get(node.get("NodeType"), {}), report)
    return nodes


def _node(item: Json, where: str, types: Json, report: Report) -> Json:
    name = need_name(item, "Name", where)
    upgrade_domain = item.get("UpgradeDomain")
    if isinstance(upgrade_domain, int) and not isinstance(upgrade_domain, bool):
        upgrade_domain = str(upgrade_domain)  # PowerShell's ConvertTo-Json may write a number
    else:
        upgrade_domain = need_name(item, "UpgradeDomain", where)
    node = {
        "NodeName": name,
        "FaultDomain": _fault_domain(item, where),
        "UpgradeDomain": upgrade_domain,
        "NodeStatus": _status(item, where, report),
    }
    intent = _intent(item)
    if node["NodeStatus"] == "Disabled" and intent is not None:
        node["DeactivationIntent"] = intent
    if item.get("Type"):
        if not isinstance(item["Type"], str):
            raise BadInput(f"{at(where, 'Type')}: {item['Type']!r} is not a str")
        if types and item["Type"] not in types:
            raise BadInput(
                f"{at(where, 'Type')}: node type {item['Type']!r} is not in the cluster manifest's NodeTypes"
            )
        node["NodeType"] = item["Type"]
    return node


def _fault_domain(item: Json, where: str) -> str:
    """The node's FaultDomain, which must be a fault domain path (SF writes fd:/dc0/r0)."""
    value = need_name(item, "FaultDomain", where).strip()
    path = value[3:] if value.startswith("fd:") else value
    if not path.startswith("/") or "" in path.split("/")[1:]:
        raise BadInput(f"{at(where, 'FaultDomain')}: {value!r} is not a fault domain like 'fd:/dc0/r0'")
    return value


def _status(item: Json, where: str, report: Report) -> str:
    """Up / Down / Disabled: SF's NodeStatus, a stopped node Down, a deactivating Up node Disabled."""
    raw = enum(need(item, "NodeStatus", where), tuple(STATUS))
    if raw is None:
        raise BadInput(f"{at(where, 'NodeStatus')}: {item['NodeStatus']!r} is not an SF node status")
    status = STATUS[raw]
    info = _deactivation(item)
    intent = _intent(item)
    progress = enum(info.get("NodeDeactivationStatus"), ("SafetyCheckInProgress", "SafetyCheckComplete", "Completed"))
    deactivating = intent is not None and progress is not None
    if flag(item.get("IsStopped")):
        status = "Down"
    elif status == "Up" and deactivating:
        status = "Disabled"
    if status != raw:
        report.note(
            f"{where}: node {item.get('Name')!r} is {status} (NodeStatus {raw}, IsStopped "
            f"{item.get('IsStopped', False)}, deactivation {info.get('NodeDeactivationIntent', 'none')})"
        )
    return status


def _deactivation(item: Json) -> Json:
    info = item.get("NodeDeactivationInfo")
    return info if isinstance(info, dict) else {}


def _intent(item: Json) -> str | None:
    """NodeDeactivationInfo.NodeDeactivationIntent, SF's spelling; None when Invalid or absent (a
    Disabled node without one is read as Pause, the state's default)."""
    return enum(_deactivation(item).get("NodeDeactivationIntent"), INTENTS)


def _node_load(load: Json, rel: str, node: Json, node_type: Json, report: Report) -> None:
    """Capacities of this node that differ from its node type's go on the node."""
    report.walk("node-load/*.json", load, fields.NODE_LOAD)
    report.count("node-load/*.json")
    typed = node_type.get("Capacities", {})
    metrics = load.get("NodeLoadMetricInformation") or []
    if not isinstance(metrics, list):
        raise BadInput(f"{rel}: NodeLoadMetricInformation: expected a list")
    for i, metric in enumerate(metrics):
        where = f"{rel}: NodeLoadMetricInformation[{i}]"
        if not isinstance(metric, dict):
            raise BadInput(f"{where}: expected a JSON object")
        name = need_name(metric, "Name", where)
        raw = metric.get("NodeCapacity")
        capacity = 0.0 if raw is None or raw == "" else number(raw, f"{where}.NodeCapacity")
        if capacity <= 0 or typed.get(name) == capacity:
            continue
        if capacity > LARGEST_CAPACITY:
            report.note(f"{where}: capacity {capacity:g} of {name} not carried: read as no capacity")
            continue
        if name in RESOURCE_METRICS:
            report.note(
                f"{where}: capacity {capacity:g} of {name} not carried: SF derives it from the "
                "node's resources (AvailableResources, CpuPercentageNodeCapacity)"
            )
            continue
        node.setdefault("Capacities", {})[name] = capacity
