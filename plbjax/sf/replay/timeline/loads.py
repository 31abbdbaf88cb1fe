"""The LoadReport event applied to a state document: a replica's loads (ReplicaId), a partition's
replicas' (PartitionId, Role?), or the service's default loads (neither). `LoadReports` applies
partition and replica reports one after the other on one document (`events` hands it a run of
them): each report finds its partition through the Partitions list's `layout`, and each replica
reported to is copied once per batch (later reports merge into that copy), so a batch costs what
it touches. A report naming a replica that
no longer exists raises `Gone`.
"""

from __future__ import annotations

from collections.abc import Mapping

from plbjax.errors import BadInput
from plbjax.sf import Role
from plbjax.sf.replay.state.layout import derived, layout_of
from plbjax.sf.replay.timeline.changes import LoadReport
from plbjax.sf.replay.timeline.cluster import service_index
from plbjax.sf.replay.types import Gone


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


def load_report(doc: dict, c: LoadReport) -> dict:
    """A replica's loads (ReplicaId), a partition's replicas' (PartitionId, Role?), or the
    service's default loads (Role?: Primary/Secondary default loads; none: all of them)."""
    if c.of_replicas:
        batch = LoadReports(doc)
        batch.add(c)
        return batch.document()
    service = doc["Services"][s := service_index(doc, c.service)]
    loads, role = checked_loads(service, c.loads, {m["Name"] for m in service.get("Metrics", [])}), c.role
    doc["Services"] = [*doc["Services"][:s], _default_loads(service, loads, role), *doc["Services"][s + 1 :]]
    return doc


class LoadReports:
    """Partition and replica LoadReports applied one after the other to `doc` (not changed): `add`
    each, then `document`."""

    def __init__(self, doc: dict) -> None:
        self.doc, self.parts = doc, list(doc["Partitions"])
        self.layout = layout_of(doc["Partitions"])
        self.services: dict[str, dict] = {}
        for service in doc["Services"]:
            self.services.setdefault(service["ServiceName"], service)
        self.metrics: dict[str, set[str]] = {}
        self.copied: dict[int, list] = {}  # position -> the Replicas list it had (its partition is copied)

    def add(self, c: LoadReport) -> None:
        """Report `c`'s loads; a bad report raises (`BadInput`, `Gone`) and changes nothing."""
        name = c.service
        service = self.services.get(name) if isinstance(name, str) else None
        if service is None:
            raise BadInput(f"ServiceName: {name!r} is not a service")
        loads = self._checked(name, service, c.loads)
        for k, n in self._hits(name, c.partition, c.replica, c.role):
            old = self.copied.get(k)
            if old is None:
                old = self.copied[k] = self.parts[k]["Replicas"]
                self.parts[k] = {**self.parts[k], "Replicas": old.copy()}
            replicas = self.parts[k]["Replicas"]
            replica = replicas[n]
            if replica is old[n]:
                replicas[n] = replica = dict(replica)
                base = replica.get("Loads", {})
                replica["Loads"] = base | loads if type(base) is dict and type(loads) is dict else {**base, **loads}
            else:  # this batch's own copy
                replica["Loads"].update(loads)

    def document(self) -> dict:
        """The document with every report added."""
        if not self.copied:
            return dict(self.doc)
        derived(self.parts, self.doc["Partitions"])
        return {**self.doc, "Partitions": self.parts}

    def _checked(self, name: str, service: dict, loads: object) -> Mapping:
        """`loads` checked as `checked_loads` checks them (a plain dict of ints and floats: at once)."""
        names = self.metrics.get(name)
        if names is None:
            names = self.metrics[name] = {m["Name"] for m in service.get("Metrics", [])}
        if type(loads) is dict and loads and loads.keys() <= names:
            for value in loads.values():
                if (type(value) is not float and type(value) is not int) or not value >= 0:
                    return checked_loads(service, loads, names)
            return loads
        return checked_loads(service, loads, names)

    def _hits(self, name: str, pid: object, rid: object, role: Role | None) -> list[tuple[int, int]]:
        """(position, slot) of the replicas a report names, as `load_report` finds them."""
        if pid is None:
            mine = self.layout.of_service.get(name, ())
        elif not (mine := self.layout.at.get((name, str(pid)), ())):
            raise BadInput(f"PartitionId: {pid!r} is not a partition of {name!r}")
        parts = self.parts
        if rid is not None:
            text = str(rid)
            hits = [(k, n) for k in mine for n, r in enumerate(parts[k]["Replicas"]) if str(r["ReplicaId"]) == text]
            if not hits:
                raise Gone(f"ReplicaId: {rid!r} is not a replica of {name!r}")
            return hits
        if role is None:
            return [(k, n) for k in mine for n in range(len(parts[k]["Replicas"]))]
        return [(k, n) for k in mine for n, r in enumerate(parts[k]["Replicas"]) if r["Role"] == role]


def _default_loads(service: dict, loads: dict, role: Role | None) -> dict:
    by_role: dict[str | None, tuple[str, ...]] = {
        Role.PRIMARY: ("PrimaryDefaultLoad",),
        Role.SECONDARY: ("SecondaryDefaultLoad",),
    }
    keys = by_role.get(role)
    if keys is None:
        keys = (
            ("PrimaryDefaultLoad", "SecondaryDefaultLoad") if service["ServiceKind"] == "Stateful" else ("DefaultLoad",)
        )
    metrics = [dict(m, **{k: loads[m["Name"]] for k in keys}) if m["Name"] in loads else m for m in service["Metrics"]]
    return dict(service, Metrics=metrics)
