"""Get Partition Info List, Get Replica Info List and the load reports -> the state's ``Partitions``.

ReplicaRole values (Unknown, None, Primary, IdleSecondary, ActiveSecondary, IdleAuxiliary,
ActiveAuxiliary, PrimaryAuxiliary) and ReplicaStatus values (Invalid, InBuild, Standby, Ready, Down,
Dropped) as in SF's REST API reference. A stateful replica is named by ``ReplicaId``, a stateless
instance by ``InstanceId``. Loads: a partition's ``PrimaryLoadMetricReports`` go to its primary,
``SecondaryLoadMetricReports`` to each secondary (and to stateless instances, which SF load-balances
as secondaries), a replica's own report (``LoadMetricReports`` of Get-ServiceFabricReplicaLoadInformation,
or ``ReportedLoad`` of Get Deployed Service Replica Detail Info) wins over both; ``CurrentValue``
(a double) is read where present, else ``Value``. Where nothing was reported the service's default
loads apply, as in SF.

Ids are read as SF writes them (int64 replica and instance ids as strings) or as JSON numbers; enum
values without regard to case. A replica that placement does not count (Standby, Dropped, Invalid, a
role None/Unknown or auxiliary) is left out and reported whatever node it names; a counted one on a node
that nodes.json does not list stops the import. What SF shows but the state cannot hold is reported and
resolved as SF's placement sees it: a second replica of a partition on one node (stateless services with
AllowMultipleStatelessInstancesOnNode) is left out, and of two replicas reported Primary (an old Down
primary beside the new one) the one that is up stays Primary, the other is counted as a Secondary.
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf import IDLE_SECONDARY, Role
from plbjax.sf.live.reading import fields
from plbjax.sf.live.reading.dumpdir import Dump, at, enum, need, need_id, number
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.reading.report import Report
from plbjax.sf.live.reading.services import BUILTIN_METRICS

ROLES = (Role.PRIMARY.sf(), Role.SECONDARY.sf(), IDLE_SECONDARY)  # SF's ReplicaRole words of a replica that counts
ALL_ROLES = (*ROLES, "Unknown", "None", "IdleAuxiliary", "ActiveAuxiliary", "PrimaryAuxiliary")
PLACED = ("Ready", "InBuild", "Down")
STATUSES = (*PLACED, "Invalid", "Standby", "Dropped")
LARGEST_LOAD = 1e15  # plbjax.sf._state.cluster.LARGEST


def partition_ids(dump: Dump, rel: str, needed_for: str) -> list[tuple[str, str]]:
    """(where, partition id) of every partition of a Get Partition Info List file."""
    out = []
    for where, item in dump.items(rel, needed_for):
        info = need(item, "PartitionInformation", where, dict)
        out.append((where, need_id(info, "Id", at(where, "PartitionInformation"))))
    return out


def read_partitions(dump: Dump, service: Json, service_id: str, nodes: set[str], report: Report) -> list[Json]:
    """The service's partitions, each with its replicas and their reported loads."""
    rel = f"partitions/{service_id}.json"
    out = []
    for where, item in dump.items(rel, f"service {service['ServiceName']!r}"):
        report.walk("partitions/*.json", item, fields.PARTITION, "Items[]")
        info = need(item, "PartitionInformation", where, dict)
        pid = need_id(info, "Id", at(where, "PartitionInformation"))
        replicas = _replicas(dump, service, pid, nodes, report)
        _apply_loads(dump, service, pid, replicas, report)
        out.append({"ServiceName": service["ServiceName"], "PartitionId": pid, "Replicas": [r for r, _ in replicas]})
    report.count("partitions/*.json")
    return out


def _replica_id(item: Json, stateful: bool, where: str) -> str:
    """ReplicaId of a stateful replica, InstanceId of a stateless instance (either, if only one is there)."""
    key = "ReplicaId" if stateful else "InstanceId"
    if key not in item:
        other = "InstanceId" if stateful else "ReplicaId"
        key = other if other in item else key
    return need_id(item, key, where)


def _replicas(dump: Dump, service: Json, pid: str, nodes: set[str], report: Report) -> list[tuple[Json, str]]:
    """(state replica, where) for each replica of the partition that SF counts as placed."""
    rel = f"replicas/{pid}.json"
    stateful = service["ServiceKind"] == "Stateful"
    out: list[tuple[dict, str, str]] = []
    for where, item in dump.items(rel, f"partition {pid} of {service['ServiceName']!r}"):
        report.walk("replicas/*.json", item, fields.REPLICA, "Items[]")
        rid = _replica_id(item, stateful, where)
        status = enum(need(item, "ReplicaStatus", where), STATUSES)
        if status is None:
            raise BadInput(f"{at(where, 'ReplicaStatus')}: {item['ReplicaStatus']!r} is not an SF replica status")
        raw_role = item.get("ReplicaRole")
        if stateful:
            sf_role = enum(raw_role, ALL_ROLES)
            if sf_role is None and raw_role is not None:
                raise BadInput(f"{at(where, 'ReplicaRole')}: {raw_role!r} is not an SF replica role")
            role = Role.from_sf(sf_role)
        else:
            sf_role, role = "instance", Role.INSTANCE
        node = item.get("NodeName")
        if role is None or status not in PLACED:
            report.note(
                f"{where}: replica {rid} ({sf_role or 'no role'}, {status}) on {node} "
                "left out: placement counts only Primary/Secondary replicas and instances "
                "that are Ready, InBuild or Down"
            )
            continue
        node = need(item, "NodeName", where)
        if node not in nodes:
            raise BadInput(f"{at(where, 'NodeName')}: unknown node {node!r} (not in nodes.json)")
        out.append(({"ReplicaId": rid, "Role": role, "NodeName": node}, where, status))
    report.count("replicas/*.json")
    return _resolve(out, pid, report)


def _resolve(replicas: list[tuple[Json, str, str]], pid: str, report: Report) -> list[tuple[Json, str]]:
    """One replica per node (the first that is up), one Primary (the first that is up)."""
    rank = {"Ready": 0, "InBuild": 1, "Down": 2}
    ordered = sorted(replicas, key=lambda r: rank[r[2]])  # stable: the file's order within a status
    kept: dict[str, tuple[dict, str, str]] = {}
    primary = None
    for replica, where, status in ordered:
        node = replica["NodeName"]
        if node in kept:
            report.note(
                f"{where}: replica {replica['ReplicaId']} ({status}) on {node} left out: replica "
                f"{kept[node][0]['ReplicaId']} of partition {pid} is on that node too, and the state "
                "holds one replica of a partition per node"
            )
            continue
        if replica["Role"] == Role.PRIMARY:
            if primary is not None:
                report.note(
                    f"{where}: replica {replica['ReplicaId']} ({status}) is counted as a Secondary: "
                    f"replica {primary} of partition {pid} is its Primary"
                )
                replica["Role"] = Role.SECONDARY
            else:
                primary = replica["ReplicaId"]
        kept[node] = (replica, where, status)
    return [(r, w) for r, w, _ in replicas if kept.get(r["NodeName"], (None,))[0] is r]


def _reports(entries: object, where: str, report: Report) -> dict[str, float]:
    """{metric: value} of a list of LoadMetricReport(Info): CurrentValue where SF wrote one, else Value."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise BadInput(f"{where}: expected a list")
    out = {}
    for i, entry in enumerate(entries):
        spot = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise BadInput(f"{spot}: expected a JSON object")
        name = need(entry, "Name", spot)
        key = "CurrentValue" if entry.get("CurrentValue") not in (None, "") else "Value"
        if entry.get(key) in (None, ""):
            raise BadInput(f"{spot}.Value: missing")
        value = number(entry[key], f"{spot}.{key}")
        if value < 0:
            raise BadInput(f"{spot}: negative load {value:g}")
        if value > LARGEST_LOAD:
            report.note(f"{spot}: load {value:g} of {name} not carried: beyond what plbjax can search with")
            continue
        out[name] = value
    return out


def _apply_loads(dump: Dump, service: Json, pid: str, replicas: list[tuple[Json, str]], report: Report) -> None:
    """Set each replica's Loads from the partition's and its own load reports."""
    by_role: dict[str, dict] = {}
    rel = f"partition-load/{pid}.json"
    if dump.exists(rel):
        load = dump.object(rel)
        report.walk("partition-load/*.json", load, fields.PARTITION_LOAD)
        report.count("partition-load/*.json")
        primary = _reports(load.get("PrimaryLoadMetricReports"), f"{rel}: PrimaryLoadMetricReports", report)
        secondary = _reports(load.get("SecondaryLoadMetricReports"), f"{rel}: SecondaryLoadMetricReports", report)
        by_role = {Role.PRIMARY: primary, Role.SECONDARY: secondary, Role.INSTANCE: secondary or primary}
    metrics = {m["Name"] for m in service.get("Metrics", [])} - BUILTIN_METRICS
    for replica, where in replicas:
        loads = dict(by_role.get(replica["Role"], {}))
        own = f"replica-load/{pid}/{replica['ReplicaId']}.json"
        if dump.exists(own):
            loads |= _replica_load(dump.object(own), own, report)
        for name in sorted(set(loads) - metrics):
            report.note(
                f"{where}: reported load {name} = {loads.pop(name):g} of replica {replica['ReplicaId']} "
                f"not carried: {service['ServiceName']} declares no such metric (SF ignores it)"
            )
        if loads:
            replica["Loads"] = loads


def _replica_load(load: Json, rel: str, report: Report) -> dict[str, float]:
    report.walk("replica-load/*/*.json", load, fields.REPLICA_LOAD)
    report.count("replica-load/*/*.json")
    key = "LoadMetricReports" if "LoadMetricReports" in load else "ReportedLoad"
    return _reports(load.get(key), f"{rel}: {key}", report)


def check_orphans(dump: Dump, partitions: list[Json], report: Report, skipped: dict[str, str] | None = None) -> None:
    """BadInput for a file of a partition or replica that the dump does not hold; the load of a
    replica that was left out is reported, and so is every file of a partition in `skipped`
    (partition id -> why its service was left out)."""
    skipped = skipped or {}
    placed = {str(p["PartitionId"]): {str(r["ReplicaId"]) for r in p["Replicas"]} for p in partitions}
    for rel in dump.files("partition-load") + dump.files("replicas") + dump.files("replica-load"):
        parts = rel.removesuffix(".json").split("/")
        pid = parts[1] if len(parts) >= 2 else ""
        if pid in skipped and pid not in placed:
            report.note(f"{rel}: not carried: {skipped[pid]}")
            continue
        if rel.startswith("replica-load/"):
            _check_replica_load(dump, rel, parts, placed, report)
        elif pid not in placed or len(parts) != 2:
            raise BadInput(f"{rel}: no partition {'/'.join(parts[1:])} in partitions/*.json")


def _check_replica_load(dump: Dump, rel: str, parts: list[str], placed: dict[str, set[str]], report: Report) -> None:
    if len(parts) != 3 or parts[1] not in placed:
        raise BadInput(f"{rel}: no partition {'/'.join(parts[1:-1])} in partitions/*.json")
    if parts[2] in placed[parts[1]]:
        return
    ids = set()
    for _, item in dump.items(f"replicas/{parts[1]}.json"):
        rid = item.get("ReplicaId", item.get("InstanceId"))
        ids.add(str(rid).strip() if isinstance(rid, (str, int)) else rid)
    if parts[2] not in ids:
        raise BadInput(f"{rel}: no replica {parts[2]} in replicas/{parts[1]}.json")
    report.note(f"{rel}: not carried: its replica was left out")
