"""A simulated cluster from a dump directory (its own JSON) or from a plbjax state document (rendered as
the SF objects a cluster would show: NodeInfo, ApplicationInfo, ServiceInfo, ServiceDescription,
ServicePartitionInfo, ReplicaInfo, a cluster manifest)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from xml.sax.saxutils import quoteattr

from plbjax.sf import NodeStatus, ReplicaStatus, Role, load_state, parse_state
from plbjax.sf.live.reading.dumpdir import canonical, decode
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.rest import service_id
from plbjax.sf.live.simulator.cluster import PRIMARY, SECONDARY, Cluster, Options, Partition, Replica
from plbjax.sf.live.simulator.http import MANIFEST, Served
from plbjax.sf.live.simulator.records import (
    APP_METRIC,
    CONSTRAINTS,
    DESCRIPTION,
    LISTED,
    LISTED_NODE,
    LISTED_NODE_TYPE,
    METRIC,
    REPLICA,
    AppMetric,
    Constraints,
    Description,
    Listed,
    ListedNode,
    ListedNodeType,
    ListedReplica,
    Metric,
    State,
    StateApplication,
    StateNode,
    StatePartition,
    StateReplica,
    StateService,
    take,
)


def read_dump(root: str | Path) -> dict[str, object]:
    """Every response of a dump directory, keys spelled as SF spells them; an XML manifest wrapped as SF sends it."""
    root = Path(root)
    files: dict[str, object] = {}
    for path in sorted(root.rglob("*.json")):
        files[path.relative_to(root).as_posix()] = canonical(json.loads(decode(path.read_bytes())))
    xml = root / "cluster-manifest.xml"
    if MANIFEST not in files and xml.exists():
        files[MANIFEST] = {"Manifest": decode(xml.read_bytes())}
    return files


def build(files: dict[str, object], options: Options) -> Served:
    """The live cluster and gateway data of a set of responses in the dump layout."""
    served = Served(files, Cluster({}, {}, options), {}, {})
    for item in served.items("nodes.json"):
        node = take(ListedNode, LISTED_NODE, item, raw=item)
        served.node_items[node.name] = node
        served.cluster.nodes[node.name] = NodeStatus.from_sf(str(node.status or "Up")) or NodeStatus.DOWN
        node_type = take(ListedNodeType, LISTED_NODE_TYPE, item).name
        served.cluster.properties[node.name] = {"NodeName": node.name, "NodeType": node_type or ""}
    for app in served.items("applications.json"):
        rel = f"services/{take(Listed, LISTED, app).id}.json"
        for service in served.items(rel) if rel in files else []:
            _service(served, take(Listed, LISTED, service))
    served.cluster.resume_builds()
    return served


def _service(served: Served, service: Listed) -> None:
    """A service's partitions and replicas into the cluster."""
    sid = service.id
    served.service_names[sid] = service.name
    desc = served.files.get(f"service-descriptions/{sid}.json") or {}
    assert isinstance(desc, dict)
    counts = take(Description, DESCRIPTION, desc)
    stateful = (service.kind if service.kind is not None else counts.kind) == "Stateful"
    target = int(counts.target if stateful else counts.instances)
    served.service_partitions[sid] = []
    rel = f"partitions/{sid}.json"
    for item in served.items(rel) if rel in served.files else []:
        pid = item["PartitionInformation"]["Id"]
        served.partition_items[pid] = item
        served.service_partitions[sid].append(pid)
        rows = served.items(f"replicas/{pid}.json") if f"replicas/{pid}.json" in served.files else []
        replicas = [_replica(row, stateful) for row in rows]
        constraints = take(Constraints, CONSTRAINTS, desc).constraints or ""
        served.cluster.partitions[pid.lower()] = Partition(pid, sid, stateful, target, replicas, constraints)


def _replica(row: Json, stateful: bool) -> Replica:
    listed = take(ListedReplica, REPLICA, row)
    rid = listed.rid(stateful)
    return Replica(rid, listed.node, listed.role if stateful else None, ReplicaStatus(listed.status), rid, row)


# --- a state document rendered as SF's responses ------------------------------------------------


def state_document(source: Json | str | Path) -> Json:
    """The validated state document of a dict or a .json/.yaml path."""
    if isinstance(source, dict):
        return parse_state(source, "state").document
    return load_state(source).document


def render(state: State) -> tuple[dict[str, object], dict[str, tuple[str, object]], dict[str, str]]:
    """(responses in the dump layout, SF partition id -> (ServiceName, the state's PartitionId), SF ReplicaId
    -> the state's where they differ)."""
    files: dict[str, object] = {MANIFEST: {"Manifest": _manifest(state)}}
    files["nodes.json"] = _paged([_node(i, n) for i, n in enumerate(state.nodes)])
    down = {n.name for n in state.nodes if n.status == "Down"}
    apps: dict[str, list[StateService]] = {}
    for service in state.services:
        apps.setdefault(service.app_name, []).append(service)
    files["applications.json"] = _paged([_application(name) for name in apps])
    keys: dict[str, tuple[str, object]] = {}
    sids: dict[str, str] = {}
    by_service: dict[str, list[StatePartition]] = {}
    for part in state.partitions:
        by_service.setdefault(part.service, []).append(part)
    owners: dict[str, str] = {}  # PartitionId -> the first service (in the document's order) that has it
    for part in state.partitions:
        owners.setdefault(str(part.pid).lower(), part.service)
    for group in state.applications:
        files[f"application-load/{service_id(group.name)}.json"] = _application_load(group, state, apps)
    for name, services in apps.items():
        files[f"services/{service_id(name)}.json"] = _paged([_service_info(s) for s in services])
        for service in services:
            _render_service(files, (keys, sids), service, by_service.get(service.name, []), (down, owners))
    return files, keys, sids


def _render_service(
    files: dict[str, object],
    maps: tuple[dict[str, tuple[str, object]], dict[str, str]],
    service: StateService,
    parts: list[StatePartition],
    sets: tuple[set[str], dict[str, str]],
) -> None:
    """A service's description, partitions and replicas (`sets`: the Down nodes, each PartitionId's
    first service)."""
    keys, sids = maps
    down, owners = sets
    sid = service_id(service.name)
    files[f"service-descriptions/{sid}.json"] = _description(service, len(parts))
    items = []
    for part in parts:
        guid = _guid(service.name, part.pid, owners)
        keys[guid.lower()] = (service.name, part.pid)
        items.append(_partition(service, guid))
        rows = []
        for replica in (r for r in part.replicas if r.node):
            rid = _rid(replica)
            rows.append(_replica_row(replica, rid, service.stateful, down))
            if rid != str(replica.rid):
                sids[rid] = str(replica.rid)
        files[f"replicas/{guid}.json"] = _paged(rows)
    files[f"partitions/{sid}.json"] = _paged(items)


def _paged(items: list) -> Json:
    return {"ContinuationToken": "", "Items": items}


def _guid(service: str, pid: object, owners: dict[str, str]) -> str:
    """The state's PartitionId as given (a plan names partitions by it); a later service's partition with
    an id an earlier one has (SF's ids are unique in a cluster, /Partitions/{id} names one) gets a GUID
    derived from its service and id."""
    if owners.get(str(pid).lower(), service) == service:
        return str(pid)
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{service}/{pid}"))


def dress(cluster: Cluster, state: State, keys: dict[str, tuple[str, object]]) -> None:
    """What SF's PLB reads beyond the REST lists, from the state document: the nodes' placement
    properties and capacities (node type's, then the node's own), and the replicas' loads (a replica's
    `Loads`, else its service's default loads for its role; a replica the FM adds: the secondary's)."""
    types = {t.name: t for t in state.node_types}
    for node in state.nodes:
        kind = types.get(node.node_type or "")
        props = {**((kind.properties if kind else None) or {}), **(node.properties or {})}
        cluster.properties[node.name] = {**props, "NodeName": node.name, "NodeType": node.node_type or ""}
        caps = {**((kind.capacities if kind else None) or {}), **(node.capacities or {})}
        cluster.capacities[node.name] = {str(m): float(v) for m, v in caps.items()}
    services = {s.name: s for s in state.services}
    parts = {(p.service, str(p.pid)): p for p in state.partitions}
    for pid, part in cluster.partitions.items():
        name, spid = keys.get(pid, ("", None))
        service, rows = services.get(name), parts.get((name, str(spid)))
        if service is None:
            continue
        part.constraints = service.constraints or part.constraints
        metrics = [take(Metric, METRIC, m) for m in service.metrics or []]
        part.new_loads = _defaults(metrics, Role.SECONDARY if service.stateful else Role.INSTANCE)
        given = {str(r.rid): r for r in rows.replicas} if rows else {}
        for replica in part.replicas:
            own = given.get(replica.sid)
            role = Role.from_sf(replica.role) if replica.role else Role.INSTANCE
            defaults = _defaults(metrics, role or Role.SECONDARY)
            replica.loads = defaults | {str(m): float(v) for m, v in ((own.loads if own else None) or {}).items()}


def _defaults(metrics: list[Metric], role: Role) -> dict[str, float]:
    """A replica's default load per metric, for its role."""
    loads = {}
    for m in metrics:
        value = m.primary if role is Role.PRIMARY else m.secondary if role is Role.SECONDARY else m.default
        value = value if value is not None else m.default
        if value is not None:
            loads[m.name] = float(value)
    return loads


def _node(i: int, node: StateNode) -> Json:
    """NodeInfo, as Get Node Info List shows it."""
    name, status = node.name, node.status
    intent = node.intent or "Invalid"
    return {
        "Name": name,
        "IpAddressOrFQDN": f"10.0.{i // 250}.{i % 250 + 4}",
        "Type": node.node_type or "NodeType0",
        "CodeVersion": "10.1.1951.9590",
        "ConfigVersion": "1",
        "NodeStatus": status,
        "NodeUpTimeInSeconds": "0" if status == "Down" else "86400",
        "HealthState": "Error" if status == "Down" else "Ok",
        "IsSeedNode": i < 3,
        "UpgradeDomain": str(node.upgrade_domain or "0"),
        "FaultDomain": str(node.fault_domain or "fd:/0"),
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


def _application_load(group: StateApplication, state: State, apps: dict[str, list[StateService]]) -> Json:
    """ApplicationLoadInfo, as Get Application Load Info shows it: ReservationCapacity is the
    cluster's (the per-node one times MinimumNodes), ApplicationLoad its replicas' loads."""
    services = {s.name: s for s in apps.get(group.name, [])}
    nodes: set[str] = set()
    load: dict[str, float] = {}
    for part in (p for p in state.partitions if p.service in services):
        service = services[part.service]
        metrics = [take(Metric, METRIC, m) for m in service.metrics or []]
        for replica in (r for r in part.replicas if r.node):
            nodes.add(str(replica.node))
            role = (Role.from_sf(str(replica.role)) if replica.role else None) or Role.INSTANCE
            for name, value in (_defaults(metrics, role) | (replica.loads or {})).items():
                load[name] = load.get(name, 0.0) + float(value)
    metrics = [take(AppMetric, APP_METRIC, m) for m in group.metrics or []]
    return {
        "Id": service_id(group.name),
        "MinimumNodes": str(group.minimum),
        "MaximumNodes": str(group.maximum),
        "NodeCount": str(len(nodes)),
        "ApplicationLoadMetricInformation": [
            {
                "Name": m.name,
                "ReservationCapacity": str(int(m.reservation * group.minimum)),
                "ApplicationCapacity": str(int(m.total)),
                "ApplicationLoad": str(int(load.get(m.name, 0.0))),
            }
            for m in metrics
        ],
    }


def _service_info(service: StateService) -> Json:
    info = {
        "Id": service_id(service.name),
        "ServiceKind": service.kind,
        "Name": service.name,
        "TypeName": service.type_name or "ServiceType",
        "ManifestVersion": "1.0.0",
        "HealthState": "Ok",
        "ServiceStatus": "Active",
        "IsServiceGroup": False,
    }
    return info | ({"HasPersistedState": True} if service.stateful else {})


def _description(service: StateService, partitions: int) -> Json:
    """ServiceDescription (Get Service Description)."""
    scheme: Json = {"PartitionScheme": "Singleton"}
    if partitions > 1:
        scheme = {"PartitionScheme": "UniformInt64Range", "Count": partitions, "LowKey": "0", "HighKey": "9999"}
    desc = {
        "ServiceKind": service.kind,
        "ApplicationName": service.app_name,
        "ServiceName": service.name,
        "ServiceTypeName": service.type_name or "ServiceType",
        "PartitionDescription": scheme,
        "PlacementConstraints": service.constraints or "",
        "CorrelationScheme": [{"ServiceName": c.service, "Scheme": c.scheme} for c in service.affinities()],
        "ServiceLoadMetrics": [dict(m) for m in service.metrics or []],
        "ServicePlacementPolicies": [dict(p) for p in service.policies or []],
        "DefaultMoveCost": service.move_cost or "Low",
        "IsDefaultMoveCostSpecified": service.move_cost_specified,
    }
    return desc | _counts(service) | ({"HasPersistedState": True} if service.stateful else {})


def _partition(service: StateService, guid: str) -> Json:
    """ServicePartitionInfo (Get Partition Info List)."""
    item = {
        "ServiceKind": service.kind,
        "PartitionInformation": {"ServicePartitionKind": "Singleton", "Id": guid},
        "HealthState": "Ok",
        "PartitionStatus": "Ready",
    }
    return item | _counts(service)


def _counts(service: StateService) -> Json:
    """TargetReplicaSetSize and MinReplicaSetSize, or InstanceCount and MinInstanceCount."""
    if service.stateful:
        target = int(service.target)
        return {"TargetReplicaSetSize": target, "MinReplicaSetSize": min(target, 2)}
    return {"InstanceCount": int(service.instances), "MinInstanceCount": 1}


def _replica_row(replica: StateReplica, rid: str, stateful: bool, down: set[str]) -> Json:
    """StatefulServiceReplicaInfo / StatelessServiceInstanceInfo of a state replica."""
    row = {
        "ServiceKind": "Stateful" if stateful else "Stateless",
        "ReplicaStatus": "Down" if replica.node in down else "Ready",
        "HealthState": "Ok",
        "NodeName": replica.node,
        "Address": "",
        "LastInBuildDurationInSeconds": "0",
    }
    if stateful:
        return row | {"ReplicaRole": PRIMARY if replica.role == Role.PRIMARY else SECONDARY, "ReplicaId": rid}
    return row | {"InstanceId": rid}


def _rid(replica: StateReplica) -> str:
    """The replica's SF id: its state ReplicaId if a number, else an int64 derived from it."""
    if str(replica.rid).isdigit():
        return str(replica.rid)
    return str(int(hashlib.md5(str(replica.rid).encode()).hexdigest()[:15], 16))


def _manifest(state: State) -> str:
    """A cluster manifest with the state's node types and PlacementAndLoadBalancing sections."""
    lines = ['<?xml version="1.0" encoding="utf-8"?>', '<ClusterManifest Name="Simulated" Version="1.0" '
             'xmlns="http://schemas.microsoft.com/2011/01/fabric">', "  <NodeTypes>"]  # fmt: skip
    for node_type in state.node_types:
        lines.append(f"    <NodeType Name={quoteattr(node_type.name)}>")
        for tag, inner, values in (
            ("PlacementProperties", "Property", node_type.properties or {}),
            ("Capacities", "Capacity", node_type.capacities or {}),
        ):
            lines += [f"      <{tag}>", *_parameters(values, inner, 8), f"      </{tag}>"]
        lines.append("    </NodeType>")
    lines += ["  </NodeTypes>", "  <FabricSettings>"]
    for name, values in state.sections.items():
        lines += [f"    <Section Name={quoteattr(name)}>", *_parameters(values, "Parameter", 6), "    </Section>"]
    return "\n".join([*lines, "  </FabricSettings>", "</ClusterManifest>"])


def _parameters(values: Json, tag: str, indent: int) -> list[str]:
    """<tag Name= Value=/> lines; booleans as SF writes them."""
    pad = " " * indent
    return [f"{pad}<{tag} Name={quoteattr(str(k))} Value={quoteattr(_config(v))} />" for k, v in values.items()]


def _config(value: object) -> str:
    """A value as SF's config writes it (booleans lower-case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
