"""plbjax-import: the fixture dumps -> valid states; every SF field carried or reported; bad dumps exit 2."""

from __future__ import annotations

import codecs
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import TESTS

from plbjax import load_state, parse_state
from plbjax.sf.live.reading.importer import import_dump, main

DUMPS = TESTS / "data" / "sf-dump"
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
    frontend2 = next(n for n in doc["Nodes"] if n["NodeName"] == "_FrontEnd_2")
    assert (frontend2["NodeStatus"], frontend2["DeactivationIntent"]) == ("Disabled", "Restart")
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
    text = "\n".join(report.lines(every_field=True))
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
    "services of an unknown application": (
        lambda root: shutil.copy(root / "services" / "Shop.json", root / "services" / "Gone.json"),
        "services/Gone.json: no application with Id 'Gone'",
    ),
    "replica status SF does not have": (
        lambda root: _edit(_replica_file(root), lambda d: d["Items"][0].update(ReplicaStatus="Sleeping")),
        "Items[0].ReplicaStatus: 'Sleeping' is not an SF replica status",
    ),
    "service kind SF does not have": (
        lambda root: _edit(root / "service-descriptions" / "Shop~Web.json", lambda d: d.update(ServiceKind="Actor")),
        "service-descriptions/Shop~Web.json: ServiceKind: 'Actor'",
    ),
    "count that is not a number": (
        lambda root: _edit(root / "service-descriptions" / "Shop~Web.json", lambda d: d.update(InstanceCount="two")),
        "service-descriptions/Shop~Web.json: InstanceCount: 'two' is not an integer",
    ),
    "load that is not a number": (
        lambda root: _edit(
            root / "partition-load" / "36c1e850-719d-5bd9-a73d-bb6bcfbfc367.json",
            lambda d: d["PrimaryLoadMetricReports"][0].update(CurrentValue="lots"),
        ),
        "PrimaryLoadMetricReports[0].CurrentValue: 'lots' is not a number",
    ),
    "not text": (
        lambda root: (root / "nodes.json").write_bytes(b"\xff\xfe\x00\xd8{"),
        "nodes.json: cannot read",
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
        [sys.executable, "-m", "plbjax.sf.live.reading.importer", str(DUMPS / "small"), "-o", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "not carried, may change placement or balancing" in done.stderr and out.exists()


# ---- real tools' output: encodings, numbers, key case, paging variants (a variant of the small dump) ----

WEB_PID = "958e2661-3cd9-5491-950f-ee8e5729f6a9"  # fabric:/Shop/Web, stateless, 2 instances
ORDERS_PID = "36c1e850-719d-5bd9-a73d-bb6bcfbfc367"  # fabric:/Shop/Orders, stateful, has a replica-load file


def _variant(tmp_path: Path) -> Path:
    root = tmp_path / "variant"
    shutil.copytree(DUMPS / "small", root)
    return root


def _load(path: Path) -> object:
    return json.loads(path.read_text())


def _camel(value: object) -> object:
    """Keys as sfctl writes them (camelCase)."""
    if isinstance(value, list):
        return [_camel(v) for v in value]
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: _camel(v) for k, v in value.items()}
    return value


def test_encodings_of_real_tools_read_the_same(tmp_path):
    root = _variant(tmp_path)
    text = (root / "nodes.json").read_text()
    (root / "nodes.json").write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))  # PowerShell 5.1 Out-File
    apps = root / "applications.json"
    apps.write_bytes(codecs.BOM_UTF8 + apps.read_bytes())  # Set-Content -Encoding UTF8
    services = root / "services" / "Shop.json"
    services.write_bytes(services.read_text().encode("utf-16-be"))  # UTF-16 without a BOM
    desc = root / "service-descriptions" / "Shop~Web.json"
    desc.write_bytes(codecs.BOM_UTF16_BE + desc.read_text().encode("utf-16-be"))
    xml = _load(root / "cluster-manifest.json")["Manifest"]  # type: ignore[index]
    (root / "cluster-manifest.json").unlink()
    xml = '<?xml version="1.0" encoding="utf-16"?>\r\n' + xml.split("?>", 1)[-1].lstrip()
    (root / "cluster-manifest.xml").write_bytes(codecs.BOM_UTF16_LE + xml.encode("utf-16-le"))
    assert import_dump(str(root))[0] == import_dump(str(DUMPS / "small"))[0]


def test_numbers_strings_and_key_case_as_sf_and_its_tools_write_them(tmp_path):
    root = _variant(tmp_path)

    def nodes(d):
        d["Items"][0]["NodeStatus"] = "up"  # SF's clients compare enums without case
        d["Items"][1]["UpgradeDomain"] = 1  # a number where SF writes a string
        d["Items"][2]["IsStopped"] = "false"

    def replicas(d):
        for item in d["Items"]:
            item["ReplicaId"] = int(item["ReplicaId"])  # int64 id as a JSON number
            item["ReplicaRole"] = item["ReplicaRole"].lower()

    def description(d):
        d["TargetReplicaSetSize"] = "3"
        d["ServiceLoadMetrics"][0]["PrimaryDefaultLoad"] = "10"
        d["ServiceLoadMetrics"][0]["Weight"] = "high"
        d["DefaultMoveCost"] = "low"

    def partition_load(d):
        for report in d["PrimaryLoadMetricReports"]:
            report["CurrentValue"] = None  # Value is read where CurrentValue is null
            report["Value"] = str(report["Value"])

    _edit(root / "nodes.json", nodes)
    _edit(root / "replicas" / f"{ORDERS_PID}.json", replicas)
    _edit(root / "service-descriptions" / "Shop~Orders.json", description)
    _edit(root / "partition-load" / f"{ORDERS_PID}.json", partition_load)
    for rel in ("partitions/Shop~Web.json", f"replicas/{WEB_PID}.json", "node-load/_BackEnd_1.json"):
        (root / rel).write_text(json.dumps(_camel(_load(root / rel))))  # sfctl's camelCase keys
    doc, report = import_dump(str(root))
    assert doc == import_dump(str(DUMPS / "small"))[0]
    assert "unknown to plbjax" not in "\n".join(report.lines())


PAGINGS = {
    "token null": lambda d: d | {"ContinuationToken": None},
    "token absent": lambda d: {"Items": d["Items"]},
    "bare array of items": lambda d: d["Items"],
    "array of pages": lambda d: [{"ContinuationToken": "1", "Items": d["Items"][:1]}, {"Items": d["Items"][1:]}],
}


@pytest.mark.parametrize("case", sorted(PAGINGS))
def test_paged_list_variants(case, tmp_path):
    root = _variant(tmp_path)
    for rel in ("nodes.json", "applications.json", "services/Shop.json", f"replicas/{WEB_PID}.json"):
        (root / rel).write_text(json.dumps(PAGINGS[case](_load(root / rel))))
    assert import_dump(str(root))[0] == import_dump(str(DUMPS / "small"))[0]


def test_an_empty_page_may_leave_items_out(tmp_path):
    root = _variant(tmp_path)
    (root / "services" / "Billing.json").write_text('{"ContinuationToken": ""}')
    (root / "service-descriptions" / "Billing~Ledger.json").unlink()
    (root / "partitions" / "Billing~Ledger.json").unlink()
    pid = "899fdbec-213d-5d00-9b50-570f804df844"  # Billing/Ledger's partition
    for folder in ("replicas", "partition-load"):
        (root / folder / f"{pid}.json").unlink(missing_ok=True)
    doc, _ = import_dump(str(root))
    assert "fabric:/Billing/Ledger" not in {s["ServiceName"] for s in doc["Services"]}


NODE_STATUSES = ("Invalid", "Up", "Down", "Enabling", "Disabling", "Disabled", "Unknown", "Removed")
INTENTS = ("Invalid", "Pause", "Restart", "RemoveData", "RemoveNode")
DEACTIVATIONS = ("None", "SafetyCheckInProgress", "SafetyCheckComplete", "Completed")


def test_every_documented_node_value_is_accepted(tmp_path):
    root = _variant(tmp_path)
    for status in NODE_STATUSES:
        for intent in INTENTS:
            for deactivation in DEACTIVATIONS:

                def nodes(d, status=status, intent=intent, deactivation=deactivation):
                    d["Items"][1]["NodeStatus"] = status
                    d["Items"][1]["NodeDeactivationInfo"] = {
                        "NodeDeactivationIntent": intent,
                        "NodeDeactivationStatus": deactivation,
                        "NodeDeactivationTask": [
                            {"NodeDeactivationTaskId": {"Id": "x", "NodeDeactivationTaskType": "Client"}}
                        ],
                        "PendingSafetyChecks": [{"SafetyCheck": {"Kind": "EnsurePartitionQuorum"}}],
                    }

                _edit(root / "nodes.json", nodes)
                doc, _ = import_dump(str(root))
                got = doc["Nodes"][1]["NodeStatus"]
                want = {"Up": "Up", "Enabling": "Up", "Disabling": "Disabled", "Disabled": "Disabled"}.get(
                    status, "Down"
                )
                if want == "Up" and intent != "Invalid" and deactivation != "None":
                    want = "Disabled"
                assert got == want, (status, intent, deactivation)
                carried = doc["Nodes"][1].get("DeactivationIntent")
                assert carried == (intent if want == "Disabled" and intent != "Invalid" else None)


ROLES = (
    "Unknown",
    "None",
    "Primary",
    "IdleSecondary",
    "ActiveSecondary",
    "IdleAuxiliary",
    "ActiveAuxiliary",
    "PrimaryAuxiliary",
)
REPLICA_STATUSES = ("Invalid", "InBuild", "Standby", "Ready", "Down", "Dropped")


@pytest.mark.parametrize("role", ROLES)
def test_every_documented_replica_role_and_status_is_accepted(role, tmp_path):
    root = _variant(tmp_path)
    for status in REPLICA_STATUSES:
        _edit(
            root / "replicas" / f"{ORDERS_PID}.json",
            lambda d, status=status: d["Items"][1].update(
                ReplicaRole=role, ReplicaStatus=status, PreviousReplicaRole="None"
            ),
        )
        doc, report = import_dump(str(root))
        replicas = next(p for p in doc["Partitions"] if p["PartitionId"] == ORDERS_PID)["Replicas"]
        kept = role in ("Primary", "IdleSecondary", "ActiveSecondary") and status in ("Ready", "InBuild", "Down")
        assert len(replicas) == (3 if kept else 2), (role, status)
        assert [r["Role"] for r in replicas].count("Primary") == 1
        if not kept:
            assert "133497100000000002" in "\n".join(report.lines())


def test_every_documented_service_value_is_accepted(tmp_path):
    root = _variant(tmp_path)

    def ledger(d):
        d["ServicePlacementPolicies"] = [
            {"Type": kind, "DomainName": "fd:/dc1"}
            for kind in (
                "Invalid",
                "InvalidDomain",
                "RequireDomain",
                "PreferPrimaryDomain",
                "RequireDomainDistribution",
                "NonPartiallyPlaceService",
                "AllowMultipleStatelessInstancesOnNode",
            )
        ] + [{"Type": "RequireDomain"}]  # no DomainName: left out
        d["DefaultMoveCost"] = "VeryHigh"
        d["PartitionDescription"] = {"PartitionScheme": "Named", "Count": 1, "Names": ["a"]}
        d["ScalingPolicies"] = [
            {
                "ScalingTrigger": {"Kind": "AveragePartitionLoad", "MetricName": "CPU"},
                "ScalingMechanism": {"Kind": "PartitionInstanceCount", "MaxInstanceCount": 3},
            }
        ]
        d["TagsRequiredToPlace"] = {"Count": 1, "Tags": ["gpu"]}
        d["ReplicaLifecycleDescription"] = {"IsSingletonReplicaMoveAllowedDuringUpgrade": True}
        d["ServiceSensitivityDescription"] = {"PrimaryDefaultSensitivity": 0}

    def cart(d):
        d["CorrelationScheme"] = [
            {"Scheme": "Invalid", "ServiceName": "fabric:/Shop/Catalog"},
            {"Scheme": "Affinity", "ServiceName": "fabric:/Shop/Gone"},  # not in the dump
            {"Scheme": "AlignedAffinity", "ServiceName": "fabric:/Shop/Catalog"},
            {"Scheme": "NonAlignedAffinity", "ServiceName": "fabric:/Shop/Orders"},  # a second one
        ]

    _edit(root / "service-descriptions" / "Billing~Ledger.json", ledger)
    _edit(root / "service-descriptions" / "Shop~Cart.json", cart)
    doc, report = import_dump(str(root))
    services = {s["ServiceName"]: s for s in doc["Services"]}
    ledger_entry = services["fabric:/Billing/Ledger"]
    assert [p["Type"] for p in ledger_entry["PlacementPolicies"]] == [
        "InvalidDomain",
        "RequiredDomain",
        "PreferPrimaryDomain",
        "RequireDomainDistribution",
    ]
    assert ledger_entry["DefaultMoveCost"] == "VeryHigh"
    assert services["fabric:/Shop/Cart"]["Correlations"] == [
        {"Scheme": "AlignedAffinity", "ServiceName": "fabric:/Shop/Catalog"}
    ]
    text = "\n".join(report.lines())
    for left_out in (
        "'Invalid'",
        "NonPartiallyPlaceService",
        "AllowMultipleStatelessInstancesOnNode",
        "RequireDomain not carried: its DomainName None",
        "fabric:/Shop/Gone",
        "a second correlation",
        "ScalingPolicies",
        "TagsRequiredToPlace",
    ):
        assert left_out in text, left_out


def test_service_kind_invalid_and_system_services_are_left_out(tmp_path):
    root = _variant(tmp_path)
    _edit(root / "service-descriptions" / "Shop~Catalog.json", lambda d: d.update(ServiceKind="Invalid"))
    _edit(root / "service-descriptions" / "Shop~Cart.json", lambda d: d.update(CorrelationScheme=[]))
    system_pid = "00000000-0000-0000-0000-000000000001"
    (root / "services" / "System.json").write_text(
        json.dumps(
            {"Items": [{"Id": "System~FailoverManagerService", "Name": "fabric:/System/FailoverManagerService"}]}
        )
    )
    (root / "service-descriptions" / "System~FailoverManagerService.json").write_text("{}")
    partitions = {"Items": [{"ServiceKind": "Stateful", "PartitionInformation": {"Id": system_pid}}]}
    (root / "partitions" / "System~FailoverManagerService.json").write_text(json.dumps(partitions))
    shutil.copy(root / "replicas" / f"{ORDERS_PID}.json", root / "replicas" / f"{system_pid}.json")
    doc, report = import_dump(str(root))
    assert {s["ServiceName"] for s in doc["Services"]} == {
        "fabric:/Shop/Orders",
        "fabric:/Shop/Web",
        "fabric:/Shop/Cart",
        "fabric:/Billing/Ledger",
    }
    text = "\n".join(report.lines())
    assert "fabric:/Shop/Catalog left out: its ServiceKind is Invalid" in text
    assert f"replicas/{system_pid}.json: not carried: system services" in text


def test_replicas_the_state_cannot_hold_are_resolved_and_reported(tmp_path):
    root = _variant(tmp_path)

    def web(d):  # AllowMultipleStatelessInstancesOnNode: two instances of the partition on one node
        d["Items"].append(dict(d["Items"][0], InstanceId="999"))

    def orders(d):
        d["Items"][0]["ReplicaStatus"] = "Down"  # the old primary, down ...
        d["Items"][1]["ReplicaRole"] = "Primary"  # ... and its successor
        d["Items"].append(dict(d["Items"][2], ReplicaId="998", NodeName="_Gone", ReplicaStatus="Dropped"))

    _edit(root / "replicas" / f"{WEB_PID}.json", web)
    _edit(root / "replicas" / f"{ORDERS_PID}.json", orders)
    doc, report = import_dump(str(root))
    parts = {p["PartitionId"]: p["Replicas"] for p in doc["Partitions"]}
    assert [r["ReplicaId"] for r in parts[WEB_PID]] == [
        r["InstanceId"]
        for r in _load(DUMPS / "small" / "replicas" / f"{WEB_PID}.json")["Items"]  # type: ignore[index]
    ]
    assert [r["Role"] for r in parts[ORDERS_PID]] == ["Secondary", "Primary", "Secondary"]
    text = "\n".join(report.lines())
    assert "replica 999 (Ready)" in text and "counted as a Secondary" in text and "998" in text


def test_capacity_beyond_the_search_is_no_capacity(tmp_path):
    root = _variant(tmp_path)
    _edit(
        root / "node-load" / "_BackEnd_1.json",
        lambda d: d["NodeLoadMetricInformation"][0].update(NodeCapacity="9223372036854775807"),
    )
    doc, report = import_dump(str(root))
    assert "Capacities" not in {n["NodeName"]: n for n in doc["Nodes"]}["_BackEnd_1"]
    assert "read as no capacity" in "\n".join(report.lines())


def test_refused_node_type_values_are_reported_not_fatal(tmp_path):
    root = _variant(tmp_path)
    xml = _load(root / "cluster-manifest.json")["Manifest"]  # type: ignore[index]
    xml = xml.replace('<Capacity Name="CPU"', '<Capacity Name="Disk" Value="-5" /><Capacity Name="CPU"', 1)
    (root / "cluster-manifest.json").write_text(json.dumps({"Manifest": xml}))
    _, report = import_dump(str(root))
    assert "Capacities/Disk" in "\n".join(report.lines())


def test_import_report_puts_what_changes_placement_first_and_ends_with_one_summary_line(tmp_path, capsys):
    """stderr: the fields and values that may change placement a line each, informational fields one
    count per kind of file, then what the state holds; -r REPORT names every field too."""
    report = tmp_path / "report.txt"
    main([str(DUMPS / "small"), "-o", str(tmp_path / "state.json"), "-r", str(report)])
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "imported: 6 nodes (1 Down), 2 applications, 5 services, 7 partitions, 20 replicas, 2 metrics"
    matter = lines.index(next(line for line in lines if line.startswith("not carried, may change placement")))
    info = lines.index(next(line for line in lines if line.startswith("not carried, no bearing on placement")))
    assert matter < info
    assert any("Parameter[EnableNodeLoadBasedPlacement]" in line for line in lines[matter:info])
    assert any("ScalingPolicies" in line for line in lines[matter:info])
    assert not any("IpAddressOrFQDN" in line for line in lines[matter:info])
    assert any(line.startswith("  nodes.json: 13 field(s): IpAddressOrFQDN, CodeVersion") for line in lines[info:])
    assert len(lines) < 30
    full = report.read_text()
    assert "nodes.json: Items[].IpAddressOrFQDN: no bearing on placement (6 times)" in full
    assert full.splitlines()[-1] == lines[-1]


def test_a_folder_that_is_not_a_dump_is_named_so(tmp_path, capsys):
    """Issue 38: importing a folder without any of a dump's files (here the repository's examples/)
    says it is not a Service Fabric dump and what one is, not just that a file is missing."""
    (tmp_path / "notes.txt").write_text("not a dump")
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), "-o", str(tmp_path / "state.json")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"plbjax-import: {tmp_path}: not a Service Fabric dump: it has none of cluster-manifest.json")
    assert "plbjax-dump writes" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "state.json").exists()
