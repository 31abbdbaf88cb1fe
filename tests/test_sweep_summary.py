"""Sweeps that mean something: the README's example gives a different outcome per value, the summary
says where it is, and its plot's labels do not overlap."""

from __future__ import annotations

import csv
import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
            "overrides": f"balancing.activity_threshold={i} search.seed={i % 2}",
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
    key = fig.axes[1].texts[0].get_text()
    assert all(re.search(rf"^{i}: balancing", key, re.M) for i in range(12))  # what each job varied
