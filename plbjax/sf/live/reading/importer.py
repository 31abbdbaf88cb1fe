"""``plbjax-import DIR -o state.json [-r REPORT]``: a dump of a live cluster -> one state document.

A recorded day (``plbjax-record``'s folder, or a folder of periodic dumps) becomes the replay's
timeline instead (plbjax.sf.live.record.timeline), and SF's observed day is written beside it
(``--observed``, default TIMELINE with ``.sf-day.json`` for its suffix): each period's state, for
``plbjax-replay observed=``.

The dump layout is in docs/contract.md; the field names are SF's (see the docstrings of
`plbjax.sf.live.reading.fields`, `.manifest`, `.nodes`, `.services`, `.replicas` for the sources they were
checked against). The state is validated with `plbjax.parse_state` before it is written (atomically);
the report (stderr, and REPORT if given) says what was read and every field that was not carried over.
An inconsistent dump exits with status 2 and one line naming the file and key.

What SF allows but the state cannot hold is reported and left out rather than fatal: services of the
system application (``fabric:/System``, ids ``System~...``) and of ServiceKind ``Invalid``, with their
partition, replica and load files; a correlation with a service the dump does not hold, with the
service itself, a second correlation of one service, or one that would make an affinity chain (SF's
PLB keeps one parent per service and no chains). Application groups come from each application's load
information (``application-load/``, `plbjax.sf.live.reading.applications`), which does not carry an
application's per-node MaximumCapacity (reported).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf import parse_state
from plbjax.sf.live.reading import fields
from plbjax.sf.live.reading.applications import read_application_groups
from plbjax.sf.live.reading.dumpdir import DUMP_FILES, Dump, at, need_name
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.reading.manifest import parse_manifest
from plbjax.sf.live.reading.nodes import read_nodes
from plbjax.sf.live.reading.replicas import check_orphans, partition_ids, read_partitions
from plbjax.sf.live.reading.report import Report
from plbjax.sf.live.reading.services import service_entry, service_kind
from plbjax.sf.live.record.timeline import import_recording, is_recording
from plbjax.version import add_flag as add_version_flag

SYSTEM_APPLICATION = "fabric:/System"
SYSTEM_ID = "System"


def import_dump(root: str) -> tuple[Json, Report]:
    """(state document, report) for the dump in directory `root`; BadInput if it is inconsistent."""
    dump, report = Dump(root), Report()
    if not any(dump.exists(name) for name in DUMP_FILES):
        raise BadInput(
            f"{root}: not a Service Fabric dump: it has none of {', '.join(DUMP_FILES)}; a dump is the folder "
            "plbjax-dump writes (one JSON file per REST response: docs/live-cluster.md)"
        )
    doc: dict = {"SchemaVersion": 1} | _manifest(dump, report)
    doc["Nodes"] = read_nodes(dump, doc.get("NodeTypes", []), report)
    node_names = {n["NodeName"] for n in doc["Nodes"]}
    doc["Services"], doc["Partitions"] = [], []
    service_ids: set[str] = set()
    skipped: dict[str, str] = {}  # partition id -> why its service was left out
    applications = _applications(dump, report)
    for app_id, app_name in applications:
        for service_id, service in _services(dump, app_id, app_name, skipped, report):
            service_ids.add(service_id)
            if service is not None:
                doc["Services"].append(service)
                doc["Partitions"] += read_partitions(dump, service, service_id, node_names, report)
    groups = read_application_groups(dump, applications, report)
    if groups:  # none: the document as before application groups
        doc["Applications"] = groups
    _check_files(dump, {app_id for app_id, _ in applications}, service_ids, skipped, report)
    _check_correlations(doc["Services"], report)
    check_orphans(dump, doc["Partitions"], report, skipped)
    _unique_replica_ids(doc["Partitions"], report)
    try:
        state = parse_state(doc, "imported state")
    except BadInput as exc:
        raise BadInput(f"{root}: the imported state does not validate: {exc}") from None
    report.summary = _summary(doc, len(applications), len(state.metric_names()))
    return doc, report


def _summary(doc: Json, applications: int, metrics: int) -> str:
    """One line: what the state holds."""
    down = sum(n.get("NodeStatus") == "Down" for n in doc["Nodes"])
    replicas = sum(len(p["Replicas"]) for p in doc["Partitions"])
    return (
        f"imported: {len(doc['Nodes'])} nodes ({down} Down), {applications} applications, "
        f"{len(doc['Services'])} services, {len(doc['Partitions'])} partitions, {replicas} replicas, {metrics} metrics"
    )


def _manifest(dump: Dump, report: Report) -> Json:
    """The cluster-wide part of the state, from cluster-manifest.json (or cluster-manifest.xml)."""
    if dump.exists("cluster-manifest.json"):
        if dump.exists("cluster-manifest.xml"):
            report.note("cluster-manifest.xml: not read (cluster-manifest.json holds the manifest)")
        body = dump.object("cluster-manifest.json")
        xml, source = need_name(body, "Manifest", "cluster-manifest.json:"), "cluster-manifest.json: Manifest"
    else:
        xml, source = dump.text("cluster-manifest.xml", "the cluster manifest"), "cluster-manifest.xml"
    report.count("cluster manifest")
    return parse_manifest(xml, source, report)


def _applications(dump: Dump, report: Report) -> list[tuple[str, str]]:
    """(Id, Name) of every application but SF's own."""
    out = []
    for where, item in dump.items("applications.json"):
        report.walk("applications.json", item, fields.APPLICATION, "Items[]")
        app_id, name = need_name(item, "Id", where), need_name(item, "Name", where)
        if name == SYSTEM_APPLICATION:
            report.note(f"{where}: {name} left out: system services are not part of a dump")
            continue
        out.append((app_id, name))
    report.count("applications.json")
    return out


def _services(
    dump: Dump, app_id: str, app_name: str, skipped: dict[str, str], report: Report
) -> list[tuple[str, Json | None]]:
    """(service Id, state Services entry, or None if left out) of every service of one application."""
    out: list[tuple[str, dict | None]] = []
    for where, item in dump.items(f"services/{app_id}.json", f"application {app_name!r}"):
        report.walk("services/*.json", item, fields.SERVICE, "Items[]")
        service_id, name = need_name(item, "Id", where), need_name(item, "Name", where)
        rel = f"service-descriptions/{service_id}.json"
        desc = dump.object(rel, f"service {name!r}")
        report.walk("service-descriptions/*.json", desc, fields.DESCRIPTION)
        report.count("service-descriptions/*.json")
        if service_kind(desc, f"{rel}:") is None:
            why = f"service {name} left out: its ServiceKind is Invalid"
            report.note(f"{rel}: {why}")
            _skip_partitions(dump, service_id, why, skipped, report)
            out.append((service_id, None))
            continue
        service = service_entry(desc, f"{rel}:", report)
        if service["ServiceName"] != name:
            raise BadInput(f"{rel}: ServiceName: {service['ServiceName']!r}, but {at(where, 'Name')} is {name!r}")
        service.setdefault("ApplicationName", app_name)
        if isinstance(item.get("TypeName"), str) and item["TypeName"] and "ServiceTypeName" not in service:
            service["ServiceTypeName"] = item["TypeName"]
        out.append((service_id, service))
    report.count("services/*.json")
    return out


def _skip_partitions(dump: Dump, service_id: str, why: str, skipped: dict[str, str], report: Report) -> None:
    """Note the partitions file of a service that is left out; its partitions' files are not carried."""
    rel = f"partitions/{service_id}.json"
    if dump.exists(rel):
        skipped |= {pid: why for _, pid in partition_ids(dump, rel, why)}
        report.note(f"{rel}: not carried: {why}")


def _check_files(dump: Dump, app_ids: set[str], service_ids: set[str], skipped: dict[str, str], report: Report) -> None:
    """BadInput for a per-application file of an application applications.json does not list, and for
    a per-service file of a service that no services/*.json lists; files of SF's system application
    (not part of a dump) are noted and not carried."""
    system = "system services are not part of a dump"
    for rel in dump.files("services") + dump.files("application-load"):
        app_id = rel.split("/", 1)[1].removesuffix(".json")
        if app_id == SYSTEM_ID:
            report.note(f"{rel}: not carried: {system}")
        elif app_id not in app_ids:
            raise BadInput(f"{rel}: no application with Id {app_id!r} in applications.json")
    for folder in ("service-descriptions", "partitions"):
        for rel in dump.files(folder):
            service_id = rel.split("/", 1)[1].removesuffix(".json")
            if service_id in service_ids:
                continue
            if service_id.split("~", 1)[0] != SYSTEM_ID:
                raise BadInput(f"{rel}: no service with Id {service_id!r} in services/*.json")
            report.note(f"{rel}: not carried: {system}")
            if folder == "partitions":
                skipped |= {pid: system for _, pid in partition_ids(dump, rel, system)}


def _check_correlations(services: list[Json], report: Report) -> None:
    """Leave out (reported) each correlation the state cannot hold: with a service the dump does not
    hold, with the service itself, a second one of a service, or one that would chain affinities."""
    names = {s["ServiceName"] for s in services}
    for service in services:
        kept = []
        for c in service.get("Correlations", []):
            why = (
                "a second correlation of the service (SF keeps one)"
                if kept
                else "the service itself"
                if c["ServiceName"] == service["ServiceName"]
                else "a service the dump does not hold"
                if c["ServiceName"] not in names
                else None
            )
            if why:
                report.note(f"{service['ServiceName']}: correlation {c} not carried: {why}")
            else:
                kept.append(c)
        service.pop("Correlations", None)
        if kept:
            service["Correlations"] = kept
    parent = {s["ServiceName"]: s["Correlations"][0]["ServiceName"] for s in services if s.get("Correlations")}
    for service in services:
        other = parent.get(service["ServiceName"])
        if other is not None and other in parent:
            report.note(
                f"{service['ServiceName']}: correlation {service['Correlations'][0]} not carried: "
                f"{other} is itself correlated with {parent[other]} (SF does not support affinity chains)"
            )
            del service["Correlations"]


def _unique_replica_ids(partitions: list[Json], report: Report) -> None:
    """SF's replica ids are unique within a partition; the state needs them unique cluster-wide."""
    count: dict[str, int] = {}
    for p in partitions:
        for r in p["Replicas"]:
            count[str(r["ReplicaId"])] = count.get(str(r["ReplicaId"]), 0) + 1
    for p in partitions:
        for r in p["Replicas"]:
            if count[str(r["ReplicaId"])] > 1:
                new = f"{p['PartitionId']}/{r['ReplicaId']}"
                report.note(
                    f"replica {r['ReplicaId']} of partition {p['PartitionId']} is named {new}: "
                    "its id is used in another partition too"
                )
                r["ReplicaId"] = new


def _write_observed(observed: Json, path: str) -> str:
    """Write SF's observed day to `path`; the report's line saying so."""
    write_text(path, json.dumps(observed, indent=1) + "\n")
    return f"SF's observed day: {len(observed['Periods'])} periods written to {path}"


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None  # the module's docstring
    parser = argparse.ArgumentParser(
        prog="plbjax-import",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 state written; 2 an inconsistent dump (one line naming the file and key); 130\n"
        "after Ctrl-C (SIGINT), 143 after SIGTERM (no file half-written)\n\n"
        "examples:\n"
        "  plbjax-import dump/ -o state.json -r import-report.txt   (the report with every field not carried)\n"
        "  plbjax-import tests/data/sf-dump/small -o state.json    (the bundled sample dump)\n"
        "  plbjax-import examples/recorded-day/day -o timeline.json   (a recording; SF's day beside it)\n"
        "then: plbjax state=state.json out=plan.json\n"
        "  or: plbjax-replay timeline=timeline.json observed=timeline.sf-day.json   (the replay beside SF's day)",
    )
    add_version_flag(parser)
    parser.add_argument(
        "dump", metavar="DIR", help="a dump directory (plbjax-dump, sfctl or curl), or a recording (plbjax-record)"
    )
    parser.add_argument("-o", "--output", required=True, metavar="STATE", help="the state document to write")
    parser.add_argument("-r", "--report", metavar="REPORT", help="also write the import report here")
    parser.add_argument(
        "--observed",
        metavar="FILE",
        help="of a recording: where SF's observed day goes (default: STATE with .sf-day.json for its suffix)",
    )
    args = parser.parse_args(argv)
    observed = None
    try:
        if is_recording(args.dump):
            doc, observed, lines = import_recording(args.dump, import_dump)
            full = lines
        else:
            if args.observed:
                raise BadInput(f"--observed: {args.dump} is one dump, not a recording: there is no day to observe")
            doc, report = import_dump(args.dump)
            lines, full = report.lines(), report.lines(every_field=True)
    except BadInput as exc:
        print(f"plbjax-import: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    write_text(args.output, json.dumps(doc, indent=2) + "\n")
    if observed is not None:
        lines.append(_write_observed(observed, args.observed or str(Path(args.output).with_suffix(".sf-day.json"))))
    if args.report:
        write_text(args.report, "\n".join(full) + "\n")
    sys.stderr.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
