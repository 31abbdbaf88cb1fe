"""plbjax-apply against the SF simulator: plans carried out, faults met, nothing moved twice."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from planned import DUMPS, plan_state

from plbjax.sf import Action, ActionKind
from plbjax.sf.live.apply.command import main, state_bases
from plbjax.sf.live.apply.executor import Executor, compose
from plbjax.sf.live.apply.journal import Journal, Status
from plbjax.sf.live.apply.steps import action_loads, order, read_plan
from plbjax.sf.live.rest import Client, Cluster, Unanswered
from plbjax.sf.live.simulator import Simulator

COMMANDS = ("MovePrimary", "MoveSecondary", "MoveInstance", "SwapPrimarySecondary")


def _copy(plan: Path, tmp_path: Path) -> Path:
    """The plan and its state in a fresh directory (so each test has its own journal)."""
    for name in ("plan.json", "state.json"):
        (tmp_path / name).write_text((plan.parent / name).read_text())
    return tmp_path / "plan.json"


def _target(plan: Path) -> dict[str, dict[str, str]]:
    """Partition -> node -> role once the plan is carried out, from the state it was made from."""
    actions = read_plan(plan).actions
    bases = state_bases(str(plan.parent / "state.json"))
    return {pid: compose(base, [a for a in actions if str(a.partition) == pid]) for pid, base in bases.items()}


def _apply(plan: Path, endpoint: str, *extra: str, state: bool = True) -> int:
    args = [str(plan), "--endpoint", endpoint, "--insecure", "--poll", "0.05", "--no-progress", *extra]
    return _exit_status(args + (["--state", str(plan.parent / "state.json")] if state else []))


def _exit_status(args: list[str]) -> int:
    """plbjax-apply's exit status for `args`."""
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _commands(plan: Path) -> list[dict]:
    return [a for a in json.loads(plan.read_text())["Actions"] if a["Action"] in COMMANDS]


def _twice(sim: Simulator) -> list:
    """Moves the simulator accepted more than once."""
    seen = Counter((m.kind, m.partition_id, m.source, m.target) for m in sim.moves)
    return [m for m, n in seen.items() if n > 1]


def _sim(plan: Path, dump: str = "small", **options) -> Simulator:
    sim = Simulator.from_dump(DUMPS / dump, **({"build_seconds": 2.0, "clock_rate": 20.0} | options))
    sim.follow_plan(json.loads(plan.read_text()))
    return sim


def test_bundled_dump_plan_is_carried_out_and_verified(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    with sim.serve() as url:
        assert _apply(plan, url) == 0
        assert sim.placement() == _target(plan)
    err = capsys.readouterr().err
    steps = len(json.loads(plan.read_text())["Actions"])
    assert "verification: as planned" in err and f"{steps} done, 0 skipped, 0 failed, 0 timed out of {steps}" in err
    assert len(sim.moves) == len(_commands(plan)) and not _twice(sim)
    assert all(line[:20].endswith("Z") and line[10] == "T" for line in err.splitlines())
    journal = json.loads((tmp_path / "plan.json.journal.json").read_text())
    assert {s["Status"] for s in journal["Steps"]} == {"done"}


def test_refused_move_fails_its_dependents_are_skipped_the_others_done(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    actions = json.loads(plan.read_text())["Actions"]
    swap = next(
        a for a in actions if a["Action"] == "SwapPrimarySecondary" and a["ServiceName"] == "fabric:/Shop/Orders"
    )
    sim = _sim(plan)
    sim.refuse_next(partition_id=swap["PartitionId"], code="FABRIC_E_INVALID_REPLICA_STATE")
    with sim.serve() as url:
        assert _apply(plan, url) == 4
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if ": failed: " in line]
    assert len(failed) == 1 and "SwapPrimarySecondary" in failed[0] and swap["PartitionId"] in failed[0]
    assert "FABRIC_E_INVALID_REPLICA_STATE" in failed[0] and swap["SourceNode"] in failed[0]
    k = int(failed[0].split("step ")[1].split("/")[0])
    skipped = [line for line in err.splitlines() if f": skipped: needs step {k}, failed" in line]
    assert skipped, "the move of the replica the swap demotes needs the swap"
    journal = json.loads((tmp_path / "plan.json.journal.json").read_text())["Steps"]
    statuses = Counter(s["Status"] for s in journal)
    assert (
        statuses["failed"] == 1 and statuses["done"] >= 6 and statuses["done"] + statuses["skipped"] == len(actions) - 1
    )
    assert not _twice(sim)


def test_node_down_mid_plan_skips_the_steps_onto_it(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    sim.node_down("_FrontEnd_2", after_moves=2)
    with sim.serve() as url:
        code = _apply(plan, url, "--step-timeout", "2")
    err = capsys.readouterr().err
    assert code in (3, 4) and "node _FrontEnd_2 is Down, not Up" in err
    down = min(m.started for m in sim.moves[1:2])
    assert not [m for m in sim.moves if m.target == "_FrontEnd_2" and m.started > down + 1.0]
    assert "verification:" in err and not _twice(sim)


def test_a_step_that_never_finishes_times_out(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    move = next(a for a in _commands(plan) if a["ServiceName"] == "fabric:/Shop/Catalog")
    sim = _sim(plan)
    sim.slow(move["PartitionId"], float("inf"))
    with sim.serve() as url:
        assert _apply(plan, url, "--step-timeout", "1") == 3
    err = capsys.readouterr().err
    assert f"partition {move['PartitionId']} {move['SourceNode']} -> {move['TargetNode']}: timed-out" in err


class _Lossy(Cluster):
    """A cluster whose move answers are lost: `after` sent (the move is made), or not sent at all."""

    def __init__(self, client: Client, poll: float, sent: bool) -> None:
        super().__init__(client, poll)
        self.sent, self.lost = sent, set()

    def move(self, action: Action) -> None:
        key = (action.partition, action.kind, action.target)
        if key in self.lost:
            return super().move(action)
        self.lost.add(key)
        if self.sent:
            super().move(action)
        raise Unanswered("POST: connection dropped")


@pytest.mark.parametrize("sent", [True, False])
def test_a_lost_answer_is_looked_for_and_no_move_is_made_twice(small_dump_plan, tmp_path, sent):
    plan = _copy(small_dump_plan, tmp_path)
    read = read_plan(plan)
    steps = order(read.actions, read.nodes, action_loads(tmp_path / "state.json", read.actions))
    sim = _sim(plan)
    with sim.serve() as url:
        cluster = _Lossy(Client(url, insecure=True, retries=3, backoff=0.05), 0.05, sent)
        journal = Journal.open(tmp_path / "j.json", str(plan), url, read.actions)
        ex = Executor(
            steps, cluster, journal, lambda line: None, per_node=2, max_in_flight=20, step_timeout=60, poll=0.05
        )
        ex.run()
        assert ex.counts()[Status.DONE] == len(steps)
        assert sim.placement() == _target(plan)
    assert len(sim.moves) == len(_commands(plan)) and not _twice(sim)
    attempts = [e["Attempts"] for e in json.loads((tmp_path / "j.json").read_text())["Steps"] if e["Attempts"]]
    assert attempts == [1] * len(attempts) if sent else attempts == [2] * len(attempts)


def test_busy_gateway_and_dropped_connections_are_recovered(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    stop = threading.Event()

    def faults() -> None:  # each time one of the first moves is sent, the next request meets a fault
        seen = 0
        while not stop.is_set():
            posts = sum(method == "POST" for method, _ in sim.requests)
            if posts > seen and seen < 4:
                seen = posts
                sim.drop_connection(1) if posts % 2 else sim.unavailable(1)
            time.sleep(0.005)

    thread = threading.Thread(target=faults, daemon=True)
    with sim.serve() as url:
        sim.unavailable(2)
        sim.drop_connection(1)
        thread.start()
        try:
            assert _apply(plan, url) == 0
        finally:
            stop.set()
            thread.join()
        assert sim.placement() == _target(plan)
    assert not _twice(sim) and len(sim.moves) == len(_commands(plan))


def test_interrupted_run_resumes_and_moves_nothing_twice(small_dump_plan, tmp_path):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan, clock_rate=2.0)
    command = ["plbjax-apply", str(plan), "--state", str(tmp_path / "state.json"), "--insecure", "--poll", "0.05"]
    with sim.serve() as url:
        proc = subprocess.Popen([*command, "--endpoint", url], stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if ": started" in line:
                proc.send_signal(signal.SIGINT)
                break
        lines += proc.stderr.readlines()
        assert proc.wait(timeout=60) == 130, "".join(lines)
        journal = json.loads((tmp_path / "plan.json.journal.json").read_text())["Steps"]
        assert "done" in {s["Status"] for s in journal} and "pending" in {s["Status"] for s in journal}
        first = len(sim.moves)
        again = subprocess.run(
            [*command, "--endpoint", url, "--no-progress"], capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 0, again.stderr
        assert sim.placement() == _target(plan)
    assert 0 < first < len(sim.moves) == len(_commands(plan)) and not _twice(sim)
    assert "SIGINT: no new step" in "".join(lines)


def test_journal_of_another_plan_is_refused(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    other = tmp_path / "other.json"
    document = json.loads(plan.read_text())
    document["Actions"] = document["Actions"][:3]
    other.write_text(json.dumps(document))
    sim = _sim(plan)
    with sim.serve() as url:
        journal = str(tmp_path / "j.json")
        _apply(other, url, "--journal", journal)
        capsys.readouterr()
        assert _apply(plan, url, "--journal", journal) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("plbjax-apply: --journal: ") and "another plan" in err[0]


def test_dry_run_sends_nothing_and_lists_every_step(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    with sim.serve() as url:
        assert _apply(plan, url, "--dry-run") == 0
    out = capsys.readouterr().out.splitlines()
    steps = len(json.loads(plan.read_text())["Actions"])
    assert len(out) == steps and all(line.startswith(f"step {k + 1}/{steps}: ") for k, line in enumerate(out))
    assert any("needs step" in line and "(the partition's previous step)" in line for line in out)
    assert any("counts against no node (the Failover Manager makes it" in line for line in out)
    assert any("; now: may start" in line for line in out)
    assert {method for method, _ in sim.requests} == {"GET"} and not sim.moves


def test_verify_lists_a_manual_move(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    with sim.serve() as url:
        assert _apply(plan, url) == 0
        capsys.readouterr()
        assert _apply(plan, url, "--verify") == 0
        assert capsys.readouterr().out.strip() == "the cluster matches the plan's target"
        move = next(a for a in _commands(plan) if a["ServiceName"] == "fabric:/Shop/Catalog")
        client = Client(url, insecure=True)
        path = f"/Partitions/{move['PartitionId']}/$/MoveSecondaryReplica"
        client.post(path, "6.5", CurrentNodeName=move["TargetNode"], NewNodeName=move["SourceNode"])
        while "InBuild" in sim.placement()[move["PartitionId"]].values():
            time.sleep(0.02)
        assert _apply(plan, url, "--verify") == 1
    out = capsys.readouterr().out.splitlines()
    assert any(move["PartitionId"] in line and move["TargetNode"] in line for line in out), out


def synthetic_plan(state: dict, moves: int, seed: int = 0) -> dict:
    """A plan of `moves` movements (swaps, secondary moves, instance moves; at most two a partition) on
    `state`, without adds or drops, and without capacities (no step waits for room)."""
    rng = random.Random(seed)
    nodes = [n["NodeName"] for n in state["Nodes"]]
    kinds = {s["ServiceName"]: s["ServiceKind"] for s in state["Services"]}
    actions = []
    for part in rng.sample(state["Partitions"], len(state["Partitions"])):
        where = {r["NodeName"]: dict(r) for r in part["Replicas"] if r.get("NodeName")}
        for _ in range(2):
            if len(actions) >= moves:
                break
            actions.append(_movement(rng, part, where, nodes, kinds[part["ServiceName"]] == "Stateless"))
    assert len(actions) == moves, "the state has too few partitions"
    return {"Actions": actions, "Nodes": []}


def _movement(rng: random.Random, part: dict, where: dict, nodes: list[str], stateless: bool) -> dict:
    """One movement of the partition's replicas (`where`: node -> replica, updated)."""
    free = [n for n in nodes if n not in where]
    src = rng.choice(sorted(where))
    replica = where[src]
    role = replica["Role"]
    base = {"ServiceName": part["ServiceName"], "PartitionId": part["PartitionId"], "Phase": "Balancing", "Reason": ""}
    if role == "Primary" and rng.random() < 0.5 and len(where) > 1:
        dst = rng.choice([n for n in where if n != src])
        where[src]["Role"], where[dst]["Role"] = where[dst]["Role"], "Primary"
        return base | {
            "ReplicaId": replica["ReplicaId"],
            "Action": "SwapPrimarySecondary",
            "SourceNode": src,
            "TargetNode": dst,
        }
    dst = rng.choice(free)
    where[dst] = where.pop(src)
    kind = "MoveInstance" if stateless else f"Move{role}"
    return base | {"ReplicaId": replica["ReplicaId"], "Action": kind, "SourceNode": src, "TargetNode": dst}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A generated cluster of 40 nodes and about 1,000 replicas."""
    work = tmp_path_factory.mktemp("generated")
    out = work / "state.json"
    command = ["plbjax-generate", "--nodes", "40", "--services", "20", "--partitions-per-service", "17", "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    state = json.loads(out.read_text())
    assert 950 <= sum(len(p["Replicas"]) for p in state["Partitions"]) <= 1100
    return out


def test_five_hundred_moves_run_concurrently_within_the_limits(generated, tmp_path, capsys):
    state = json.loads(generated.read_text())
    (tmp_path / "state.json").write_text(generated.read_text())
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(synthetic_plan(state, 500)))
    # 3 simulated seconds a wall second: the polls' wall time, which the simulated clock counts too, stays
    # well inside the bound on a machine four times slower than this one
    sim = Simulator.from_state(state, build_seconds=2.0, clock_rate=3.0, swap_seconds=2.0)
    with sim.serve() as url:
        began = sim.now()
        assert _apply(plan, url, "--per-node", "2", "--max-in-flight", "20") == 0
        makespan = sim.now() - began
        assert sim.placement() == _target(plan)
    serial = sum(m.finished - m.started for m in sim.moves if m.finished is not None)
    assert len(sim.moves) == 500 and not _twice(sim)
    assert makespan <= serial / 4, (makespan, serial)
    assert sim.max_concurrent_per_node() <= 2 and sim.max_concurrent() <= 20


@pytest.mark.slow
def test_paged_dump_plan_is_carried_out(paged_dump_plan, tmp_path):
    plan = _copy(paged_dump_plan, tmp_path)
    sim = _sim(plan, "paged")
    with sim.serve() as url:
        assert _apply(plan, url, "--step-timeout", "30") == 0
        assert sim.placement() == _target(plan)
    assert not _twice(sim)


@pytest.mark.slow
def test_generated_cluster_plan_is_carried_out(generated, tmp_path):
    (tmp_path / "state.json").write_text(generated.read_text())
    plan = plan_state(tmp_path, steps=3000)
    assert _commands(plan), "the plan should move something"
    sim = Simulator.from_state(generated, build_seconds=2.0, clock_rate=20.0)
    sim.follow_plan(json.loads(plan.read_text()))
    with sim.serve() as url:
        assert _apply(plan, url, "--step-timeout", "30") == 0
        assert sim.placement() == _target(plan)
    assert not _twice(sim)


def test_bad_input_is_one_line_and_exit_2(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    assert _apply(tmp_path / "state.json", "http://127.0.0.1:9") == 2
    assert _apply(plan, "https://127.0.0.1:9", state=False) == 2
    assert _apply(plan, "http://127.0.0.1:9", "--per-node", "0") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("plbjax-apply: ") for line in err), err
    assert "not a plan" in err[0] and "cannot read the cluster" in err[1] and "--per-node" in err[2]


def test_help_names_exit_statuses_and_examples():
    out = subprocess.run([sys.executable, "-m", "plbjax.sf.live.apply", "--help"], capture_output=True, text=True)
    assert "exit status: 0" in out.stdout and out.stdout.count("plbjax-apply plan.json") == 3


def test_a_secured_cluster_takes_the_client_certificate_and_refuses_none(small_dump_plan, tmp_path, pki, capsys):
    """https with a client certificate and the cluster verified against --ca, as sfctl and curl take them;
    without the certificate the gateway refuses the connection: exit 2 naming the endpoint."""
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    common = [str(plan), "--state", str(plan.parent / "state.json"), "--poll", "0.05", "--no-progress"]
    with sim.serve(cert=str(pki / "server.pem"), client_ca=str(pki / "ca.pem")) as url:
        assert url.startswith("https://")
        assert _exit_status([*common, "--endpoint", url, "--ca", str(pki / "ca.pem")]) == 2
        assert f"--endpoint: {url}" in capsys.readouterr().err
        certificate = ["--cert", str(pki / "client.crt"), "--key", str(pki / "client.key"), "--ca", str(pki / "ca.pem")]
        assert _exit_status([*common, "--endpoint", url, *certificate]) == 0, capsys.readouterr().err
        assert sim.placement() == _target(plan)


# --- preflight: the cluster compared with the plan's input before the first step -------------------


def _partitions(plan: Path) -> int:
    return len({a["PartitionId"] for a in json.loads(plan.read_text())["Actions"]})


def _move_by_hand(sim: Simulator, url: str, move: dict, avoid: set[str]) -> str:
    """The replica `move` would move, moved by hand to another node (of the target's type, if one is free);
    that node, once the move is done."""
    pid = move["PartitionId"]
    held = sim.placement()[pid]
    nodes = [n["Name"] for n in json.loads(DUMPS.joinpath("small", "nodes.json").read_text())["Items"]]
    free = [n for n in nodes if n not in held and n != move["TargetNode"] and n not in avoid]
    kind = move["Action"]
    other = next((n for n in free if n.rsplit("_", 1)[0] == move["TargetNode"].rsplit("_", 1)[0]), free[0])
    action = Action(move["ServiceName"], pid, None, ActionKind(kind), move["SourceNode"], other)
    Cluster(Client(url, insecure=True), 0.05).move(action)
    deadline = time.monotonic() + 60
    while "InBuild" in sim.placement()[pid].values() or move["SourceNode"] in sim.placement()[pid]:
        assert time.monotonic() < deadline, sim.placement()[pid]
        time.sleep(0.02)
    return other


def _two_moved_by_hand(plan: Path, sim: Simulator, url: str) -> list[dict]:
    """The first moves of two partitions (a secondary's and an instance's) made elsewhere by hand."""
    commands = _commands(plan)
    firsts = [a for a in commands if a is next(b for b in commands if b["PartitionId"] == a["PartitionId"])]
    chosen = [next(a for a in firsts if a["Action"] == kind) for kind in ("MoveSecondary", "MoveInstance")]
    used: set[str] = set()
    for move in chosen:
        used.add(_move_by_hand(sim, url, move, used))
    return chosen


def test_a_plan_for_another_cluster_is_refused_at_once(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    document = json.loads(plan.read_text())
    for action in document["Actions"]:  # the same services, other partitions: another cluster's
        action["PartitionId"] = str(uuid.uuid5(uuid.NAMESPACE_OID, action["PartitionId"]))
    plan.write_text(json.dumps(document))
    sim = _sim(small_dump_plan)
    with sim.serve() as url:
        assert _apply(plan, url, state=False) == 2
        assert _apply(plan, url, "--dry-run", state=False) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("plbjax-apply: this plan is not for this cluster: ") for line in err)
    assert f"none of its {_partitions(plan)} partition(s)" in err[0], err[0]
    assert not sim.moves and not (tmp_path / "plan.json.journal.json").exists()


def test_two_replicas_moved_by_hand_are_refused_before_any_step(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    with sim.serve() as url:
        moved = _two_moved_by_hand(plan, sim, url)
        by_hand = len(sim.moves)
        assert _apply(plan, url, "--dry-run") == 4
        dry = capsys.readouterr()
        assert _apply(plan, url) == 4
        err = capsys.readouterr().err
        assert len(sim.moves) == by_hand, "no step sent"
        drifted = [line for line in err.splitlines() if " drifted: " in line]
        assert {m["PartitionId"] for m in moved} == {line.split(" partition ")[1].split(":")[0] for line in drifted}
        assert all(m["SourceNode"] in err for m in moved) and "the plan expects a Ready" in err
        assert f"2 of {_partitions(plan)} partition(s) drifted from the plan's input; no step sent" in err
        assert "no step sent" in dry.err and "now: skipped (its partition drifted: " in dry.out
        assert not (tmp_path / "plan.json.journal.json").exists()

        assert _apply(plan, url, "--allow-drift") == 4
        err = capsys.readouterr().err
    pids = {m["PartitionId"] for m in moved}
    sent = sim.moves[by_hand:]
    assert sent and not {m.partition_id for m in sent} & pids and not _twice(sim)
    others = [a for a in _commands(plan) if a["PartitionId"] not in pids]
    assert len(sent) == len(others), (sent, others)
    target = _target(plan)
    assert all(sim.placement()[pid] == target[pid] for pid in {a["PartitionId"] for a in others})
    assert "the others carried out: --allow-drift)" in err and "skipped: its partition drifted: " in err


def test_a_cluster_already_at_the_target_has_nothing_to_do_without_the_journal(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    with sim.serve() as url:
        assert _apply(plan, url) == 0
        moves = len(sim.moves)
        capsys.readouterr()
        assert _apply(plan, url) == 0, "with the journal"
        (tmp_path / "plan.json.journal.json").unlink()
        assert _apply(plan, url) == 0, "without it"
        assert _apply(plan, url, state=False) == 0, "without the state"
        assert _apply(plan, url, "--dry-run") == 0
        assert len(sim.moves) == moves
    err = capsys.readouterr().err.splitlines()
    said = f"nothing to do: the cluster is at the plan's target ({_partitions(plan)} partition(s) checked)"
    assert len(err) == 4 and all(line.endswith(said) for line in err), err
    assert not (tmp_path / "plan.json.journal.json").exists()


def test_a_rerun_part_way_without_the_journal_counts_the_past_steps_done(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    first = tmp_path / "first.json"  # the plan's first action carried out by another run (its journal elsewhere)
    document = json.loads(plan.read_text())
    first.write_text(json.dumps(document | {"Actions": document["Actions"][:1]}))
    sim = _sim(plan)
    with sim.serve() as url:
        assert _apply(first, url, state=False) == 0
        capsys.readouterr()
        assert _apply(plan, url) == 0
        assert sim.placement() == _target(plan)
    err = capsys.readouterr().err
    first = document["Actions"][0]
    past = [line for line in err.splitlines() if line.endswith(": done: the cluster is past it")]
    assert [
        line for line in past if f"{first['Action']} {first['ServiceName']} partition {first['PartitionId']}" in line
    ]
    assert not _twice(sim)
    assert len(sim.moves) == len(_commands(plan))


# --- safe by default ---------------------------------------------------------------------------------


def test_a_token_is_never_sent_over_plain_http_unless_the_flag_names_the_risk(
    small_dump_plan, tmp_path, capsys, monkeypatch
):
    plan = _copy(small_dump_plan, tmp_path)
    monkeypatch.setenv("PLBJAX_TOKEN", "secret")
    sim = _sim(plan)
    with sim.serve() as url:
        assert _apply(plan, url) == 2
        assert not sim.requests, "nothing sent"
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"plbjax-apply: --endpoint: {url} is plain http: the bearer token")
        assert "clear text" in err[0] and "--allow-token-over-http" in err[0]
        assert _apply(plan, url, "--allow-token-over-http") == 0
        assert sim.placement() == _target(plan)


@pytest.mark.parametrize("endpoint", ["localhost:19080", "127.0.0.1:19080", "mycluster.example.com"])
def test_a_url_without_a_scheme_is_refused_at_once(small_dump_plan, tmp_path, capsys, endpoint):
    plan = _copy(small_dump_plan, tmp_path)
    assert _apply(plan, endpoint) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"plbjax-apply: --endpoint: {endpoint} is not an http(s) URL; write the scheme, e.g. https://{endpoint}"
    ]


@pytest.mark.parametrize("command", ["plbjax-apply", "plbjax-export"])
def test_output_closed_early_ends_quietly(small_dump_plan, tmp_path, command):
    plan = _copy(small_dump_plan, tmp_path)
    args = [str(plan), "--dry-run", "--state", str(tmp_path / "state.json")]
    args = args if command == "plbjax-apply" else [str(plan), "--format", "sfctl"]
    proc = subprocess.Popen([command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head` having read enough
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141) and "Traceback" not in err and "BrokenPipe" not in err, err
