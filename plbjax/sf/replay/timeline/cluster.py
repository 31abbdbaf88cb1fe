"""The cluster events applied to a state document: services created, deleted and updated, a
replica failed, an application or cluster upgrade walking its upgrade domains (each replica in
scope returns to its node when that node's domain is done), settings changed, and block-list
entries added and expired. Replicas a service's deletion or a failure loses go as `nodes.lose`
takes them (a lost primary is handed over); a ReplicaFailed naming a replica that no longer exists
raises `Gone`.
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf import NodeStatus
from plbjax.sf.replay.timeline.changes import (
    BlockListAdded,
    BlockListExpired,
    ReplicaFailed,
    ServiceCreated,
    ServiceDeleted,
    ServiceUpdated,
    SettingsChanged,
    UpgradeCompleted,
    UpgradeDomainCompleted,
    UpgradeStarted,
)
from plbjax.sf.replay.timeline.nodes import lose, node_index
from plbjax.sf.replay.types import Gone


def service_index(doc: dict, name: object, key: str = "ServiceName") -> int:
    """Where service `name` is in the document's Services (`key` names it in the error)."""
    for i, service in enumerate(doc["Services"]):
        if service["ServiceName"] == name:
            return i
    raise BadInput(f"{key}: {name!r} is not a service")


# ------------------------------------------------------------------------------ services


def service_created(doc: dict, c: ServiceCreated) -> dict:
    """The service and its partitions (default: one partition 0 with no replicas, all to place)."""
    name = c.name
    if any(s["ServiceName"] == name for s in doc["Services"]):
        raise BadInput(f"Service.ServiceName: {name!r} is already a service")
    partitions = ({"ServiceName": name, "PartitionId": 0, "Replicas": []},) if c.partitions is None else c.partitions
    doc["Services"] = [*doc["Services"], dict(c.service)]
    doc["Partitions"] = [*doc["Partitions"], *({"ServiceName": name, **p} for p in partitions)]
    return doc


def service_deleted(doc: dict, c: ServiceDeleted) -> dict:
    """The service, its partitions, correlations to it and block-list entries of a type no other
    service has are gone."""
    s = service_index(doc, c.service)
    name, type_name = c.service, doc["Services"][s].get("ServiceTypeName")
    doc = lose(doc, lambda part, _: part["ServiceName"] == name)
    doc["Partitions"] = [p for p in doc["Partitions"] if p["ServiceName"] != name]
    services = [x for x in doc["Services"] if x["ServiceName"] != name]
    doc["Services"] = [
        dict(x, Correlations=[c for c in x["Correlations"] if c["ServiceName"] != name])
        if any(c["ServiceName"] == name for c in x.get("Correlations", []))
        else x
        for x in services
    ]
    if "BlockList" in doc and type_name not in {x.get("ServiceTypeName") for x in services}:
        doc["BlockList"] = [b for b in doc["BlockList"] if b["ServiceTypeName"] != type_name]
    return doc


def service_updated(doc: dict, c: ServiceUpdated) -> dict:
    """Changes merged into the service; reported loads of metrics it no longer has are dropped."""
    s = service_index(doc, c.service)
    changes = c.changes
    service = {**doc["Services"][s], **changes}
    doc["Services"] = [*doc["Services"][:s], service, *doc["Services"][s + 1 :]]
    if "Metrics" in changes:
        names = {m.get("Name") for m in service["Metrics"]}
        doc["Partitions"] = [
            dict(p, Replicas=[_only_loads(r, names) for r in p["Replicas"]])
            if p["ServiceName"] == service["ServiceName"]
            else p
            for p in doc["Partitions"]
        ]
    return doc


def _only_loads(replica: dict, names: set) -> dict:
    if set(replica.get("Loads", {})) <= names:
        return replica
    loads = {k: v for k, v in replica["Loads"].items() if k in names}
    return {**{k: v for k, v in replica.items() if k != "Loads"}, **({"Loads": loads} if loads else {})}


def replica_failed(doc: dict, c: ReplicaFailed) -> dict:
    rid = str(c.replica)
    if not any(str(r["ReplicaId"]) == rid for p in doc["Partitions"] for r in p["Replicas"]):
        raise Gone(f"ReplicaId: {c.replica!r} is not a replica")
    return lose(doc, lambda _, replica: str(replica["ReplicaId"]) == rid)


# ------------------------------------------------------------------------------ upgrades


def upgrade_started(doc: dict, c: UpgradeStarted) -> dict:
    """Upgrade in progress with Snapshot = where every placed replica in scope is now."""
    if doc.get("Upgrade", {}) and doc["Upgrade"].get("InProgress"):
        raise BadInput("Kind: an upgrade is already in progress")
    scope, app = c.scope, c.application
    domains = {str(n["UpgradeDomain"]) for n in doc["Nodes"]}
    for i, ud in enumerate(c.domains):
        if str(ud) not in domains:
            raise BadInput(f"UpgradeDomains[{i}]: {ud!r} is not an upgrade domain")
    in_scope = {
        s["ServiceName"]
        for s in doc["Services"]
        if scope == "Cluster" or s.get("ApplicationName", _application(s["ServiceName"])) == app
    }
    snapshot = {
        str(r["ReplicaId"]): r["NodeName"]
        for p in doc["Partitions"]
        if p["ServiceName"] in in_scope
        for r in p["Replicas"]
        if r.get("NodeName") is not None
    }
    upgrade = {"InProgress": True, "Scope": scope, "UpgradeDomainsDone": [], "Snapshot": snapshot}
    doc["Upgrade"] = upgrade | ({"ApplicationName": app} if app is not None else {})
    return doc


def _application(service_name: str) -> str | None:
    """SF's default application of a service name: fabric:/App for fabric:/App/Svc."""
    parts = service_name.split("/")
    return "/".join(parts[:2]) if service_name.startswith("fabric:/") and len(parts) > 2 else None


def upgrade_domain_completed(doc: dict, c: UpgradeDomainCompleted) -> dict:
    """The domain is done; every replica whose snapshot node is in it and is running again returns
    there (its node changes back; its role stays), unless the replica is gone or that node already
    holds another replica of its partition."""
    upgrade = doc.get("Upgrade") or {}
    if not upgrade.get("InProgress"):
        raise BadInput("Kind: no upgrade is in progress")
    ud = str(c.domain)
    if ud not in {str(n["UpgradeDomain"]) for n in doc["Nodes"]}:
        raise BadInput(f"UpgradeDomain: {c.domain!r} is not an upgrade domain")
    running = {
        n["NodeName"]
        for n in doc["Nodes"]
        if str(n["UpgradeDomain"]) == ud and n.get("NodeStatus", NodeStatus.UP) == NodeStatus.UP
    }
    home = {rid: node for rid, node in upgrade.get("Snapshot", {}).items() if node in running}
    doc["Partitions"] = [_return_home(p, home) for p in doc["Partitions"]]
    doc["Upgrade"] = dict(upgrade, UpgradeDomainsDone=[*upgrade.get("UpgradeDomainsDone", []), c.domain])
    return doc


def _return_home(part: dict, home: dict[str, str]) -> dict:
    replicas = list(part["Replicas"])
    for i, r in enumerate(replicas):
        target = home.get(str(r["ReplicaId"]))
        if target is not None and r.get("NodeName") != target and all(o.get("NodeName") != target for o in replicas):
            replicas[i] = dict(r, NodeName=target)
    return part if replicas == part["Replicas"] else dict(part, Replicas=replicas)


def upgrade_completed(doc: dict, c: UpgradeCompleted) -> dict:
    if not (doc.get("Upgrade") or {}).get("InProgress"):
        raise BadInput("Kind: no upgrade is in progress")
    doc.pop("Upgrade")
    return doc


# ------------------------------------------------------------------------------ settings, block list


def settings_changed(doc: dict, c: SettingsChanged) -> dict:
    """Each mapping merged key by key into the current one; a Settings name replaces the current
    value whatever its spelling (SF's setting names are case-insensitive)."""
    for key, values in c.changes.items():
        current = doc.get(key) or {}
        if key == "Settings":
            given = {str(k).lower() for k in values}
            current = {k: v for k, v in current.items() if str(k).lower() not in given}
        doc[key] = {**current, **values}
    return doc


def block_list_added(doc: dict, c: BlockListAdded) -> dict:
    node_index(doc, c.node)
    entry = {"NodeName": c.node, "ServiceTypeName": c.service_type}
    if entry["ServiceTypeName"] not in {s.get("ServiceTypeName") for s in doc["Services"]}:
        raise BadInput(f"ServiceTypeName: {entry['ServiceTypeName']!r} is no service's ServiceTypeName")
    if entry not in doc.get("BlockList", []):
        doc["BlockList"] = [*doc.get("BlockList", []), entry]
    return doc


def block_list_expired(doc: dict, c: BlockListExpired) -> dict:
    entry = {"NodeName": c.node, "ServiceTypeName": c.service_type}
    doc["BlockList"] = [b for b in doc.get("BlockList", []) if b != entry]
    return doc
