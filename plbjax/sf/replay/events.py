"""Timeline events applied to a state document, as the Failover Manager and SF apply them.

`apply_event` is pure: it returns a new document and shares the parts it did not change with the
input, which it never mutates. A replica that is lost (its node went down or was removed, it
failed, its node was deactivated with Intent RemoveData or RemoveNode) is removed from its partition: the
partition is then below its target and the next placement round adds a replica. A lost primary
hands its role to the first secondary left on a running node, as the Failover Manager promotes
one. References that a timeline cannot get wrong at load time but that the loop may have changed
(a replica the planner dropped) raise `Gone`; every other bad reference raises `BadInput` with
the offending key first (`NodeName: 'N9' is not a node`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from plbjax.errors import BadInput

# Kind -> (required fields, optional fields), besides Time and Kind.
KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "NodeDown": (frozenset({"NodeName"}), frozenset()),
    "NodeUp": (frozenset({"NodeName"}), frozenset()),
    "NodeAdded": (frozenset({"Node"}), frozenset()),
    "NodeRemoved": (frozenset({"NodeName"}), frozenset()),
    "NodeDisabled": (frozenset({"NodeName"}), frozenset({"Intent"})),
    "NodeEnabled": (frozenset({"NodeName"}), frozenset({"Intent"})),
    "LoadReport": (frozenset({"ServiceName", "Loads"}), frozenset({"PartitionId", "ReplicaId", "Role"})),
    "ServiceCreated": (frozenset({"Service"}), frozenset({"Partitions"})),
    "ServiceDeleted": (frozenset({"ServiceName"}), frozenset()),
    "ServiceUpdated": (frozenset({"ServiceName", "Changes"}), frozenset()),
    "ReplicaFailed": (frozenset({"ReplicaId"}), frozenset()),
    "UpgradeStarted": (frozenset({"Scope", "UpgradeDomains"}), frozenset({"ApplicationName"})),
    "UpgradeDomainCompleted": (frozenset({"UpgradeDomain"}), frozenset()),
    "UpgradeCompleted": (frozenset(), frozenset()),
    "SettingsChanged": (
        frozenset(),
        frozenset(
            {
                "Settings",
                "MetricBalancingThresholds",
                "MetricActivityThresholds",
                "DefragmentationMetrics",
                "NodeBufferPercentage",
                "GlobalMetricWeights",
                "ResourceThresholds",
            }
        ),
    ),
    "BlockListAdded": (frozenset({"NodeName", "ServiceTypeName"}), frozenset({"Until"})),
}
# Not a timeline kind: the loop applies it at a BlockListAdded event's Until.
BLOCK_LIST_EXPIRED = "BlockListExpired"
INTENTS = ("Pause", "Restart", "RemoveData", "RemoveNode")
SERVICE_CHANGES = frozenset(
    {
        "InstanceCount",
        "TargetReplicaSetSize",
        "Metrics",
        "PlacementConstraints",
        "PlacementPolicies",
        "Correlations",
        "DefaultMoveCost",
        "Priority",
        "BalancingPolicy",
    }
)


class Gone(BadInput):
    """The event names a replica that no longer exists (the loop skips such an event)."""


@dataclass(frozen=True)
class Event:
    """One timeline event: `fields` holds every key but Time and Kind; `index` is its place in Events."""

    time: float
    kind: str
    fields: Mapping = field(default_factory=dict)
    index: int = -1


def apply_event(state_doc: dict, event: Event, now: float) -> dict:
    """The state document after `event`, applied at simulated time `now` (no kind depends on the
    clock yet: a BlockListAdded's Until is the loop's to keep); `state_doc` is not changed."""
    handler = _HANDLERS.get(event.kind)
    if handler is None:
        raise BadInput(f"Kind: unknown event kind {event.kind!r}")
    return handler(dict(state_doc), event.fields)


def apply_events(
    state_doc: dict, events: Sequence[Event], now: float, skip_gone: bool = False
) -> tuple[dict, list[Event]]:
    """The state document after `events`, in order (as `apply_event` one after the other), and the
    events applied: with `skip_gone`, an event that raises `Gone` is skipped, else it is bad input.
    A bad event raises `BadInput` naming it (`Events[3].NodeName: ...`). Runs of partition and
    replica LoadReports are applied on one private copy of the Partitions list, each partition
    they touch copied once, so a run of them costs what they touch, not the cluster's size."""
    doc, applied, i = state_doc, [], 0
    while i < len(events):
        j = i
        while j < len(events) and _batched(events[j]):
            j += 1
        if j > i:
            doc = _load_reports(doc, events[i:j], skip_gone, applied)
            i = j
            continue
        event = events[i]
        i += 1
        try:
            doc = apply_event(doc, event, now)
        except Gone as exc:
            if skip_gone:
                continue
            raise BadInput(f"Events[{event.index}].{exc}") from None
        except BadInput as exc:
            raise BadInput(f"Events[{event.index}].{exc}") from None
        applied.append(event)
    return doc, applied


NAMED = 3  # more events of a kind at one time are counted, not named


def describe(events: Sequence[Event]) -> tuple[tuple[str, str], ...]:
    """(kind, what happened) per kind of `events`, in order of first appearance, for the record:
    `NodeDown N0, N3` (each event's subject, up to `NAMED`), else counted, with their subjects while
    they are few: `12 LoadReport events (fabric:/Shop/Orders, fabric:/Shop/Web)`, `18000 LoadReport events`."""
    subjects: dict[str, list[str]] = {}
    for event in events:
        subjects.setdefault(event.kind, []).append(_subject(event))
    out = []
    for kind, named in subjects.items():
        distinct = [s for s in dict.fromkeys(named) if s]
        if len(named) == 1 or (len(named) <= NAMED and len(distinct) == len(named)):
            out.append((kind, " ".join([kind, ", ".join(distinct)]).rstrip()))
        else:
            listed = f" ({', '.join(distinct)})" if distinct and len(distinct) <= NAMED else ""
            out.append((kind, f"{len(named)} {kind} events{listed}"))
    return tuple(out)


def _subject(event: Event) -> str:
    """What an event is about: its node, service, replica, upgrade domain or block-list entry."""
    f = event.fields
    if event.kind in ("BlockListAdded", BLOCK_LIST_EXPIRED):
        return f"{f['NodeName']}/{f['ServiceTypeName']}"
    if event.kind == "UpgradeStarted":
        return " ".join(str(x) for x in (f.get("Scope"), f.get("ApplicationName")) if x)
    if event.kind == "SettingsChanged":
        return "+".join(sorted(f))
    for key in ("NodeName", "ServiceName", "ReplicaId", "UpgradeDomain"):
        if key in f:
            return str(f[key])
    nested = f.get("Node") or f.get("Service") or {}
    return str(nested.get("NodeName") or nested.get("ServiceName") or "") if isinstance(nested, Mapping) else ""


def _batched(event: Event) -> bool:
    return event.kind == "LoadReport" and ("PartitionId" in event.fields or "ReplicaId" in event.fields)


def _load_reports(state_doc: dict, events: Sequence[Event], skip_gone: bool, applied: list[Event]) -> dict:
    """Partition and replica LoadReports (`_load_report` one after the other) on one copy."""
    services = {s["ServiceName"]: s for s in state_doc["Services"]}
    metric_names: dict[str, set] = {}
    parts = list(state_doc["Partitions"])
    at: dict[tuple[str, str], list[int]] = {}
    of_service: dict[str, list[int]] = {}
    for k, p in enumerate(parts):
        at.setdefault((p["ServiceName"], str(p["PartitionId"])), []).append(k)
        of_service.setdefault(p["ServiceName"], []).append(k)
    copied: set[int] = set()
    for event in events:
        f = event.fields
        try:
            name = f["ServiceName"]
            service = services.get(name) if isinstance(name, str) else None
            if service is None:
                raise BadInput(f"ServiceName: {name!r} is not a service")
            if name not in metric_names:
                metric_names[name] = {m["Name"] for m in service.get("Metrics", [])}
            loads, role = _checked_loads(service, f["Loads"], metric_names[name]), f.get("Role")
            if role is not None and role not in ("Primary", "Secondary", "Instance"):
                raise BadInput(f"Role: {role!r} is not Primary, Secondary or Instance")
            rid, pid = f.get("ReplicaId"), f.get("PartitionId")
            mine = at.get((name, str(pid)), []) if pid is not None else of_service.get(name, [])
            if pid is not None and not mine:
                raise BadInput(f"PartitionId: {pid!r} is not a partition of {name!r}")
            if rid is not None:
                rid_text = str(rid)
                hits = [
                    (k, n) for k in mine for n, r in enumerate(parts[k]["Replicas"]) if str(r["ReplicaId"]) == rid_text
                ]
            elif role is None:
                hits = [(k, n) for k in mine for n in range(len(parts[k]["Replicas"]))]
            else:
                hits = [(k, n) for k in mine for n, r in enumerate(parts[k]["Replicas"]) if r["Role"] == role]
            if rid is not None and not hits:
                raise Gone(f"ReplicaId: {rid!r} is not a replica of {name!r}")
        except Gone as exc:
            if skip_gone:
                continue
            raise BadInput(f"Events[{event.index}].{exc}") from None
        except BadInput as exc:
            raise BadInput(f"Events[{event.index}].{exc}") from None
        for k, n in hits:
            if k not in copied:
                parts[k] = dict(parts[k], Replicas=list(parts[k]["Replicas"]))
                copied.add(k)
            replica = parts[k]["Replicas"][n]
            parts[k]["Replicas"][n] = {**replica, "Loads": {**replica.get("Loads", {}), **loads}}
        applied.append(event)
    return dict(state_doc, Partitions=parts)


# ------------------------------------------------------------------------------ helpers


def _node_index(doc: dict, name: object) -> int:
    for i, node in enumerate(doc["Nodes"]):
        if node["NodeName"] == name:
            return i
    raise BadInput(f"NodeName: {name!r} is not a node")


def _service_index(doc: dict, name: object, key: str = "ServiceName") -> int:
    for i, service in enumerate(doc["Services"]):
        if service["ServiceName"] == name:
            return i
    raise BadInput(f"{key}: {name!r} is not a service")


def _set_node(doc: dict, name: str, **changes) -> dict:
    """`doc` with node `name`'s keys changed (a None removes the key)."""
    i = _node_index(doc, name)
    node = {k: v for k, v in {**doc["Nodes"][i], **changes}.items() if v is not None}
    doc["Nodes"] = [*doc["Nodes"][:i], node, *doc["Nodes"][i + 1 :]]
    return doc


def _promote(replicas: list[dict], down: set[str | None]) -> list[dict]:
    """`replicas` with the first secondary on a running node made primary if none is primary."""
    if any(r["Role"] == "Primary" for r in replicas) or not any(r["Role"] == "Secondary" for r in replicas):
        return replicas
    chosen = next((r for r in replicas if r["Role"] == "Secondary" and r.get("NodeName") not in down), None)
    return [dict(r, Role="Primary") if r is chosen else r for r in replicas]


def _down_nodes(doc: dict) -> set[str | None]:
    return {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus") == "Down"} | {None}


def _lose(doc: dict, lost: Callable[[dict, dict], bool]) -> dict:
    """`doc` without the replicas for which lost(partition, replica) holds (primaries handed over);
    History and Upgrade.Snapshot forget them."""
    down, gone, partitions = _down_nodes(doc), set(), []
    for part in doc["Partitions"]:
        keep = [r for r in part["Replicas"] if not lost(part, r)]
        if len(keep) == len(part["Replicas"]):
            partitions.append(part)
            continue
        gone |= {str(r["ReplicaId"]) for r in part["Replicas"] if not any(r is k for k in keep)}
        partitions.append(dict(part, Replicas=_promote(keep, down)))
    doc["Partitions"] = partitions
    return _forget_replicas(doc, gone) if gone else doc


def _forget_replicas(doc: dict, gone: set[str]) -> dict:
    if "History" in doc:
        doc["History"] = {k: v for k, v in doc["History"].items() if k not in gone}
    if doc.get("Upgrade") and "Snapshot" in doc["Upgrade"]:
        snapshot = {k: v for k, v in doc["Upgrade"]["Snapshot"].items() if k not in gone}
        doc["Upgrade"] = dict(doc["Upgrade"], Snapshot=snapshot)
    return doc


def _on_node(name: str) -> Callable[[dict, dict], bool]:
    return lambda _, replica: replica.get("NodeName") == name


# ------------------------------------------------------------------------------ nodes


def _node_down(doc: dict, f: Mapping) -> dict:
    return _lose(_set_node(doc, f["NodeName"], NodeStatus="Down", DeactivationIntent=None), _on_node(f["NodeName"]))


def _node_up(doc: dict, f: Mapping) -> dict:
    """A down node runs again (a deactivated node that never went down stays Disabled)."""
    if _status(doc, f["NodeName"]) == "Disabled":
        return doc
    return _set_node(doc, f["NodeName"], NodeStatus="Up")


def _status(doc: dict, name: object) -> str:
    return doc["Nodes"][_node_index(doc, name)].get("NodeStatus", "Up")


def _node_added(doc: dict, f: Mapping) -> dict:
    node = f["Node"]
    if not isinstance(node, Mapping) or "NodeName" not in node:
        raise BadInput("Node: a node object with a NodeName is required")
    if any(n["NodeName"] == node["NodeName"] for n in doc["Nodes"]):
        raise BadInput(f"Node.NodeName: {node['NodeName']!r} is already a node")
    doc["Nodes"] = [*doc["Nodes"], dict(node)]
    return doc


def _node_removed(doc: dict, f: Mapping) -> dict:
    name = f["NodeName"]
    doc = _node_down(doc, f)
    doc["Nodes"] = [n for n in doc["Nodes"] if n["NodeName"] != name]
    if "BlockList" in doc:
        doc["BlockList"] = [b for b in doc["BlockList"] if b["NodeName"] != name]
    if "History" in doc:
        doc["History"] = {k: [n for n in v if n != name] for k, v in doc["History"].items()}
    if doc.get("Upgrade") and "Snapshot" in doc["Upgrade"]:
        snapshot = {k: v for k, v in doc["Upgrade"]["Snapshot"].items() if v != name}
        doc["Upgrade"] = dict(doc["Upgrade"], Snapshot=snapshot)
    return doc


def _node_disabled(doc: dict, f: Mapping) -> dict:
    """SF's deactivation: no new replicas (Disabled, with the event's DeactivationIntent); Restart
    also swaps its primaries out (a secondary elsewhere is promoted); RemoveData and RemoveNode
    also lose its replicas, to be built elsewhere. A Down node stays Down (it holds no replica; the
    state has one status per node)."""
    name, intent = f["NodeName"], f.get("Intent", "Pause")
    if intent not in INTENTS:
        raise BadInput(f"Intent: {intent!r} is not one of {', '.join(INTENTS)}")
    if _status(doc, name) == "Down":
        return doc
    doc = _set_node(doc, name, NodeStatus="Disabled", DeactivationIntent=intent)
    if intent in ("RemoveData", "RemoveNode"):
        return _lose(doc, _on_node(name))
    if intent == "Restart":
        return _swap_out(doc, name)
    return doc


def _swap_out(doc: dict, name: str) -> dict:
    down, partitions = _down_nodes(doc) | {name}, []
    for part in doc["Partitions"]:
        replicas = part["Replicas"]
        if any(r["Role"] == "Primary" and r.get("NodeName") == name for r in replicas) and any(
            r["Role"] == "Secondary" and r.get("NodeName") not in down for r in replicas
        ):
            demoted = [dict(r, Role="Secondary") if r["Role"] == "Primary" else r for r in replicas]
            part = dict(part, Replicas=_promote(demoted, down))
        partitions.append(part)
    doc["Partitions"] = partitions
    return doc


def _node_enabled(doc: dict, f: Mapping) -> dict:
    """SF's activation: a Disabled node takes replicas again (its intent cleared); a Down node
    stays down."""
    if f.get("Intent") is not None and f["Intent"] not in INTENTS:
        raise BadInput(f"Intent: {f['Intent']!r} is not one of {', '.join(INTENTS)}")
    if _status(doc, f["NodeName"]) == "Down":
        return doc
    return _set_node(doc, f["NodeName"], NodeStatus="Up", DeactivationIntent=None)


# ------------------------------------------------------------------------------ loads


def _check_loads(service: dict, loads: object) -> dict:
    return _checked_loads(service, loads, {m["Name"] for m in service.get("Metrics", [])})


def _checked_loads(service: dict, loads: object, names: set) -> dict:
    if not isinstance(loads, Mapping) or not loads:
        raise BadInput("Loads: a non-empty mapping {metric: number} is required")
    for metric, value in loads.items():
        if metric not in names:
            raise BadInput(f"Loads.{metric}: service {service['ServiceName']!r} has no metric {metric!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise BadInput(f"Loads.{metric}: {value!r} is not a non-negative number")
    return dict(loads)


def _load_report(doc: dict, f: Mapping) -> dict:
    """A replica's loads (ReplicaId), a partition's replicas' (PartitionId, Role?), or the
    service's default loads (Role?: Primary/Secondary default loads; none: all of them)."""
    s = _service_index(doc, f["ServiceName"])
    service = doc["Services"][s]
    loads, role = _check_loads(service, f["Loads"]), f.get("Role")
    if role is not None and role not in ("Primary", "Secondary", "Instance"):
        raise BadInput(f"Role: {role!r} is not Primary, Secondary or Instance")
    if "ReplicaId" not in f and "PartitionId" not in f:
        doc["Services"] = [*doc["Services"][:s], _default_loads(service, loads, role), *doc["Services"][s + 1 :]]
        return doc
    return _replica_loads(doc, f, loads, role)


def _default_loads(service: dict, loads: dict, role: str | None) -> dict:
    by_role: dict[str | None, tuple[str, ...]] = {
        "Primary": ("PrimaryDefaultLoad",),
        "Secondary": ("SecondaryDefaultLoad",),
    }
    keys = by_role.get(role)
    if keys is None:
        keys = (
            ("PrimaryDefaultLoad", "SecondaryDefaultLoad") if service["ServiceKind"] == "Stateful" else ("DefaultLoad",)
        )
    metrics = [dict(m, **{k: loads[m["Name"]] for k in keys}) if m["Name"] in loads else m for m in service["Metrics"]]
    return dict(service, Metrics=metrics)


def _replica_loads(doc: dict, f: Mapping, loads: dict, role: str | None) -> dict:
    rid, pid, name = f.get("ReplicaId"), f.get("PartitionId"), f["ServiceName"]

    def hit(replica: dict) -> bool:
        return str(replica["ReplicaId"]) == str(rid) if rid is not None else role in (None, replica["Role"])

    mine = [
        p for p in doc["Partitions"] if p["ServiceName"] == name and (pid is None or str(p["PartitionId"]) == str(pid))
    ]
    if pid is not None and not mine:
        raise BadInput(f"PartitionId: {pid!r} is not a partition of {name!r}")
    if rid is not None and not any(hit(r) for p in mine for r in p["Replicas"]):
        raise Gone(f"ReplicaId: {rid!r} is not a replica of {name!r}")
    doc["Partitions"] = [
        dict(p, Replicas=[{**r, "Loads": {**r.get("Loads", {}), **loads}} if hit(r) else r for r in p["Replicas"]])
        if any(p is m for m in mine)
        else p
        for p in doc["Partitions"]
    ]
    return doc


# ------------------------------------------------------------------------------ services


def _service_created(doc: dict, f: Mapping) -> dict:
    """The service and its partitions (default: one partition 0 with no replicas, all to place)."""
    service = f["Service"]
    if not isinstance(service, Mapping) or "ServiceName" not in service:
        raise BadInput("Service: a service object with a ServiceName is required")
    name = service["ServiceName"]
    if any(s["ServiceName"] == name for s in doc["Services"]):
        raise BadInput(f"Service.ServiceName: {name!r} is already a service")
    partitions = f.get("Partitions", [{"ServiceName": name, "PartitionId": 0, "Replicas": []}])
    if not isinstance(partitions, list) or any(
        not isinstance(p, Mapping) or p.get("ServiceName", name) != name for p in partitions
    ):
        raise BadInput(f"Partitions: a list of partition objects of {name!r} is required")
    doc["Services"] = [*doc["Services"], dict(service)]
    doc["Partitions"] = [*doc["Partitions"], *({"ServiceName": name, **p} for p in partitions)]
    return doc


def _service_deleted(doc: dict, f: Mapping) -> dict:
    """The service, its partitions, correlations to it and block-list entries of a type no other
    service has are gone."""
    s = _service_index(doc, f["ServiceName"])
    name, type_name = f["ServiceName"], doc["Services"][s].get("ServiceTypeName")
    doc = _lose(doc, lambda part, _: part["ServiceName"] == name)
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


def _service_updated(doc: dict, f: Mapping) -> dict:
    """Changes merged into the service; reported loads of metrics it no longer has are dropped."""
    s = _service_index(doc, f["ServiceName"])
    changes = f["Changes"]
    if not isinstance(changes, Mapping):
        raise BadInput("Changes: a mapping {field: value} is required")
    for key in changes:
        if key not in SERVICE_CHANGES:
            raise BadInput(f"Changes.{key}: not a field an update may change ({', '.join(sorted(SERVICE_CHANGES))})")
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


def _replica_failed(doc: dict, f: Mapping) -> dict:
    rid = str(f["ReplicaId"])
    if not any(str(r["ReplicaId"]) == rid for p in doc["Partitions"] for r in p["Replicas"]):
        raise Gone(f"ReplicaId: {f['ReplicaId']!r} is not a replica")
    return _lose(doc, lambda _, replica: str(replica["ReplicaId"]) == rid)


# ------------------------------------------------------------------------------ upgrades


def _upgrade_started(doc: dict, f: Mapping) -> dict:
    """Upgrade in progress with Snapshot = where every placed replica in scope is now."""
    if doc.get("Upgrade", {}) and doc["Upgrade"].get("InProgress"):
        raise BadInput("Kind: an upgrade is already in progress")
    scope, app = f["Scope"], f.get("ApplicationName")
    if scope not in ("Cluster", "Application"):
        raise BadInput(f"Scope: {scope!r} is not Cluster or Application")
    if scope == "Application" and app is None:
        raise BadInput("ApplicationName: required when Scope is 'Application'")
    domains = {str(n["UpgradeDomain"]) for n in doc["Nodes"]}
    for i, ud in enumerate(_as_list(f["UpgradeDomains"], "UpgradeDomains")):
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


def _as_list(value: object, key: str) -> list:
    if not isinstance(value, list):
        raise BadInput(f"{key}: a list is required")
    return value


def _upgrade_domain_completed(doc: dict, f: Mapping) -> dict:
    """The domain is done; every replica whose snapshot node is in it and is running again returns
    there (its node changes back; its role stays), unless the replica is gone or that node already
    holds another replica of its partition."""
    upgrade = doc.get("Upgrade") or {}
    if not upgrade.get("InProgress"):
        raise BadInput("Kind: no upgrade is in progress")
    ud = str(f["UpgradeDomain"])
    if ud not in {str(n["UpgradeDomain"]) for n in doc["Nodes"]}:
        raise BadInput(f"UpgradeDomain: {f['UpgradeDomain']!r} is not an upgrade domain")
    running = {
        n["NodeName"] for n in doc["Nodes"] if str(n["UpgradeDomain"]) == ud and n.get("NodeStatus", "Up") == "Up"
    }
    home = {rid: node for rid, node in upgrade.get("Snapshot", {}).items() if node in running}
    doc["Partitions"] = [_return_home(p, home) for p in doc["Partitions"]]
    doc["Upgrade"] = dict(upgrade, UpgradeDomainsDone=[*upgrade.get("UpgradeDomainsDone", []), f["UpgradeDomain"]])
    return doc


def _return_home(part: dict, home: dict[str, str]) -> dict:
    replicas = list(part["Replicas"])
    for i, r in enumerate(replicas):
        target = home.get(str(r["ReplicaId"]))
        if target is not None and r.get("NodeName") != target and all(o.get("NodeName") != target for o in replicas):
            replicas[i] = dict(r, NodeName=target)
    return part if replicas == part["Replicas"] else dict(part, Replicas=replicas)


def _upgrade_completed(doc: dict, f: Mapping) -> dict:
    if not (doc.get("Upgrade") or {}).get("InProgress"):
        raise BadInput("Kind: no upgrade is in progress")
    doc.pop("Upgrade")
    return doc


# ------------------------------------------------------------------------------ settings, block list


def _settings_changed(doc: dict, f: Mapping) -> dict:
    """Each mapping merged key by key into the current one; a Settings name replaces the current
    value whatever its spelling (SF's setting names are case-insensitive)."""
    for key, values in f.items():
        if not isinstance(values, Mapping):
            raise BadInput(f"{key}: a mapping is required")
        current = doc.get(key) or {}
        if key == "Settings":
            given = {str(k).lower() for k in values}
            current = {k: v for k, v in current.items() if str(k).lower() not in given}
        doc[key] = {**current, **values}
    return doc


def _block_list_added(doc: dict, f: Mapping) -> dict:
    _node_index(doc, f["NodeName"])
    entry = {"NodeName": f["NodeName"], "ServiceTypeName": f["ServiceTypeName"]}
    if entry["ServiceTypeName"] not in {s.get("ServiceTypeName") for s in doc["Services"]}:
        raise BadInput(f"ServiceTypeName: {entry['ServiceTypeName']!r} is no service's ServiceTypeName")
    if entry not in doc.get("BlockList", []):
        doc["BlockList"] = [*doc.get("BlockList", []), entry]
    return doc


def _block_list_expired(doc: dict, f: Mapping) -> dict:
    entry = {"NodeName": f["NodeName"], "ServiceTypeName": f["ServiceTypeName"]}
    doc["BlockList"] = [b for b in doc.get("BlockList", []) if b != entry]
    return doc


_HANDLERS: dict[str, Callable[[dict, Mapping], dict]] = {
    "NodeDown": _node_down,
    "NodeUp": _node_up,
    "NodeAdded": _node_added,
    "NodeRemoved": _node_removed,
    "NodeDisabled": _node_disabled,
    "NodeEnabled": _node_enabled,
    "LoadReport": _load_report,
    "ServiceCreated": _service_created,
    "ServiceDeleted": _service_deleted,
    "ServiceUpdated": _service_updated,
    "ReplicaFailed": _replica_failed,
    "UpgradeStarted": _upgrade_started,
    "UpgradeDomainCompleted": _upgrade_domain_completed,
    "UpgradeCompleted": _upgrade_completed,
    "SettingsChanged": _settings_changed,
    "BlockListAdded": _block_list_added,
    BLOCK_LIST_EXPIRED: _block_list_expired,
}
