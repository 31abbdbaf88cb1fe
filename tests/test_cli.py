"""The command line as a user runs it: a plan from the bundled example, sweeps, and bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "small.yaml"
FAST = ["search.chains=4", "search.steps=1000", "anneal.block_steps=250"]


def plbjax(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "plbjax.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_plan_from_example(tmp_path):
    out, png = tmp_path / "plan.json", tmp_path / "loads.png"
    done = plbjax(f"state={EXAMPLE}", f"out={out}", f"plot={png}", f"hydra.run.dir={tmp_path / 'run'}",
                  *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    schema = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())
    jsonschema.validate(plan, schema)
    assert plan == json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["Actions"] and plan["Score"]["After"] < plan["Score"]["Before"]
    assert png.stat().st_size > 1000
    assert "AvgStdDev" in done.stdout


def test_cpu_preset_runs_one_parallel_chain(tmp_path):
    out = tmp_path / "plan.json"
    done = plbjax(f"state={EXAMPLE}", f"out={out}", "+preset=cpu", "search.seconds=2", "anneal.block_steps=100",
                  f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    assert plan["Search"]["Chains"] == 1 and plan["Score"]["After"] < plan["Score"]["Before"]


def test_sweep_writes_summary(tmp_path):
    sweep = tmp_path / "sweep"
    done = plbjax("-m", f"state={EXAMPLE}", "balancing.activity_threshold=0,100000", f"hydra.sweep.dir={sweep}",
                  *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["overrides"] for r in rows] == ["balancing.activity_threshold=0", "balancing.activity_threshold=100000"]
    assert int(rows[0]["actions"]) > 0 and int(rows[1]["actions"]) == 0
    assert (sweep / "summary.png").exists() and (sweep / "0" / "plan.json").exists()


def _bad(tmp_path, doc) -> Path:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("args, needle", [
    (["state=does-not-exist.json"], "does-not-exist.json"),
    ([f"state={EXAMPLE}", "search.chains=abc"], "search.chains"),
    ([f"state={EXAMPLE}", "search.chainz=4"], "chainz"),
    ([f"state={EXAMPLE}", "anneal.population=maybe"], "anneal.population"),
    ([f"state={EXAMPLE}", "search.room=0"], "search.room"),
    ([], "state"),
])
def test_bad_arguments_exit_2(tmp_path, args, needle):
    done = plbjax(*args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["Nodes"][0].update(FaultDomain=5), "Nodes[0].FaultDomain"),
    (lambda d: d["Services"][0].update(TargetReplicaCount=3), "TargetReplicaCount"),
    (lambda d: d["Partitions"][0]["Replicas"][0].update(NodeName="Nowhere"), "Nowhere"),
    (lambda d: d["Settings"].update(NoSuchSetting=1), "NoSuchSetting"),
    (lambda d: d["Services"][1].update(PlacementConstraints="NodeType == && x"), "PlacementConstraints"),
])
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
    done = plbjax("-m", "hydra/launcher=local", "hydra.launcher.n_jobs=2", "device.memory_fraction=0.4",
                  "search.tries=4", f"state={EXAMPLE}", "search.seed=0,1", f"hydra.sweep.dir={sweep}", *FAST,
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["overrides"] for r in rows] == ["search.seed=0", "search.seed=1"]
    assert all(int(r["actions"]) > 0 for r in rows)
