"""``plbjax-import DIR -o state.json [-r REPORT]``: a dump of a live cluster -> one state document.

The dump layout is shared/spec/sf-dump.md; the field names are SF's (see the docstrings of
`plbjax.sf.live.fields`, `.manifest`, `.nodes`, `.services`, `.replicas` for the sources they were
checked against). The state is validated with `plbjax.parse_state` before it is written (atomically);
the report (stderr, and REPORT if given) says what was read and every field that was not carried over.
An inconsistent dump exits with status 2 and one line naming the file and key.
"""

from __future__ import annotations

import argparse
import json
import sys

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf import parse_state
from plbjax.sf.live import fields
from plbjax.sf.live.dumpdir import Dump, at, need
from plbjax.sf.live.manifest import parse_manifest
from plbjax.sf.live.nodes import read_nodes
from plbjax.sf.live.replicas import check_orphans, read_partitions
from plbjax.sf.live.report import Report
from plbjax.sf.live.services import service_entry

SYSTEM_APPLICATION = "fabric:/System"


def import_dump(root: str) -> tuple[dict, Report]:
    """(state document, report) for the dump in directory `root`; BadInput if it is inconsistent."""
    dump, report = Dump(root), Report()
    doc: dict = {"SchemaVersion": 1} | _manifest(dump, report)
    doc["Nodes"] = read_nodes(dump, doc.get("NodeTypes", []), report)
    node_names = {n["NodeName"] for n in doc["Nodes"]}
    doc["Services"], doc["Partitions"] = [], []
    service_ids: set[str] = set()
    for app_id, app_name in _applications(dump, report):
        for service_id, service in _services(dump, app_id, app_name, report):
            service_ids.add(service_id)
            doc["Services"].append(service)
            doc["Partitions"] += read_partitions(dump, service, service_id, node_names, report)
    _check_files(dump, service_ids)
    check_orphans(dump, doc["Partitions"], report)
    _unique_replica_ids(doc["Partitions"], report)
    try:
        parse_state(doc, "imported state")
    except BadInput as exc:
        raise BadInput(f"{root}: the imported state does not validate: {exc}") from None
    return doc, report


def _manifest(dump: Dump, report: Report) -> dict:
    """The cluster-wide part of the state, from cluster-manifest.json (or cluster-manifest.xml)."""
    if dump.exists("cluster-manifest.json"):
        if dump.exists("cluster-manifest.xml"):
            report.note("cluster-manifest.xml: not read (cluster-manifest.json holds the manifest)")
        body = dump.object("cluster-manifest.json")
        xml, source = need(body, "Manifest", "cluster-manifest.json:"), "cluster-manifest.json: Manifest"
    else:
        xml, source = dump.text("cluster-manifest.xml", "the cluster manifest"), "cluster-manifest.xml"
    report.count("cluster manifest")
    return parse_manifest(xml, source, report)


def _applications(dump: Dump, report: Report) -> list[tuple[str, str]]:
    """(Id, Name) of every application but SF's own."""
    out = []
    for where, item in dump.items("applications.json"):
        report.walk("applications.json", item, fields.APPLICATION, "Items[]")
        app_id, name = need(item, "Id", where), need(item, "Name", where)
        if name == SYSTEM_APPLICATION:
            report.note(f"{where}: {name} left out: system services are not part of a dump")
            continue
        out.append((app_id, name))
    report.count("applications.json")
    return out


def _services(dump: Dump, app_id: str, app_name: str, report: Report) -> list[tuple[str, dict]]:
    """(service Id, state Services entry) of every service of one application."""
    out = []
    for where, item in dump.items(f"services/{app_id}.json", f"application {app_name!r}"):
        report.walk("services/*.json", item, fields.SERVICE, "Items[]")
        service_id, name = need(item, "Id", where), need(item, "Name", where)
        rel = f"service-descriptions/{service_id}.json"
        desc = dump.object(rel, f"service {name!r}")
        report.walk("service-descriptions/*.json", desc, fields.DESCRIPTION)
        report.count("service-descriptions/*.json")
        service = service_entry(desc, f"{rel}:", report)
        if service["ServiceName"] != name:
            raise BadInput(f"{rel}: ServiceName: {service['ServiceName']!r}, but {at(where, 'Name')} is {name!r}")
        service.setdefault("ApplicationName", app_name)
        if item.get("TypeName") and "ServiceTypeName" not in service:
            service["ServiceTypeName"] = item["TypeName"]
        out.append((service_id, service))
    report.count("services/*.json")
    return out


def _check_files(dump: Dump, service_ids: set[str]) -> None:
    """BadInput for a per-service file of a service that no services/*.json lists."""
    for folder in ("service-descriptions", "partitions"):
        for rel in dump.files(folder):
            service_id = rel.split("/", 1)[1].removesuffix(".json")
            if service_id not in service_ids:
                raise BadInput(f"{rel}: no service with Id {service_id!r} in services/*.json")


def _unique_replica_ids(partitions: list[dict], report: Report) -> None:
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


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None  # the module's docstring
    parser = argparse.ArgumentParser(prog="plbjax-import", description=__doc__.splitlines()[0])
    parser.add_argument("dump", metavar="DIR", help="a dump directory (plbjax-dump, sfctl or curl)")
    parser.add_argument("-o", "--output", required=True, metavar="STATE", help="the state document to write")
    parser.add_argument("-r", "--report", metavar="REPORT", help="also write the import report here")
    args = parser.parse_args(argv)
    try:
        doc, report = import_dump(args.dump)
    except BadInput as exc:
        print(f"plbjax-import: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    text = "\n".join(report.lines()) + "\n"
    write_text(args.output, json.dumps(doc, indent=2) + "\n")
    if args.report:
        write_text(args.report, text)
    sys.stderr.write(text)


if __name__ == "__main__":
    main()
