"""Get Node Info List and Get Node Load Info -> the state document's ``Nodes``.

NodeStatus values (Invalid, Up, Down, Enabling, Disabling, Disabled, Unknown, Removed) and
NodeDeactivationInfo (NodeDeactivationIntent: Invalid, Pause, Restart, RemoveData, RemoveNode;
NodeDeactivationStatus: None, SafetyCheckInProgress, SafetyCheckComplete, Completed) as in SF's REST API
reference (NodeInfo); NodeLoadMetricInformation.NodeCapacity is an int64 written as a string, 0 when
the metric has no capacity on the node (Service Fabric Explorer reads it so: hasCapacity = NodeCapacity > 0).
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf.live import fields
from plbjax.sf.live.dumpdir import Dump, at, need
from plbjax.sf.live.report import Report

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


def read_nodes(dump: Dump, node_types: list[dict], report: Report) -> list[dict]:
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


def _node(item: dict, where: str, types: dict, report: Report) -> dict:
    name = need(item, "Name", where)
    node = {
        "NodeName": name,
        "FaultDomain": need(item, "FaultDomain", where),
        "UpgradeDomain": need(item, "UpgradeDomain", where),
        "NodeStatus": _status(item, where, report),
    }
    if item.get("Type"):
        if types and item["Type"] not in types:
            raise BadInput(
                f"{at(where, 'Type')}: node type {item['Type']!r} is not in the cluster manifest's NodeTypes"
            )
        node["NodeType"] = item["Type"]
    return node


def _status(item: dict, where: str, report: Report) -> str:
    """Up / Down / Disabled: SF's NodeStatus, a stopped node Down, a deactivating Up node Disabled."""
    raw = need(item, "NodeStatus", where)
    if raw not in STATUS:
        raise BadInput(f"{at(where, 'NodeStatus')}: {raw!r} is not an SF node status")
    status = STATUS[raw]
    info = item.get("NodeDeactivationInfo") or {}
    deactivating = (
        info.get("NodeDeactivationIntent", "Invalid") not in ("Invalid", "")
        and info.get("NodeDeactivationStatus", "None") != "None"
    )
    if item.get("IsStopped"):
        status = "Down"
    elif status == "Up" and deactivating:
        status = "Disabled"
    if status != raw:
        report.note(
            f"{where}: node {item.get('Name')!r} is {status} (NodeStatus {raw}, IsStopped "
            f"{item.get('IsStopped', False)}, deactivation {info.get('NodeDeactivationIntent', 'none')})"
        )
    return status


def _node_load(load: dict, rel: str, node: dict, node_type: dict, report: Report) -> None:
    """Capacities of this node that differ from its node type's go on the node."""
    report.walk("node-load/*.json", load, fields.NODE_LOAD)
    report.count("node-load/*.json")
    typed = node_type.get("Capacities", {})
    for i, metric in enumerate(load.get("NodeLoadMetricInformation") or []):
        where = f"{rel}: NodeLoadMetricInformation[{i}]"
        name = need(metric, "Name", where)
        try:
            capacity = float(metric.get("NodeCapacity", 0))
        except (TypeError, ValueError):
            raise BadInput(f"{where}.NodeCapacity: {metric.get('NodeCapacity')!r} is not a number") from None
        if capacity <= 0 or typed.get(name) == capacity:
            continue
        if name in RESOURCE_METRICS:
            report.note(
                f"{where}: capacity {capacity:g} of {name} not carried: SF derives it from the "
                "node's resources (AvailableResources, CpuPercentageNodeCapacity)"
            )
            continue
        node.setdefault("Capacities", {})[name] = capacity
