"""plbjax-import: the fixture dumps -> valid states; every SF field carried or reported; bad dumps exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from plbjax import load_state, parse_state
from plbjax.sf.live.importer import import_dump, main

DUMPS = Path(__file__).parent / "data" / "sf-dump"
PAGING = {"ContinuationToken", "Items"}
# Fields the import carries into the state (by the last key of their path).
CARRIED = {
    "Manifest",
    "Name",
    "Type",
    "FaultDomain",
    "UpgradeDomain",
    "NodeStatus",
    "IsStopped",
    "NodeDeactivationInfo",
    "NodeDeactivationIntent",
    "NodeDeactivationStatus",
    "NodeName",
    "NodeLoadMetricInformation",
    "NodeCapacity",
    "Id",
    "ServiceKind",
    "TypeName",
    "ApplicationName",
    "ServiceName",
    "ServiceTypeName",
    "PlacementConstraints",
    "CorrelationScheme",
    "Scheme",
    "ServiceLoadMetrics",
    "Weight",
    "PrimaryDefaultLoad",
    "SecondaryDefaultLoad",
    "DefaultLoad",
    "ServicePlacementPolicies",
    "DomainName",
    "DefaultMoveCost",
    "IsDefaultMoveCostSpecified",
    "TargetReplicaSetSize",
    "InstanceCount",
    "PartitionInformation",
    "ReplicaId",
    "InstanceId",
    "ReplicaRole",
    "ReplicaStatus",
    "PartitionId",
    "PrimaryLoadMetricReports",
    "SecondaryLoadMetricReports",
    "Value",
    "CurrentValue",
    "ReplicaOrInstanceId",
    "LoadMetricReports",
    "ReportedLoad",
}


def _keys(value: object, path: str = "") -> set[str]:
    """Every key path of a JSON value, lists written as []."""
    if isinstance(value, list):
        return set().union(*(_keys(v, f"{path}[]") for v in value)) if value else set()
    if not isinstance(value, dict):
        return set()
    out = set()
    for key, item in value.items():
        field = f"{path}.{key}" if path else key
        out |= {field} | _keys(item, field)
    return out


@pytest.mark.parametrize("name", ["small", "paged"])
def test_fixture_imports_to_a_valid_state(name, tmp_path):
    out, report = tmp_path / "state.json", tmp_path / "report.txt"
    main([str(DUMPS / name), "-o", str(out), "-r", str(report)])
    state = load_state(out)
    doc = json.loads(out.read_text())
    assert parse_state(doc).nodes == state.nodes
    assert {n["NodeName"]: n["NodeStatus"] for n in doc["Nodes"]}["_BackEnd_2"] == "Down"
    assert report.read_text().startswith("read: 1 cluster manifest")


def test_small_cluster_is_carried_over():
    doc, _ = import_dump(str(DUMPS / "small"))
    assert doc["Settings"] == {
        "MinLoadBalancingInterval": "5",
        "UseMoveCostReports": "false",
        "UpgradeDomainConstraintPriority": "1",
    }
    assert doc["MetricBalancingThresholds"] == {"CPU": 1.5, "Memory": 2.0}
    assert doc["NodeBufferPercentage"] == {"CPU": 0.1}
    assert [t["Name"] for t in doc["NodeTypes"]] == ["FrontEnd", "BackEnd"]
    nodes = {n["NodeName"]: n for n in doc["Nodes"]}
    assert nodes["_BackEnd_1"]["Capacities"] == {"CPU": 150.0}  # node-load differs from the type
    assert "Capacities" not in nodes["_BackEnd_0"]
    services = {s["ServiceName"]: s for s in doc["Services"]}
    assert services["fabric:/Shop/Web"]["Metrics"] == [{"Name": "CPU", "Weight": "Medium", "DefaultLoad": 20}]
    assert services["fabric:/Shop/Cart"]["Correlations"] == [
        {"Scheme": "NonAlignedAffinity", "ServiceName": "fabric:/Shop/Catalog"}
    ]
    assert services["fabric:/Billing/Ledger"]["PlacementPolicies"][1] == {
        "Type": "PreferPrimaryDomain",
        "DomainName": "fd:/dc1/r1",
    }
    orders0 = next(p for p in doc["Partitions"] if p["ServiceName"] == "fabric:/Shop/Orders")
    loads = [r.get("Loads") for r in orders0["Replicas"]]
    assert loads == [{"CPU": 30.0, "Memory": 600.0}, {"CPU": 6.0, "Memory": 580.0}, {"CPU": 9.0, "Memory": 580.0}]


def test_paged_dump_merges_pages_and_maps_values():
    doc, report = import_dump(str(DUMPS / "paged"))
    assert len(doc["Nodes"]) == 6 and len(doc["Services"]) == 5
    assert {n["NodeName"]: n["NodeStatus"] for n in doc["Nodes"]}["_FrontEnd_2"] == "Disabled"
    backend = doc["NodeTypes"][1]["PlacementAndLoadBalancingOverrides"]
    assert backend == {
        "MetricBalancingThresholdsPerNodeType": {"CPU": 1.2},
        "MetricActivityThresholdsPerNodeType": {"CPU": 20.0},
        "MinLoadBalancingIntervalPerNodeType": 100.0,
    }
    ledger = next(s for s in doc["Services"] if s["ServiceName"] == "fabric:/Billing/Ledger")
    assert [p["Type"] for p in ledger["PlacementPolicies"]] == [
        "RequireDomainDistribution",
        "PreferPrimaryDomain",
        "RequiredDomain",
        "InvalidDomain",
    ]
    assert "DefaultMoveCost" not in ledger  # IsDefaultMoveCostSpecified false
    replicas = next(p for p in doc["Partitions"] if p["ServiceName"] == "fabric:/Billing/Ledger")["Replicas"]
    assert [(r["Role"], r.get("Loads")) for r in replicas] == [
        ("Primary", {"CPU": 12.0}),
        ("Secondary", {"CPU": 4.5}),
        ("Secondary", {"CPU": 4.5}),
        ("Secondary", {"CPU": 2.0}),
    ]
    text = "\n".join(report.lines())
    for left_out in (
        "133497100000000902",
        "133497100000000903",
        "133497100000000904",
        "NonPartiallyPlaceService",
        "Parameter[Disk]",
        "Latency",
    ):
        assert left_out in text


def _accounted(field: str, text: str) -> bool:
    """The field, or a field it is part of, is named in the report, or its whole path is carried."""
    parts = field.removeprefix("[].").split(".")
    if parts[0] in PAGING:
        parts[0] = "Items[]"
    if parts == ["Items[]"] or parts == ["ContinuationToken"]:
        return True
    for n in range(1, len(parts) + 1):
        if f"{'.'.join(parts[:n]).removesuffix('[]')}: " in text:
            return True
    return all(p.removesuffix("[]") in CARRIED for p in parts if p != "Items[]")


@pytest.mark.parametrize("name", ["small", "paged"])
def test_every_fixture_field_is_carried_or_reported(name):
    _, report = import_dump(str(DUMPS / name))
    text = "\n".join(report.lines())
    missing = [
        f"{path.relative_to(DUMPS)}: {field}"
        for path in sorted((DUMPS / name).rglob("*.json"))
        for field in sorted(_keys(json.loads(path.read_text())))
        if not _accounted(field, text)
    ]
    assert not missing


def _broken(tmp_path: Path, change) -> Path:
    root = tmp_path / "dump"
    shutil.copytree(DUMPS / "small", root)
    change(root)
    return root


def _replica_file(root: Path) -> Path:
    return sorted((root / "replicas").glob("*.json"))[0]


def _edit(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


BAD = {
    "replica on an unknown node": (
        lambda root: _edit(_replica_file(root), lambda d: d["Items"][0].update(NodeName="Nope")),
        "Items[0].NodeName: unknown node 'Nope'",
    ),
    "partitions of an unknown service": (
        lambda root: (root / "partitions" / "Shop~Gone.json").write_text('{"ContinuationToken": "", "Items": []}'),
        "partitions/Shop~Gone.json: no service with Id 'Shop~Gone'",
    ),
    "missing required file": (
        lambda root: (root / "service-descriptions" / "Shop~Web.json").unlink(),
        "service-descriptions/Shop~Web.json: missing",
    ),
    "malformed JSON": (lambda root: (root / "nodes.json").write_text('{"Items": ['), "nodes.json:1:"),
    "missing key": (
        lambda root: _edit(root / "nodes.json", lambda d: d["Items"][1].pop("FaultDomain")),
        "nodes.json: Items[1].FaultDomain: missing",
    ),
    "load of an unknown partition": (
        lambda root: (root / "partition-load" / "0000.json").write_text("{}"),
        "partition-load/0000.json: no partition",
    ),
    "bad manifest XML": (
        lambda root: (root / "cluster-manifest.json").write_text('{"Manifest": "<ClusterManifest"}'),
        "cluster-manifest.json: Manifest: invalid XML",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_dump_exits_2_with_one_line(case, tmp_path, capsys):
    change, expected = BAD[case]
    root = _broken(tmp_path, change)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(SystemExit) as exit_info:
        main([str(root), "-o", str(tmp_path / "state.json")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "state.json").exists()
    assert before == {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}  # the dump is not changed


def test_module_runs_as_a_script(tmp_path):
    out = tmp_path / "state.json"
    done = subprocess.run(
        [sys.executable, "-m", "plbjax.sf.live.importer", str(DUMPS / "small"), "-o", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "not carried:" in done.stderr and out.exists()
