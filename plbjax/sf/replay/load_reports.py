"""The LoadReport event applied to a state document: a replica's loads (ReplicaId), a partition's
replicas' (PartitionId, Role?), or the service's default loads (neither). `checked_loads` checks a
report's loads against its service's metrics; `events` uses it too when it applies a run of
partition and replica reports as one batch. A report naming a replica that no longer exists raises
`Gone`.
"""

from __future__ import annotations

from collections.abc import Mapping

from plbjax.errors import BadInput
from plbjax.sf.replay.cluster_events import service_index
from plbjax.sf.replay.types import Gone


def _check_loads(service: dict, loads: object) -> dict:
    return checked_loads(service, loads, {m["Name"] for m in service.get("Metrics", [])})


def checked_loads(service: dict, loads: object, names: set) -> dict:
    """`loads` as a dict, checked: a non-empty mapping of `names` (the service's metrics) to
    non-negative numbers."""
    if not isinstance(loads, Mapping) or not loads:
        raise BadInput("Loads: a non-empty mapping {metric: number} is required")
    for metric, value in loads.items():
        if metric not in names:
            raise BadInput(f"Loads.{metric}: service {service['ServiceName']!r} has no metric {metric!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise BadInput(f"Loads.{metric}: {value!r} is not a non-negative number")
    return dict(loads)


def load_report(doc: dict, f: Mapping) -> dict:
    """A replica's loads (ReplicaId), a partition's replicas' (PartitionId, Role?), or the
    service's default loads (Role?: Primary/Secondary default loads; none: all of them)."""
    s = service_index(doc, f["ServiceName"])
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
