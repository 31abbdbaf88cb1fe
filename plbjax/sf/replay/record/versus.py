"""The replay beside SF's observed day (`observed`): `sf-series.csv` (SF's series on the replay's time
axis), the summary's `VersusSF` entry (both over the observed periods: time-averaged AvgStdDev,
movements, worst violations; which did better and by how much) and `versus-sf.png`."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from plbjax.files import write_figure, write_text
from plbjax.sf.replay.record.observed import Beside, SfRow, sf_series
from plbjax.sf.replay.record.series import number, rows_of, simulated_time, time_average
from plbjax.sf.replay.types import Replay, Row

SF_COLUMNS = ("Time", "Utc", "AvgStdDev", "ImbalancedMetrics", "Violations", "Unplaced", "Moves", "Swaps")
FILES = ("sf-series.csv", "versus-sf.png")


def write_versus(replay: Replay, beside: Beside, out: str | Path) -> dict:
    """Write sf-series.csv and versus-sf.png into `out` (SF's series: `beside`'s day measured by
    its probe); the summary's `VersusSF` entry."""
    out, sf = Path(out), sf_series(*beside)
    write_text(out / FILES[0], sf_csv(sf))
    plot_versus(replay, sf, out / FILES[1])
    return versus(replay, sf)


def sf_csv(sf: Sequence[SfRow]) -> str:
    """SF's series: `SF_COLUMNS`, CumulativeMovements, then one Violations.<kind> per kind any period breaks."""
    kinds = sorted({k for row in sf for k in row.needs.violations_by_kind})
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*SF_COLUMNS, "CumulativeMovements", *(f"Violations.{k}" for k in kinds)])
    for row in sf:
        needs = row.needs
        imbalanced = ";".join(sorted({metric for metric, _ in needs.imbalanced}))
        writer.writerow(
            [simulated_time(row.time), row.utc, number(needs.avg_std_dev), imbalanced, needs.violations]
            + [needs.unplaced, row.moves, row.swaps, row.cumulative_movements]
            + [needs.violations_by_kind.get(k, 0) for k in kinds]
        )
    return buffer.getvalue()


def versus(replay: Replay, sf: Sequence[SfRow]) -> dict:
    """Both over [first, last observed period]. `TimeAveragedAvgStdDev`: sampled alike, at the
    periods (the replay's last row at or before each; a sample holds to the next), as an observer
    of both clusters at the periods would see them; the replay's over all its rows besides
    (`TimeAveragedAvgStdDevAllRows`). Movements (SF's: seen between periods, so a replica moved and
    moved back between two is none), worst violations; `Better` ("replay", "SF" or "tie": the lower
    sampled average), `AvgStdDevLower` (by how much, and as a percentage of the higher)."""
    start, end = sf[0].time, sf[-1].time
    rows = rows_of(replay)
    sampled = [(r.time, _at(rows, r.time).needs.avg_std_dev) for r in sf] if rows else []
    mine = {
        "TimeAveragedAvgStdDev": window_average(sampled, start, end),
        "TimeAveragedAvgStdDevAllRows": window_average([(r.time, r.needs.avg_std_dev) for r in rows], start, end),
        "Movements": _at(rows, end).cumulative_movements - _at(rows, start).cumulative_movements if rows else 0,
        "MaxViolations": max((r.needs.violations for r in rows if start <= r.time <= end), default=0),
    }
    theirs = {
        "TimeAveragedAvgStdDev": window_average([(r.time, r.needs.avg_std_dev) for r in sf], start, end),
        "Movements": sf[-1].cumulative_movements,
        "MaxViolations": max(r.needs.violations for r in sf),
    }
    a, b = mine["TimeAveragedAvgStdDev"], theirs["TimeAveragedAvgStdDev"]
    better = "tie" if abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0) else "replay" if a < b else "SF"
    worse = max(a, b)
    return {
        "Periods": len(sf),
        "From": simulated_time(start),
        "To": simulated_time(end),
        "Replay": mine,
        "SF": theirs,
        "Better": better,
        "AvgStdDevLower": round(abs(a - b), 6),
        "AvgStdDevLowerPercent": round(100 * abs(a - b) / worse, 2) if worse > 0 else 0.0,
    }


def told(replay: Replay, beside: Beside) -> str:
    """The comparison in one sentence, for the replay's story."""
    entry = versus(replay, sf_series(*beside))
    mine, theirs = entry["Replay"], entry["SF"]
    told = (
        f"Beside SF's observed day ({entry['Periods']} periods): AvgStdDev at the periods, time-averaged, "
        f"{mine['TimeAveragedAvgStdDev']:.4f} replayed, {theirs['TimeAveragedAvgStdDev']:.4f} SF's; "
        f"{mine['Movements']} movements replayed, {theirs['Movements']} SF's"
    )
    if entry["Better"] == "tie":
        return told + "; a tie."
    return told + f"; {entry['Better']} better by {entry['AvgStdDevLowerPercent']:g}%."


def window_average(samples: list[tuple[float, float]], start: float, end: float) -> float:
    """The time average over [start, end] of a value that holds from its sample to the next."""
    before = [s for s in samples if s[0] <= start]
    inside = [s for s in samples if start < s[0] <= end]
    first = [(start, before[-1][1])] if before else []
    return time_average(first + inside, end)


def _at(rows: Sequence[Row], t: float) -> Row:
    """The last row at or before `t` (the first row if none is)."""
    return next((r for r in reversed(rows) if r.time <= t), rows[0])


def plot_versus(replay: Replay, sf: Sequence[SfRow], path: Path) -> None:
    """AvgStdDev of the replay and of SF over time, dots where both are sampled (top); the cumulative
    movements of both (bottom)."""
    rows = rows_of(replay)
    end = max(replay.duration, sf[-1].time, rows[-1].time if rows else 0.0)
    times = [r.time for r in rows] + [end]
    sf_times = [r.time for r in sf] + [end]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    if rows:
        top.step(
            times, [r.needs.avg_std_dev for r in rows] + [rows[-1].needs.avg_std_dev], where="post", label="replay"
        )
        cumulative = [r.cumulative_movements for r in rows]
        bottom.step(times, cumulative + cumulative[-1:], where="post", label="replay")
    top.step(sf_times, [r.needs.avg_std_dev for r in sf] + [sf[-1].needs.avg_std_dev], where="post", label="SF")
    top.plot([r.time for r in sf], [r.needs.avg_std_dev for r in sf], "o", color="C1", markersize=3)
    if rows:
        sampled = [_at(rows, r.time).needs.avg_std_dev for r in sf]
        top.plot([r.time for r in sf], sampled, "o", color="C0", markersize=3, label="replay at SF's periods")
    sf_cumulative = [r.cumulative_movements for r in sf]
    bottom.step(sf_times, sf_cumulative + sf_cumulative[-1:], where="post", label="SF (between periods)")
    top.set_ylabel("AvgStdDev")
    top.set_title("the replay beside SF's observed day")
    top.legend(fontsize=8)
    bottom.set_ylabel("cumulative movements")
    bottom.set_xlabel("simulated seconds from the timeline's start")
    bottom.legend(fontsize=8)
    write_figure(path, fig)
