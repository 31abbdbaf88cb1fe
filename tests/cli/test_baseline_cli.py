"""plbjax-baseline: the sequential annealer from the command line, on plbjax's config: a plan
document written like plbjax's, its sweeps summarised by the same tables."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from conftest import cluster

pytest.importorskip("numba")

RUN = "import sys; from plbjax.console_scripts import plbjax_baseline as m; sys.argv[0] = 'plbjax-baseline'; sys.exit(m())"


def _baseline(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_a_plan_and_a_sweep_of_the_baseline(tmp_path):
    """`plbjax-baseline STATE out=...`: a plan whose Provenance names the command; `-m` over two
    seeds: summary.csv and jobs.parquet list both jobs with their program and the input's hash."""
    (tmp_path / "s.json").write_text(json.dumps(cluster(0)))
    done = _baseline(tmp_path, "s.json", "out=plan.json", "search.steps=5000")
    assert done.returncode == 0, done.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["Provenance"]["Command"][0] == "plbjax-baseline" and plan["Search"]["Steps"] == 5000
    assert "phases run: Balancing" in done.stdout
    done = _baseline(tmp_path, "-m", "state=s.json", "search.seed=0,1", "search.steps=5000", "hydra.sweep.dir=sw")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(tmp_path / "sw" / "summary.csv")))
    assert [r["search.seed"] for r in rows] == ["0", "1"] and {r["program"] for r in rows} == {"plbjax-baseline"}
    assert (
        rows[0]["input_sha256"] == plan["Provenance"]["Input"]["Sha256"] and (tmp_path / "sw" / "jobs.parquet").exists()
    )


def test_bad_input_is_one_line_exit_2(tmp_path):
    """A state the baseline cannot plan (a hard constraint broken) and a key plbjax's config lacks
    each exit 2 with one line naming why."""
    from conftest import packed_cluster

    (tmp_path / "s.json").write_text(json.dumps(packed_cluster()))
    done = _baseline(tmp_path, "s.json")
    assert done.returncode == 2 and "only balances" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    done = _baseline(tmp_path, "s.json", "search.seedz=1")
    assert done.returncode == 2 and done.stderr.strip() == (
        "plbjax-baseline: bad config: search.seedz: unknown config key (did you mean 'search.seed'?)"
    )
