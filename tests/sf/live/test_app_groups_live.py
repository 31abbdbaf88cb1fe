"""SF's application groups on the live wing: Get Application Load Info (ApplicationLoadInfo) answered by
the simulator, read by the real azure-servicefabric client, written by plbjax-dump as
``application-load/<ApplicationId>.json`` and carried by plbjax-import into the state's Applications."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from paths import ROOT, TESTS

from plbjax.errors import BadInput
from plbjax.sf import parse_state
from plbjax.sf.live.reading.dump import main as dump_main
from plbjax.sf.live.reading.importer import import_dump
from plbjax.sf.live.simulator import Simulator

EXAMPLE = ROOT / "examples" / "small.yaml"
DUMP = TESTS / "data" / "sf-dump" / "small"
NO_FM = {"build_seconds": 2.0, "clock_rate": 20.0, "failover_seconds": float("inf")}
SHOP = {
    "ApplicationName": "fabric:/Shop",
    "MinimumNodes": 2,
    "MaximumNodes": 3,
    "Metrics": [
        {"Name": "CPU", "MaximumCapacity": 40, "ReservationCapacity": 5, "TotalApplicationCapacity": 120},
        {"Name": "Memory", "TotalApplicationCapacity": 4000},
    ],
}


def _grouped() -> dict:
    doc = yaml.safe_load(EXAMPLE.read_text())
    return doc | {"Applications": [SHOP]}


def test_the_import_carries_the_application_groups_a_dump_of_the_simulator_holds(tmp_path):
    """The round trip: a state with an application group -> the simulator -> plbjax-dump -> plbjax-import.
    SF's answer holds no per-node MaximumCapacity (the report says so); the reservation comes back
    per node from the cluster's (ReservationCapacity / MinimumNodes)."""
    sim = Simulator.from_state(_grouped(), **NO_FM)
    with sim.serve() as endpoint:
        dump_main(["--endpoint", endpoint, "--insecure", "-o", str(tmp_path / "d")])
    answer = json.loads((tmp_path / "d" / "application-load" / "Shop.json").read_text())
    assert (
        answer["MinimumNodes"] == "2" and answer["ApplicationLoadMetricInformation"][0]["ReservationCapacity"] == "10"
    )
    imported, report = import_dump(str(tmp_path / "d"))
    expected = copy.deepcopy(SHOP)
    expected["Metrics"] = [
        {"Name": "CPU", "TotalApplicationCapacity": 120, "ReservationCapacity": 5},
        {"Name": "Memory", "TotalApplicationCapacity": 4000},
    ]
    assert imported["Applications"] == [expected]
    assert parse_state(imported).applications[0].maximum_nodes == 3
    lines = "\n".join(report.lines(every_field=True))
    assert "MaximumCapacity (an application's most load on one node) is not in SF's application load" in lines
    assert "application-load/*.json: ApplicationLoadMetricInformation[].ApplicationLoad" in lines


def test_a_cluster_without_application_capacity_imports_as_before(tmp_path):
    """SF answers zeros for an application without application capacity: no Applications key, the
    state the bundled dump always gave."""
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        dump_main(["--endpoint", endpoint, "--insecure", "-o", str(tmp_path / "d"), "--replica-loads"])
    assert list((tmp_path / "d" / "application-load").glob("*.json"))
    imported, _ = import_dump(str(tmp_path / "d"))
    assert "Applications" not in imported and imported == import_dump(str(DUMP))[0]


def test_the_real_sdk_reads_the_simulators_application_load():
    """azure-servicefabric's get_application_load_info: every key of the answer known to its model."""
    sdk = pytest.importorskip("azure.servicefabric")
    auth = pytest.importorskip("msrest.authentication")
    sim = Simulator.from_state(_grouped(), **NO_FM)
    with sim.serve() as endpoint:
        client = sdk.ServiceFabricClientAPIs(auth.Authentication(), endpoint)
        answer = client.get_application_load_info("Shop", raw=True)
        other = client.get_application_load_info(client.get_application_info_list().items[0].id)
    raw, model = answer.response.json(), answer.output
    assert set(raw) == {v["key"] for v in type(model)._attribute_map.values()}
    doc = _grouped()
    shop = {
        r["NodeName"] for p in doc["Partitions"] if p["ServiceName"].startswith("fabric:/Shop/") for r in p["Replicas"]
    }
    assert (model.minimum_nodes, model.maximum_nodes, model.node_count) == (2, 3, len(shop))
    cpu = model.application_load_metric_information[0]
    assert (cpu.name, cpu.reservation_capacity, cpu.application_capacity) == ("CPU", 10, 120)
    assert cpu.application_load > 0 and other.id


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ({"MinimumNodes": "x"}, "application-load/Shop.json: MinimumNodes"),
        (
            {"MinimumNodes": 3, "ApplicationLoadMetricInformation": [{"Name": "CPU", "ReservationCapacity": 10}]},
            "ReservationCapacity: 10 is not a multiple of MinimumNodes (3)",
        ),
        (
            {"ApplicationLoadMetricInformation": [{"ReservationCapacity": 1}]},
            "ApplicationLoadMetricInformation[0].Name",
        ),
    ],
)
def test_a_bad_application_load_answer_names_its_file_and_key(tmp_path, answer, fragment):
    dump = _dump_with_load(tmp_path, answer)
    with pytest.raises(
        BadInput, match=fragment.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")
    ):
        import_dump(str(dump))


def test_an_application_load_file_of_an_unknown_application_is_refused(tmp_path):
    dump = _dump_with_load(tmp_path, {"MinimumNodes": 0}, "Nope")
    with pytest.raises(BadInput, match="application-load/Nope.json: no application with Id 'Nope'"):
        import_dump(str(dump))


def test_a_reservation_without_minimum_nodes_is_reported_not_carried(tmp_path):
    dump = _dump_with_load(
        tmp_path, {"MaximumNodes": 2, "ApplicationLoadMetricInformation": [{"Name": "CPU", "ReservationCapacity": 4}]}
    )
    imported, report = import_dump(str(dump))
    assert imported["Applications"] == [
        {
            "ApplicationName": "fabric:/Shop",
            "MinimumNodes": 0,
            "MaximumNodes": 2,
            "Metrics": [{"Name": "CPU", "TotalApplicationCapacity": 0}],
        }
    ]
    assert any("ReservationCapacity 4 without MinimumNodes: not carried" in line for line in report.lines())


def _dump_with_load(tmp_path, answer: dict, app_id: str = "Shop"):
    """The bundled dump with `answer` as application `app_id`'s load information."""
    import shutil

    dump = tmp_path / "dump"
    shutil.copytree(DUMP, dump)
    (dump / "application-load").mkdir()
    (dump / "application-load" / f"{app_id}.json").write_text(json.dumps({"Id": app_id} | answer))
    return dump
