"""plbjax-replay observed=: SF's observed day beside the replay's (issue 63): sf-series.csv, the
summary's VersusSF, versus-sf.png; a missing or bad observed file exits 2 naming it."""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import EXAMPLES

from plbjax import load_state, parse_state
from plbjax.cli.replay_command import load_observed
from plbjax.config import ReplayConfig
from plbjax.errors import BadInput
from plbjax.sf.replay.record.observed import movements
from plbjax.sf.replay.record.versus import window_average

REPLAY = "from plbjax.cli import replay_main; replay_main()"
QUICK = ["search.steps=50", "search.seconds=null", "search.chains=1", "search.tries=16"]


def _small() -> dict:
    return load_state(EXAMPLES / "small.yaml").document


def _moved(doc: dict) -> dict:
    """The small cluster after SF moved one secondary (Orders 0's from N2 to N3) and swapped one
    primary (Orders 1's, N1 and N0)."""
    doc = copy.deepcopy(doc)
    first, second = doc["Partitions"][0]["Replicas"], doc["Partitions"][1]["Replicas"]
    assert (first[2]["NodeName"], second[0]["NodeName"], second[1]["NodeName"]) == ("N2", "N1", "N0")
    first[2]["NodeName"] = "N3"
    second[0]["NodeName"], second[1]["NodeName"] = "N0", "N1"
    return doc


def _day(folder: Path) -> tuple[Path, Path]:
    """A 60 s timeline of the small cluster without events, and SF's day of it: periods at 0, 30
    (one move, one swap) and 60 (nothing moved)."""
    small = _small()
    timeline, observed = folder / "timeline.json", folder / "timeline.sf-day.json"
    timeline.write_text(json.dumps({"SchemaVersion": 1, "State": small, "Duration": 60, "Events": []}))
    states = [small, _moved(small), _moved(small)]
    periods = [{"Time": t, "Utc": f"2026-01-01T00:00:{t:02d}Z", "State": s} for t, s in zip((0, 30, 60), states)]
    observed.write_text(json.dumps({"SchemaVersion": 1, "Periods": periods}))
    return timeline, observed


def test_movements_are_replicas_on_another_node_and_primary_swaps() -> None:
    small = _small()
    assert movements(parse_state(small), parse_state(_moved(small))) == (1, 1)
    built = copy.deepcopy(small)  # a replica only added is no movement
    built["Partitions"][0]["Replicas"].append({"ReplicaId": 900, "Role": "Secondary", "NodeName": "N4"})
    assert movements(parse_state(small), parse_state(built)) == (0, 0)


def test_window_average_holds_each_value_to_the_next() -> None:
    samples = [(0.0, 4.0), (100.0, 2.0), (300.0, 1.0)]
    assert window_average(samples, 0.0, 400.0) == pytest.approx((4 * 100 + 2 * 200 + 1 * 100) / 400)
    assert window_average(samples, 200.0, 400.0) == pytest.approx((2 * 100 + 1 * 100) / 200)


def test_replay_with_observed_writes_sf_series_summary_and_plot(tmp_path: Path) -> None:
    timeline, observed = _day(tmp_path)
    out = tmp_path / "r"
    command = [sys.executable, "-c", REPLAY, f"timeline={timeline}", f"observed={observed}", f"out={out}", *QUICK]
    done = subprocess.run(command + [f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Beside SF's observed day (3 periods)" in done.stdout
    with (out / "sf-series.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [float(r["Time"]) for r in rows] == [0, 30, 60]
    assert [(r["Moves"], r["Swaps"], r["CumulativeMovements"]) for r in rows] == [
        ("0", "0", "0"),
        ("1", "1", "2"),
        ("0", "0", "2"),
    ]
    series = json.loads((out / "series.json").read_text())
    assert float(rows[0]["AvgStdDev"]) == pytest.approx(series[0]["AvgStdDev"])  # the same probe at time 0
    assert rows[0]["ImbalancedMetrics"] == series[0]["ImbalancedMetrics"]
    versus = json.loads((out / "summary.json").read_text())["VersusSF"]
    assert (versus["Periods"], versus["From"], versus["To"], versus["SF"]["Movements"]) == (3, 0, 60, 2)
    assert set(versus["Replay"]) == {
        "TimeAveragedAvgStdDev",
        "TimeAveragedAvgStdDevAllRows",
        "Movements",
        "MaxViolations",
    }
    assert versus["SF"]["TimeAveragedAvgStdDev"] == pytest.approx(
        sum(float(r["AvgStdDev"]) for r in rows[:2]) / 2  # 0 to 30 s, then 30 to 60 s
    )
    mine, theirs = versus["Replay"]["TimeAveragedAvgStdDev"], versus["SF"]["TimeAveragedAvgStdDev"]
    assert versus["Better"] == ("replay" if mine < theirs else "SF" if mine > theirs else "tie")
    assert versus["AvgStdDevLower"] == pytest.approx(abs(mine - theirs), abs=1e-6)
    assert (out / "versus-sf.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "cannot read"),
        ({"SchemaVersion": 1}, "Periods: required"),
        ({"Periods": [{"Time": 0}]}, "Periods[0].State: required"),
        ({"Periods": [{"Time": -1, "State": {}}]}, "Periods[0].Time: -1"),
        ({"Periods": [{"Time": 0, "State": {"Nodes": 3}}]}, "Periods[0].State:"),
    ],
)
def test_a_bad_observed_file_names_the_key(tmp_path: Path, content: object, message: str) -> None:
    path = tmp_path / "day.sf-day.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(BadInput) as bad:
        load_observed(ReplayConfig(timeline="timeline.json", observed=str(path)))
    assert str(bad.value).startswith(f"observed: {path}: ") and message in str(bad.value)
    assert "\n" not in str(bad.value)


def test_periods_out_of_order_name_the_period(tmp_path: Path) -> None:
    timeline, observed = _day(tmp_path)
    doc = json.loads(observed.read_text())
    doc["Periods"][2]["Time"] = 30
    observed.write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=r"Periods\[2\]\.Time: 30 is not after"):
        load_observed(ReplayConfig(timeline=str(timeline), observed=str(observed)))


def test_replay_with_a_missing_observed_file_exits_2(tmp_path: Path) -> None:
    timeline, _ = _day(tmp_path)
    missing = tmp_path / "nowhere.sf-day.json"
    command = [sys.executable, "-c", REPLAY, f"timeline={timeline}", f"observed={missing}", f"out={tmp_path / 'r'}"]
    done = subprocess.run(command + [f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "observed:" in lines[0] and str(missing) in lines[0]
    assert not (tmp_path / "r" / "summary.json").exists()
