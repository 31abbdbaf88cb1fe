"""Sweeps that mean something: the README's example gives a different outcome per value, the summary
says where it is, and its plot's labels do not overlap."""

from __future__ import annotations

import csv
import itertools
import json
import re
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


def test_the_sweep_plots_labels_do_not_overlap():
    from plbjax.sweep import figure

    fig = figure(_rows(12))
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    legend = ax.get_legend()
    boxes += [legend.get_window_extent(renderer)] if legend else []
    assert len(ax.texts) >= 2
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    assert len(fig.axes) == 1  # no panel beside it: summary.md says what each job varied
    labelled = {job for t in ax.texts for job in re.findall(r"\d+", t.get_text())}
    assert labelled == {str(i) for i in range(12)}


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
