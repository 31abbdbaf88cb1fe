"""The command line as a user runs it: a plan from the bundled example, sweeps, and bad input."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml
from paths import ROOT

from plbjax.version import VERSION

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "small.yaml"
FAST = ["search.chains=4", "search.steps=1000", "search.block_steps=250"]


def plbjax(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "plbjax.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_plan_from_example(tmp_path):
    out, png = tmp_path / "plan.json", tmp_path / "loads.png"
    done = plbjax(
        f"state={EXAMPLE}", f"out={out}", f"plot={png}", f"hydra.run.dir={tmp_path / 'run'}", *FAST, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    schema = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())
    jsonschema.validate(plan, schema)
    assert plan == json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["Actions"] and plan["Score"]["After"] < plan["Score"]["Before"]
    assert plan["Search"]["Budget"] == "steps" and plan["Search"]["Minimal"] and plan["Search"]["Version"] == VERSION
    assert png.stat().st_size > 1000
    assert "AvgStdDev" in done.stdout


def test_cpu_preset_runs_one_parallel_chain(tmp_path):
    out = tmp_path / "plan.json"
    done = plbjax(
        f"state={EXAMPLE}",
        f"out={out}",
        "+preset=cpu",
        "search.seconds=null",  # steps, not a clock, bound the search: the same on a loaded machine
        "search.steps=500",
        "search.block_steps=100",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    assert plan["Search"]["Chains"] == 1 and plan["Score"]["After"] < plan["Score"]["Before"]


def test_sweep_writes_summary(tmp_path):
    sweep = tmp_path / "sweep"
    done = plbjax(
        "-m",
        f"state={EXAMPLE}",
        "balancing.activity_threshold=0,100000",
        f"hydra.sweep.dir={sweep}",
        *FAST,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["balancing.activity_threshold"] for r in rows] == ["0", "100000"]  # a column per swept key
    assert int(rows[0]["actions"]) > 0 and int(rows[1]["actions"]) == 0
    assert (sweep / "summary.png").exists() and (sweep / "0" / "plan.json").exists()
    assert all(r["version"] == VERSION for r in rows)  # the plbjax that made each job's plan
    assert (sweep / "summary.md").read_text().startswith(f"2 job(s) by plbjax {VERSION}\n")


def test_a_sweep_job_with_bad_input_is_listed_and_the_others_run(tmp_path):
    sweep = tmp_path / "sweep"
    done = plbjax(
        "-m",
        f"state={EXAMPLE}",
        "search.chains=2,0",
        f"hydra.sweep.dir={sweep}",
        "search.steps=500",
        "search.block_steps=250",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr  # a sweep with a failed job exits non-zero, naming it
    assert done.stderr.strip().splitlines()[-1].startswith("plbjax: 1 job(s) failed: 1: bad input: search.chains")
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["status"] for r in rows][0] == "ok" and "search.chains" in rows[1]["status"]
    assert int(rows[0]["actions"]) > 0 and rows[1]["actions"] == ""
    assert "- job 1: bad input: search.chains" in (sweep / "summary.md").read_text()


def _bad(tmp_path, doc) -> Path:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "args, needle",
    [
        (["state=does-not-exist.json"], "does-not-exist.json"),
        ([f"state={EXAMPLE}", "search.chains=abc"], "search.chains"),
        ([f"state={EXAMPLE}", "search.chainz=4"], "chainz"),
        ([f"state={EXAMPLE}", "search.population=maybe"], "search.population"),
        ([f"state={EXAMPLE}", "search.room=0"], "search.room"),
        ([f"state={EXAMPLE}", "refresh=maybe"], "refresh"),
        ([f"state={EXAMPLE}", "out=."], "out"),
        ([f"state={EXAMPLE}", "nonsense"], "nonsense"),
        ([], "state"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, args, needle):
    done = plbjax(*args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not list(tmp_path.glob("outputs/*/*/plan.json"))  # refused before any search


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d: d["Nodes"][0].update(FaultDomain=5), "Nodes[0].FaultDomain"),
        (lambda d: d["Services"][0].update(TargetReplicaCount=3), "TargetReplicaCount"),
        (lambda d: d["Partitions"][0]["Replicas"][0].update(NodeName="Nowhere"), "Nowhere"),
        (lambda d: d["Settings"].update(NoSuchSetting=1), "NoSuchSetting"),
        (lambda d: d["Services"][1].update(PlacementConstraints="NodeType == && x"), "PlacementConstraints"),
        (lambda d: d["NodeTypes"][0]["Capacities"].update(CPU=10**400), "NodeTypes[0].Capacities.CPU"),
        (lambda d: d["Partitions"][0]["Replicas"][0].update(Loads={"CPU": 1e308}), "Loads.CPU"),
    ],
)
def test_bad_documents_exit_2_and_stay_untouched(tmp_path, edit, needle):
    doc = yaml.safe_load(EXAMPLE.read_text())
    edit(doc)
    path = _bad(tmp_path, doc)
    text = path.read_text()
    done = plbjax(f"state={path}", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert path.read_text() == text


def test_parallel_sweep_with_the_local_launcher(tmp_path):
    """conf/hydra/launcher/local.yaml: jobs in separate processes, each with its share of GPU memory."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = tmp_path / "sweep"
    done = plbjax(
        "-m",
        "hydra/launcher=local",
        "hydra.launcher.n_jobs=2",
        "device.memory_fraction=0.4",
        "search.tries=4",
        f"state={EXAMPLE}",
        "search.seed=0,1",
        f"hydra.sweep.dir={sweep}",
        *FAST,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["search.seed"] for r in rows] == ["0", "1"]
    assert all(int(r["actions"]) > 0 for r in rows)


def test_sigterm_mid_search_writes_the_best_plan_found(tmp_path):
    """SIGTERM (a batch scheduler's time limit) ends the search at its next block: the plan found so
    far is written whole, applies to the input, breaks no hard rule, and says it was interrupted."""
    from validity import breaks

    state = tmp_path / "big.json"
    assert (
        subprocess.run(
            [
                sys.executable,
                "-m",
                "plbjax.generate_cli",
                "--nodes",
                "200",
                "--services",
                "20",
                "--skew",
                "0.9",
                "-o",
                state,
            ],
            capture_output=True,
        ).returncode
        == 0
    )
    out = tmp_path / "plan.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plbjax.cli",
            f"state={state}",
            f"out={out}",
            "search.steps=null",
            "search.seconds=120",
            "search.block_steps=200",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # progress lines start after a few seconds of search
        if re.match(r"plbjax: \w+: search \d", line):  # e.g. plbjax: Balancing: search 3/9 blocks
            break
    started = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 143 and time.perf_counter() - started < 30, stdout  # 128 + SIGTERM, after the plan
    plan = json.loads(out.read_text())
    assert plan["Search"]["Interrupted"] and plan["Search"]["Minimal"] and "interrupted" in stdout
    doc = json.loads(state.read_text())
    assert breaks(doc, {s["ServiceName"]: (lambda n: True) for s in doc["Services"]}, plan) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".plan.json")]


def test_search_seconds_bound_the_whole_run():
    """Placement, constraint check and balancing together stay within `search.seconds`."""
    from plbjax import SearchConfig, parse_state, plan

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["Partitions"][0]["Replicas"].pop()  # something to place
    result = plan(
        parse_state(doc), SearchConfig(chains=2, steps=None, seconds=3, block_steps=100, tries=1, parallel=False)
    ).document()
    ran = [p["Phase"] for p in result["Phases"] if p["Ran"]]
    assert "Placement" in ran and "Balancing" in ran
    assert result["Search"]["Seconds"] <= 3.3 and not result["Search"]["Interrupted"]


def test_an_output_file_is_replaced_whole_or_not_at_all(tmp_path):
    from plbjax.files import atomic_path, write_text

    target = tmp_path / "plan.json"
    write_text(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed while writing")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]
    write_text(target, "new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_outputs_keep_the_users_umask(tmp_path):
    """plan.json (run directory and out=), the plot: mode 0666 less the umask, as any write would give."""
    out, png, run = tmp_path / "plan.json", tmp_path / "loads.png", tmp_path / "run"
    done = plbjax(f"state={EXAMPLE}", f"out={out}", f"plot={png}", f"hydra.run.dir={run}", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for path in (out, png, run / "plan.json"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~_umask(), path


def test_atomic_writes_follow_the_umask(tmp_path):
    from plbjax.files import write_text

    previous = os.umask(0o027)
    try:
        write_text(tmp_path / "a.txt", "x")
        write_text(tmp_path / "b.sh", "x", executable=True)
    finally:
        os.umask(previous)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b.sh").stat().st_mode & 0o777 == 0o750


def test_help_names_every_key_with_its_default_and_meaning(tmp_path):
    from plbjax.help import keys

    done = plbjax("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for key in keys("plbjax"):
        line = next((line for line in lines if line.strip().startswith(f"{key}=")), None)
        assert line is not None, key
        assert len(line.split(maxsplit=1)) == 2, f"{key} has no meaning: {line!r}"
    assert "search.seconds=null" in done.stdout and "state=???" in done.stdout
    assert "Search.Budget" in done.stdout  # which rule bounds the search
    assert "+settings.NAME=VALUE" in done.stdout and "+preset=cpu" in done.stdout
    examples = lines[lines.index("== Examples ==") + 1 :]
    assert sum(line.strip().startswith("plbjax ") for line in examples) == 3
    assert "is powered by Hydra" not in done.stdout


SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]  # command -> module:function


@pytest.mark.parametrize("command", [*sorted(SCRIPTS), "plbjax-generate timeline"])
def test_every_commands_help_gives_the_exit_statuses_after_a_signal(command, tmp_path):
    name, *words = command.split()
    module, function = SCRIPTS[name].split(":")
    code = f"import sys; from {module} import {function}; sys.exit({function}())"
    done = subprocess.run(
        [sys.executable, "-c", code, *words, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "130 after Ctrl-C (SIGINT), 143 after SIGTERM" in " ".join(done.stdout.split()), done.stdout


def test_replay_help_names_every_key(tmp_path):
    from plbjax.help import keys

    done = subprocess.run(
        [sys.executable, "-c", "from plbjax.cli import replay_main; replay_main()", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for key in keys("plbjax-replay"):
        assert f"  {key}=" in done.stdout, key
    assert "search.steps=2000" in done.stdout and "plbjax-replay -m timeline=" in done.stdout


def test_a_bare_path_is_the_state_and_preset_needs_no_plus(tmp_path):
    out = tmp_path / "plan.json"
    done = plbjax(
        str(EXAMPLE), "preset=cpu", f"out={out}", "search.seconds=1", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    assert plan["Search"]["Chains"] == 1  # preset cpu: one chain
    overrides = yaml.safe_load((tmp_path / "run" / ".hydra" / "overrides.yaml").read_text())
    assert f"state={EXAMPLE}" in overrides and "+preset=cpu" in overrides


@pytest.mark.parametrize(
    "args, line",
    [
        ([f"state={EXAMPLE}", "search.secnds=3"], "search.secnds: unknown config key (did you mean 'search.seconds'?)"),
        ([f"state={EXAMPLE}", "balancing.treshold=2"], "did you mean 'balancing.threshold'?"),
        ([str(EXAMPLE), "other.yaml"], "other.yaml: not key=value (the state is named once, as state=PATH)"),
        ([str(EXAMPLE), "+search.chainz=4"], "search.chainz: unknown config key (did you mean 'search.chains'?)"),
        ([str(EXAMPLE), "preset=cpuu"], "preset=cpuu: no such preset (did you mean 'cpu'?) (one of: cpu, gpu)"),
        (
            [str(EXAMPLE), "+settings.MaxPercentageToMov=1"],  # checked as the state's Settings are
            f"{EXAMPLE}: Settings.MaxPercentageToMov: unknown PlacementAndLoadBalancing setting "
            "(did you mean 'MaxPercentageToMove'?)",
        ),
    ],
)
def test_a_misspelled_key_or_a_second_path_gets_a_one_line_hint(tmp_path, args, line):
    done = plbjax(*args, cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert line in done.stderr


def test_a_run_refusing_its_input_leaves_no_run_directory(tmp_path):
    done = plbjax("state=does-not-exist.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "outputs").exists(), list(tmp_path.rglob("*"))


def test_plain_forms_become_hydras():
    from plbjax.cli.apps import plain_forms

    assert plain_forms(["day.yaml", "out=r"], "timeline") == ["timeline=day.yaml", "out=r"]
    assert plain_forms(["-m", "s.yaml", "preset=cpu,gpu"], "state") == ["-m", "state=s.yaml", "+preset=cpu,gpu"]
    assert plain_forms(["--cfg", "job", "state=s.yaml", "+preset=gpu"], "state") == [
        "--cfg",
        "job",
        "state=s.yaml",
        "+preset=gpu",
    ]
