"""Sweeps that mean something: the README's example gives a different outcome per value, the summary
says where it is, and its plot's labels do not overlap."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys

import pytest
from paths import ROOT

ROOT = ROOT
FAST = ["search.chains=4", "search.steps=1000", "search.block_steps=250"]


def test_the_readme_sweep_gives_a_different_outcome_per_value(tmp_path):
    """The README's sweep over the bundled example (a shorter search): each value its own row, no two
    alike; the summary's path is printed."""
    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("$ plbjax -m "))
    args = [a.replace("examples/", f"{ROOT}/examples/") for a in shlex.split(line)[2:]]
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "plbjax.cli", *args, f"hydra.sweep.dir={sweep}", *FAST],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert f"sweep summary written to {sweep / 'summary.md'}" in done.stdout
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    outcomes = [(r["actions"], r["score_after"], r["imbalanced_before"], r["imbalanced_after"]) for r in rows]
    assert len(rows) == 3 and len(set(outcomes)) == 3, outcomes


def _rows(n: int) -> list[dict]:
    """`n` jobs, most ending alike or nearly alike (labels that would sit on each other)."""
    return [
        {
            "job": str(i),
            "balancing.activity_threshold": str(i),
            "search.seed": str(i % 2),
            "status": "ok",
            "actions": 7 if i % 3 else 0,
            "score_before": 1.3848,
            "score_after": 0.9789 + 0.0003 * (i % 4) if i % 3 else 1.3848,
            "seconds": 1.0,
        }
        for i in range(n)
    ]


def test_the_sweep_plot_shows_each_configuration_with_its_interval():
    """One point per configuration (its swept keys in the legend, with n), at the mean over its
    seeds, with the 95 % confidence intervals as error bars; every job a faint dot; axes named."""
    from matplotlib.container import ErrorbarContainer

    from plbjax.sweep import figure

    rows = [
        dict(row, **{"balancing.activity_threshold": str(i % 3), "search.seed": str(i // 3)})
        for i, row in enumerate(_rows(12))
    ]
    fig = figure(rows)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [n for n in names if n.startswith("balancing")] == [
        f"balancing.activity_threshold={k} (n=4)" for k in ("0", "1", "2")
    ]
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 3 and all(c.has_yerr for c in bars)
    assert ax.get_xlabel() == "actions in the plan" and ax.get_ylabel() == "AvgStdDev after the plan"


def test_a_replay_sweep_has_its_own_columns(tmp_path):
    """A replay sweep's table: time-averaged AvgStdDev, movements, rounds, violations, unplaced and
    wall time from each job's summary.json; a job without a record is still listed as a replay's."""
    import json

    import yaml

    from plbjax.sweep import write_summary

    for job, threshold in (("0", 1.1), ("1", 2)):
        (tmp_path / job / ".hydra").mkdir(parents=True)
        overrides = [f"balancing.threshold={threshold}", "timeline=day.yaml"]
        (tmp_path / job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
        (tmp_path / job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"timeline": "day.yaml"}))
    summary = {
        "Rounds": {"Balancing": 8, "Placement": 1},
        "Actions": {"MovePrimary": 4},
        "CumulativeMovements": 16,
        "TimeAveragedAvgStdDev": 0.95158,
        "MaxViolations": 15,
        "FinalUnplaced": 0,
        "Seconds": 43.162,
        "SimulatedSeconds": 630.0,
        "Interrupted": False,
        "CancelledActions": 0,
    }
    (tmp_path / "0" / "summary.json").write_text(json.dumps(summary))
    rows = write_summary(tmp_path)
    assert list(rows[0]) == [
        "job",
        "balancing.threshold",  # a column per swept key (timeline= is common to both)
        "status",
        "time_averaged_avg_std_dev",
        "movements",
        "rounds",
        "max_violations",
        "final_unplaced",
        "wall_seconds",
        "version",
        "program",
        "input_sha256",
    ]
    table = (tmp_path / "summary.md").read_text().splitlines()[2:]  # below "N job(s) by plbjax V"
    assert table[0].startswith("| job | balancing.threshold | status | time-averaged AvgStdDev | movements | rounds |")
    assert table[2] == "| 0 | 1.1 | ok | 0.9516 | 16 | Balancing 8, Placement 1 | 15 | 0 | 43.16 |"
    assert table[3] == "| 1 | 2 | no record (killed or crashed) | - | - | - | - | - | - |"
    assert (tmp_path / "summary.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_readme_thresholds_by_temperatures_sweep_rows_differ(tmp_path):
    """README's sweep of balancing thresholds x initial temperatures, with the movement throttle
    lifted by `+settings.MaxPercentageToMove=1`, on its tiny generated cluster (fewer steps, one
    seed): no two rows alike, no job stopped by the throttle, seeds aggregated per configuration."""
    from plbjax.generate_cli import main as generate

    lines = (ROOT / "README.md").read_text().splitlines()
    generating = next(line for line in lines if line.startswith("plbjax-generate ") and "tiny.json" in line)
    generate(shlex.split(generating.split("#")[0])[1:] + ["-o", str(tmp_path / "tiny.json")])
    line = next(line for line in lines if line.startswith("plbjax -m tiny.json "))
    args = [a for a in shlex.split(line.split("#")[0])[2:] if not a.startswith("search.seed=")]
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "plbjax.cli",
            "-m",
            *args,
            "search.seed=0,1",
            "search.steps=2000",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert len([line for line in done.stdout.splitlines() if line.startswith("plbjax: job ")]) == 8  # a line a job
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert {"balancing.threshold", "search.initial_temperature", "search.seed"} <= set(rows[0])  # a column a key
    first = [r for r in rows if r["search.seed"] == "0"]
    outcomes = [(r["actions"], r["score_after"], r["imbalanced_after"]) for r in first]
    assert len(first) == 4 and len(set(outcomes)) == 4, outcomes
    for job in first:
        plan = json.loads((sweep / job["job"] / "plan.json").read_text())
        assert not any(p.get("Throttle") and "stopped at the throttle" in p.get("Stopped", "") for p in plan["Phases"])
    groups = list(csv.DictReader(open(sweep / "summary-by-config.csv")))
    assert len(groups) == 4 and all(g["n"] == "2" for g in groups)
    assert "mean ± standard deviation" in (sweep / "summary.md").read_text()


def _job(sweep, job: str, overrides: list[str], plan: dict | None = None, failed: str | None = None) -> None:
    import yaml

    (sweep / job / ".hydra").mkdir(parents=True)
    (sweep / job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    if plan is not None:
        (sweep / job / "plan.json").write_text(json.dumps(plan))
    if failed is not None:
        (sweep / job / "failed.txt").write_text(failed + "\n")


def _plan(actions: int, after: float, energy: float, t0: float) -> dict:
    """The parts of a plan document the summary reads, with the per-phase Search records."""
    records = [
        {
            "Phase": "Balancing",
            "Stopped": "converged",
            "Blocks": 4,
            "Steps": 1024,
            "InitialTemperature": t0,
            "Energy": energy + 1,
        },
        {
            "Phase": "FewestMovements",
            "Stopped": "steps",
            "Blocks": 1,
            "Steps": 64,
            "InitialTemperature": 0.0,
            "Energy": energy,
        },
    ]
    return {
        "Actions": [{}] * actions,
        "Phases": [{"Phase": "Balancing", "Ran": True, "Movements": {"Allowed": 9, "Used": actions}}],
        "Score": {"Before": 1.5, "After": after},
        "Balance": [{"Metric": "CPU", "IsBalancedBefore": False, "IsBalancedAfter": after < 1}],
        "Search": {"Steps": 1088, "Seconds": 2.0, "Version": "0.1.0+gabc", "Phases": records},
    }


def test_a_column_per_swept_key_and_the_seeds_aggregated(tmp_path):
    """Two thresholds x two seeds and a failed job: a column per swept key (a `+settings.` key by its
    name), T0 and steps per phase searched, the final energy; per threshold the seeds' mean, standard
    deviation, the mean's 95 % confidence interval (Student's t over the seeds: 12.706 x 7.07 / sqrt 2
    for two), min and max (summary-by-config.csv, summary.md); the failed job listed in FAILURES."""
    from plbjax import sweep

    common = ["state=s.yaml", "+settings.MaxPercentageToMove=1"]
    _job(tmp_path, "0", [*common, "balancing.threshold=1.1", "search.seed=0"], _plan(4, 0.5, 100.0, 7.0))
    _job(tmp_path, "1", [*common, "balancing.threshold=1.1", "search.seed=1"], _plan(6, 0.7, 110.0, 8.0))
    _job(tmp_path, "2", [*common, "balancing.threshold=2", "search.seed=0"], _plan(2, 1.2, 130.0, 5.0))
    _job(tmp_path, "3", [*common, "balancing.threshold=2", "search.seed=1"], failed="bad input: x")
    rows = sweep.write_summary(tmp_path)
    assert list(rows[0])[:4] == ["job", "balancing.threshold", "search.seed", "status"]
    assert rows[0]["energy"] == 100.0 and rows[0]["movements"] == 4 and rows[0]["steps"] == 1088
    assert rows[0]["t0_Balancing"] == 7.0 and rows[0]["steps_FewestMovements"] == 64
    assert rows[3]["status"] == "bad input: x" and rows[3]["energy"] is None
    assert sweep.FAILURES == ["3: bad input: x"]
    groups = list(csv.DictReader(open(tmp_path / "summary-by-config.csv")))
    assert [(g["balancing.threshold"], g["jobs"], g["n"]) for g in groups] == [("1.1", "0 1", "2"), ("2", "2 3", "1")]
    assert float(groups[0]["energy_mean"]) == 105.0 and float(groups[0]["energy_std"]) == pytest.approx(50**0.5)
    assert (groups[0]["actions_min"], groups[0]["actions_max"]) == ("4", "6")
    assert float(groups[0]["energy_ci95_low"]) == pytest.approx(105 - 12.706 * 5)
    assert float(groups[0]["energy_ci95_high"]) == pytest.approx(105 + 12.706 * 5)
    assert groups[1]["energy_ci95_low"] == ""  # one job: no interval
    md = (tmp_path / "summary.md").read_text()
    assert "| 1.1 | 0 1 | 2 | 105 ± 7.07107 (95 % CI 41.47 to 168.53) [100, 110] |" in md
    assert "Student's t" in md and "- job 3: bad input: x" in md
    csv_rows = list(csv.DictReader(open(tmp_path / "summary.csv")))
    assert csv_rows[1]["search.seed"] == "1" and csv_rows[1]["version"] == "0.1.0+gabc"


def test_a_job_that_fails_is_listed_and_the_sweep_exits_1(tmp_path):
    """A job whose plot cannot be drawn (an error that is not bad input, after its plan is written):
    one line on stderr, its error in the summary, the traceback in the job's log, exit status 1."""
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "plbjax.cli", "-m", f"state={ROOT}/examples/small.yaml", "plot=a.png,b.nope"]
        + [f"hydra.sweep.dir={sweep}", *FAST],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("plbjax: 1 job(s) failed: 1: error: ValueError: ")
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert rows[0]["status"] == "ok" and rows[1]["status"].startswith("error: ValueError: ")
    assert "Traceback" in next((sweep / "1").glob("*.log")).read_text() and "Traceback" not in done.stderr
