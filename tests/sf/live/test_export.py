"""plbjax-export: dump -> import -> plan (the plbjax CLI) -> script; its commands parsed back are the plan's
movements, and the script run against the simulator (plbjax.sf.live.simulator, with tests/bin/sfctl or curl)
carries the plan out."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from paths import TESTS
from planned import DUMPS, plan_state

from plbjax.sf import ActionKind, apply_actions, load_state
from plbjax.sf.live import export
from plbjax.sf.live.apply import expectations
from plbjax.sf.live.apply.steps import action_loads, order, plan_read, read_plan
from plbjax.sf.live.export.script import PS_NAMES, READER_PY, export_plan, main, read_cluster
from plbjax.sf.live.simulator import Move, Simulator

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


ISSUE = re.compile(r"^(?:issue \d+ (.*)|Invoke-PlbjaxStep \d+ \{ (.*) \})$")


def _commands(text: str) -> list[str]:
    """The moves' commands, as the steps issue them (not the script's functions, waits or comments)."""
    return [m[1] or m[2] for line in text.splitlines() if (m := ISSUE.match(line))]


def _events(text: str) -> list[tuple]:
    """The script as what it does, in order: ("step", k) where step k begins, ("needs", k, d)
    for each step it names as needed, ("wait", d) where it polls until step d is done."""
    out = []
    for line in text.splitlines():
        if m := re.match(r"# step (\d+)/\d+: ", line):
            out.append(("step", int(m[1])))
        elif m := re.match(r"# step (\d+) needs step (\d+) done", line):
            out.append(("needs", int(m[1]), int(m[2])))
        elif line.startswith(("wait_for ", "Wait-PlbjaxStep ")):
            out.append(("wait", int(shlex.split(line)[2])))
        elif ISSUE.match(line):
            out.append(("command",))
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
def test_round_trip_gives_exactly_the_plans_movements(small_dump_plan, fmt, tmp_path):
    plan = json.loads(small_dump_plan.read_text())
    out = tmp_path / f"plan.{fmt}"
    main([str(small_dump_plan), "--format", fmt, "--state", str(small_dump_plan.parent / "state.json"), "-o", str(out)])
    text = out.read_text()
    expected = [_movement(a) for a in plan["Actions"] if a["Action"] in MOVES]
    assert expected, "the fixture's plan should move something"
    assert Counter(PARSERS[fmt](line) for line in _commands(text)) == Counter(expected)
    header = [line for line in text.splitlines() if line.startswith("# ")]
    assert str(small_dump_plan) in header[0] and "Nothing has run" in "\n".join(header)
    assert f"{plan['Score']['Before']:.6g} -> {plan['Score']['After']:.6g}" in header[1]
    others = [a for a in plan["Actions"] if a["Action"] not in MOVES]
    assert sum("no command; the Failover Manager" in line for line in header) == len(others)
    _check_waits(text)


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_each_step_names_the_steps_it_needs_above_it_and_waits_for_them(small_dump_plan, fmt):
    """The bundled dump's plan, loads unknown and known: each needed step is above and waited for, and
    the '# step k needs step d' line describes step d as step d describes itself."""
    plan = json.loads(small_dump_plan.read_text())
    for loads in (None, action_loads(small_dump_plan.parent / "state.json", plan_read(plan, "plan.json").actions)):
        text = export_plan(plan, fmt, str(small_dump_plan), loads=loads)
        needs = _check_waits(text)
        assert needs, "a swap and the move of the replica it demotes: one step needs another"
        described = _described(text)
        for m in re.finditer(r"^# step (\d+) needs step (\d+) done \([^)]*\): (.*)$", text, re.M):
            assert m[3] == described[int(m[2])]


def test_the_loads_the_export_reckons_with_are_the_plans(small_dump_plan):
    """LoadsBefore plus what each action changes is LoadsAfter, node by node and metric by metric."""
    plan = json.loads(small_dump_plan.read_text())
    total = {n["NodeName"]: dict(n["LoadsBefore"]) for n in plan["Nodes"]}
    for change in action_loads(small_dump_plan.parent / "state.json", plan_read(plan, "plan.json").actions):
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


def test_a_state_that_does_not_hold_the_plans_replicas_exits_2(tmp_path, small_dump_plan):
    plan = json.loads(small_dump_plan.read_text())
    plan["Actions"][0]["ReplicaId"] = "999"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    state = str(small_dump_plan.parent / "state.json")
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


def _order(actions: list[dict], nodes: list[dict], loads: list | None = None) -> list:
    """`order` of a plan of these actions and nodes."""
    read = plan_read(_plan(*actions, nodes=nodes), "plan.json")
    return order(read.actions, read.nodes, loads)


def _needs(steps) -> dict[int, set[int]]:
    """Plan index -> the plan indices of the steps it waits for."""
    return {s.index: {steps[d].index for d in s.needs} for s in steps}


def test_a_move_onto_a_full_node_waits_for_the_move_off_it_that_makes_room():
    """N1 holds 8 of 10: the move of 5 onto it waits for the move of 4 off it (listed after it, so
    it runs first), not for the move of 1 off it that is not needed."""
    actions, nodes, loads = _moves(
        ("pa", "1", "N2", "N1", 5.0), ("pb", "2", "N1", "N3", 4.0), ("pc", "3", "N1", "N3", 1.0), before={"N1": 8.0}
    )
    steps = _order(actions, nodes, loads)
    assert [s.index for s in steps] == [1, 0, 2]
    assert _needs(steps) == {1: set(), 0: {1}, 2: set()} and not any(s.note for s in steps)


def test_moves_under_way_hold_room_on_their_target():
    """Two moves of 3 onto N1 (5 of 10): the second finds the first's 3 taken, and waits for the move off."""
    actions, nodes, loads = _moves(
        ("pa", "1", "N2", "N1", 3.0), ("pb", "2", "N3", "N1", 3.0), ("pc", "3", "N1", "N4", 2.0), before={"N1": 5.0}
    )
    assert _needs(_order(actions, nodes, loads)) == {0: set(), 2: set(), 1: {2}}


def test_unknown_loads_a_move_onto_a_node_waits_for_every_move_off_it():
    actions, nodes, _ = _moves(("pa", "1", "N2", "N1", 1.0), ("pb", "2", "N1", "N3", 1.0), ("pc", "3", "N1", "N4", 1.0))
    steps = _order(actions, nodes)
    assert [s.index for s in steps] == [1, 2, 0] and _needs(steps)[0] == {1, 2}


def test_a_partitions_actions_run_in_order_a_swap_before_the_move_of_the_replica_it_demotes():
    swap = _action("SwapPrimarySecondary", "N0", "N5") | {"ReplicaId": "120"}
    move = _action("MoveSecondary", "N0", "N3") | {"ReplicaId": "120"}
    steps = _order([swap, move], [])
    assert [s.index for s in steps] == [0, 1] and steps[1].needs == {0: "the partition's previous step"}
    text = export_plan(_plan(swap, move), "sfctl")
    assert "\nwait_for 2 1\n" in text
    assert (
        f"plan_step 1 'SwapPrimarySecondary fabric:/Shop/Orders partition {PID} N0 -> N5' {PID} SwapPrimarySecondary N0 N5 '' 0"
        in text
    )
    assert (
        f"plan_step 2 'MoveSecondary fabric:/Shop/Orders partition {PID} N0 -> N3' {PID} MoveSecondary N0 N3 1 0"
        in text
    )


def test_a_move_after_the_failover_managers_action_waits_for_it():
    """A drop makes the room a move needs: the drop comes first (no command) and the move waits for it."""
    drop = _action("DropSecondary", "N1", None, pid="pa") | {"ReplicaId": "1"}
    move = _action("MoveSecondary", "N2", "N1", pid="pb") | {"ReplicaId": "2"}
    nodes = [{"NodeName": "N1", "Capacities": {"CPU": 10.0}, "LoadsBefore": {"CPU": 9.0}}]
    steps = _order([move, drop], nodes, [{"N2": {"CPU": -4.0}, "N1": {"CPU": 4.0}}, {"N1": {"CPU": -4.0}}])
    assert [s.index for s in steps] == [1, 0] and _needs(steps)[0] == {1}
    text = export_plan(
        _plan(move, drop, nodes=nodes),
        "sfctl",
        loads=[{"N2": {"CPU": -4.0}, "N1": {"CPU": 4.0}}, {"N1": {"CPU": -4.0}}],
    )
    assert "\nwait_for 2 1\nissue 2 sfctl" in text
    assert "plan_step 1 'DropSecondary fabric:/Shop/Orders partition pa N1 -> -' pa DropSecondary N1 '' '' 0" in text


def test_a_cycle_runs_the_first_move_and_says_it_may_find_no_room(capsys, tmp_path):
    """Each of two full nodes needs the room the move off the other frees: the plan's first runs
    first and says so, in the step and the header, and the export warns."""
    actions, nodes, loads = _moves(
        ("pa", "1", "N1", "N2", 6.0), ("pb", "2", "N2", "N1", 6.0), before={"N1": 8.0, "N2": 8.0}
    )
    steps = _order(actions, nodes, loads)
    assert [s.index for s in steps] == [0, 1] and "a cycle" in steps[0].note and _needs(steps)[1] == {0}
    text = export_plan(_plan(*actions, nodes=nodes), "sfctl", loads=loads)
    assert "# step 1 may find no room: it needs room that only later steps free (a cycle)" in text
    assert "# Steps 1 may find no room" in text
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(*actions, nodes=nodes)))
    main([str(path), "--format", "sfctl", "-o", str(tmp_path / "moves.sh")])
    assert "warning: Steps 1 may find no room (see their notes); --state tells" in capsys.readouterr().err


# ------------------------------------------------------------------------ reading the cluster's answers


def test_powershell_defines_what_it_calls_and_quotes_every_value():
    """pwsh is not here to run it: every function the script calls is defined in it, and each value is quoted."""
    swap = _action("SwapPrimarySecondary", "N0", "N'5") | {"ReplicaId": "120"}
    move = _action("MoveSecondary", "N0", "N3") | {"ReplicaId": "120"}
    text = export_plan(_plan(swap, move), "powershell")
    assert all(f"function {name}" in text for name in PS_NAMES.values())
    assert "Get-ServiceFabricReplica -PartitionId $PartitionId" in text
    assert (
        f"Add-PlbjaxStep 1 'SwapPrimarySecondary fabric:/Shop/Orders partition {PID} N0 -> N''5' '{PID}' "
        "'SwapPrimarySecondary' 'N0' 'N''5' @() 0"
    ) in text
    assert "\nWait-PlbjaxStep 2 1\nInvoke-PlbjaxStep 2 { Move-ServiceFabricSecondaryReplica " in text
    assert "\nFind-PlbjaxDone @(1, 2)\n" in text  # one [int[]] argument: the partition's steps
    assert text.count("{") == text.count("}") and text.count("(") == text.count(")")


def test_powershell_reads_sfs_role_words_as_expectations_does():
    """A Ready ActiveSecondary is a secondary; an IdleSecondary, any other role or a replica not Ready is
    being built; an auxiliary replica is one; Down, Dropped, Standby and Invalid replicas hold nothing;
    SF's role is never taken as is."""
    text = export_plan(_plan(_action("SwapPrimarySecondary", "N0", "N1")), "powershell")
    holding = text[text.index("function Get-PlbjaxHolding") : text.index("function Read-PlbjaxPartition")]
    assert "if ($status -in 'Down', 'Dropped', 'Standby', 'Invalid' -or -not $node) { continue }" in holding
    assert (
        "$role = if ($sfRole -like '*auxiliary*') { 'Auxiliary' } elseif ($status -ne 'Ready') { 'InBuild' }" in holding
    )
    assert "elseif (-not $sfRole) { 'Instance' }" in holding
    assert (
        "elseif ($sfRole -eq 'Primary') { 'Primary' } elseif ($sfRole -eq 'ActiveSecondary') { 'Secondary' }" in holding
    )
    assert "        else { 'InBuild' }" in holding and "'IdleSecondary'" in holding
    assert tuple(expectations.GONE) == ("down", "dropped", "standby", "invalid")  # the PowerShell's list
    assert text.count("ReplicaRole") == 1  # read once, into $sfRole
    assert "$want = if ($role -eq 'Secondary') { 'ActiveSecondary' }" in text


def test_the_bash_scripts_read_the_cluster_by_expectations_own_source():
    for fmt in ("sfctl", "rest"):
        text = export_plan(_plan(_action("SwapPrimarySecondary", "N0", "N1")), fmt)
        assert f"<<'PY' || true\n{READER_PY}\nPY\n" in text
        source = inspect.getsource(expectations)  # its own, its vocabulary as plain words (no plbjax there)
        head, vocabulary = source.split("# the vocabulary", 1)
        assert READER_PY.startswith(head) and vocabulary.split("# end of the vocabulary\n", 1)[1] in READER_PY


def _listing(*replicas: tuple, camel: bool = False, token: str = "") -> str:
    """A page of Get Replica Info List's answer: (node, SF's role or None for an instance, status) each,
    as REST writes it or (camel) as sfctl prints it."""
    items = [
        {"NodeName": n, "ReplicaStatus": s, **({"ReplicaRole": r} if r else {"InstanceId": "9"})}
        for n, r, s in replicas
    ]
    page = {"ContinuationToken": token, "Items": items}
    if camel:
        page = {"continuationToken": token, "items": [{k[0].lower() + k[1:]: v for k, v in i.items()} for i in items]}
    return json.dumps(page, indent=2)


SWAP = ["SwapPrimarySecondary", "N0", "N1"]
MOVE = ["MoveSecondary", "N0", "N3"]


@pytest.mark.parametrize("camel", [False, True], ids=["rest", "sfctl"])
@pytest.mark.parametrize(
    "replicas, argv, answer",
    [
        ([("N1", "Primary", "Ready"), ("N0", "ActiveSecondary", "Ready")], ["done", *SWAP], (0, "")),
        (
            [("N1", "Primary", "Ready"), ("N0", "IdleSecondary", "Ready")],
            ["done", *SWAP],
            (1, "N0 holds IdleSecondary (Ready), not a Ready ActiveSecondary"),
        ),
        (
            [("N1", "Primary", "Ready"), ("N0", "ActiveSecondary", "InBuild")],
            ["done", *SWAP],
            (1, "N0 holds ActiveSecondary (InBuild), not a Ready ActiveSecondary"),
        ),
        ([("N3", "ActiveSecondary", "Ready"), ("N0", "ActiveSecondary", "Dropped")], ["done", *MOVE], (0, "")),
        ([("N3", "ActiveSecondary", "Ready"), ("N0", "ActiveSecondary", "Standby")], ["done", *MOVE], (0, "")),
        (
            [("N3", "ActiveSecondary", "Ready"), ("N0", "ActiveSecondary", "Ready")],
            ["done", *MOVE],
            (1, "N0 still holds ActiveSecondary (Ready)"),
        ),
        ([("N0", "Primary", "Ready"), ("N1", "ActiveSecondary", "Ready")], ["step", *SWAP], (0, "")),
        ([("N1", "Primary", "Ready"), ("N0", "ActiveSecondary", "Ready")], ["step", *SWAP], (0, "done")),
        ([("N0", "Primary", "Ready")], ["step", *SWAP], (1, "N1 holds no replica, not a Ready ActiveSecondary")),
        ([("N 2", None, "Ready")], ["done", "MoveInstance", "N1", "N 2"], (0, "")),
        (
            [("N1", "Primary", "Ready"), ("N0", "ActiveAuxiliary", "Ready")],
            ["done", *SWAP],
            (1, "N0 holds ActiveAuxiliary (Ready), not a Ready ActiveSecondary"),
        ),
        (
            [("N0", "Primary", "Ready"), ("N1", "ActiveSecondary", "Ready"), ("N4", "ActiveSecondary", "Ready")],
            ["done", "AddSecondary", "", "N3", "2"],
            (0, "placed elsewhere by the Failover Manager: the partition holds the 2 Ready ActiveSecondary(s) planned"),
        ),
        (
            [("N0", "Primary", "Ready"), ("N1", "ActiveSecondary", "Ready"), ("N4", "IdleSecondary", "InBuild")],
            ["done", "AddSecondary", "", "N3", "2"],
            (1, "N3 holds no replica, not a Ready ActiveSecondary"),
        ),
        (
            [("N1", "Primary", "Ready"), ("N3", "ActiveSecondary", "Ready")],
            ["survey", "1", *SWAP, "2", *MOVE],
            (0, "2"),
        ),
    ],
)
def test_what_the_scripts_take_for_done(replicas, argv, answer, camel):
    """The bash scripts' reading of a partition's replicas (SF's words; REST's PascalCase, sfctl's camelCase)."""
    assert read_cluster(argv, _listing(*replicas, camel=camel)) == answer


def test_the_reader_reads_every_page_and_says_sfs_errors():
    pages = _listing(("N1", "Primary", "Ready"), token="1") + "\n" + _listing(("N0", "ActiveSecondary", "Ready"))
    assert read_cluster(["done", *SWAP], pages) == (0, "")
    body = '{"Error": {"Code": "FABRIC_E_NODE_NOT_FOUND", "Message": "Node\\nnot found."}}\ncurl: (22) error: 400'
    assert read_cluster(["error"], body) == (0, "FABRIC_E_NODE_NOT_FOUND: Node not found.")
    sfctl = "ERROR: (FABRIC_E_TIMEOUT) Operation timed out.\nTraceback (most recent call last):\n  ...\n"
    assert read_cluster(["error"], sfctl) == (0, "FABRIC_E_TIMEOUT: Operation timed out.")
    assert read_cluster(["error"], "curl: (7) Failed to connect\n") == (0, "curl: (7) Failed to connect")


def test_the_bash_scripts_read_every_page():
    """replicas PARTITION asks for the next page while SF's answer has a continuation token."""
    text = export_plan(_plan(_action("SwapPrimarySecondary", "N0", "N1")), "sfctl")
    start = text.index("replicas() {")
    replicas = text[start : text.index("\n}\n", start) + 2]
    stub = """replica_page() {
  [[ -z $2 ]] && printf '{\\n  "continuationToken": "7",\\n  "items": [1]\\n}\\n' || echo "{\\"items\\": [$2]}"
}"""
    done = subprocess.run(["bash", "-c", f"{stub}\n{replicas}\nreplicas P"], capture_output=True, text=True)
    assert done.stdout == '{\n  "continuationToken": "7",\n  "items": [1]\n}\n{"items": [7]}\n'


def test_the_embedded_reader_runs_as_the_script_runs_it():
    text = export_plan(_plan(_action("SwapPrimarySecondary", "N0", "N1")), "rest")
    reader = text[text.index("<<'PY' || true\n") + 15 : text.index("\nPY\n")]
    listing = _listing(("N1", "Primary", "Ready"), ("N0", "ActiveSecondary", "InBuild"))
    done = subprocess.run(
        ["python3", "-c", reader, "done", *SWAP], input=listing, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (1, "N0 holds ActiveSecondary (InBuild), not a Ready ActiveSecondary\n")


def test_the_wait_timeout_is_the_scripts_default_and_must_be_positive(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(_action("MovePrimary", "N0", "N2"))))
    main([str(path), "--format", "sfctl", "--wait-timeout", "60", "-o", str(tmp_path / "moves.sh")])
    assert "wait_timeout=${PLBJAX_WAIT_TIMEOUT:-60}" in (tmp_path / "moves.sh").read_text()
    with pytest.raises(SystemExit) as stop:
        main([str(path), "--format", "sfctl", "--wait-timeout", "0"])
    assert stop.value.code == 2


def test_the_exit_statuses_are_documented(capsys):
    """In the script's header, the module's docstring and --help."""
    text = export_plan(_plan(_action("MovePrimary", "N0", "N2")), "sfctl")
    assert "Exit status: 0 every step done; 3 a wait timed out (the line names the" in text
    assert "Exit status: 0 every step done;\n3 a wait timed out" in (export.__doc__ or "")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert (
        "exit status: 0 every step done; 3 a wait\ntimed out (PLBJAX_WAIT_TIMEOUT); 4 a step refused"
        in capsys.readouterr().out
    )


# ------------------------------------------------------------------- running it against the simulator

BIN = TESTS / "bin"  # the stand-in sfctl, for a machine without the real one (the test extra installs it)
REAL_SFCTL = shutil.which(
    "sfctl", path=os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != BIN)
)
SLOW_SFCTL = pytest.param("sfctl", marks=pytest.mark.slow)  # the real sfctl: about 2 s a step
STAMPED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ plbjax: ")
QUICK = {"build_seconds": 2.0, "clock_rate": 20.0, "seed": 0}  # a build: 0.1 s of wall time


class Cluster:
    """A simulator served on loopback, and exported scripts run against it (sfctl selected in `home`)."""

    def __init__(self, sim: Simulator, endpoint: str, home: Path, stand_in: bool = False):
        self.sim, self.endpoint, self.home = sim, endpoint, home
        path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != BIN]
        self.env = os.environ | {
            "PATH": os.pathsep.join(path if REAL_SFCTL and not stand_in else [str(BIN), *path]),
            "PYTHONWARNINGS": "ignore",  # the real sfctl warns that its version is not the cluster's
            "HOME": str(home),
            "PLBJAX_ENDPOINT": endpoint,
            "PLBJAX_POLL_SECONDS": "0.05",
            "PLBJAX_WAIT_TIMEOUT": "120",
        }
        self.sfctl("cluster", "select", "--endpoint", endpoint)

    def sfctl(self, *args: str) -> None:
        subprocess.run(["sfctl", *args], env=self.env, check=True, capture_output=True)

    def run(self, script: Path, **env: str) -> subprocess.CompletedProcess:
        """Run the script; nothing on stdout, every line on stderr stamped with the UTC time."""
        done = subprocess.run(["bash", str(script)], env=self.env | env, capture_output=True, text=True, timeout=300)
        assert done.stdout == "" and all(STAMPED.match(line) for line in done.stderr.splitlines()), done.stderr
        return done

    def posts(self) -> int:
        """How many moves were asked for so far (POSTs)."""
        return sum(method == "POST" for method, _ in self.sim.requests)


@contextlib.contextmanager
def _served(sim: Simulator, home: Path, stand_in: bool = False) -> Iterator[Cluster]:
    """The simulator served while the block runs (`stand_in`: sfctl is tests/bin/sfctl)."""
    with sim.serve() as endpoint:
        yield Cluster(sim, endpoint, home, stand_in)


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    """The bundled dump's cluster, simulated."""
    with _served(Simulator.from_dump(DUMPS / "small", **QUICK), tmp_path) as served:
        yield served


def _script(small_dump_plan: Path, fmt: str, tmp_path: Path) -> Path:
    """The plan exported in `fmt`, with the state it was made from."""
    out = tmp_path / f"moves-{fmt}"
    main([str(small_dump_plan), "--format", fmt, "--state", str(small_dump_plan.parent / "state.json"), "-o", str(out)])
    return out


def _target(small_dump_plan: Path) -> dict[str, dict[str, str]]:
    """The plan's target placement: its actions applied to the state, replicas on Up nodes."""
    plan = json.loads(small_dump_plan.read_text())
    target = apply_actions(load_state(small_dump_plan.parent / "state.json").document, plan["Actions"])
    up = {n["NodeName"] for n in target["Nodes"] if n.get("NodeStatus", "Up") == "Up"}
    return {
        str(p["PartitionId"]): {r["NodeName"]: r["Role"] for r in p["Replicas"] if r.get("NodeName") in up}
        for p in target["Partitions"]
    }


def _carried_out(small_dump_plan: Path, sim: Simulator) -> None:
    """The cluster is the plan's target, and each of its moves was accepted once."""
    plan = json.loads(small_dump_plan.read_text())
    assert sim.placement() == _target(small_dump_plan)
    moves = Counter(
        (str(a["PartitionId"]), a["Action"], a["TargetNode"]) for a in plan["Actions"] if a["Action"] in MOVES
    )
    assert Counter((m.partition_id, m.kind, m.target) for m in sim.moves) == moves


def _in_order(steps: list, sim: Simulator) -> None:
    """Each move started after the moves it needs had finished (in simulated time)."""
    moves = {(m.partition_id, m.kind, m.target): m for m in sim.moves}

    def move(step) -> Move:
        return moves[(str(step.action.partition), step.action.kind, step.action.target)]

    pairs = [(move(steps[d]), move(s)) for s in steps if s.command for d in s.needs if steps[d].command]
    assert pairs and all(m.finished is not None and m.finished <= n.started for m, n in pairs)


def _steps(small_dump_plan: Path) -> list:
    """The plan's steps, as its script (exported with --state) numbers them."""
    read = read_plan(small_dump_plan)
    return order(read.actions, read.nodes, action_loads(small_dump_plan.parent / "state.json", read.actions))


@pytest.mark.parametrize("fmt", [SLOW_SFCTL, "rest"])  # tests/sf/live/test_sfctl.py: a short plan
def test_the_script_carries_the_plan_out(small_dump_plan, cluster, tmp_path, fmt):
    """sfctl (the stand-in) or curl against the simulated bundled dump: every step done, the end confirmed."""
    done = cluster.run(_script(small_dump_plan, fmt, tmp_path))
    assert done.returncode == 0, done.stderr
    _carried_out(small_dump_plan, cluster.sim)
    steps = _steps(small_dump_plan)
    _in_order(steps, cluster.sim)
    lines = [STAMPED.sub("", line) for line in done.stderr.splitlines()]
    assert lines[-1] == f"all {len(steps)} step(s) done"
    for k, step in enumerate(steps, 1):
        said = f"step {k}/{len(steps)}"
        assert sum(line.startswith(f"{said}: ") for line in lines) == step.command
        assert any(line.startswith((f"{said} done", f"{said} already done")) for line in lines), said


def _refuse(cluster: Cluster, small_dump_plan: Path) -> tuple[int, dict]:
    """SF refuses the first step that waits for another (k, its action): FABRIC_E_CONSTRAINT_NOT_SATISFIED."""
    k, a = next((k, s.action.document()) for k, s in enumerate(_steps(small_dump_plan), 1) if s.command and s.needs)
    post = "MovePrimary" if a["Action"] == SWAP[0] else a["Action"]
    cluster.sim.refuse_next(str(a["PartitionId"]), post, code="FABRIC_E_CONSTRAINT_NOT_SATISFIED")
    return k, a


@pytest.mark.parametrize("fmt", [SLOW_SFCTL, "rest"])  # tests/sf/live/test_sfctl.py: a short plan
def test_a_refused_move_stops_the_script_naming_the_step_and_sfs_error(small_dump_plan, cluster, tmp_path, fmt):
    k, a = _refuse(cluster, small_dump_plan)
    posts = cluster.posts()
    done = cluster.run(_script(small_dump_plan, fmt, tmp_path))
    assert done.returncode == 4
    assert STAMPED.sub("", done.stderr.splitlines()[-1]) == (
        f"stopped: step {k}/{len(_steps(small_dump_plan))} ({a['Action']} {a['ServiceName']} partition {a['PartitionId']} "
        f"{a['SourceNode']} -> {a['TargetNode']}) refused: FABRIC_E_CONSTRAINT_NOT_SATISFIED: "
        "The operation failed because a constraint was not satisfied."
    )
    assert cluster.posts() - posts == sum(s.command for s in _steps(small_dump_plan)[:k])  # nothing after it


def test_a_stopped_script_run_again_from_that_step_finishes(small_dump_plan, cluster, tmp_path):
    """PLBJAX_START_AT=k: the steps before k are not issued again, and no move is accepted twice."""
    k, _ = _refuse(cluster, small_dump_plan)
    script = _script(small_dump_plan, "rest", tmp_path)
    assert cluster.run(script).returncode == 4
    posts = cluster.posts()
    again = cluster.run(script, PLBJAX_START_AT=str(k))
    assert again.returncode == 0, again.stderr
    assert cluster.posts() - posts == sum(
        s.command for s in _steps(small_dump_plan)[k - 1 :]
    )  # from step k on, each once
    _carried_out(small_dump_plan, cluster.sim)


def test_a_finished_script_run_again_issues_nothing(small_dump_plan, cluster, tmp_path):
    script = _script(small_dump_plan, "rest", tmp_path)
    assert cluster.run(script).returncode == 0
    posts = cluster.posts()
    again = cluster.run(script)
    assert again.returncode == 0 and cluster.posts() == posts, again.stderr
    steps = _steps(small_dump_plan)
    assert again.stderr.count("already done, not issued") == sum(s.command for s in steps)
    _carried_out(small_dump_plan, cluster.sim)


def test_a_wait_that_times_out_stops_the_script_naming_the_step(small_dump_plan, cluster, tmp_path):
    steps = _steps(small_dump_plan)
    k, d = next((k, d) for k, s in enumerate(steps, 1) for d in s.needs if steps[d].action.kind != SWAP[0])
    needed = steps[d].action.document()
    cluster.sim.slow(str(needed["PartitionId"]), float("inf"))
    done = cluster.run(_script(small_dump_plan, "rest", tmp_path), PLBJAX_WAIT_TIMEOUT="1")
    assert done.returncode == 3
    last = STAMPED.sub("", done.stderr.splitlines()[-1])
    assert last.startswith(
        f"stopped: step {d + 1} ({needed['Action']} {needed['ServiceName']} partition {needed['PartitionId']} "
        f"{needed['SourceNode']} -> {needed['TargetNode']}) is not done after 1 s (PLBJAX_WAIT_TIMEOUT): "
    )
    assert last.endswith(f"; step {k} and those after it have not run")
    assert f"step {k}/{len(steps)}: " not in done.stderr


def test_an_add_the_failover_manager_made_elsewhere_is_confirmed_at_the_end(small_dump_plan, tmp_path):
    steps = _steps(small_dump_plan)
    k, add = next((k, s.action.document()) for k, s in enumerate(steps, 1) if s.action.kind is ActionKind.ADD_SECONDARY)
    sim = Simulator.from_dump(DUMPS / "small", **QUICK)  # its world moves on when asked: none asked yet

    def elsewhere(pid: str, kind: str, nodes: list[str]) -> str:
        return next(n for n in nodes if n != add["TargetNode"])

    sim.failover_choice = elsewhere
    with _served(sim, tmp_path) as cluster:
        done = cluster.run(_script(small_dump_plan, "rest", tmp_path))
    assert done.returncode == 0, done.stderr
    assert (
        f"step {k}/{len(steps)} done (placed elsewhere by the Failover Manager: the partition holds the 2 Ready "
        "ActiveSecondary(s) planned)"
    ) in done.stderr


def test_a_replica_not_where_the_plan_assumed_stops_the_script_in_sfs_words(small_dump_plan, cluster, tmp_path):
    steps = _steps(small_dump_plan)
    alone = Counter(str(s.action.partition) for s in steps)  # a partition with one step: this one
    k, a = next(
        (k, s.action.document())
        for k, s in enumerate(steps, 1)
        if s.action.kind is ActionKind.MOVE_SECONDARY and alone[str(s.action.partition)] == 1
    )
    pid, src = str(a["PartitionId"]), a["SourceNode"]
    free = sorted(
        {n["NodeName"] for n in json.loads(small_dump_plan.read_text())["Nodes"]} - set(cluster.sim.placement()[pid])
    )
    other = next(n for n in free if n not in (a["TargetNode"], "_BackEnd_2"))  # _BackEnd_2 is Down
    cluster.sfctl(
        "partition",
        "move-secondary-replica",
        "--partition-id",
        pid,
        "--current-node-name",
        src,
        "--new-node-name",
        other,
    )
    while src in cluster.sim.placement()[pid]:
        time.sleep(0.05)
    done = cluster.run(_script(small_dump_plan, "sfctl", tmp_path))
    assert done.returncode == 4
    assert STAMPED.sub("", done.stderr.splitlines()[-1]).startswith(f"stopped: step {k}/{len(steps)} (")
    assert done.stderr.endswith(
        f"the replica is not where the plan assumed: {src} holds no replica, not a Ready ActiveSecondary\n"
    )


def test_the_script_asks_again_while_the_cluster_does_not_answer(small_dump_plan, cluster, tmp_path):
    cluster.sim.unavailable(times=2)
    done = cluster.run(_script(small_dump_plan, "rest", tmp_path))
    assert done.returncode == 0, done.stderr
    assert "the cluster did not answer (FABRIC_E_SERVICE_TOO_BUSY: " in done.stderr
    _carried_out(small_dump_plan, cluster.sim)


@pytest.mark.slow  # a second plan: another run of the plbjax CLI
@pytest.mark.parametrize("fmt", ["sfctl", "rest"])
def test_the_script_carries_the_paged_dumps_plan_out(paged_dump_plan, tmp_path, fmt):
    """Its Failover Manager drops and adds where the plan says (follow_plan)."""
    sim = Simulator.from_dump(DUMPS / "paged", **QUICK)
    sim.follow_plan(json.loads(paged_dump_plan.read_text()))
    with _served(sim, tmp_path) as cluster:
        done = cluster.run(_script(paged_dump_plan, fmt, tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(f"plbjax: all {len(_steps(paged_dump_plan))} step(s) done\n")
    _carried_out(paged_dump_plan, sim)


@pytest.fixture(scope="module")
def generated_plan_path(tmp_path_factory) -> Path:
    """A generated cluster of 40 nodes and about 1,000 replicas, planned."""
    work = tmp_path_factory.mktemp("generated")
    size = ["--nodes", "40", "--services", "20", "--partitions-per-service", "17"]
    subprocess.run(["plbjax-generate", *size, "-o", str(work / "state.json")], check=True, timeout=120)
    state = json.loads((work / "state.json").read_text())
    assert 950 <= sum(len(p["Replicas"]) for p in state["Partitions"]) <= 1100
    return plan_state(work)


@pytest.mark.slow  # a plan of a 1,000-replica cluster, carried out one step at a time
@pytest.mark.parametrize("fmt", ["sfctl", "rest"])
def test_the_script_carries_a_generated_clusters_plan_out(generated_plan_path, tmp_path, fmt):
    """Every move accepted once, the cluster the plan's target, the end confirmed."""
    plan = json.loads(generated_plan_path.read_text())
    assert sum(a["Action"] in MOVES for a in plan["Actions"]) >= 20, "the plan should move replicas"
    sim = Simulator.from_state(generated_plan_path.parent / "state.json", build_seconds=2.0, clock_rate=50.0)
    sim.follow_plan(plan)
    # sfctl: the stand-in, as the real one (about 2 s a call) takes over 5 minutes on this plan's steps; the
    # real one runs the bundled dumps' plans (above; tests/sf/live/test_sfctl.py)
    with _served(sim, tmp_path, stand_in=True) as cluster:
        done = cluster.run(_script(generated_plan_path, fmt, tmp_path), PLBJAX_POLL_SECONDS="0.02")
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(f"plbjax: all {len(_steps(generated_plan_path))} step(s) done\n")
    _carried_out(generated_plan_path, sim)
