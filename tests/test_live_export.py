"""plbjax-export: dump -> import -> plan (the plbjax CLI) -> commands -> parsed back = the plan's movements."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from plbjax.sf.live.export import export_plan, main
from plbjax.sf.live.importer import main as import_main

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
    method, url = line.split(" ", 1)
    assert method == "POST"
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


def _commands(text: str) -> list[str]:
    """The command lines: neither comments nor the script's preamble (interpreter line, stop on error)."""
    return [line for line in text.splitlines() if line and not line.startswith(("#", "set -e", "$ErrorAction"))]


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


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_round_trip_gives_exactly_the_plans_movements(plan_path, fmt, tmp_path):
    plan = json.loads(plan_path.read_text())
    out = tmp_path / f"plan.{fmt}"
    main([str(plan_path), "--format", fmt, "-o", str(out)])
    text = out.read_text()
    expected = [_movement(a) for a in plan["Actions"] if a["Action"] in MOVES]
    assert expected, "the fixture's plan should move something"
    assert [PARSERS[fmt](line) for line in _commands(text)] == expected
    header = [line for line in text.splitlines() if line.startswith("# ")]
    assert str(plan_path) in header[0] and "Nothing has run" in "\n".join(header)
    assert f"{plan['Score']['Before']:.6g} -> {plan['Score']['After']:.6g}" in header[1]
    others = [a for a in plan["Actions"] if a["Action"] not in MOVES]
    assert sum("no command; the Failover Manager" in line for line in header) == len(others)


def _plan(*actions: dict) -> dict:
    return {"Score": {"Before": 2.0, "After": 1.0}, "Actions": list(actions)}


def _action(kind: str, source: str | None, target: str | None, service: str = "fabric:/Shop/Orders") -> dict:
    return {
        "ServiceName": service,
        "PartitionId": PID,
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
    assert parsed == [_movement(a) for a in actions if a["Action"] in MOVES]
    for kind in ("AddSecondary", "DropSecondary", "PromoteSecondary"):
        assert sum(line.startswith(f"# {kind} ") for line in text.splitlines()) == 1


def test_sfctl_names_the_service_by_its_id():
    line = _commands(export_plan(_plan(_action("MoveInstance", "N1", "N2", "fabric:/Shop/Web")), "sfctl"))[0]
    assert "--service-id 'Shop~Web'" in line
    rest = _commands(export_plan(_plan(_action("MoveInstance", "N1", "N2", "fabric:/Shop/Web")), "rest"))[0]
    assert rest.startswith(f"POST /Services/Shop~Web/$/GetPartitions/{PID}/$/MoveInstance?api-version=8.0&")


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


def test_stdout_by_default(tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(_action("MovePrimary", "N0", "N2"))))
    main([str(path), "--format", "powershell"])
    assert _commands(capsys.readouterr().out) == [
        f"Move-ServiceFabricPrimaryReplica -PartitionId '{PID}' -ServiceName 'fabric:/Shop/Orders' -NodeName 'N2'"
    ]


@pytest.mark.parametrize(
    "fmt, first, stop",
    [("sfctl", "#!/bin/sh", "set -e"), ("powershell", "#!/usr/bin/env pwsh", "$ErrorActionPreference = 'Stop'")],
)
def test_a_script_starts_with_its_interpreter_and_stops_at_the_first_failure(tmp_path, fmt, first, stop):
    out = tmp_path / "moves"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan(_action("MovePrimary", "N0", "N2"))))
    main([str(path), "--format", fmt, "-o", str(out)])
    lines = out.read_text().splitlines()
    assert lines[0] == first and lines[1].startswith(stop)
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()  # executable, as the user's umask allows


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_failing_command_stops_the_sfctl_script(tmp_path):
    """set -e: the command after a failed one does not run (sfctl replaced by a stub that fails once)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    stub = bin_dir / "sfctl"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncase "$*" in *N2*) exit 1;; esac\n')
    stub.chmod(0o755)
    script = tmp_path / "moves.sh"
    script.write_text(
        export_plan(_plan(_action("MovePrimary", "N0", "N2"), _action("MovePrimary", "N1", "N3")), "sfctl")
    )
    done = subprocess.run(["sh", str(script)], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True)
    assert done.returncode != 0 and log.read_text().count("\n") == 1


def test_a_move_onto_a_node_an_earlier_move_leaves_waits_for_it():
    actions = [
        _action("MoveSecondary", "N1", "N2"),
        _action("MoveInstance", "N3", "N4", "fabric:/Shop/Web"),
        _action("MoveSecondary", "N5", "N1"),  # onto N1, which the first move leaves
        _action("AddSecondary", None, "N3"),  # the Failover Manager's: no command, no wait
    ]
    lines = export_plan(_plan(*actions), "sfctl").splitlines()
    waits = [i for i, line in enumerate(lines) if line.startswith("# wait:")]
    assert len(waits) == 1
    assert "off N1" in lines[waits[0]] and "onto N1" in lines[waits[0]]
    assert "--new-node-name N1" in lines[waits[0] + 1] and "--new-node-name N2" in lines[waits[0] - 2]
