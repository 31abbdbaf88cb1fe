"""The simulated SF cluster: its REST shapes, moves, refusals, faults, Failover Manager and the sfctl stand-in."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT, TESTS

from plbjax.sf import generate
from plbjax.sf.live.reading.dump import main as dump_main
from plbjax.sf.live.reading.importer import import_dump
from plbjax.sf.live.simulator import Simulator

DUMP = TESTS / "data" / "sf-dump" / "small"
EXAMPLE = ROOT / "examples" / "small.yaml"
SFCTL = TESTS / "bin" / "sfctl"
ORDERS = "36c1e850-719d-5bd9-a73d-bb6bcfbfc367"  # Primary _FrontEnd_0, secondaries _FrontEnd_1, _BackEnd_0
WEB = "958e2661-3cd9-5491-950f-ee8e5729f6a9"  # stateless, instances on _FrontEnd_0 and _FrontEnd_1
CART_DOWN = "1e597dcc-cd86-54f0-a58d-092589c580ce"  # a secondary Down on _BackEnd_2
FAST = {"build_seconds": 2.0, "clock_rate": 20.0}  # a build takes 0.1 s of wall time
NO_FM = {**FAST, "failover_seconds": float("inf")}


def _get(endpoint: str, path: str, version: str = "6.0") -> tuple[int, Any]:
    """(HTTP status, JSON body or None) of a GET."""
    sep = "&" if "?" in path else "?"
    try:
        with urllib.request.urlopen(f"{endpoint}{path}{sep}api-version={version}", timeout=10) as response:
            body = response.read()
            return response.status, json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _post(endpoint: str, path: str, **query: str) -> tuple[int, Any]:
    """(HTTP status, JSON body or None) of a move POST."""
    url = f"{endpoint}{path}?" + "&".join(f"{k}={v}" for k, v in query.items())
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST"), timeout=10) as response:
            return response.status, response.read() or None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _secondary(endpoint: str, pid: str, current: str, new: str, **extra: str) -> tuple[int, Any]:
    query = {"api-version": "6.5", "CurrentNodeName": current, "NewNodeName": new, **extra}
    return _post(endpoint, f"/Partitions/{pid}/$/MoveSecondaryReplica", **query)


def _primary(endpoint: str, pid: str, node: str, **extra: str) -> tuple[int, Any]:
    return _post(
        endpoint, f"/Partitions/{pid}/$/MovePrimaryReplica", **{"api-version": "6.5", "NodeName": node, **extra}
    )


def _wait(predicate, seconds: float = 5.0) -> None:
    """Poll until predicate() holds (a test failure after `seconds` of wall time)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def _items(stored: Any) -> list:
    return [i for page in (stored if isinstance(stored, list) else [stored]) for i in page["Items"]]


def test_gets_answer_the_dumps_own_json():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        for rel, path in (
            ("nodes.json", "/Nodes"),
            ("applications.json", "/Applications"),
            ("services/Shop.json", "/Applications/Shop/$/GetServices"),
            ("partitions/Shop~Orders.json", "/Services/Shop~Orders/$/GetPartitions"),
            (f"replicas/{ORDERS}.json", f"/Partitions/{ORDERS}/$/GetReplicas"),
            (f"replicas/{WEB}.json", f"/Partitions/{WEB}/$/GetReplicas"),
        ):
            status, body = _get(endpoint, path)
            assert status == 200 and body == json.loads((DUMP / rel).read_text()), rel
        for rel, path in (
            ("service-descriptions/Shop~Orders.json", "/Services/Shop~Orders/$/GetDescription"),
            ("cluster-manifest.json", "/$/GetClusterManifest"),
            (f"partition-load/{ORDERS}.json", f"/Partitions/{ORDERS}/$/GetLoadInformation"),
            ("node-load/_FrontEnd_0.json", "/Nodes/_FrontEnd_0/$/GetLoadInformation"),
        ):
            assert _get(endpoint, path) == (200, json.loads((DUMP / rel).read_text())), rel
        nodes = _items(json.loads((DUMP / "nodes.json").read_text()))
        assert _get(endpoint, "/Nodes/_BackEnd_2") == (200, nodes[-1])
        assert _get(endpoint, "/Nodes/nope") == (204, None) and _get(endpoint, "/Partitions/nope") == (204, None)
        partitions = _items(json.loads((DUMP / "partitions/Shop~Orders.json").read_text()))
        assert _get(endpoint, f"/Partitions/{ORDERS}") == (200, partitions[0])
        status, body = _get(endpoint, "/Nodes", version="")
        assert status == 400 and body["Error"]["Code"] == "E_INVALIDARG"


def test_paging_follows_max_results_and_continuation_token():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        names, token, pages = [], "", 0
        while True:
            status, page = _get(endpoint, f"/Nodes?MaxResults=4&ContinuationToken={token}")
            assert status == 200 and len(page["Items"]) <= 4
            names += [n["Name"] for n in page["Items"]]
            pages, token = pages + 1, page["ContinuationToken"]
            if not token:
                break
    assert pages == 2 and names == [n["Name"] for n in _items(json.loads((DUMP / "nodes.json").read_text()))]


def test_move_secondary_builds_a_new_replica_then_drops_the_old_one():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        assert _secondary(endpoint, ORDERS, "_FrontEnd_1", "_FrontEnd_2") == (200, None)
        _, page = _get(endpoint, f"/Partitions/{ORDERS}/$/GetReplicas")
        new = next(r for r in page["Items"] if r["NodeName"] == "_FrontEnd_2")
        assert (new["ReplicaStatus"], new["ReplicaRole"]) == ("InBuild", "IdleSecondary")
        assert sim.placement()[ORDERS]["_FrontEnd_2"] == "InBuild"
        _wait(lambda: sim.placement()[ORDERS].get("_FrontEnd_2") == "Secondary")
        _, page = _get(endpoint, f"/Partitions/{ORDERS}/$/GetReplicas")
        done = next(r for r in page["Items"] if r["NodeName"] == "_FrontEnd_2")
        assert (done["ReplicaStatus"], done["ReplicaRole"], done["ReplicaId"]) == (
            "Ready",
            "ActiveSecondary",
            new["ReplicaId"],
        )
        assert new["ReplicaId"] != "133497100000000002" and set(done) == set(page["Items"][0])
        assert "_FrontEnd_1" not in {r["NodeName"] for r in page["Items"]}
    (move,) = sim.moves
    assert (move.kind, move.source, move.target, move.outcome) == (
        "MoveSecondary",
        "_FrontEnd_1",
        "_FrontEnd_2",
        "done",
    )
    assert move.finished is not None and move.finished - move.started == pytest.approx(2.0, abs=1e-6)
    assert sim.max_concurrent() == 1 and sim.max_concurrent_per_node() == 1


def test_move_primary_to_a_secondary_is_a_swap_and_to_a_new_node_a_build():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        assert _primary(endpoint, ORDERS, "_BackEnd_0") == (200, None)
        _wait(lambda: sim.placement()[ORDERS]["_BackEnd_0"] == "Primary")
        assert sim.placement()[ORDERS] == {
            "_FrontEnd_0": "Secondary",
            "_FrontEnd_1": "Secondary",
            "_BackEnd_0": "Primary",
        }
        assert sim.moves[0].kind == "SwapPrimarySecondary"
        assert _primary(endpoint, ORDERS, "_FrontEnd_2") == (200, None)
        assert sim.placement()[ORDERS]["_FrontEnd_2"] == "InBuild"
        _wait(lambda: sim.placement()[ORDERS].get("_FrontEnd_2") == "Primary")
        assert sim.placement()[ORDERS] == {
            "_FrontEnd_0": "Secondary",
            "_FrontEnd_1": "Secondary",
            "_FrontEnd_2": "Primary",
        }
        assert _post(endpoint, f"/Partitions/{ORDERS}/$/MovePrimaryReplica", **{"api-version": "6.5"}) == (200, None)
        _wait(lambda: sim.moves[-1].outcome == "done")
        assert list(sim.placement()[ORDERS].values()).count("Primary") == 1


def test_move_instance():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        path = f"/Services/Shop~Web/$/GetPartitions/{WEB}/$/MoveInstance"
        query = {"api-version": "8.0", "CurrentNodeName": "_FrontEnd_1", "NewNodeName": "_FrontEnd_2"}
        assert _post(endpoint, path, **query) == (200, None)
        _wait(lambda: sim.placement()[WEB] == {"_FrontEnd_0": "Instance", "_FrontEnd_2": "Instance"})
        _, page = _get(endpoint, f"/Partitions/{WEB}/$/GetReplicas")
        assert all("InstanceId" in i and "ReplicaRole" not in i for i in page["Items"])
        status, body = _post(endpoint, f"/Services/Shop~Nope/$/GetPartitions/{WEB}/$/MoveInstance", **query)
        assert (status, body["Error"]["Code"]) == (404, "FABRIC_E_SERVICE_DOES_NOT_EXIST")
        status, body = _post(endpoint, path, **{**query, "api-version": "6.5"})
        assert (status, body["Error"]["Code"]) == (400, "E_INVALIDARG")


@pytest.mark.parametrize(
    "call, status, code",
    [
        (
            ("secondary", "00000000-0000-0000-0000-000000000000", "_FrontEnd_1", "_FrontEnd_2"),
            404,
            "FABRIC_E_PARTITION_NOT_FOUND",
        ),
        (("secondary", WEB, "_FrontEnd_1", "_FrontEnd_2"), 400, "FABRIC_E_INVALID_PARTITION_OPERATION"),
        (("secondary", ORDERS, "_FrontEnd_1", "_Nope"), 404, "FABRIC_E_NODE_NOT_FOUND"),
        (("secondary", ORDERS, "_FrontEnd_1", "_BackEnd_2"), 404, "FABRIC_E_NODE_NOT_FOUND"),  # Down
        (("secondary", ORDERS, "_FrontEnd_2", "_BackEnd_1"), 404, "FABRIC_E_REPLICA_DOES_NOT_EXIST"),
        (("secondary", ORDERS, "_FrontEnd_0", "_BackEnd_1"), 400, "FABRIC_E_INVALID_REPLICA_STATE"),  # the primary
        (("secondary", ORDERS, "_FrontEnd_1", "_BackEnd_0"), 409, "FABRIC_E_SECONDARY_ALREADY_EXISTS"),
        (("secondary", ORDERS, "_FrontEnd_1", "_FrontEnd_0"), 409, "FABRIC_E_PRIMARY_ALREADY_EXISTS"),
        (("primary", ORDERS, "_FrontEnd_0"), 409, "FABRIC_E_PRIMARY_ALREADY_EXISTS"),
        (("primary", WEB, "_FrontEnd_0"), 400, "FABRIC_E_INVALID_PARTITION_OPERATION"),
        (("primary", ORDERS, "_BackEnd_2"), 404, "FABRIC_E_NODE_NOT_FOUND"),
    ],
)
def test_each_refusal_has_sfs_code_and_status(call, status, code):
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        got = _secondary(endpoint, *call[1:]) if call[0] == "secondary" else _primary(endpoint, *call[1:])
    assert got[0] == status and got[1]["Error"]["Code"] == code and got[1]["Error"]["Message"]
    assert sim.moves == []


def test_a_reconfiguring_partition_is_refused_after_the_timeout_and_waited_for_before():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    sim.slow(ORDERS, float("inf"))
    with sim.serve() as endpoint:
        assert _secondary(endpoint, ORDERS, "_FrontEnd_1", "_FrontEnd_2")[0] == 200
        status, body = _primary(endpoint, ORDERS, "_BackEnd_0", timeout="1")
        assert (status, body["Error"]["Code"]) == (504, "FABRIC_E_TIMEOUT")
        assert sim.moves[0].outcome == "in build"
    fast = Simulator.from_dump(DUMP, **NO_FM)
    with fast.serve() as endpoint:
        assert _secondary(endpoint, ORDERS, "_FrontEnd_1", "_FrontEnd_2")[0] == 200
        assert _primary(endpoint, ORDERS, "_BackEnd_0") == (200, None)  # waits for the build, then swaps
        assert fast.moves[1].started >= (fast.moves[0].finished or 0.0)


def test_refuse_next_and_node_down_mid_move():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    sim.refuse_next(partition_id=ORDERS, kind="MoveSecondary", code="FABRIC_E_CONSTRAINT_NOT_SATISFIED")
    sim.slow(ORDERS, 1000.0)
    with sim.serve() as endpoint:
        status, body = _secondary(endpoint, ORDERS, "_FrontEnd_1", "_FrontEnd_2")
        assert (status, body["Error"]["Code"]) == (400, "FABRIC_E_CONSTRAINT_NOT_SATISFIED")
        assert _secondary(endpoint, ORDERS, "_FrontEnd_1", "_FrontEnd_2")[0] == 200
        sim.node_down("_FrontEnd_2")
        assert sim.moves[0].outcome == "failed" and "_FrontEnd_2" not in sim.placement()[ORDERS]
        _, node = _get(endpoint, "/Nodes/_FrontEnd_2")
        assert node["NodeStatus"] == "Down"
        status, body = _secondary(endpoint, ORDERS, "_FrontEnd_1", "_FrontEnd_2")
        assert (status, body["Error"]["Code"]) == (404, "FABRIC_E_NODE_NOT_FOUND")
    later = Simulator.from_dump(DUMP, **NO_FM)
    later.node_down("_FrontEnd_1", after_moves=1)
    with later.serve() as endpoint:
        assert _secondary(endpoint, "458e2db1-4db0-5d43-9802-c144df15a55c", "_BackEnd_1", "_FrontEnd_2")[0] == 200
        _, page = _get(endpoint, f"/Partitions/{ORDERS}/$/GetReplicas")
        assert {r["NodeName"]: r["ReplicaStatus"] for r in page["Items"]}["_FrontEnd_1"] == "Down"


def test_the_failover_manager_restores_a_down_replica_where_the_plan_says():
    sim = Simulator.from_dump(DUMP, **FAST)
    sim.follow_plan(
        {
            "Actions": [
                {
                    "Action": "AddSecondary",
                    "ServiceName": "fabric:/Shop/Cart",
                    "PartitionId": CART_DOWN,
                    "ReplicaId": None,
                    "SourceNode": None,
                    "TargetNode": "_BackEnd_1",
                }
            ]
        }  # fmt: skip
    )
    _wait(lambda: sim.placement()[CART_DOWN].get("_BackEnd_1") == "Secondary")
    assert sim.placement()[CART_DOWN] == {
        "_FrontEnd_0": "Primary",
        "_FrontEnd_1": "Secondary",
        "_BackEnd_1": "Secondary",
    }
    assert [m.kind for m in sim.failovers] == ["AddSecondary"] and sim.moves == []
    doc = sim.state_document()
    cart = next(p for p in doc["Partitions"] if p["PartitionId"] == CART_DOWN)
    assert sorted(r["NodeName"] for r in cart["Replicas"]) == ["_BackEnd_1", "_FrontEnd_0", "_FrontEnd_1"]


def test_the_failover_manager_promotes_when_the_primary_goes_down():
    sim = Simulator.from_dump(DUMP, **FAST)

    def last(pid: str, kind: str, candidates: list[str]) -> str:
        return candidates[-1]

    sim.failover_choice = last
    sim.node_down("_FrontEnd_0")
    _wait(lambda: sum(role == "Primary" for role in sim.placement()[ORDERS].values()) == 1)
    _wait(lambda: len([r for r in sim.placement()[ORDERS].values() if r != "InBuild"]) == 3)
    assert "_FrontEnd_0" not in sim.placement()[ORDERS]
    assert {m.kind for m in sim.failovers} >= {"PromoteSecondary", "AddSecondary"}


def test_busy_gateway_and_dropped_connection():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    sim.unavailable(times=1)
    sim.drop_connection(times=1)
    with sim.serve() as endpoint:
        with pytest.raises((http.client.RemoteDisconnected, urllib.error.URLError, ConnectionError)):
            _get(endpoint, "/Nodes")
        status, body = _get(endpoint, "/Nodes")
        assert (status, body["Error"]["Code"]) == (503, "FABRIC_E_SERVICE_TOO_BUSY")
        assert _get(endpoint, "/Nodes")[0] == 200
    assert [m for m, _ in sim.requests] == ["GET"] * 3 and sim.requests[0][1] == "/Nodes?api-version=6.0"


def test_plbjax_dump_of_the_simulator_imports_as_the_bundled_dump(tmp_path):
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        dump_main(
            ["--endpoint", endpoint, "--insecure", "-o", str(tmp_path / "d"), "--max-results", "2", "--replica-loads"]
        )
    assert import_dump(str(tmp_path / "d"))[0] == import_dump(str(DUMP))[0] == sim.state_document()


def test_plbjax_dump_of_a_secured_simulator_takes_the_client_certificate(tmp_path, pki):
    """https, the client's certificate presented and the gateway's verified against --ca."""
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve(cert=str(pki / "server.pem"), client_ca=str(pki / "ca.pem")) as endpoint:
        credentials = ["--cert", str(pki / "client.crt"), "--key", str(pki / "client.key"), "--ca", str(pki / "ca.pem")]
        dump_main(["--endpoint", endpoint, *credentials, "--replica-loads", "-o", str(tmp_path / "d")])
    assert import_dump(str(tmp_path / "d"))[0] == import_dump(str(DUMP))[0]


def _sfctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run([sys.executable, str(SFCTL), *args], capture_output=True, text=True, env=env, timeout=30)


def test_the_sfctl_stand_in(tmp_path):
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        assert _sfctl(tmp_path, "cluster", "select", "--endpoint", endpoint).returncode == 0
        assert f"endpoint = {endpoint}" in (tmp_path / ".sfctl" / "config").read_text()
        listed = _sfctl(tmp_path, "replica", "list", "--partition-id", ORDERS)
        page = json.loads(listed.stdout)
        assert page["continuationToken"] == "" and page["items"][0] == {
            "address": _items(json.loads((DUMP / f"replicas/{ORDERS}.json").read_text()))[0]["Address"],
            "healthState": "Ok",
            "lastInBuildDurationInSeconds": "12",
            "nodeName": "_FrontEnd_0",
            "replicaId": "133497100000000001",
            "replicaRole": "Primary",
            "replicaStatus": "Ready",
            "serviceKind": "Stateful",
        }
        moved = _sfctl(tmp_path, "partition", "move-secondary-replica", "--partition-id", ORDERS,
                       "--current-node-name", "_FrontEnd_1", "--new-node-name", "_FrontEnd_2")  # fmt: skip
        assert (moved.returncode, moved.stdout, moved.stderr) == (0, "", "")
        refused = _sfctl(
            tmp_path, "partition", "move-primary-replica", "--partition-id", ORDERS, "--node-name", "_FrontEnd_0"
        )
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.startswith("ERROR: (FABRIC_E_PRIMARY_ALREADY_EXISTS) Replica is already primary role.\n")
        assert _sfctl(tmp_path, "replica", "frobnicate").returncode == 2
    assert [m.kind for m in sim.moves] == ["MoveSecondary"]


def test_from_state_on_the_example_and_a_generated_cluster(tmp_path):
    sim = Simulator.from_state(EXAMPLE, **NO_FM)
    doc = sim.state_document()
    with sim.serve() as endpoint:
        dump_main(["--endpoint", endpoint, "--insecure", "-o", str(tmp_path / "d")])
    imported, _ = import_dump(str(tmp_path / "d"))
    assert [n["NodeName"] for n in imported["Nodes"]] == [n["NodeName"] for n in doc["Nodes"]]
    placed = sorted((r["NodeName"], r["Role"]) for p in doc["Partitions"] for r in p["Replicas"])
    assert sorted((r["NodeName"], r["Role"]) for p in imported["Partitions"] for r in p["Replicas"]) == placed
    from plbjax.sf import ClusterSpec

    big = Simulator.from_state(generate(0, ClusterSpec(nodes=40, services=20, partitions_per_service=16)), **NO_FM)
    replicas = sum(len(p) for p in big.placement().values())
    assert replicas > 900 and big.state_document()["Partitions"] == big.base["Partitions"]


# --- issue 59: a simulator that behaves like SF ---------------------------------------------------


def _sdk_model(name: str, body: Any) -> Any:
    """`body` deserialized into the azure-servicefabric model `name` (the test skips without the SDK)."""
    models = pytest.importorskip("azure.servicefabric.models")
    msrest = pytest.importorskip("msrest")
    classes = {k: v for k, v in vars(models).items() if isinstance(v, type)}
    return msrest.Deserializer(classes)(name, body)


def _fault(endpoint: str, **query: str) -> tuple[int, Any]:
    return _post(endpoint, "/$/SimulatorFault", **query)


GATED = {  # a cluster with node types, a Disabled node, capacities and a constrained service
    "NodeTypes": [
        {"Name": "Gateway", "PlacementProperties": {"Tier": "edge"}, "Capacities": {"CPU": 100}},
        {"Name": "FrontEnd", "Capacities": {"CPU": 100}},
    ],
    "Nodes": [
        {"NodeName": "g0", "NodeType": "Gateway", "UpgradeDomain": "0", "FaultDomain": "fd:/0"},
        {"NodeName": "g1", "NodeType": "Gateway", "UpgradeDomain": "1", "FaultDomain": "fd:/1"},
        {
            "NodeName": "g2",
            "NodeType": "Gateway",
            "UpgradeDomain": "2",
            "FaultDomain": "fd:/2",
            "NodeStatus": "Disabled",
        },
        {
            "NodeName": "g3",
            "NodeType": "Gateway",
            "UpgradeDomain": "0",
            "FaultDomain": "fd:/0",
            "Capacities": {"CPU": 5},
        },
        {"NodeName": "f0", "NodeType": "FrontEnd", "UpgradeDomain": "1", "FaultDomain": "fd:/1"},
        {"NodeName": "f1", "NodeType": "FrontEnd", "UpgradeDomain": "2", "FaultDomain": "fd:/2"},
    ],
    "Services": [
        {
            "ServiceName": "fabric:/App/Gw",
            "ServiceKind": "Stateless",
            "InstanceCount": -1,
            "PlacementConstraints": "NodeType == Gateway",
        },
        {
            "ServiceName": "fabric:/App/Db",
            "ServiceKind": "Stateful",
            "TargetReplicaSetSize": 3,
            "Metrics": [{"Name": "CPU", "Weight": "High", "PrimaryDefaultLoad": 20, "SecondaryDefaultLoad": 10}],
        },
    ],
    "Partitions": [
        {
            "ServiceName": "fabric:/App/Gw",
            "PartitionId": "gw-0",
            "Replicas": [{"ReplicaId": 1, "NodeName": "g0", "Role": "Instance"}],
        },
        {
            "ServiceName": "fabric:/App/Db",
            "PartitionId": "db-0",
            "Replicas": [
                {"ReplicaId": 2, "NodeName": "f0", "Role": "Primary"},
                {"ReplicaId": 3, "NodeName": "f1", "Role": "Secondary"},
            ],
        },
    ],
}


def test_unserved_routes_answer_sfs_error_json():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        for path in ("/$/GetFrobnication", "/Nodes/_FrontEnd_0/$/Frobnicate", f"/Partitions/{ORDERS}/$/Frob"):
            status, body = _get(endpoint, path)
            assert status == 404 and body["Error"]["Code"] == "FABRIC_E_INVALID_ADDRESS", path
            assert body["Error"]["Message"]
        status, body = _post(endpoint, "/$/Frobnicate", **{"api-version": "6.0"})
        assert (status, body["Error"]["Code"]) == (404, "FABRIC_E_INVALID_ADDRESS")
        request = urllib.request.Request(f"{endpoint}/Nodes/_FrontEnd_0?api-version=6.0", method="DELETE")
        with pytest.raises(urllib.error.HTTPError) as deleted:
            urllib.request.urlopen(request, timeout=10)
        assert json.loads(deleted.value.read())["Error"]["Code"] == "FABRIC_E_INVALID_ADDRESS"
        status, body = _get(endpoint, "/Nodes/_Nope/$/GetHealth")
        assert (status, body["Error"]["Code"]) == (404, "FABRIC_E_NODE_NOT_FOUND")
        status, body = _get(endpoint, "/Partitions/nope/$/GetHealth")
        assert (status, body["Error"]["Code"]) == (404, "FABRIC_E_PARTITION_NOT_FOUND")
        status, body = _get(endpoint, "/Applications/Nope/$/GetHealth")
        assert (status, body["Error"]["Code"]) == (404, "FABRIC_E_APPLICATION_NOT_FOUND")


def test_continuation_tokens_are_opaque_and_a_bad_one_is_a_400():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        status, page = _get(endpoint, "/Nodes?MaxResults=2")
        token = page["ContinuationToken"]
        assert status == 200 and token and not token.isdigit()
        for bad in ("garbage", "2", "sim-page-999", "sim-page-x"):
            status, body = _get(endpoint, f"/Nodes?ContinuationToken={bad}")
            assert (status, body["Error"]["Code"]) == (400, "E_INVALIDARG"), bad
        status, body = _get(endpoint, "/Nodes?MaxResults=two")
        assert (status, body["Error"]["Code"]) == (400, "E_INVALIDARG")
        assert _get(endpoint, f"/Nodes?ContinuationToken={token}")[0] == 200  # the connection lives on


def test_health_upgrade_version_load_and_info_routes_answer_in_sfs_shapes():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        answers = {}
        for model, path in (
            ("ClusterHealth", "/$/GetClusterHealth"),
            ("NodeHealth", "/Nodes/_FrontEnd_0/$/GetHealth"),
            ("PartitionHealth", f"/Partitions/{ORDERS}/$/GetHealth"),
            ("ApplicationHealth", "/Applications/Shop/$/GetHealth"),
            ("ServiceHealth", "/Services/Shop~Orders/$/GetHealth"),
            ("ClusterUpgradeProgressObject", "/$/GetUpgradeProgress"),
            ("ClusterVersion", "/$/GetClusterVersion"),
            ("ClusterLoadInfo", "/$/GetLoadInformation"),
            ("NodeLoadInfo", "/Nodes/_FrontEnd_0/$/GetLoadInformation"),
            ("ApplicationInfo", "/Applications/Shop"),
            ("ServiceInfo", "/Applications/Shop/$/GetServices/Shop~Orders"),
            ("ServiceInfo", "/Applications/Shop/$/GetServices/Shop~Web"),
            ("ReplicaInfo", f"/Partitions/{ORDERS}/$/GetReplicas/133497100000000001"),
            ("ReplicaHealth", f"/Partitions/{ORDERS}/$/GetReplicas/133497100000000001/$/GetHealth"),
            ("ApplicationUpgradeProgressInfo", "/Applications/Shop/$/GetUpgradeProgress"),
        ):
            status, body = _get(endpoint, path)
            assert status == 200 and isinstance(body, dict), path
            answers[path] = (model, body)
        assert _get(endpoint, "/Applications/Nope") == (204, None)
        assert _get(endpoint, "/Applications/Shop/$/GetServices/Shop~Nope") == (204, None)
        assert _get(endpoint, f"/Partitions/{ORDERS}/$/GetReplicas/1") == (204, None)
    cluster = answers["/$/GetClusterHealth"][1]
    assert cluster["AggregatedHealthState"] == "Error"  # _BackEnd_2 is Down
    assert {n["Name"]: n["AggregatedHealthState"] for n in cluster["NodeHealthStates"]}["_BackEnd_2"] == "Error"
    assert answers["/$/GetUpgradeProgress"][1]["UpgradeState"] == "RollingForwardCompleted"
    assert answers["/$/GetClusterVersion"][1]["Version"]
    assert answers[f"/Partitions/{ORDERS}/$/GetHealth"][1]["AggregatedHealthState"] == "Ok"
    assert answers["/Applications/Shop/$/GetServices/Shop~Web"][1]["ServiceKind"] == "Stateless"
    assert answers[f"/Partitions/{ORDERS}/$/GetReplicas/133497100000000001"][1]["ReplicaRole"] == "Primary"
    metrics = {m["Name"] for m in answers["/$/GetLoadInformation"][1]["LoadMetricInformation"]}
    assert "CPU" in metrics
    for path, (model, body) in answers.items():  # the real SDK's models take every answer
        assert _sdk_model(model, body) is not None, path


def _unknown_keys(model: Any, raw: Any, path: str = "$") -> list[str]:
    """The keys of SF's answer `raw` that the SDK model read from it has no attribute for (a key SF does
    not write that way: its value lost on every real client), by JSON path."""
    from msrest.serialization import Model

    if isinstance(model, list) and isinstance(raw, list):
        return [k for i, (m, r) in enumerate(zip(model, raw)) for k in _unknown_keys(m, r, f"{path}[{i}]")]
    if not isinstance(model, Model) or not isinstance(raw, dict):
        return []
    attrs = {spec["key"]: name for name, spec in model._attribute_map.items()}  # pyright: ignore[reportAttributeAccessIssue]
    out = [f"{path}.{k} ({type(model).__name__})" for k in raw if k not in attrs]
    return out + [
        k
        for key, v in raw.items()
        if key in attrs
        for k in _unknown_keys(getattr(model, attrs[key]), v, f"{path}.{key}")
    ]


class _Sdk:
    """The real azure-servicefabric client on the simulator: each answer read into its model, every key
    of it known to the model and no required field missing (the test skips without the SDK)."""

    def __init__(self, endpoint: str) -> None:
        sdk = pytest.importorskip("azure.servicefabric")
        auth = pytest.importorskip("msrest.authentication")
        self.client = sdk.ServiceFabricClientAPIs(auth.Authentication(), endpoint)
        self.read: list[str] = []

    def __call__(self, call: str, *args: str) -> Any:
        answer = getattr(self.client, call)(*args, raw=True)
        raw, model = answer.response.json(), answer.output
        said, unknown = f"{call}{args}", _unknown_keys(model, raw)
        assert model is not None and unknown == [], (said, unknown)
        assert [e for e in model.validate() if e.rule == "required"] == [], said
        self.read.append(call)
        return model


@pytest.mark.parametrize("source", ["dump", "state"])
def test_every_route_the_simulator_serves_reads_through_the_real_sdk(source):
    """Cluster, nodes, applications, services, partitions, replicas: each list and item, its health, load,
    upgrade and description, walked as a client walks them, each answer in its SDK model (the kinds typed:
    a stateless service's partitions and instances read as stateless)."""
    sim = Simulator.from_dump(DUMP, **NO_FM) if source == "dump" else Simulator.from_state(EXAMPLE, **NO_FM)
    models = pytest.importorskip("azure.servicefabric.models")
    with sim.serve() as endpoint:
        sdk = _Sdk(endpoint)
        for call in ("get_cluster_health", "get_cluster_upgrade_progress", "get_cluster_version", "get_cluster_load",
                     "get_cluster_manifest"):  # fmt: skip
            sdk(call)
        nodes = sdk("get_node_info_list").items
        assert [n.name for n in nodes] == list(sim.cluster.nodes)
        for node in nodes:
            assert sdk("get_node_info", node.name).node_status == sim.cluster.nodes[node.name]
            assert sdk("get_node_load_info", node.name).node_name == node.name
            assert sdk("get_node_health", node.name).aggregated_health_state
        replicas = 0
        for app in sdk("get_application_info_list").items:
            assert sdk("get_application_info", app.id).name == app.name
            sdk("get_application_health", app.id)
            sdk("get_application_upgrade", app.id)
            for service in sdk("get_service_info_list", app.id).items:
                stateless = service.service_kind == "Stateless"
                kind = "Stateless" if stateless else "Stateful"
                assert isinstance(sdk("get_service_info", app.id, service.id), getattr(models, f"{kind}ServiceInfo"))
                assert sdk("get_service_description", service.id).service_name == service.name
                sdk("get_service_health", service.id)
                for part in sdk("get_partition_info_list", service.id).items:
                    pid = part.partition_information.id
                    assert isinstance(sdk("get_partition_info", pid), getattr(models, f"{kind}ServicePartitionInfo"))
                    assert sdk("get_partition_health", pid).partition_id == pid
                    assert sdk("get_partition_load_information", pid).partition_id == pid
                    listed = sdk("get_replica_info_list", pid).items
                    cls = models.StatelessServiceInstanceInfo if stateless else models.StatefulServiceReplicaInfo
                    assert listed and all(isinstance(r, cls) for r in listed)
                    for replica in listed:
                        rid = replica.instance_id if stateless else replica.replica_id
                        assert rid and sdk("get_replica_info", pid, rid).node_name == replica.node_name
                        sdk("get_replica_health", pid, rid)
                        if sim.cluster.nodes[replica.node_name] != "Down":  # SF: no detail of a replica on a Down node
                            sdk("get_deployed_service_replica_detail_info", replica.node_name, pid, rid)
                        replicas += 1
        assert replicas == sum(len(p) for p in sim.placement().values()) + (source == "dump")  # + the Down one
        with pytest.raises(models.FabricErrorException) as missing:
            sdk.client.get_partition_health("nope")
        assert missing.value.error.error.code == "FABRIC_E_PARTITION_NOT_FOUND"
    assert len(set(sdk.read)) == 25


def test_injected_faults_partition_error_node_warning_upgrade_and_sfs_balancer():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    with sim.serve() as endpoint:
        assert _fault(endpoint, Kind="Health", Entity="partition", Name=ORDERS, HealthState="Error") == (200, None)
        assert _fault(endpoint, Kind="Health", Entity="node", Name="_FrontEnd_1", HealthState="Warning")[0] == 200
        assert _get(endpoint, f"/Partitions/{ORDERS}/$/GetHealth")[1]["AggregatedHealthState"] == "Error"
        assert _get(endpoint, "/Services/Shop~Orders/$/GetHealth")[1]["AggregatedHealthState"] == "Error"
        assert _get(endpoint, f"/Partitions/{ORDERS}")[1]["HealthState"] == "Error"
        listed = _get(endpoint, "/Services/Shop~Orders/$/GetPartitions")[1]["Items"]
        assert [p["HealthState"] for p in listed if p["PartitionInformation"]["Id"] == ORDERS] == ["Error"]
        assert _get(endpoint, "/Applications/Shop/$/GetHealth")[1]["AggregatedHealthState"] == "Error"
        node = _get(endpoint, "/Nodes/_FrontEnd_1/$/GetHealth")[1]
        assert node["AggregatedHealthState"] == "Warning" and node["HealthEvents"][0]["HealthState"] == "Warning"
        nodes = {n["Name"]: n for n in _get(endpoint, "/Nodes")[1]["Items"]}
        assert (nodes["_FrontEnd_1"]["HealthState"], nodes["_FrontEnd_1"]["NodeStatus"]) == ("Warning", "Up")
        assert _get(endpoint, "/Applications/Shop/$/GetUpgradeProgress")[1]["UpgradeState"] == "RollingForwardCompleted"
        assert _fault(endpoint, Kind="Upgrade", Application="Shop")[0] == 200
        assert (
            _get(endpoint, "/Applications/Shop/$/GetUpgradeProgress")[1]["UpgradeState"] == "RollingForwardInProgress"
        )
        assert _get(endpoint, "/$/GetUpgradeProgress")[1]["UpgradeState"] == "RollingForwardCompleted"
        assert _fault(endpoint, Kind="Upgrade")[0] == 200
        progress = _get(endpoint, "/$/GetUpgradeProgress")[1]
        assert progress["UpgradeState"] == "RollingForwardInProgress"
        assert [d["State"] for d in progress["UpgradeDomains"]][0] == "InProgress"
        moved = _fault(endpoint, Kind="BalancerMove", PartitionId=ORDERS, CurrentNodeName="_BackEnd_0",
                       NewNodeName="_BackEnd_1")  # fmt: skip
        assert moved == (200, None)
        nodes = {r["NodeName"] for r in _get(endpoint, f"/Partitions/{ORDERS}/$/GetReplicas")[1]["Items"]}
        assert nodes == {"_FrontEnd_0", "_FrontEnd_1", "_BackEnd_1"}
        for bad in (
            {"Kind": "Health", "Entity": "planet", "Name": "x", "HealthState": "Error"},
            {"Kind": "Health", "Entity": "node", "Name": "_FrontEnd_1", "HealthState": "Sad"},
            {"Kind": "BalancerMove", "PartitionId": ORDERS, "CurrentNodeName": "_Nope", "NewNodeName": "_BackEnd_0"},
            {"Kind": "Frobnicate"},
        ):
            status, body = _fault(endpoint, **bad)
            assert (status, body["Error"]["Code"]) == (400, "E_INVALIDARG"), bad
    assert [(m.source, m.target) for m in sim.failovers] == [("_BackEnd_0", "_BackEnd_1")]
    assert sim.moves == []  # SF's balancer's move is no client move
    sim.health("partition", ORDERS, "Ok")
    sim.upgrade(seconds=0.0)
    with sim.serve() as endpoint:
        assert _get(endpoint, f"/Partitions/{ORDERS}/$/GetHealth")[1]["AggregatedHealthState"] == "Ok"


def test_node_loads_follow_the_replicas_as_they_move():
    sim = Simulator.from_dump(DUMP, **NO_FM)

    def cpu(endpoint: str, node: str) -> float:
        rows = _get(endpoint, f"/Nodes/{node}/$/GetLoadInformation")[1]["NodeLoadMetricInformation"]
        return next(r["CurrentNodeLoad"] for r in rows if r["Name"] == "CPU")

    with sim.serve() as endpoint:
        before = {n: cpu(endpoint, n) for n in ("_BackEnd_0", "_BackEnd_1")}
        load = sim.cluster.partitions[ORDERS].replicas[2].loads["CPU"]
        assert sim.cluster.partitions[ORDERS].replicas[2].node == "_BackEnd_0" and load > 0
        assert _secondary(endpoint, ORDERS, "_BackEnd_0", "_BackEnd_1")[0] == 200
        _wait(lambda: sim.moves[-1].outcome == "done")
        after = {n: cpu(endpoint, n) for n in ("_BackEnd_0", "_BackEnd_1")}
        cluster_cpu = next(
            m for m in _get(endpoint, "/$/GetLoadInformation")[1]["LoadMetricInformation"] if m["Name"] == "CPU"
        )
    assert after == {"_BackEnd_0": before["_BackEnd_0"] - load, "_BackEnd_1": before["_BackEnd_1"] + load}
    assert sim.node_loads("_BackEnd_1")["CPU"] - sim.cluster.baseline["_BackEnd_1"]["CPU"] == load
    assert cluster_cpu["CurrentClusterLoad"] > 0


def test_the_failover_manager_places_within_constraints_node_types_capacity_and_not_on_disabled_nodes():
    sim = Simulator.from_state(GATED, **FAST)
    with sim.serve() as endpoint:
        assert _get(endpoint, "/Nodes/g2")[1]["NodeStatus"] == "Disabled"
        _wait(lambda: len(sim.placement()["gw-0"]) == 3 and len(sim.placement()["db-0"]) == 3)
        time.sleep(0.3)  # a few more FM passes (20x clock): nothing else is added
        placement = sim.placement()
    # -1 instances: every Up Gateway node (g2 is Disabled), none on FrontEnd nodes
    assert placement["gw-0"] == {"g0": "Instance", "g1": "Instance", "g3": "Instance"}
    # the third Db replica needs 10 CPU: not on g3 (capacity 5), not on Disabled g2; g0 or g1
    db = placement["db-0"]
    assert set(db) - {"f0", "f1"} <= {"g0", "g1"} and db["f0"] == "Primary"
    assert all(m.target not in ("f0", "f1", "g2") for m in sim.failovers if m.partition_id == "gw-0")
    assert sim.node_loads("f0") == {"CPU": 20.0} and sim.node_loads("f1") == {"CPU": 10.0}


def test_partitions_keep_their_ids_and_a_stateless_replica_is_stateless():
    sim = Simulator.from_state(EXAMPLE, **NO_FM)
    with sim.serve() as endpoint:
        status, body = _get(endpoint, "/Partitions/web-0")
        assert status == 200 and body["PartitionInformation"]["Id"] == "web-0"
        replicas = _get(endpoint, "/Partitions/web-0/$/GetReplicas")[1]["Items"]
        first = replicas[0]
        detail = f"/Nodes/{first['NodeName']}/$/GetPartitions/web-0/$/GetReplicas/{first['InstanceId']}/$/GetDetail"
        status, body = _get(endpoint, detail)
        assert status == 200 and body["ServiceKind"] == "Stateless" and body["InstanceId"] == first["InstanceId"]
        assert _get(endpoint, "/Partitions/1")[0] == 200
    assert {"0", "1", "web-0"} <= set(sim.placement())
    # PartitionId 0 is fabric:/Shop/Orders' and another service's in the example: SF's ids are unique, so the
    # later one gets a GUID derived from its service and id
    assert sim.keys["0"] == ("fabric:/Shop/Orders", 0)
    assert sum(pid == 0 for _, pid in sim.keys.values()) == 2 and len(sim.placement()) == len(sim.keys)


def test_the_help_documents_the_fault_route():
    out = subprocess.run(
        [sys.executable, "-m", "plbjax.sf.live.simulator", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "SimulatorFault" in out and "BalancerMove" in out


def test_faults_scheduled_for_the_nth_move_fire_when_it_starts():
    sim = Simulator.from_dump(DUMP, **NO_FM)
    sim.health("partition", WEB, "Error", after_moves=1)
    sim.health("node", "_BackEnd_1", "Warning", after_moves=2)
    sim.upgrade(after_moves=2)
    sim.balancer_move(ORDERS, "_BackEnd_0", "_FrontEnd_2", after_moves=1)
    sim.balancer_move(ORDERS, "_Nope", "_FrontEnd_2", after_moves=1)  # no longer possible then: skipped
    with sim.serve() as endpoint:
        assert _get(endpoint, f"/Partitions/{WEB}/$/GetHealth")[1]["AggregatedHealthState"] == "Ok"
        assert _secondary(endpoint, ORDERS, "_FrontEnd_1", "_BackEnd_1")[0] == 200
        assert _get(endpoint, f"/Partitions/{WEB}/$/GetHealth")[1]["AggregatedHealthState"] == "Error"
        assert _get(endpoint, "/Nodes/_BackEnd_1/$/GetHealth")[1]["AggregatedHealthState"] == "Ok"
        assert _get(endpoint, "/$/GetUpgradeProgress")[1]["UpgradeState"] == "RollingForwardCompleted"
        _wait(lambda: sim.moves[-1].outcome == "done")
        status, body = _post(
            endpoint,
            f"/Services/Shop~Web/$/GetPartitions/{WEB}/$/MoveInstance",
            **{"api-version": "8.0", "CurrentNodeName": "_FrontEnd_0", "NewNodeName": "_BackEnd_0"},
        )
        assert status == 200, body
        assert _get(endpoint, "/Nodes/_BackEnd_1/$/GetHealth")[1]["AggregatedHealthState"] == "Warning"
        assert _get(endpoint, "/$/GetUpgradeProgress")[1]["UpgradeState"] == "RollingForwardInProgress"
    assert [(m.source, m.target) for m in sim.failovers] == [("_BackEnd_0", "_FrontEnd_2")]
