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
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf.live import fields
from plbjax.sf.live.dumpdir import Dump, at, need
from plbjax.sf.live.report import Report
from plbjax.sf.live.services import BUILTIN_METRICS

ROLES = {"Primary": "Primary", "ActiveSecondary": "Secondary", "IdleSecondary": "Secondary"}
PLACED = ("Ready", "InBuild", "Down")


def read_partitions(dump: Dump, service: dict, service_id: str, nodes: set[str], report: Report) -> list[dict]:
    """The service's partitions, each with its replicas and their reported loads."""
    rel = f"partitions/{service_id}.json"
    out = []
    for where, item in dump.items(rel, f"service {service['ServiceName']!r}"):
        report.walk("partitions/*.json", item, fields.PARTITION, "Items[]")
        info = need(item, "PartitionInformation", where, dict)
        pid = need(info, "Id", at(where, "PartitionInformation"))
        replicas = _replicas(dump, service, pid, nodes, report)
        _apply_loads(dump, service, pid, replicas, report)
        out.append({"ServiceName": service["ServiceName"], "PartitionId": pid, "Replicas": [r for r, _ in replicas]})
    report.count("partitions/*.json")
    return out


def _replicas(dump: Dump, service: dict, pid: str, nodes: set[str], report: Report) -> list[tuple[dict, str]]:
    """(state replica, where) for each replica of the partition that SF counts as placed."""
    rel = f"replicas/{pid}.json"
    stateful = service["ServiceKind"] == "Stateful"
    out = []
    for where, item in dump.items(rel, f"partition {pid} of {service['ServiceName']!r}"):
        report.walk("replicas/*.json", item, fields.REPLICA, "Items[]")
        rid = need(item, "ReplicaId" if stateful else "InstanceId", where)
        node = need(item, "NodeName", where)
        if node not in nodes:
            raise BadInput(f"{at(where, 'NodeName')}: unknown node {node!r} (not in nodes.json)")
        role = ROLES.get(item.get("ReplicaRole", "")) if stateful else "Instance"
        status = need(item, "ReplicaStatus", where)
        if role is None or status not in PLACED:
            report.note(
                f"{where}: replica {rid} ({item.get('ReplicaRole', 'instance')}, {status}) on {node} "
                "left out: placement counts only Primary/Secondary replicas and instances "
                "that are Ready, InBuild or Down"
            )
            continue
        out.append(({"ReplicaId": rid, "Role": role, "NodeName": node}, where))
    report.count("replicas/*.json")
    return out


def _reports(entries: list | None, where: str) -> dict[str, float]:
    """{metric: value} of a list of LoadMetricReport(Info)."""
    out = {}
    for i, entry in enumerate(entries or []):
        spot = f"{where}[{i}]"
        name = need(entry, "Name", spot)
        raw = entry.get("CurrentValue", entry.get("Value"))
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise BadInput(f"{spot}.CurrentValue: {raw!r} is not a number") from None
        if value < 0:
            raise BadInput(f"{spot}: negative load {value:g}")
        out[name] = value
    return out


def _apply_loads(dump: Dump, service: dict, pid: str, replicas: list[tuple[dict, str]], report: Report) -> None:
    """Set each replica's Loads from the partition's and its own load reports."""
    by_role: dict[str, dict] = {}
    rel = f"partition-load/{pid}.json"
    if dump.exists(rel):
        load = dump.object(rel)
        report.walk("partition-load/*.json", load, fields.PARTITION_LOAD)
        report.count("partition-load/*.json")
        primary = _reports(load.get("PrimaryLoadMetricReports"), f"{rel}: PrimaryLoadMetricReports")
        secondary = _reports(load.get("SecondaryLoadMetricReports"), f"{rel}: SecondaryLoadMetricReports")
        by_role = {"Primary": primary, "Secondary": secondary, "Instance": secondary or primary}
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


def _replica_load(load: dict, rel: str, report: Report) -> dict[str, float]:
    report.walk("replica-load/*/*.json", load, fields.REPLICA_LOAD)
    report.count("replica-load/*/*.json")
    key = "LoadMetricReports" if "LoadMetricReports" in load else "ReportedLoad"
    return _reports(load.get(key), f"{rel}: {key}")


def check_orphans(dump: Dump, partitions: list[dict], report: Report) -> None:
    """BadInput for a file of a partition or replica that the dump does not hold; the load of a
    replica that was left out is reported."""
    placed = {str(p["PartitionId"]): {str(r["ReplicaId"]) for r in p["Replicas"]} for p in partitions}
    for rel in dump.files("partition-load") + dump.files("replicas"):
        pid = rel.split("/", 1)[1].removesuffix(".json")
        if pid not in placed:
            raise BadInput(f"{rel}: no partition {pid} in partitions/*.json")
    for rel in dump.files("replica-load"):
        parts = rel.removesuffix(".json").split("/")
        if len(parts) != 3 or parts[1] not in placed:
            raise BadInput(f"{rel}: no partition {'/'.join(parts[1:-1])} in partitions/*.json")
        if parts[2] in placed[parts[1]]:
            continue
        ids = {
            str(item.get("ReplicaId", item.get("InstanceId"))) for _, item in dump.items(f"replicas/{parts[1]}.json")
        }
        if parts[2] not in ids:
            raise BadInput(f"{rel}: no replica {parts[2]} in replicas/{parts[1]}.json")
        report.note(f"{rel}: not carried: its replica was left out")
