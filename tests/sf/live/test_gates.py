"""plbjax-apply's health and upgrade gates and its watch on SF's own balancer, against the SF simulator's
injected faults: a partition in Error, a node in Warning, a cluster upgrade, a replica moved mid-plan."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from planned import DUMPS

from plbjax.sf.live.apply.command import main
from plbjax.sf.live.simulator import Simulator

COMMANDS = ("MovePrimary", "MoveSecondary", "MoveInstance", "SwapPrimarySecondary")


def _copy(plan: Path, tmp_path: Path) -> Path:
    for name in ("plan.json", "state.json"):
        (tmp_path / name).write_text((plan.parent / name).read_text())
    return tmp_path / "plan.json"


def _apply(plan: Path, endpoint: str, *extra: str) -> int:
    args = [str(plan), "--endpoint", endpoint, "--insecure", "--poll", "0.05", "--no-progress", *extra]
    try:
        main([*args, "--state", str(plan.parent / "state.json")])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _sim(plan: Path, **options) -> Simulator:
    sim = Simulator.from_dump(DUMPS / "small", **({"build_seconds": 2.0, "clock_rate": 20.0} | options))
    sim.follow_plan(json.loads(plan.read_text()))
    return sim


def _commands(plan: Path) -> list[dict]:
    return [a for a in json.loads(plan.read_text())["Actions"] if a["Action"] in COMMANDS]


def _twice(sim: Simulator) -> list:
    seen = Counter((m.kind, m.partition_id, m.source, m.target) for m in sim.moves)
    return [m for m, n in seen.items() if n > 1]


def test_a_partition_in_error_is_held_then_skipped_after_the_timeout(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    moves = _commands(plan)
    pid = moves[0]["PartitionId"]
    sim = _sim(plan)
    sim.health("partition", pid, "Error")
    with sim.serve() as url:
        assert _apply(plan, url, "--health-timeout", "0.5") == 4
    err = capsys.readouterr().err
    mine = sum(a["PartitionId"] == pid for a in moves)
    held = [line for line in err.splitlines() if f": held: partition {pid} is Error (SF's health)" in line]
    skipped = [
        line
        for line in err.splitlines()
        if f": skipped: partition {pid} is Error (SF's health), still after 0.5 s (--health-timeout)" in line
    ]
    assert len(held) == 1 and len(skipped) == 1, err  # the partition's later steps need the first: knock-on
    assert not [m for m in sim.moves if m.partition_id.lower() == pid.lower()]
    others = len({a["PartitionId"] for a in moves} - {pid})
    assert len({m.partition_id.lower() for m in sim.moves}) == others and not _twice(sim)
    assert "1 held by the health and upgrade gates (1 of them skipped)" in err
    assert mine >= 1


def test_a_node_in_warning_holds_only_with_strict_health(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    moves = _commands(plan)
    node = moves[0]["TargetNode"]
    sim = _sim(plan)
    sim.health("node", node, "Warning")
    with sim.serve() as url:
        assert _apply(plan, url) == 0
    err = capsys.readouterr().err
    assert ": held: " not in err and "0 held by the health and upgrade gates (0 of them skipped)" in err

    (tmp_path / "strict").mkdir()
    strict = _copy(small_dump_plan, tmp_path / "strict")
    sim = _sim(strict)
    sim.health("node", node, "Warning")
    with sim.serve() as url:
        assert _apply(strict, url, "--strict-health", "--health-timeout", "0.5") == 4
    err = capsys.readouterr().err
    assert f": held: node {node} is Warning (SF's health)" in err
    assert f": skipped: node {node} is Warning (SF's health), still after 0.5 s" in err
    assert not [m for m in sim.moves if node in (m.source, m.target)] and not _twice(sim)


def test_a_cluster_upgrade_holds_every_step_until_it_completes(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    sim.upgrade(seconds=30.0)  # simulated: 1.5 s at 20x
    with sim.serve() as url:
        assert _apply(plan, url, "--health-timeout", "120") == 0
    err = capsys.readouterr().err
    assert "a cluster upgrade is RollingForwardInProgress: every move held (--during-upgrade)" in err
    assert ": held: a cluster upgrade is RollingForwardInProgress" in err
    held = [line for line in err.splitlines() if ": held: " in line]
    first_move = next(i for i, line in enumerate(err.splitlines()) if ": started" in line)
    assert all(err.splitlines().index(line) < first_move for line in held)
    assert "verification: as planned" in err and not _twice(sim)
    assert len(sim.moves) == len(_commands(plan))


def test_a_rolling_upgrade_skips_after_the_timeout_or_continues_when_asked(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    sim = _sim(plan)
    sim.upgrade()  # rolls until the simulator stops
    with sim.serve() as url:
        assert _apply(plan, url, "--health-timeout", "0.3") == 4
        assert not sim.moves
    err = capsys.readouterr().err
    assert "a cluster upgrade is RollingForwardInProgress, still after 0.3 s (--health-timeout)" in err
    (tmp_path / "go").mkdir()
    plan = _copy(small_dump_plan, tmp_path / "go")
    sim = _sim(plan)
    sim.upgrade()
    with sim.serve() as url:
        assert _apply(plan, url, "--during-upgrade", "continue") == 0
    assert len(sim.moves) == len(_commands(plan))


def test_a_replica_moved_by_sfs_balancer_mid_plan_is_reported_and_its_step_rechecked(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    moves = _commands(plan)
    per = Counter(a["PartitionId"] for a in moves)
    pid = max(per, key=lambda p: (per[p], p))
    last = [a for a in moves if a["PartitionId"] == pid and a["Action"] == "MoveSecondary"][-1]
    sim = _sim(plan)
    first = moves[0]["PartitionId"]
    assert first != pid
    sim.balancer_move(pid, last["SourceNode"], last["TargetNode"], after_moves=1)
    with sim.serve() as url:
        code = _apply(plan, url)
    err = capsys.readouterr().err
    reported = [line for line in err.splitlines() if "changed without a step of the plan (SF's balancer" in line]
    assert len(reported) == 1, err
    assert pid in reported[0] and last["SourceNode"] in reported[0] and "re-checked before it is sent" in reported[0]
    assert f"{last['SourceNode']} -> {last['TargetNode']}" in reported[0]  # the step it affects
    step = reported[0].split(": its partition changed")[0].split("Z ", 1)[1]
    assert f"{step}: done: the cluster already shows it" in err  # re-checked: found made, not sent again
    sent = [
        m
        for m in sim.moves
        if (m.partition_id.lower(), m.source, m.target) == (pid.lower(), last["SourceNode"], last["TargetNode"])
    ]
    assert len(sent) <= 1  # the balancer's move only
    assert code in (0, 1, 4) and not _twice(sim)


def test_an_application_upgrade_holds_only_its_own_moves(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    moves = _commands(plan)
    sim = _sim(plan)
    sim.upgrade(application="Shop")  # rolls until the simulator stops
    with sim.serve() as url:
        assert _apply(plan, url, "--health-timeout", "0.3") == 4
    err = capsys.readouterr().err
    assert "an upgrade of application fabric:/Shop is RollingForwardInProgress, still after 0.3 s" in err
    assert "a cluster upgrade" not in err
    sent = {m.partition_id.lower() for m in sim.moves}
    assert sent == {a["PartitionId"].lower() for a in moves if not a["ServiceName"].startswith("fabric:/Shop/")}


def test_health_and_upgrade_are_read_at_most_once_per_poll(small_dump_plan, tmp_path, capsys):
    plan = _copy(small_dump_plan, tmp_path)
    pid = _commands(plan)[0]["PartitionId"]
    sim = _sim(plan)
    sim.health("partition", pid, "Error")
    with sim.serve() as url:
        began = time.monotonic()
        assert _apply(plan, url, "--poll", "0.2", "--health-timeout", "1") == 4
        most = (time.monotonic() - began) / 0.2 + 2  # the reads a run this long may make, measured not asserted
    paths = [path.split("?")[0] for _, path in sim.requests]
    assert 1 <= paths.count("/$/GetUpgradeProgress") <= most
    assert 1 <= paths.count("/$/GetClusterHealth") <= most
    assert 1 <= sum(p.lower() == f"/partitions/{pid}/$/gethealth".lower() for p in paths) <= most
