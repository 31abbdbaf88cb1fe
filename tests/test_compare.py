"""plbjax-compare: two sweeps joined on their swept keys and input, B - A per configuration with
Welch's 95 % interval; the jobs' Parquet table; one line and exit 2 for what is not comparable."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from plbjax import compare, sweep


def _sweep(folder, scores: dict[str, list[float]], input_hash: str = "abc", actions: int = 5) -> None:
    """A sweep folder whose jobs (one per threshold and seed) left plans scoring `scores[threshold]`."""
    job = 0
    for threshold, values in scores.items():
        for seed, after in enumerate(values):
            path = folder / str(job)
            (path / ".hydra").mkdir(parents=True)
            (path / ".hydra" / "overrides.yaml").write_text(
                yaml.safe_dump([f"balancing.threshold={threshold}", f"search.seed={seed}"])
            )
            plan = {
                "Actions": [{}] * (actions + seed),
                "Phases": [{"Phase": "Balancing", "Ran": True, "Movements": {"Allowed": None, "Used": actions}}],
                "Score": {"Before": 1.5, "After": after},
                "Balance": [{"Metric": "CPU", "IsBalancedBefore": False, "IsBalancedAfter": True}],
                "Search": {"Steps": 10, "Seconds": 1.0, "Version": "0.1.0"},
                "Provenance": {"Command": ["plbjax"], "Input": {"Path": "s.json", "Sha256": input_hash}},
            }
            (path / "plan.json").write_text(json.dumps(plan))
            job += 1
    sweep.write_summary(folder)


def test_welch_interval_by_hand():
    """a = 1 2 3, b = 2 4 6: difference 2, standard error sqrt(1/3 + 4/3), Welch-Satterthwaite
    df 2.94 (t with 2 df: 4.303)."""
    out = compare.welch([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    half = 4.303 * (5 / 3) ** 0.5
    assert out["difference"] == 2.0 and out["df"] == pytest.approx(2.941, abs=1e-3)
    assert (out["ci95_low"], out["ci95_high"]) == (pytest.approx(2 - half), pytest.approx(2 + half))
    assert compare.welch([1.0], [2.0, 3.0])["ci95_low"] is None  # one seed: no interval


def test_two_sweeps_joined_per_configuration(tmp_path, capsys):
    """Each threshold of A paired with the same of B on the same input; the table, compare.csv and
    compare.md say B - A with its interval; the figure is written; Parquet and CSV read alike."""
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    _sweep(a, {"1.1": [0.5, 0.6, 0.7], "2": [0.9, 1.0, 1.1]})
    _sweep(b, {"1.1": [0.4, 0.5, 0.6], "3": [0.1, 0.2, 0.3]})
    assert (a / "jobs.parquet").exists()
    assert compare.main([str(a), str(b), "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "compare.csv")))
    score = [r for r in rows if r["number"] == "score_after"]
    assert [r["configuration"] for r in score] == ["balancing.threshold=1.1"]
    assert float(score[0]["difference"]) == pytest.approx(-0.1)
    assert float(score[0]["ci95_low"]) < -0.1 < float(score[0]["ci95_high"])
    assert "Welch" in (out / "compare.md").read_text() and (out / "compare.png").stat().st_size > 0
    assert "comparison written to" in capsys.readouterr().out
    (a / "jobs.parquet").unlink()  # the CSV gives the same
    assert [r["difference"] for r in compare.compare(compare.read_sweep(a), compare.read_sweep(b))] == [
        pytest.approx(float(r["difference"])) for r in rows
    ]


def test_the_jobs_table_is_typed(tmp_path):
    """jobs.parquet holds summary.csv's rows with numbers as numbers and the input's hash."""
    import pyarrow.parquet as pq

    _sweep(tmp_path, {"1.1": [0.5, 0.6]})
    rows = pq.read_table(tmp_path / "jobs.parquet").to_pylist()
    assert rows[1]["score_after"] == 0.6 and rows[1]["actions"] == 6 and rows[1]["input_sha256"] == "abc"
    assert rows[0]["program"] == "plbjax" and rows[0]["search.seed"] == "0"


def test_a_column_mixing_text_and_numbers_is_kept_as_text(tmp_path):
    """No job's value is lost to a type: a column of numbers and text is written as text."""
    import pyarrow.parquet as pq

    sweep.write_jobs_table(tmp_path / "jobs.parquet", [{"job": "0", "x": 1.5}, {"job": "1", "x": "n/a"}, {"job": "2"}])
    assert pq.read_table(tmp_path / "jobs.parquet").to_pylist() == [
        {"job": "0", "x": "1.5"},
        {"job": "1", "x": "n/a"},
        {"job": "2", "x": None},
    ]


def test_not_comparable_exits_2_with_one_line(tmp_path, capsys):
    """A folder that is no sweep, and sweeps of different inputs, each one line and exit 2."""
    a, b = tmp_path / "a", tmp_path / "b"
    _sweep(a, {"1.1": [0.5, 0.6]})
    _sweep(b, {"1.1": [0.5, 0.6]}, input_hash="other")
    assert compare.main([str(a), str(tmp_path / "nothing")]) == 2
    assert compare.main([str(a), str(b), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "not a sweep" in err[0] and "share no configuration" in err[1]


def test_help_gives_three_examples(capsys):
    """--help, as every argparse command's: three examples of the command."""
    with pytest.raises(SystemExit) as done:
        compare.main(["--help"])
    examples = capsys.readouterr().out.split("examples:\n", 1)[1].splitlines()
    assert done.value.code == 0 and sum(line.startswith("  plbjax-compare ") for line in examples) == 3
