"""A simulated cluster from a dump directory (its own JSON) or from a plbjax state document (rendered as
the SF objects a cluster would show: NodeInfo, ApplicationInfo, ServiceInfo, ServiceDescription,
ServicePartitionInfo, ReplicaInfo, a cluster manifest)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from xml.sax.saxutils import quoteattr

from plbjax.sf import Role, load_state, parse_state
from plbjax.sf.live.reading.dumpdir import canonical, decode
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.rest import service_id
from plbjax.sf.live.simulator.cluster import PRIMARY, SECONDARY, Cluster, Options, Partition, Replica
from plbjax.sf.live.simulator.http import Served

DOWN = ("Down", "Removed", "Invalid", "Unknown")  # NodeStatus values of a node that is not up
METRIC_SECTIONS = (
    "MetricBalancingThresholds",
    "MetricActivityThresholds",
    "DefragmentationMetrics",
    "NodeBufferPercentage",
    "GlobalMetricWeights",
)


def read_dump(root: str | Path) -> dict[str, object]:
    """Every response of a dump directory, keys spelled as SF spells them; an XML manifest wrapped as SF sends it."""
    root = Path(root)
    files: dict[str, object] = {}
    for path in sorted(root.rglob("*.json")):
        files[path.relative_to(root).as_posix()] = canonical(json.loads(decode(path.read_bytes())))
    xml = root / "cluster-manifest.xml"
    if "cluster-manifest.json" not in files and xml.exists():
        files["cluster-manifest.json"] = {"Manifest": decode(xml.read_bytes())}
    return files


def build(files: dict[str, object], options: Options) -> Served:
    """The live cluster and gateway data of a set of responses in the dump layout."""
    served = Served(files, Cluster({}, {}, options), {}, {})
    for item in served.items("nodes.json"):
        served.node_items[item["Name"]] = item
        served.cluster.nodes[item["Name"]] = "Down" if item.get("NodeStatus") in DOWN else "Up"
    for app in served.items("applications.json"):
        for service in served.items(f"services/{app['Id']}.json") if f"services/{app['Id']}.json" in files else []:
            _service(served, service)
    served.cluster.resume_builds()
    return served


def _service(served: Served, service: Json) -> None:
    """A service's partitions and replicas into the cluster."""
    sid = service["Id"]
    desc = served.files.get(f"service-descriptions/{sid}.json") or {}
    assert isinstance(desc, dict)
    stateful = service.get("ServiceKind", desc.get("ServiceKind")) == "Stateful"
    target = int(desc.get("TargetReplicaSetSize" if stateful else "InstanceCount", -1 if not stateful else 3))
    served.service_partitions[sid] = []
    rel = f"partitions/{sid}.json"
    for item in served.items(rel) if rel in served.files else []:
        pid = item["PartitionInformation"]["Id"]
        served.partition_items[pid] = item
        served.service_partitions[sid].append(pid)
        rows = served.items(f"replicas/{pid}.json") if f"replicas/{pid}.json" in served.files else []
        replicas = [_replica(row, stateful) for row in rows]
        served.cluster.partitions[pid.lower()] = Partition(pid, sid, stateful, target, replicas)


def _replica(row: Json, stateful: bool) -> Replica:
    rid = str(row.get("ReplicaId" if stateful else "InstanceId", row.get("ReplicaId", row.get("InstanceId"))))
    return Replica(rid, row["NodeName"], row.get("ReplicaRole") if stateful else None, row["ReplicaStatus"], rid, row)


# --- a state document rendered as SF's responses ------------------------------------------------


def state_document(source: Json | str | Path) -> Json:
    """The validated state document of a dict or a .json/.yaml path."""
    if isinstance(source, dict):
        return parse_state(source, "state").document
    return load_state(source).document


def render(doc: Json) -> tuple[dict[str, object], dict[str, tuple[str, object]], dict[str, str]]:
    """(responses in the dump layout, SF partition id -> (ServiceName, the state's PartitionId), SF ReplicaId
    -> the state's where they differ)."""
    files: dict[str, object] = {"cluster-manifest.json": {"Manifest": _manifest(doc)}}
    files["nodes.json"] = _paged([_node(i, n) for i, n in enumerate(doc["Nodes"])])
    down = {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus", "Up") == "Down"}
    apps: dict[str, list[dict]] = {}
    for service in doc["Services"]:
        apps.setdefault(_app_name(service), []).append(service)
    files["applications.json"] = _paged([_application(name) for name in apps])
    keys: dict[str, tuple[str, object]] = {}
    sids: dict[str, str] = {}
    by_service: dict[str, list[dict]] = {}
    for part in doc["Partitions"]:
        by_service.setdefault(part["ServiceName"], []).append(part)
    for name, services in apps.items():
        files[f"services/{service_id(name)}.json"] = _paged([_service_info(s) for s in services])
        for service in services:
            _render_service(files, (keys, sids), service, by_service.get(service["ServiceName"], []), down)
    return files, keys, sids


def _render_service(
    files: dict[str, object],
    maps: tuple[dict[str, tuple[str, object]], dict[str, str]],
    service: Json,
    parts: list[Json],
    down: set[str],
) -> None:
    """A service's description, partitions and replicas."""
    keys, sids = maps
    sid, stateful = service_id(service["ServiceName"]), service["ServiceKind"] == "Stateful"
    files[f"service-descriptions/{sid}.json"] = _description(service, len(parts))
    items = []
    for part in parts:
        guid = _guid(service["ServiceName"], part["PartitionId"])
        keys[guid.lower()] = (service["ServiceName"], part["PartitionId"])
        items.append(_partition(service, guid, stateful))
        rows = []
        for replica in (r for r in part["Replicas"] if r.get("NodeName")):
            rows.append(_replica_row(replica, stateful, down))
            rid = rows[-1]["ReplicaId" if stateful else "InstanceId"]
            if rid != str(replica["ReplicaId"]):
                sids[rid] = str(replica["ReplicaId"])
        files[f"replicas/{guid}.json"] = _paged(rows)
    files[f"partitions/{sid}.json"] = _paged(items)


def _paged(items: list) -> Json:
    return {"ContinuationToken": "", "Items": items}


def _app_name(service: Json) -> str:
    return service.get("ApplicationName") or service["ServiceName"].rsplit("/", 1)[0]


def _guid(service: str, pid: object) -> str:
    """The state's PartitionId if it is a GUID, else a GUID derived from it."""
    try:
        return str(uuid.UUID(str(pid)))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{service}/{pid}"))


def _node(i: int, node: Json) -> Json:
    """NodeInfo, as Get Node Info List shows it."""
    name, status = node["NodeName"], node.get("NodeStatus", "Up")
    intent = node.get("DeactivationIntent") or "Invalid"
    return {
        "Name": name,
        "IpAddressOrFQDN": f"10.0.{i // 250}.{i % 250 + 4}",
        "Type": node.get("NodeType") or "NodeType0",
        "CodeVersion": "10.1.1951.9590",
        "ConfigVersion": "1",
        "NodeStatus": status,
        "NodeUpTimeInSeconds": "0" if status == "Down" else "86400",
        "HealthState": "Error" if status == "Down" else "Ok",
        "IsSeedNode": i < 3,
        "UpgradeDomain": str(node.get("UpgradeDomain") or "0"),
        "FaultDomain": str(node.get("FaultDomain") or "fd:/0"),
        "Id": {"Id": hashlib.md5(name.encode()).hexdigest()},
        "InstanceId": str(133497000000000000 + i),
        "NodeDeactivationInfo": {
            "NodeDeactivationIntent": intent,
            "NodeDeactivationStatus": "None" if intent == "Invalid" else "DeactivationComplete",
            "NodeDeactivationTask": [],
            "PendingSafetyChecks": [],
        },
        "IsStopped": False,
        "NodeDownTimeInSeconds": "0",
        "NodeUpAt": "2024-03-01T10:00:00.000Z",
        "NodeDownAt": "0001-01-01T00:00:00.000Z",
    }


def _application(name: str) -> Json:
    return {
        "Id": service_id(name),
        "Name": name,
        "TypeName": f"{service_id(name)}Type",
        "TypeVersion": "1.0.0",
        "Status": "Ready",
        "Parameters": [],
        "HealthState": "Ok",
        "ApplicationDefinitionKind": "ServiceFabricApplicationDescription",
    }


def _service_info(service: Json) -> Json:
    info = {
        "Id": service_id(service["ServiceName"]),
        "ServiceKind": service["ServiceKind"],
        "Name": service["ServiceName"],
        "TypeName": service.get("ServiceTypeName") or "ServiceType",
        "ManifestVersion": "1.0.0",
        "HealthState": "Ok",
        "ServiceStatus": "Active",
        "IsServiceGroup": False,
    }
    return info | ({"HasPersistedState": True} if service["ServiceKind"] == "Stateful" else {})


def _description(service: Json, partitions: int) -> Json:
    """ServiceDescription (Get Service Description)."""
    stateful = service["ServiceKind"] == "Stateful"
    scheme = {"PartitionScheme": "Singleton"}
    if partitions > 1:
        scheme = {"PartitionScheme": "UniformInt64Range", "Count": partitions, "LowKey": "0", "HighKey": "9999"}
    desc = {
        "ServiceKind": service["ServiceKind"],
        "ApplicationName": _app_name(service),
        "ServiceName": service["ServiceName"],
        "ServiceTypeName": service.get("ServiceTypeName") or "ServiceType",
        "PartitionDescription": scheme,
        "PlacementConstraints": service.get("PlacementConstraints") or "",
        "CorrelationScheme": [
            {"ServiceName": c["ServiceName"], "Scheme": c["Scheme"]} for c in service.get("Correlations") or []
        ],
        "ServiceLoadMetrics": [dict(m) for m in service.get("Metrics") or []],
        "ServicePlacementPolicies": [dict(p) for p in service.get("PlacementPolicies") or []],
        "DefaultMoveCost": service.get("DefaultMoveCost") or "Low",
        "IsDefaultMoveCostSpecified": "DefaultMoveCost" in service,
    }
    if stateful:
        target = int(service.get("TargetReplicaSetSize", 3))
        return desc | {"TargetReplicaSetSize": target, "MinReplicaSetSize": min(target, 2), "HasPersistedState": True}
    return desc | {"InstanceCount": int(service.get("InstanceCount", -1)), "MinInstanceCount": 1}


def _partition(service: Json, guid: str, stateful: bool) -> Json:
    """ServicePartitionInfo (Get Partition Info List)."""
    item = {
        "ServiceKind": service["ServiceKind"],
        "PartitionInformation": {"ServicePartitionKind": "Singleton", "Id": guid},
        "HealthState": "Ok",
        "PartitionStatus": "Ready",
    }
    if stateful:
        target = int(service.get("TargetReplicaSetSize", 3))
        return item | {"TargetReplicaSetSize": target, "MinReplicaSetSize": min(target, 2)}
    return item | {"InstanceCount": int(service.get("InstanceCount", -1)), "MinInstanceCount": 1}


def _replica_row(replica: Json, stateful: bool, down: set[str]) -> Json:
    """StatefulServiceReplicaInfo / StatelessServiceInstanceInfo of a state replica."""
    rid = str(replica["ReplicaId"]) if str(replica.get("ReplicaId")).isdigit() else _number(replica)
    row = {
        "ServiceKind": "Stateful" if stateful else "Stateless",
        "ReplicaStatus": "Down" if replica["NodeName"] in down else "Ready",
        "HealthState": "Ok",
        "NodeName": replica["NodeName"],
        "Address": "",
        "LastInBuildDurationInSeconds": "0",
    }
    if stateful:
        return row | {"ReplicaRole": PRIMARY if replica["Role"] == Role.PRIMARY else SECONDARY, "ReplicaId": rid}
    return row | {"InstanceId": rid}


def _number(replica: Json) -> str:
    """An int64 id for a replica whose state ReplicaId is not a number."""
    return str(int(hashlib.md5(str(replica.get("ReplicaId")).encode()).hexdigest()[:15], 16))


def _manifest(doc: Json) -> str:
    """A cluster manifest with the state's node types and PlacementAndLoadBalancing sections."""
    lines = ['<?xml version="1.0" encoding="utf-8"?>', '<ClusterManifest Name="Simulated" Version="1.0" '
             'xmlns="http://schemas.microsoft.com/2011/01/fabric">', "  <NodeTypes>"]  # fmt: skip
    for node_type in doc.get("NodeTypes") or []:
        lines.append(f"    <NodeType Name={quoteattr(node_type['Name'])}>")
        for tag, inner, values in (
            ("PlacementProperties", "Property", node_type.get("PlacementProperties") or {}),
            ("Capacities", "Capacity", node_type.get("Capacities") or {}),
        ):
            lines += [f"      <{tag}>", *_parameters(values, inner, 8), f"      </{tag}>"]
        lines.append("    </NodeType>")
    lines += ["  </NodeTypes>", "  <FabricSettings>"]
    sections = {"PlacementAndLoadBalancing": doc.get("Settings") or {}}
    sections |= {name: doc[name] for name in METRIC_SECTIONS if doc.get(name)}
    for name, values in sections.items():
        lines += [f"    <Section Name={quoteattr(name)}>", *_parameters(values, "Parameter", 6), "    </Section>"]
    return "\n".join([*lines, "  </FabricSettings>", "</ClusterManifest>"])


def _parameters(values: Json, tag: str, indent: int) -> list[str]:
    """<tag Name= Value=/> lines; booleans as SF writes them."""
    pad = " " * indent
    return [f"{pad}<{tag} Name={quoteattr(str(k))} Value={quoteattr(_config(v))} />" for k, v in values.items()]


def _config(value: object) -> str:
    """A value as SF's config writes it (booleans lower-case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
