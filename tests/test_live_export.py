"""plbjax-export: dump -> import -> plan (the plbjax CLI) -> commands -> parsed back = the plan's movements."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from plbjax.sf.live.export import SETTLED_PY, export_plan, main
from plbjax.sf.live.importer import main as import_main
from plbjax.sf.live.steps import action_loads, order

DUMPS = Path(__file__).parent / "data" / "sf-dump"
PID = "36c1e850-719d-5bd9-a73d-bb6bcfbfc367"
MOVES = ("MovePrimary", "MoveSecondary", "MoveInstance", "SwapPrimarySecondary")


def _movement(action: dict) -> tuple:
    """What a command can say of an action: a primary move names only its target."""
    kind, pid = action["Action"], str(action["PartitionId"])
    if kind in ("MovePrimary", "SwapPrimarySecondary"):
        return ("primary", pid, None, action["TargetNode"])
    return ("secondary" if kind == "MoveSecondary" else "instance", pid, action["SourceNode"], action["TargetNode"])


def _parse_sfctl(line: str) -> tuple:
    words = shlex.split(line)
    assert words[:2] == ["sfctl", "partition"]
    flags = dict(zip(words[3::2], words[4::2]))
    kind = {"move-primary-replica": "primary", "move-secondary-replica": "secondary", "move-instance": "instance"}[
        words[2]
    ]
    if kind == "primary":
        return (kind, flags["--partition-id"], None, flags["--node-name"])
    return (kind, flags["--partition-id"], flags["--current-node-name"], flags["--new-node-name"])


def _parse_powershell(line: str) -> tuple:
    cmdlet, rest = line.split(" ", 1)
    args = {k: v.replace("''", "'") for k, v in re.findall(r"-(\w+) '((?:[^']|'')*)'", rest)}
    if cmdlet == "Move-ServiceFabricPrimaryReplica":
        return ("primary", args["PartitionId"], None, args["NodeName"])
    if cmdlet == "Move-ServiceFabricSecondaryReplica":
        return ("secondary", args["PartitionId"], args["CurrentSecondaryNodeName"], args["NewSecondaryNodeName"])
    assert cmdlet == "Move-ServiceFabricInstance"
    return ("instance", args["PartitionId"], args["CurrentInstanceNodeName"], args["NewInstanceNodeName"])


def _parse_rest(line: str) -> tuple:
    method, url = shlex.split(line)
    assert method == "post"
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    path = unquote(parts.path)
    if path.endswith("/$/MovePrimaryReplica"):
        assert query["api-version"] == "6.5"
        return ("primary", path.split("/")[2], None, query["NodeName"])
    if path.endswith("/$/MoveSecondaryReplica"):
        assert query["api-version"] == "6.5"
        return ("secondary", path.split("/")[2], query["CurrentNodeName"], query["NewNodeName"])
    assert path.endswith("/$/MoveInstance") and query["api-version"] == "8.0"
    return ("instance", path.split("/")[5], query["CurrentNodeName"], query["NewNodeName"])


PARSERS = {"sfctl": _parse_sfctl, "powershell": _parse_powershell, "rest": _parse_rest}


COMMAND = ("sfctl partition ", "Move-ServiceFabric", "post ")


def _commands(text: str) -> list[str]:
    """The command lines, the moves' requests (not the script's functions, waits or comments)."""
    return [line for line in text.splitlines() if line.startswith(COMMAND)]


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory) -> Path:
    """The fixture cluster imported and planned by the installed plbjax CLI (a short search)."""
    work = tmp_path_factory.mktemp("roundtrip")
    import_main([str(DUMPS / "small"), "-o", str(work / "state.json")])
    subprocess.run(
        [
            "plbjax",
            f"state={work / 'state.json'}",
            f"out={work / 'plan.json'}",
            "search.seconds=null",  # steps, not a clock, bound the search: the same on a loaded machine
            "search.steps=2000",
            f"hydra.run.dir={work / 'run'}",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return work / "plan.json"


def _events(text: str) -> list[tuple]:
    """The script as what it does, in order: ("step", k, command?) where step k begins, ("needs", k, d)
    for each step it names as needed, ("wait", d) where it polls until step d is done."""
    out = []
    for line in text.splitlines():
        if m := re.match(r"# step (\d+)/\d+: ", line):
            out.append(("step", int(m[1])))
        elif m := re.match(r"# step (\d+) needs step (\d+) done", line):
            out.append(("needs", int(m[1]), int(m[2])))
        elif line.startswith(("wait_for ", "Wait-PlbjaxStep ")):
            out.append(("wait", int(shlex.split(line)[2])))
        elif line.startswith(COMMAND):
            out.append(("command", out[-1][1] if out[-1][0] == "step" else None))
    return out


def _check_waits(text: str) -> dict[int, set[int]]:
    """Every step a step needs is above it and waited for before its command; {step: steps it needs}."""
    needs: dict[int, set[int]] = {}
    waited: set[int] = set()
    step = 0
    for event in _events(text):
        if event[0] == "step":
            assert event[1] == step + 1
            step = event[1]
        elif event[0] == "needs":
            assert event[1] == step and event[2] < step, f"step {step} needs step {event[2]}, not above it"
            needs.setdefault(step, set()).add(event[2])
        elif event[0] == "wait":
            waited.add(event[1])
        else:
            assert needs.get(step, set()) <= waited, f"step {step} runs before {needs[step] - waited} are done"
    return needs


def _described(text: str) -> dict[int, str]:
    """Step -> the action it says it is."""
    return {int(m[1]): m[2] for m in re.finditer(r"^# step (\d+)/\d+: (.*) \(the plan's", text, re.M)}


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_round_trip_gives_exactly_the_plans_movements(plan_path, fmt, tmp_path):
    plan = json.loads(plan_path.read_text())
    out = tmp_path / f"plan.{fmt}"
    main([str(plan_path), "--format", fmt, "--state", str(plan_path.parent / "state.json"), "-o", str(out)])
    text = out.read_text()
    expected = [_movement(a) for a in plan["Actions"] if a["Action"] in MOVES]
    assert expected, "the fixture's plan should move something"
    assert Counter(PARSERS[fmt](line) for line in _commands(text)) == Counter(expected)
    header = [line for line in text.splitlines() if line.startswith("# ")]
    assert str(plan_path) in header[0] and "Nothing has run" in "\n".join(header)
    assert f"{plan['Score']['Before']:.6g} -> {plan['Score']['After']:.6g}" in header[1]
    others = [a for a in plan["Actions"] if a["Action"] not in MOVES]
    assert sum("no command; the Failover Manager" in line for line in header) == len(others)
    _check_waits(text)


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_each_step_names_the_steps_it_needs_above_it_and_waits_for_them(plan_path, fmt):
    """The bundled dump's plan, loads unknown and known: each needed step is above and waited for, and
    the '# step k needs step d' line describes step d as step d describes itself."""
    plan = json.loads(plan_path.read_text())
    for loads in (None, action_loads(plan_path.parent / "state.json", plan["Actions"])):
        text = export_plan(plan, fmt, str(plan_path), loads=loads)
        needs = _check_waits(text)
        assert needs, "a swap and the move of the replica it demotes: one step needs another"
        described = _described(text)
        for m in re.finditer(r"^# step (\d+) needs step (\d+) done \([^)]*\): (.*)$", text, re.M):
            assert m[3] == described[int(m[2])]


def test_the_loads_the_export_reckons_with_are_the_plans(plan_path):
    """LoadsBefore plus what each action changes is LoadsAfter, node by node and metric by metric."""
    plan = json.loads(plan_path.read_text())
    total = {n["NodeName"]: dict(n["LoadsBefore"]) for n in plan["Nodes"]}
    for change in action_loads(plan_path.parent / "state.json", plan["Actions"]):
        for node, loads in change.items():
            for metric, value in loads.items():
                total[node][metric] += value
    for node in plan["Nodes"]:
        assert total[node["NodeName"]] == pytest.approx(node["LoadsAfter"])


def _plan(*actions: dict, nodes: list | None = None) -> dict:
    return {"Score": {"Before": 2.0, "After": 1.0}, "Actions": list(actions), "Nodes": nodes or []}


def _action(
    kind: str, source: str | None, target: str | None, service: str = "fabric:/Shop/Orders", pid: str = PID
) -> dict:
    return {
        "ServiceName": service,
        "PartitionId": pid,
        "ReplicaId": "7",
        "Action": kind,
        "SourceNode": source,
        "TargetNode": target,
    }


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_every_action_kind(fmt):
    actions = [
        _action("SwapPrimarySecondary", "N0", "N1"),
        _action("MoveInstance", "N1", "N 2", "fabric:/Shop/Web"),
        _action("AddSecondary", None, "N3"),
        _action("DropSecondary", "N4", None),
        _action("PromoteSecondary", "N1", "N1"),
        _action("MoveSecondary", "N'5", "N6"),
    ]
    text = export_plan(_plan(*actions), fmt, "p.json")
    parsed = [PARSERS[fmt](line) for line in _commands(text)]
    assert Counter(parsed) == Counter(_movement(a) for a in actions if a["Action"] in MOVES)
    for kind in ("AddSecondary", "DropSecondary", "PromoteSecondary"):
        assert len(re.findall(rf"^# step \d+/6: {kind} ", text, re.M)) == 1
    _check_waits(text)


def test_sfctl_names_the_service_by_its_id():
    line = _commands(export_plan(_plan(_action("MoveInstance", "N1", "N2", "fabric:/Shop/Web")), "sfctl"))[0]
    assert "--service-id 'Shop~Web'" in line
    rest = _commands(export_plan(_plan(_action("MoveInstance", "N1", "N2", "fabric:/Shop/Web")), "rest"))[0]
    assert shlex.split(rest)[1].startswith(f"/Services/Shop~Web/$/GetPartitions/{PID}/$/MoveInstance?api-version=8.0&")


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{", "invalid JSON"),
        ("{}", "Actions: missing"),
        ('{"SchemaVersion": 1, "Nodes": []}', "a state document, not a plan"),
        ("Nodes: []", "not a plan"),
        ('{"Actions": [{"Action": "MovePrimary"}]}', "Actions[0].ServiceName"),
    ],
)
def test_bad_plan_exits_2_with_one_line(tmp_path, content, expected):
    path = tmp_path / "plan.json"
    path.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "plbjax.sf.live.export", str(path), "--format", "sfctl"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr


def test_a_state_that_does_not_hold_the_plans_replicas_exits_2(tmp_path, plan_path):
    plan = json.loads(plan_path.read_text())
    plan["Actions"][0]["ReplicaId"] = "999"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    state = str(plan_path.parent / "state.json")
    done = subprocess.run(
        [sys.executable, "-m", "plbjax.sf.live.export", str(path), "--format", "sfctl", "--state", state],
        capture_output=True,
        text=True,
    )
    assert (
        done.returncode == 2
        and done.stderr == "plbjax-export: --state: Actions[0].ReplicaId: 999 is not in the state\n"
    )


def test_stdout_by_default(tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(_action("MovePrimary", "N0", "N2"))))
    main([str(path), "--format", "powershell"])
    assert _commands(capsys.readouterr().out) == [
        f"Move-ServiceFabricPrimaryReplica -PartitionId '{PID}' -ServiceName 'fabric:/Shop/Orders' -NodeName 'N2'"
    ]


@pytest.mark.parametrize(
    "fmt, first, stop",
    [
        ("sfctl", "#!/usr/bin/env bash", "set -euo pipefail"),
        ("rest", "#!/usr/bin/env bash", "set -euo pipefail"),
        ("powershell", "#!/usr/bin/env pwsh", "$ErrorActionPreference = 'Stop'"),
    ],
)
def test_a_script_starts_with_its_interpreter_and_stops_at_the_first_failure(tmp_path, fmt, first, stop):
    out = tmp_path / "moves"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(_action("MovePrimary", "N0", "N2"))))
    main([str(path), "--format", fmt, "-o", str(out)])
    lines = out.read_text().splitlines()
    assert lines[0] == first and lines[1].startswith(stop)
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()  # executable, as the user's umask allows
    if fmt != "powershell":
        assert subprocess.run(["bash", "-n", str(out)]).returncode == 0


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------------------------------ the order


def _moves(*moves: tuple[str, str, str, str, float], capacity: float = 10.0, before: dict | None = None):
    """A plan of secondary moves (partition, replica, source, target, load) on nodes of one CPU
    capacity, and what each changes of each node's load."""
    actions = [_action("MoveSecondary", src, dst, pid=pid) | {"ReplicaId": rid} for pid, rid, src, dst, _ in moves]
    loads = [{src: {"CPU": -load}, dst: {"CPU": load}} for *_, src, dst, load in moves]
    names = sorted({n for *_, src, dst, _ in moves for n in (src, dst)})
    nodes = [
        {"NodeName": n, "Capacities": {"CPU": capacity}, "LoadsBefore": {"CPU": (before or {}).get(n, 0.0)}}
        for n in names
    ]
    return actions, nodes, loads


def _needs(steps) -> dict[int, set[int]]:
    """Plan index -> the plan indices of the steps it waits for."""
    return {s.index: {steps[d].index for d in s.needs} for s in steps}


def test_a_move_onto_a_full_node_waits_for_the_move_off_it_that_makes_room():
    """N1 holds 8 of 10: the move of 5 onto it waits for the move of 4 off it (listed after it, so
    it runs first), not for the move of 1 off it that is not needed."""
    actions, nodes, loads = _moves(
        ("pa", "1", "N2", "N1", 5.0), ("pb", "2", "N1", "N3", 4.0), ("pc", "3", "N1", "N3", 1.0), before={"N1": 8.0}
    )
    steps = order(actions, nodes, loads)
    assert [s.index for s in steps] == [1, 0, 2]
    assert _needs(steps) == {1: set(), 0: {1}, 2: set()} and not any(s.note for s in steps)


def test_moves_under_way_hold_room_on_their_target():
    """Two moves of 3 onto N1 (5 of 10): the second finds the first's 3 taken, and waits for the move off."""
    actions, nodes, loads = _moves(
        ("pa", "1", "N2", "N1", 3.0), ("pb", "2", "N3", "N1", 3.0), ("pc", "3", "N1", "N4", 2.0), before={"N1": 5.0}
    )
    assert _needs(order(actions, nodes, loads)) == {0: set(), 2: set(), 1: {2}}


def test_unknown_loads_a_move_onto_a_node_waits_for_every_move_off_it():
    actions, nodes, _ = _moves(("pa", "1", "N2", "N1", 1.0), ("pb", "2", "N1", "N3", 1.0), ("pc", "3", "N1", "N4", 1.0))
    steps = order(actions, nodes)
    assert [s.index for s in steps] == [1, 2, 0] and _needs(steps)[0] == {1, 2}


def test_a_partitions_actions_run_in_order_a_swap_before_the_move_of_the_replica_it_demotes():
    swap = _action("SwapPrimarySecondary", "N0", "N5") | {"ReplicaId": "120"}
    move = _action("MoveSecondary", "N0", "N3") | {"ReplicaId": "120"}
    steps = order([swap, move], [])
    assert [s.index for s in steps] == [0, 1] and steps[1].needs == {0: "the partition's previous step"}
    text = export_plan(_plan(swap, move), "sfctl")
    assert (
        f"wait_for 2 1 'SwapPrimarySecondary fabric:/Shop/Orders partition {PID} N0 -> N5' {PID} N5=Primary N0=Secondary"
        in text
    )


def test_a_move_after_the_failover_managers_action_waits_for_it():
    """A drop makes the room a move needs: the drop comes first (no command) and the move waits for it."""
    drop = _action("DropSecondary", "N1", None, pid="pa") | {"ReplicaId": "1"}
    move = _action("MoveSecondary", "N2", "N1", pid="pb") | {"ReplicaId": "2"}
    nodes = [{"NodeName": "N1", "Capacities": {"CPU": 10.0}, "LoadsBefore": {"CPU": 9.0}}]
    steps = order([move, drop], nodes, [{"N2": {"CPU": -4.0}, "N1": {"CPU": 4.0}}, {"N1": {"CPU": -4.0}}])
    assert [s.index for s in steps] == [1, 0] and _needs(steps)[0] == {1}
    text = export_plan(
        _plan(move, drop, nodes=nodes),
        "sfctl",
        loads=[{"N2": {"CPU": -4.0}, "N1": {"CPU": 4.0}}, {"N1": {"CPU": -4.0}}],
    )
    assert "wait_for 2 1 'DropSecondary fabric:/Shop/Orders partition pa N1 -> -' pa N1=-" in text


def test_a_cycle_runs_the_first_move_and_says_it_may_find_no_room(capsys, tmp_path):
    """Each of two full nodes needs the room the move off the other frees: the plan's first runs
    first and says so, in the step and the header, and the export warns."""
    actions, nodes, loads = _moves(
        ("pa", "1", "N1", "N2", 6.0), ("pb", "2", "N2", "N1", 6.0), before={"N1": 8.0, "N2": 8.0}
    )
    steps = order(actions, nodes, loads)
    assert [s.index for s in steps] == [0, 1] and "a cycle" in steps[0].note and _needs(steps)[1] == {0}
    text = export_plan(_plan(*actions, nodes=nodes), "sfctl", loads=loads)
    assert "# step 1 may find no room: it needs room that only later steps free (a cycle)" in text
    assert "# Steps 1 may find no room" in text
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(*actions, nodes=nodes)))
    main([str(path), "--format", "sfctl", "-o", str(tmp_path / "moves.sh")])
    assert "warning: Steps 1 may find no room (see their notes); --state tells" in capsys.readouterr().err


# ---------------------------------------------------------------------------- running it on a fake


def _fake_cluster(tmp_path: Path, actions: list[dict], replicas: dict, late: int = 2) -> tuple[dict, Path]:
    """PATH and environment for a script run against the fake cluster (tests/fake_sf.py as sfctl and
    curl), and its world file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    fake = Path(__file__).parent / "fake_sf.py"
    for tool in ("sfctl", "curl"):
        (bin_dir / tool).write_text(
            f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(fake))} {tool} "$@"\n'
        )
        (bin_dir / tool).chmod(0o755)
    world = tmp_path / "world.json"
    world.write_text(json.dumps({"replicas": replicas, "actions": actions, "late": late, "log": []}))
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_SF": str(world),
        "PLBJAX_POLL_SECONDS": "0",
        "PLBJAX_ENDPOINT": "http://fake:19080",
    }
    return env, world


def _replicas(state: dict) -> dict:
    return {
        str(p["PartitionId"]): [
            {"ReplicaId": str(r["ReplicaId"]), "Role": r.get("Role") or "Instance", "NodeName": r.get("NodeName")}
            for r in p["Replicas"]
        ]
        for p in state["Partitions"]
    }


@pytest.mark.parametrize("fmt", ["sfctl", "rest"])
@pytest.mark.parametrize("known", [True, False], ids=["loads", "no-loads"])
def test_the_script_never_starts_a_move_before_those_it_needs_are_done(plan_path, tmp_path, fmt, known):
    """Run against a fake cluster that reports each move done only after two looks at its partition,
    and refuses a move of a partition still reconfiguring: every command runs, and each only after
    the fake has reported done every step it needs."""
    plan = json.loads(plan_path.read_text())
    state = json.loads((plan_path.parent / "state.json").read_text())
    loads = action_loads(plan_path.parent / "state.json", plan["Actions"]) if known else None
    script = tmp_path / "moves.sh"
    script.write_text(export_plan(plan, fmt, loads=loads))
    env, world = _fake_cluster(tmp_path, plan["Actions"], _replicas(state))
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = json.loads(world.read_text())["log"]
    assert not [line for line in log if line.startswith("refused")]
    commands = [i for i, a in enumerate(plan["Actions"]) if a["Action"] in MOVES]
    assert (
        sorted(int(line.split()[1]) for line in log if line.startswith("start ") and int(line.split()[1]) in commands)
        == commands
    )
    steps = order(plan["Actions"], plan["Nodes"], loads)
    waited = 0
    for step in steps:
        if not step.command:
            continue
        for d in step.needs:
            assert log.index(f"done {steps[d].index}") < log.index(f"start {step.index}")
            waited += 1
    assert waited and "plbjax: step" in done.stderr and "done:" in done.stderr


def test_the_fake_refuses_a_script_that_does_not_wait(tmp_path):
    """The same script without its waits (as before, when they were comments) fires the move of the
    replica a swap demotes before the swap is done: the fake refuses it, so it tells the two apart."""
    swap = _action("SwapPrimarySecondary", "N0", "N5") | {"ReplicaId": "120"}
    move = _action("MoveSecondary", "N0", "N3") | {"ReplicaId": "120"}
    replicas = {
        PID: [
            {"ReplicaId": "120", "Role": "Primary", "NodeName": "N0"},
            {"ReplicaId": "121", "Role": "Secondary", "NodeName": "N5"},
        ]
    }
    text = export_plan(_plan(swap, move), "sfctl")
    for waits in (True, False):
        script = tmp_path / f"moves-{waits}.sh"
        script.write_text("\n".join(line for line in text.splitlines() if waits or not line.startswith("wait_for ")))
        env, world = _fake_cluster(tmp_path / str(waits), [swap, move], replicas)
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == (0 if waits else 1), done.stderr


@pytest.mark.parametrize("fmt", ["sfctl", "rest"])
def test_a_wait_longer_than_its_timeout_stops_the_script_with_a_message(tmp_path, fmt):
    swap = _action("SwapPrimarySecondary", "N0", "N5") | {"ReplicaId": "120"}
    move = _action("MoveSecondary", "N0", "N3") | {"ReplicaId": "120"}
    replicas = {
        PID: [
            {"ReplicaId": "120", "Role": "Primary", "NodeName": "N0"},
            {"ReplicaId": "121", "Role": "Secondary", "NodeName": "N5"},
        ]
    }
    script = tmp_path / "moves.sh"
    script.write_text(export_plan(_plan(swap, move), fmt))
    env, world = _fake_cluster(tmp_path, [swap, move], replicas, late=10**9)
    env |= {"PLBJAX_WAIT_TIMEOUT": "1", "PLBJAX_POLL_SECONDS": "0.2"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stderr.strip().splitlines()[-1] == (
        f"plbjax: stopped: step 1 (SwapPrimarySecondary fabric:/Shop/Orders partition {PID} N0 -> N5) is not done "
        "after 1 s (PLBJAX_WAIT_TIMEOUT); step 2 and those after it have not run"
    )
    log = json.loads(world.read_text())["log"]
    assert "start 0" in log and "start 1" not in log


def test_a_failing_command_stops_the_script(tmp_path):
    """set -e: after a refused move nothing else runs."""
    actions = [
        _action("MoveSecondary", "N1", "N2", pid="pa") | {"ReplicaId": "1"},
        _action("MoveSecondary", "N3", "N4", pid="pb") | {"ReplicaId": "2"},
    ]
    replicas = {
        "pa": [{"ReplicaId": "1", "Role": "Primary", "NodeName": "N1"}],
        "pb": [{"ReplicaId": "2", "Role": "Secondary", "NodeName": "N3"}],
    }
    script = tmp_path / "moves.sh"
    script.write_text(export_plan(_plan(*actions), "sfctl"))
    env, world = _fake_cluster(tmp_path, actions, replicas)
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    log = json.loads(world.read_text())["log"]
    assert done.returncode == 1 and "no Secondary replica on N1" in done.stderr
    assert sum(line.startswith("sfctl partition") for line in log) == 1


def test_powershell_defines_what_it_calls_and_quotes_every_value():
    """pwsh is not here to run it: its waits call the function the script defines, with the step
    numbers, the partition and each NODE=ROLE quoted."""
    swap = _action("SwapPrimarySecondary", "N0", "N'5") | {"ReplicaId": "120"}
    move = _action("MoveSecondary", "N0", "N3") | {"ReplicaId": "120"}
    text = export_plan(_plan(swap, move), "powershell")
    assert "function Wait-PlbjaxStep(" in text and "function Test-PlbjaxSettled(" in text
    assert "Get-ServiceFabricReplica -PartitionId $PartitionId" in text
    assert (
        f"Wait-PlbjaxStep 2 1 'SwapPrimarySecondary fabric:/Shop/Orders partition {PID} N0 -> N''5' '{PID}' "
        "@('N''5=Primary', 'N0=Secondary')"
    ) in text
    assert text.count("{") == text.count("}") and text.count("(") == text.count(")")


def test_the_wait_timeout_is_the_scripts_default_and_must_be_positive(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(_action("MovePrimary", "N0", "N2"))))
    main([str(path), "--format", "sfctl", "--wait-timeout", "60", "-o", str(tmp_path / "moves.sh")])
    assert "wait_timeout=${PLBJAX_WAIT_TIMEOUT:-60}" in (tmp_path / "moves.sh").read_text()
    with pytest.raises(SystemExit) as stop:
        main([str(path), "--format", "sfctl", "--wait-timeout", "0"])
    assert stop.value.code == 2


@pytest.mark.parametrize(
    "replicas, expected, settled",
    [
        (
            {"Items": [{"NodeName": "N1", "ReplicaRole": "Primary", "ReplicaStatus": "Ready"}]},
            ["N1=Primary", "N0=-"],
            True,
        ),
        ({"items": [{"nodeName": "N1", "replicaRole": "Primary", "replicaStatus": "InBuild"}]}, ["N1=Primary"], False),
        ({"items": [{"nodeName": "N1", "replicaRole": "Secondary", "replicaStatus": "Ready"}]}, ["N1=Primary"], False),
        ({"Items": [{"NodeName": "N0", "ReplicaRole": "Secondary", "ReplicaStatus": "Ready"}]}, ["N0=-"], False),
        ({"Items": [{"NodeName": "N0", "ReplicaRole": "Secondary", "ReplicaStatus": "Standby"}]}, ["N0=-"], True),
        ({"Items": [{"NodeName": "N 2", "InstanceId": "9", "ReplicaStatus": "Ready"}]}, ["N 2=Instance"], True),
        ([{"NodeName": "N=3", "ReplicaRole": "Secondary", "ReplicaStatus": "Ready"}], ["N=3=Secondary"], True),
    ],
)
def test_what_the_script_takes_for_done(replicas, expected, settled):
    """The scripts' reading of a partition's replicas (REST's PascalCase, sfctl's camelCase, a bare list)."""
    done = subprocess.run(
        [sys.executable, "-c", SETTLED_PY, *expected], input=json.dumps(replicas), capture_output=True, text=True
    )
    assert done.returncode == (0 if settled else 1), done.stderr
