"""The simulator's day: what happens to the cluster on a schedule, as SF's EventStore records it, loads
that follow a seeded diurnal curve per service, and SF's own balancer moving replicas between periods.

Events: the shapes of SF's EventStore (learn.microsoft.com/rest/api/servicefabric sfclient-api-
getclustereventlist, -getnodeseventlist, -getapplicationseventlist, -getserviceseventlist,
-getpartitionseventlist; the models of azure-servicefabric: NodeDownEvent, NodeUpEvent,
NodeDeactivateStartedEvent, NodeDeactivateCompletedEvent, ClusterUpgradeStartedEvent,
ClusterUpgradeDomainCompletedEvent, ClusterUpgradeCompletedEvent). Each route answers a JSON array of
the events of its family whose TimeStamp is within [StartTimeUtc, EndTimeUtc] and not in the future.
SF has no event for a node enabled again: its status shows it (Get Node Info List).

Simplifications: a cluster upgrade does not take its domains' nodes down; SF's balancer is a simple
rule (one replica from the node with the most load of the most spread metric to the one with the
least, where it fits, each `balance_every` simulated seconds).
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass
from enum import StrEnum

from plbjax.sf import Intent, NodeStatus, ReplicaStatus
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.simulator.cluster import PRIMARY, Cluster, Partition, Refused, Upgrade
from plbjax.sf.live.simulator.served import Served
from plbjax.sf.live.utc import iso, parse_utc

DAY = 86400.0
FAMILIES = {  # the EventStore route's family -> the Kinds it answers (azure-servicefabric's subtype maps)
    "Cluster": ("ClusterUpgradeStarted", "ClusterUpgradeDomainCompleted", "ClusterUpgradeCompleted"),
    "Nodes": ("NodeDown", "NodeUp", "NodeDeactivateStarted", "NodeDeactivateCompleted"),
    "Applications": (),
    "Services": ("ServiceCreated", "ServiceDeleted"),
    "Partitions": (),
}
TARGET_VERSION = "10.1.2175.9590"


class DayKind(StrEnum):
    """What the schedule makes happen."""

    NODE_DOWN = "NodeDown"
    NODE_UP = "NodeUp"
    DEACTIVATE = "Deactivate"
    ACTIVATE = "Activate"
    UPGRADE = "Upgrade"
    SERVICE_DELETED = "ServiceDeleted"
    SERVICE_CREATED = "ServiceCreated"


@dataclass(frozen=True)
class Scheduled:
    """One happening at simulated second `at`: a node's or a service's (`name`: its id, App~Svc), a
    deactivation's `intent`, an upgrade's length in `seconds`. A service is deleted, then may be
    created again (the Failover Manager places its replicas)."""

    at: float
    kind: DayKind
    name: str = ""
    intent: Intent = Intent.PAUSE
    seconds: float = 3600.0


def seeded_schedule(nodes: list[str], services: list[str], seed: int = 0, hours: float = 24.0) -> list[Scheduled]:
    """A day of a cluster's life, seeded: two node faults, a deactivation for a restart, an upgrade, a
    service deleted and created again."""
    rng = random.Random(f"day:{seed}")
    picked = rng.sample(sorted(nodes), k=min(3, len(nodes)))
    service = rng.choice(sorted(services)) if services else ""
    h = hours * 3600.0 / 24.0  # an hour of this day
    day = [
        Scheduled(3.2 * h, DayKind.NODE_DOWN, picked[0]),
        Scheduled(3.7 * h, DayKind.NODE_UP, picked[0]),
        Scheduled(8.1 * h, DayKind.DEACTIVATE, picked[1 % len(picked)], Intent.RESTART),
        Scheduled(9.0 * h, DayKind.ACTIVATE, picked[1 % len(picked)]),
        Scheduled(11.5 * h, DayKind.SERVICE_DELETED, service),
        Scheduled(14.0 * h, DayKind.UPGRADE, seconds=2.0 * h),
        Scheduled(17.2 * h, DayKind.SERVICE_CREATED, service),
        Scheduled(20.3 * h, DayKind.NODE_DOWN, picked[2 % len(picked)]),
        Scheduled(20.6 * h, DayKind.NODE_UP, picked[2 % len(picked)]),
    ]
    return [s for s in day if s.name or s.kind is DayKind.UPGRADE]


def utc(c: Cluster, seconds: float) -> str:
    """SF's ISO 8601 UTC time of simulated second `seconds`."""
    return iso(c.epoch + seconds)


class Day:
    """The cluster's day: its schedule, loads and balancer on the simulated clock, and its EventStore."""

    def __init__(
        self,
        served: Served,
        schedule: list[Scheduled],
        seed: int = 0,
        amplitude: float = 0.4,
        load_every: float = 300.0,
        balance_every: float = 600.0,
    ) -> None:
        self.served, self.cluster = served, served.cluster
        self.pending = sorted(schedule, key=lambda s: s.at)
        self.events: list[Json] = []
        self.rng = random.Random(f"events:{seed}")
        self.amplitude, self.load_every, self.balance_every = amplitude, load_every, balance_every
        phases = random.Random(f"loads:{seed}")
        services = sorted({p.service_id for p in self.cluster.partitions.values()})
        self.phase = {sid: phases.uniform(0.0, 2 * math.pi) for sid in services}
        self.base = {pid: _base(part) for pid, part in self.cluster.partitions.items()}
        self.instances = dict.fromkeys(self.cluster.nodes, 1)
        self.deleted: dict[str, _Deleted] = {}
        self.intents: dict[str, Intent] = {}  # a node Disabled by the day -> its deactivation's intent
        self.next_load, self.next_balance = self.cluster.clock, self.cluster.clock + balance_every

    # --- the clock's hook ----------------------------------------------------------------------

    def due(self) -> float | None:
        times = [self.next_load, self.next_balance] + [s.at for s in self.pending[:1]]
        return min(times)

    def fire(self) -> None:
        """The earliest of: the next scheduled happening, a load change, a balancer pass."""
        now = self.cluster.clock
        if self.pending and self.pending[0].at <= now:
            self._happen(self.pending.pop(0))
        elif self.next_load <= now:
            self.next_load += self.load_every
            self._loads(now)
        else:
            self.next_balance += self.balance_every
            self._balance()

    # --- the EventStore ---------------------------------------------------------------------------

    def answer(self, family: str, start: str | None, end: str | None) -> list[Json]:
        """The events of a family within [start, end] (SF's StartTimeUtc/EndTimeUtc; both needed)."""
        if start is None or end is None:
            raise Refused("E_INVALIDARG", "StartTimeUtc and EndTimeUtc are required.")
        try:
            low, high = parse_utc(start), parse_utc(end)
        except ValueError:
            raise Refused("E_INVALIDARG", f"Invalid StartTimeUtc/EndTimeUtc {start!r}, {end!r}.") from None
        now = self.cluster.epoch + self.cluster.clock
        kinds = FAMILIES[family]
        return [e for e in self.events if e["Kind"] in kinds and low <= parse_utc(e["TimeStamp"]) <= min(high, now)]

    def deactivation(self, node: str) -> Json | None:
        """NodeInfo's NodeDeactivationInfo of a node the day Disabled (its deactivation completed)."""
        intent = self.intents.get(node)
        if intent is None or self.cluster.nodes.get(node) != NodeStatus.DISABLED:
            return None
        return {
            "NodeDeactivationIntent": intent.value,
            "NodeDeactivationStatus": "Completed",
            "NodeDeactivationTask": [],
            "PendingSafetyChecks": [],
        }

    def partition_load(self, part: Partition) -> Json:
        """PartitionLoadInformation now: the primary's and a secondary's (an instance's) loads."""
        primary = next((r.loads for r in part.replicas if r.role == PRIMARY), {})
        other = next((r.loads for r in part.replicas if r.role != PRIMARY and r.loads), {})
        stamp = utc(self.cluster, self.cluster.clock)
        return {
            "PartitionId": part.pid,
            "PrimaryLoadMetricReports": _reports(primary, stamp) if part.stateful else [],
            "SecondaryLoadMetricReports": _reports(other or primary, stamp),
        }

    def _event(self, kind: str, at: float, **fields: object) -> None:
        """Record one event (SF's FabricEvent fields, then the kind's)."""
        instance = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        head = {"Kind": kind, "EventInstanceId": instance, "TimeStamp": utc(self.cluster, at)}
        self.events.append(head | {"Category": "StateTransition", "HasCorrelatedEvents": False} | fields)

    # --- what happens -----------------------------------------------------------------------------

    def _happen(self, item: Scheduled) -> None:
        c, now, name = self.cluster, self.cluster.clock, item.name
        node = {"NodeName": name, "NodeInstance": self.instances.get(name, 1)}
        if item.kind is DayKind.NODE_DOWN:
            c.node_down(name)
            self._event("NodeDown", now, **node, LastNodeUpAt=utc(c, 0.0))
        elif item.kind is DayKind.NODE_UP:
            c.node_up(name)
            self.instances[name] = self.instances.get(name, 1) + 1
            self._event("NodeUp", now, **node | {"NodeInstance": self.instances[name]}, LastNodeDownAt=utc(c, now))
        elif item.kind is DayKind.DEACTIVATE:
            c.nodes[name], self.intents[name] = NodeStatus.DISABLED, item.intent
            batch = f"Simulator-{int(now)}"
            self._event("NodeDeactivateStarted", now, **node, BatchId=batch, DeactivateIntent=item.intent.value)
            done = {"EffectiveDeactivateIntent": item.intent.value, "BatchIdsWithDeactivateIntent": batch}
            self._event("NodeDeactivateCompleted", now + 60.0, **node, **done, StartTime=utc(c, now))
        elif item.kind is DayKind.ACTIVATE:
            c.nodes[name] = NodeStatus.UP
            self.intents.pop(name, None)
        elif item.kind is DayKind.SERVICE_DELETED:
            self._delete(name, now)
        elif item.kind is DayKind.SERVICE_CREATED:
            self._create(name, now)
        else:
            self._upgrade(now, item.seconds)

    def _upgrade(self, now: float, seconds: float) -> None:
        """A cluster upgrade rolling for `seconds`: started, each domain completed in turn, completed."""
        c = self.cluster
        c.upgrades.append(Upgrade(now, seconds, TARGET_VERSION))
        domains = sorted({str(n.raw.get("UpgradeDomain", "")) for n in self.served.node_items.values()} - {""})
        started = {"CurrentClusterVersion": "10.1.1951.9590", "TargetClusterVersion": TARGET_VERSION}
        mode = {"UpgradeType": "Rolling", "RollingUpgradeMode": "Monitored", "FailureAction": "Rollback"}
        self._event("ClusterUpgradeStarted", now, **started, **mode)
        step = seconds / max(len(domains), 1)
        for i, domain in enumerate(domains):
            done = {"UpgradeState": "RollingForwardInProgress", "UpgradeDomains": domain}
            at = now + step * (i + 1)
            self._event(
                "ClusterUpgradeDomainCompleted",
                at,
                TargetClusterVersion=TARGET_VERSION,
                **done,
                UpgradeDomainElapsedTimeInMs=step * 1000.0,
            )
        elapsed = {"OverallUpgradeElapsedTimeInMs": seconds * 1000.0}
        self._event("ClusterUpgradeCompleted", now + seconds, TargetClusterVersion=TARGET_VERSION, **elapsed)
        self.events.sort(key=lambda e: parse_utc(e["TimeStamp"]))

    def _delete(self, sid: str, now: float) -> None:
        """The service goes: its listing, description, partitions and replicas (kept to create it again)."""
        s = self.served
        rel = next((r for r in s.files if r.startswith("services/") and _listed(s, r, sid)), None)
        if rel is None:
            raise KeyError(f"no service {sid!r} to delete")
        item = next(i for i in s.items(rel) if i.get("Id") == sid)
        pids = s.service_partitions.pop(sid)
        gone = _Deleted(rel, item, s.files.pop(f"service-descriptions/{sid}.json", None), {})
        for pid in pids:
            gone.partitions[pid] = (s.partition_items.pop(pid), self.cluster.partitions.pop(pid.lower()))
        s.files[rel] = {"ContinuationToken": "", "Items": [i for i in s.items(rel) if i.get("Id") != sid]}
        self.deleted[sid] = gone
        self._event("ServiceDeleted", now, **self._service_fields(gone))

    def _create(self, sid: str, now: float) -> None:
        """A deleted service is created again, its partitions without replicas (the FM places them)."""
        s, gone = self.served, self.deleted.pop(sid)
        s.files[gone.rel] = {"ContinuationToken": "", "Items": [*s.items(gone.rel), gone.item]}
        if gone.description is not None:
            s.files[f"service-descriptions/{sid}.json"] = gone.description
        s.service_partitions[sid] = list(gone.partitions)
        for pid, (listed, part) in gone.partitions.items():
            part.replicas = []
            s.partition_items[pid], self.cluster.partitions[pid.lower()] = listed, part
        first = {"PartitionId": next(iter(gone.partitions), "")}
        self._event("ServiceCreated", now, **self._service_fields(gone), **first)

    def _service_fields(self, gone: _Deleted) -> Json:
        """ServiceCreatedEvent's / ServiceDeletedEvent's fields of a service."""
        parts = [p for _, p in gone.partitions.values()]
        app = "fabric:/" + gone.rel.removeprefix("services/").removesuffix(".json").replace("~", "/")
        return {
            "ServiceId": gone.item.get("Id"),
            "ServiceTypeName": gone.item.get("TypeName", ""),
            "ApplicationName": app,
            "ApplicationTypeName": app.removeprefix("fabric:/") + "Type",
            "ServiceInstance": 1,
            "IsStateful": bool(parts and parts[0].stateful),
            "PartitionCount": len(parts),
            "TargetReplicaSetSize": parts[0].target if parts else 0,
            "MinReplicaSetSize": min(parts[0].target, 2) if parts else 0,
            "ServicePackageVersion": "1.0",
        }

    def _loads(self, now: float) -> None:
        """Every replica's loads: its role's loads at the start times the service's diurnal factor."""
        for pid, part in self.cluster.partitions.items():
            primary, other = self.base[pid]
            angle = 2 * math.pi * now / DAY + self.phase.get(part.service_id, 0.0)
            factor = 1.0 + self.amplitude * math.sin(angle)
            part.new_loads = {m: v * factor for m, v in other.items()}
            for replica in part.replicas:
                loads = primary if replica.role == PRIMARY else other
                replica.loads = {m: round(v * factor, 3) for m, v in loads.items()}

    def _balance(self) -> None:
        """SF's balancer, simply: one replica from the most to the least loaded Up node of the metric
        most spread, where it fits and the partition is not reconfiguring."""
        c = self.cluster
        up = sorted(n for n, s in c.nodes.items() if s == NodeStatus.UP)
        loads = {n: c.node_loads(n) for n in up}
        metrics = sorted({m for row in loads.values() for m in row})
        if len(up) < 2 or not metrics:
            return
        metric = max(metrics, key=lambda m: _spread([loads[n].get(m, 0.0) for n in up]))
        hot = max(up, key=lambda n: (loads[n].get(metric, 0.0), n))
        cool = min(up, key=lambda n: (loads[n].get(metric, 0.0), n))
        gap = loads[hot].get(metric, 0.0) - loads[cool].get(metric, 0.0)
        for part in sorted(c.partitions.values(), key=lambda p: p.pid):
            replica = next((r for r in part.replicas if r.node == hot and r.status == ReplicaStatus.READY), None)
            if replica is None or c.busy(part.pid) or any(r.node == cool for r in part.replicas):
                continue
            load = replica.loads.get(metric, 0.0)
            if 0 < load < gap and c.allowed(part, cool) and c.fits(cool, replica.loads):
                c.balancer_move(part.pid, hot, cool)
                return


@dataclass
class _Deleted:
    """A deleted service, kept to create it again: its listing file and item, description, partitions."""

    rel: str
    item: Json
    description: object
    partitions: dict[str, tuple[Json, Partition]]


def _listed(s: Served, rel: str, sid: str) -> bool:
    return any(i.get("Id") == sid for i in s.items(rel) if isinstance(i, dict))


def _base(part: Partition) -> tuple[dict[str, float], dict[str, float]]:
    """A partition's loads at the start: its primary's (or first replica's), and another replica's."""
    primary = next((r.loads for r in part.replicas if r.role == PRIMARY), None)
    other = next((r.loads for r in part.replicas if r.role != PRIMARY and r.loads), part.new_loads)
    return dict(primary if primary is not None else other), dict(other or primary or {})


def _reports(loads: dict[str, float], stamp: str) -> list[Json]:
    """SF's LoadMetricReport list of `loads`."""
    return [
        {"Name": m, "Value": str(round(v)), "CurrentValue": f"{v:g}", "LastReportedUtc": stamp}
        for m, v in sorted(loads.items())
    ]


def _spread(values: list[float]) -> float:
    """The coefficient of variation of `values` (0 when their mean is 0)."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean if mean > 0 else 0.0
