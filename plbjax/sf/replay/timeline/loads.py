"""The LoadReport event: a replica's loads (ReplicaId) or a partition's replicas' (PartitionId,
Role?), applied to the resident state's records, or the service's default loads (neither), an edit
of the state's document. `LoadReports` applies partition and replica reports one after the other
(`events` hands it a run of them): each report finds its partition through the state's `places`,
and each replica reported to gets one new record per batch, so a batch costs what it touches. A
report naming a replica that no longer exists raises `Gone`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from plbjax.errors import BadInput
from plbjax.sf import ClusterState, Partition, Role, parse_state, state_document
from plbjax.sf._state import BUILTIN_LOADS
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.timeline.changes import LoadReport
from plbjax.sf.replay.timeline.cluster import service_index
from plbjax.sf.replay.timeline.decay import LoadDecay
from plbjax.sf.replay.types import Gone


def checked_loads(service: dict, loads: object, names: set) -> dict:
    """`loads` as a dict, checked: a non-empty mapping of `names` (the service's metrics) to
    non-negative numbers."""
    if not isinstance(loads, Mapping) or not loads:
        raise BadInput("Loads: a non-empty mapping {metric: number} is required")
    for metric, value in loads.items():
        if metric not in names:
            raise BadInput(f"Loads.{metric}: service {service['ServiceName']!r} has no metric {metric!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise BadInput(f"Loads.{metric}: {value!r} is not a non-negative number")
    return dict(loads)


def load_report(doc: dict, c: LoadReport) -> dict:
    """The document after `c`: a replica's or a partition's loads (`LoadReports` on its state), or
    the service's default loads (Role?: Primary/Secondary default loads; none: all of them)."""
    if c.of_replicas:
        batch = LoadReports(state := parse_state(doc, "state"), Places.of(state.partitions))
        batch.add(c)
        return state_document(batch.state())
    service = doc["Services"][s := service_index(doc, c.service)]
    loads, role = checked_loads(service, c.loads, {m["Name"] for m in service.get("Metrics", [])}), c.role
    doc["Services"] = [*doc["Services"][:s], _default_loads(service, loads, role), *doc["Services"][s + 1 :]]
    return doc


class LoadReports:
    """Partition and replica LoadReports applied one after the other to a resident state (not
    changed): `add` each, then `state`. Each report finds its partition through `places`; each
    replica reported to gets one new record per batch, its loads merged in the order reported
    (averaged with what it reported before when `decay` says so, the reports made at `now`)."""

    def __init__(self, state: ClusterState, places: Places, decay: LoadDecay | None = None, now: float = 0.0) -> None:
        self.base, self.places, self.decay, self.now = state, places, decay, now
        self.declared: dict[str, dict] = {}  # a service's document (its declared Metrics)
        for service in state.document["Services"]:
            self.declared.setdefault(service["ServiceName"], service)
        self.metrics: dict[str, set[str]] = {}
        self.loads: dict[tuple[int, int], dict[str, float]] = {}  # (position, slot) -> its new loads

    def add(self, c: LoadReport) -> None:
        """Report `c`'s loads; a bad report raises (`BadInput`, `Gone`) and changes nothing."""
        name = c.service
        service = self.declared.get(name) if isinstance(name, str) else None
        if service is None:
            raise BadInput(f"ServiceName: {name!r} is not a service")
        loads = self._checked(name, service, c.loads)
        for hit in self._hits(name, c.partition, c.replica, c.role):
            merged = self.loads.get(hit)
            if merged is None:
                k, n = hit
                merged = self.loads[hit] = dict(self.base.partitions[k].replicas[n].loads)
            if self.decay is None:
                for metric, value in loads.items():
                    merged[metric] = float(value)
            else:
                self._decayed(hit, merged, loads)

    def state(self) -> ClusterState:
        """The state with every report added (new records for the partitions it changed)."""
        if not self.loads:
            return self.base
        by_position: dict[int, dict[int, dict[str, float]]] = {}
        for (k, n), loads in self.loads.items():
            by_position.setdefault(k, {})[n] = loads
        partitions = list(self.base.partitions)
        for k, slots in by_position.items():
            p = partitions[k]
            replicas = tuple(r.with_loads(slots[n]) if n in slots else r for n, r in enumerate(p.replicas))
            partitions[k] = Partition(p.service, p.partition_id, replicas)
        return replace(self.base, partitions=tuple(partitions))

    def _decayed(self, hit: tuple[int, int], merged: dict[str, float], loads: Mapping) -> None:
        """`loads` reported to the replica at `hit`, each averaged with its past reports (`LoadDecay`)."""
        assert self.decay is not None
        partition = self.base.partitions[hit[0]]
        replica = str(partition.replicas[hit[1]].replica_id)
        for metric, value in loads.items():
            key = (partition.service, str(partition.partition_id), replica, metric)
            merged[metric] = self.decay.report(key, float(value), self.now, merged.get(metric))

    def _checked(self, name: str, service: dict, loads: object) -> Mapping:
        """`loads` checked as `checked_loads` checks them (a plain dict of ints and floats: at once)."""
        names = self.metrics.get(name)
        if names is None:
            names = self.metrics[name] = {m["Name"] for m in service.get("Metrics", [])} - BUILTIN_LOADS.keys()
        if type(loads) is dict and loads and loads.keys() <= names:
            for value in loads.values():
                if (type(value) is not float and type(value) is not int) or not math.isfinite(value) or value < 0:
                    return checked_loads(service, loads, names)
            return loads
        return checked_loads(service, loads, names)

    def _hits(self, name: str, pid: object, rid: object, role: Role | None) -> list[tuple[int, int]]:
        """(position, slot) of the replicas a report names."""
        if pid is None:
            mine = self.places.of_service.get(name, ())
        elif not (mine := self.places.at.get((name, str(pid)), ())):
            raise BadInput(f"PartitionId: {pid!r} is not a partition of {name!r}")
        parts = self.base.partitions
        if rid is not None:
            text = str(rid)
            hits = [(k, n) for k in mine for n, r in enumerate(parts[k].replicas) if str(r.replica_id) == text]
            if not hits:
                raise Gone(f"ReplicaId: {rid!r} is not a replica of {name!r}")
            return hits
        if role is None:
            return [(k, n) for k in mine for n in range(len(parts[k].replicas))]
        return [(k, n) for k in mine for n, r in enumerate(parts[k].replicas) if r.role is role]


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
