"""SF's real clients against the simulator: the exported sfctl script run with the real sfctl (installed
by the test extra), and plbjax-apply finding each plan partition by its service and id as SF serves it.

The real sfctl takes about half a second a call on a quiet machine (more on a loaded one), so the fast
tests carry out plans of a few steps; the bundled dump's 12-step plan is in the slow set."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path

import pytest
from paths import ROOT, TESTS

from plbjax.sf.live.apply.command import main as apply_main
from plbjax.sf.live.export import main as export_main
from plbjax.sf.live.simulator import Simulator

pytestmark = pytest.mark.skipif(shutil.which("sfctl") is None, reason="the real sfctl is not installed")

EXAMPLE = ROOT / "examples" / "small.yaml"
STAMPED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ plbjax: ")
QUICK = {"build_seconds": 2.0, "clock_rate": 20.0, "seed": 0}  # a build: 0.1 s of wall time
SESSIONS_0 = str(uuid.uuid5(uuid.NAMESPACE_URL, "fabric:/Shop/Sessions/0"))  # its id reused: the simulator's GUID


def _action(service: str, pid: str, rid: str, kind: str, src: str, dst: str) -> dict:
    return {"ServiceName": service, "PartitionId": pid, "ReplicaId": rid, "Action": kind, "SourceNode": src,
            "TargetNode": dst}  # fmt: skip


ORDERS_1 = _action("fabric:/Shop/Orders", "1", "110", "MovePrimary", "N1", "N4")
ORDERS_2 = _action("fabric:/Shop/Orders", "2", "122", "MoveSecondary", "N5", "N3")
WEB_0 = _action("fabric:/Shop/Web", "web-0", "w0b", "MoveInstance", "N1", "N2")
ORDERS_0 = _action("fabric:/Shop/Orders", "0", "100", "MovePrimary", "N0", "N3")
SESSIONS = _action("fabric:/Shop/Sessions", "0", "202", "MoveSecondary", "N5", "N4")  # PartitionId 0 twice


def _plan(tmp_path: Path, *actions: dict) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"Actions": list(actions)}))
    return path


def _real_sfctl(home: Path, endpoint: str) -> dict[str, str]:
    """The environment of a script run with the real sfctl, selected on `endpoint` in `home`."""
    env = os.environ | {
        "HOME": str(home),
        "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != TESTS / "bin"),
        "PLBJAX_POLL_SECONDS": "0.1",
        "PLBJAX_WAIT_TIMEOUT": "240",
        "PYTHONWARNINGS": "ignore",  # sfctl warns that its version is not the cluster's
    }
    assert shutil.which("sfctl", path=env["PATH"]) != str(TESTS / "bin" / "sfctl")
    subprocess.run(["sfctl", "cluster", "select", "--endpoint", endpoint], env=env, check=True, capture_output=True)
    return env


def _export(plan: Path, state: Path, tmp_path: Path) -> Path:
    out = tmp_path / "moves.sh"
    export_main([str(plan), "--format", "sfctl", "--state", str(state), "-o", str(out)])
    return out


def _run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=540)


def _verify(plan: Path, state: Path, endpoint: str, capsys) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        apply_main([str(plan), "--state", str(state), "--endpoint", endpoint, "--insecure", "--verify"])
    return int(ended.value.code or 0), capsys.readouterr().out


def test_the_exported_sfctl_script_with_the_real_sfctl_reaches_the_plans_target(tmp_path, capsys):
    """Each move once, in the plan's order, every step confirmed; plbjax-apply --verify then finds no difference."""
    plan = _plan(tmp_path, ORDERS_1, ORDERS_2, WEB_0)
    sim = Simulator.from_state(EXAMPLE, **QUICK)
    with sim.serve() as endpoint:
        done = _run(_export(plan, EXAMPLE, tmp_path), _real_sfctl(tmp_path, endpoint))
        assert done.returncode == 0, done.stderr
        assert _verify(plan, EXAMPLE, endpoint, capsys) == (0, "the cluster matches the plan's target\n")
    lines = [STAMPED.sub("", line) for line in done.stderr.splitlines() if STAMPED.match(line)]
    assert lines[-1] == "all 3 step(s) done"
    assert [line.split(":")[0] for line in lines if re.match(r"step \d/3: ", line)] == [
        "step 1/3",
        "step 2/3",
        "step 3/3",
    ]
    moved = Counter((m.partition_id, m.kind, m.target) for m in sim.moves)
    assert moved == Counter({("1", "MovePrimary", "N4"): 1, ("2", "MoveSecondary", "N3"): 1,
                             ("web-0", "MoveInstance", "N2"): 1})  # fmt: skip
    placement = sim.placement()
    assert placement["1"]["N4"] == "Primary" and "N5" not in placement["2"] and "N1" not in placement["web-0"]


def test_a_move_sf_refuses_stops_the_real_sfctl_script_with_sfs_error(tmp_path):
    """The real sfctl's error output (knack's '(CODE) Message' and a traceback) read as the script reads it."""
    plan = _plan(tmp_path, ORDERS_1, WEB_0)
    sim = Simulator.from_state(EXAMPLE, **QUICK)
    sim.refuse_next("web-0", "MoveInstance", code="FABRIC_E_CONSTRAINT_NOT_SATISFIED")
    with sim.serve() as endpoint:
        done = _run(_export(plan, EXAMPLE, tmp_path), _real_sfctl(tmp_path, endpoint))
    assert done.returncode == 4, done.stderr
    last = STAMPED.sub("", done.stderr.splitlines()[-1])
    assert last == (
        "stopped: step 2/2 (MoveInstance fabric:/Shop/Web partition web-0 N1 -> N2) refused: "
        "FABRIC_E_CONSTRAINT_NOT_SATISFIED: The operation failed because a constraint was not satisfied."
    )
    assert [(m.partition_id, m.kind) for m in sim.moves] == [("1", "MovePrimary")]


def test_apply_finds_each_partition_by_its_service_and_id(tmp_path, capsys):
    """examples/small.yaml gives PartitionId 0 to Orders and to Sessions; the simulator (as SF: ids are unique)
    serves Sessions' under another id. The apply moves each where the plan says and --verify finds no difference."""
    plan = _plan(tmp_path, ORDERS_0, SESSIONS, WEB_0)
    sim = Simulator.from_state(EXAMPLE, **QUICK)
    with sim.serve() as endpoint:
        args = [str(plan), "--state", str(EXAMPLE), "--endpoint", endpoint, "--insecure", "--poll", "0.1"]
        with pytest.raises(SystemExit) as ended:
            apply_main([*args, "--no-progress"])
        assert ended.value.code == 0, capsys.readouterr().err
        assert _verify(plan, EXAMPLE, endpoint, capsys) == (0, "the cluster matches the plan's target\n")
    placement = sim.placement()
    assert placement["0"] == {"N3": "Primary", "N1": "Secondary", "N2": "Secondary"}
    assert placement[SESSIONS_0] == {"N0": "Primary", "N1": "Secondary", "N4": "Secondary"}
    assert Counter(m.partition_id for m in sim.moves) == Counter({"0": 1, SESSIONS_0: 1, "web-0": 1})


@pytest.mark.slow  # 12 steps, about 30 real sfctl calls
def test_the_bundled_dumps_plan_with_the_real_sfctl(small_dump_plan, tmp_path, capsys):
    state = small_dump_plan.parent / "state.json"
    sim = Simulator.from_dump(TESTS / "data" / "sf-dump" / "small", **QUICK)
    sim.follow_plan(json.loads(small_dump_plan.read_text()))
    with sim.serve() as endpoint:
        done = _run(_export(small_dump_plan, state, tmp_path), _real_sfctl(tmp_path, endpoint))
        assert done.returncode == 0, done.stderr
        assert _verify(small_dump_plan, state, endpoint, capsys) == (0, "the cluster matches the plan's target\n")
    plan = json.loads(small_dump_plan.read_text())
    posts = Counter(
        (str(a["PartitionId"]), a["TargetNode"]) for a in plan["Actions"] if a["Action"].startswith(("Move", "Swap"))
    )
    assert Counter((m.partition_id, m.target) for m in sim.moves) == posts
