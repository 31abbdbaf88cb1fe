"""Beyond one process, on existing engines: 4-job sweeps through Hydra's joblib launcher and through
the submitit launcher's local executor (the code path of its SLURM executor), and one plan made by
two processes joined by jax.distributed on the CPU (the coordinator on localhost, found the way a
SLURM job finds it)."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "small.yaml"
FAST = ["search.chains=4", "search.steps=1000", "search.block_steps=250"]
SEEDS = "search.seed=0,1,2,3"


def _plbjax(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "plbjax.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _sweep(launcher: list[str], tmp_path: Path) -> list[dict]:
    sweep = tmp_path / "sweep"
    run = _plbjax("-m", *launcher, f"state={EXAMPLE}", SEEDS, f"hydra.sweep.dir={sweep}", *FAST, cwd=tmp_path)
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, err
    assert f"sweep summary written to {sweep / 'summary.md'}" in out
    # a line a job, in the console or, for submitit's jobs, in their logs (as on SLURM)
    logs = "".join(log.read_text() for log in (sweep / ".submitit").glob("*/*_log.out"))
    assert len([line for line in (out + logs).splitlines() if line.startswith("plbjax: job ")]) == 4
    (group,) = csv.DictReader(open(sweep / "summary-by-config.csv"))  # the seeds of one configuration
    assert group["n"] == "4" and float(group["score_after_min"]) <= float(group["score_after_mean"])
    return list(csv.DictReader(open(sweep / "summary.csv")))


@pytest.mark.slow
def test_a_4_job_sweep_through_the_joblib_launcher(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    rows = _sweep(["hydra/launcher=local", "hydra.launcher.n_jobs=2", "device.memory_fraction=0.4"], tmp_path)
    assert [r["search.seed"] for r in rows] == [str(i) for i in range(4)]
    assert all(r["status"] == "ok" and int(r["actions"]) > 0 for r in rows)


@pytest.mark.slow
def test_a_4_job_sweep_through_the_submitit_launchers_local_executor(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    rows = _sweep(["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"], tmp_path)
    assert [r["search.seed"] for r in rows] == [str(i) for i in range(4)]
    assert all(r["status"] == "ok" and int(r["actions"]) > 0 for r in rows)
    assert len(list((tmp_path / "sweep" / ".submitit").iterdir())) >= 4  # submitit ran the jobs


def _free_port() -> int:
    """A free port in the range jax's SLURM detection derives from a job id (61440 + id mod 4096)."""
    for port in range(61440 + os.getpid() % 4000, 65536):
        with socket.socket() as s:
            try:
                s.bind(("localhost", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


@pytest.mark.slow
def test_two_processes_plan_one_cluster_with_jax_distributed(tmp_path):
    """device.distributed=true in two processes of one (simulated) SLURM step on this machine: each
    holds one CPU device, the 4 chains are split over both, both reach the same plan, process 0 writes it."""
    job = _free_port() - 61440
    runs = []
    for rank in (0, 1):
        env = os.environ | {
            "SLURM_JOB_ID": str(job),
            "SLURM_STEP_NODELIST": "localhost",
            "SLURM_NTASKS": "2",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank),
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
        }
        args = [f"state={EXAMPLE}", "device.distributed=true", f"out={tmp_path / f'plan{rank}.json'}", *FAST]
        runs.append(_plbjax(*args, f"hydra.run.dir={tmp_path / f'run{rank}'}", cwd=tmp_path, env=env))
    outs = [run.communicate(timeout=600) for run in runs]
    for rank, (run, (out, err)) in enumerate(zip(runs, outs)):
        assert run.returncode == 0, err
        assert f"plbjax: process {rank} of 2; the chains are split over 2 devices in all (1 here)" in out
    summaries = [next(line for line in out.splitlines() if line.startswith("plbjax: phases run")) for out, _ in outs]
    assert summaries[0].rsplit(";", 1)[0] == summaries[1].rsplit(";", 1)[0]  # the same plan (its time aside)
    plan = json.loads((tmp_path / "plan0.json").read_text())
    assert plan["Search"]["Chains"] == 4 and plan["Actions"]
    assert not (tmp_path / "plan1.json").exists()  # one process writes
