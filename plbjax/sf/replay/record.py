"""A replay's output directory (timeline.md §3): series, actions, final state, summary and plots.

Every file is written atomically (`plbjax.files`). The series has one column per metric that
any row reports (`MaxMinRatio.<metric>`, sorted; empty where a row lacks it).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from plbjax.files import write_figure, write_text
from plbjax.sf.replay.loop import Replay, Row
from plbjax.version import VERSION

COLUMNS = (
    "Time",
    "Trigger",
    "Phase",
    "NodeType",
    "Actions",
    "Moves",
    "Swaps",
    "Adds",
    "Drops",
    "Promotions",
    "CumulativeMovements",
    "AvgStdDev",
    "ImbalancedMetrics",
    "Violations",
    "Unplaced",
)
PLOTS = ("imbalance-movements.png", "node-loads.png")
MAX_LABELLED_NODES = 60  # more nodes: the heatmap's rows are not labelled, its height is capped


def series(replay: Replay) -> list[dict]:
    """The series rows as {column: value}, metrics' MaxMinRatio columns last (None where absent)."""
    metrics = sorted({m for row in replay.rows for m in row.needs.max_min_ratio})
    return [
        _columns(row) | {f"MaxMinRatio.{m}": _number(row.needs.max_min_ratio.get(m)) for m in metrics}
        for row in replay.rows
    ]


def _columns(row: Row) -> dict:
    imbalanced = sorted({metric for metric, _ in row.needs.imbalanced})
    return {
        "Time": simulated_time(row.time),
        "Trigger": row.trigger,
        "Phase": row.phase,
        "NodeType": row.node_type or "",
        **{k: row.counts[k] for k in COLUMNS[4:10]},
        "CumulativeMovements": row.cumulative_movements,
        "AvgStdDev": _number(row.needs.avg_std_dev),
        "ImbalancedMetrics": ";".join(imbalanced),
        "Violations": row.needs.violations,
        "Unplaced": row.needs.unplaced,
    }


def simulated_time(t: float) -> float:
    """A simulated time as written: refresh times are multiples of PLBRefreshGap computed in
    floating point (101 × 0.1 = 10.100000000000001), written to the nanosecond (10.1)."""
    return round(float(t), 9)


def _number(value: float | None) -> float | None:
    """JSON has no infinity (a ratio with a zero minimum): such a value is written as null."""
    return None if value is None or not math.isfinite(value) else float(value)


SUMMARY_KEYS = (
    "Rounds",
    "Actions",
    "CumulativeMovements",
    "TimeAveragedAvgStdDev",
    "MaxViolations",
    "FinalUnplaced",
    "Seconds",
    "SimulatedSeconds",
    "Interrupted",
    "CancelledActions",  # beyond §3: in-flight actions that no longer fitted when they completed
    "Version",  # the plbjax that played it
)


def summary(replay: Replay) -> dict:
    """Rounds and actions by kind, churn, time-averaged imbalance, worst violations, wall time:
    the keys of timeline.md §3 in that order, then `CancelledActions` (`SUMMARY_KEYS`). Actions by
    kind are the plan's action names (`MoveSecondary`, `AddInstance`, ...), as issued; a replay
    stopped early has `Interrupted` true and `SimulatedSeconds` the time it reached;
    `CancelledActions` counts those that no longer fitted when they completed."""
    actions: dict[str, int] = {}
    for action in replay.actions:
        actions[action["Action"]] = actions.get(action["Action"], 0) + 1
    rows = replay.rows
    return {
        "Rounds": dict(replay.rounds),
        "Actions": actions,
        "CumulativeMovements": rows[-1].cumulative_movements if rows else 0,
        "TimeAveragedAvgStdDev": time_average([(r.time, r.needs.avg_std_dev) for r in rows], replay.duration),
        "MaxViolations": max((r.needs.violations for r in rows), default=0),
        "FinalUnplaced": rows[-1].needs.unplaced if rows else 0,
        "Seconds": round(replay.seconds, 3),
        "SimulatedSeconds": replay.duration,
        "Interrupted": replay.interrupted,
        "CancelledActions": replay.cancelled,
        "Version": VERSION,
    }


def time_average(samples: list[tuple[float, float]], duration: float) -> float:
    """Average over [first sample, duration] of a value that holds from its sample to the next."""
    if not samples:
        return 0.0
    ends = [t for t, _ in samples[1:]] + [max(duration, samples[-1][0])]
    span = ends[-1] - samples[0][0]
    if span <= 0:
        return float(samples[-1][1])
    return float(sum(v * (end - t) for (t, v), end in zip(samples, ends)) / span)


def write_outputs(replay: Replay, out: str | Path) -> Path:
    """Write every output file into the folder `out` (created); returns it."""
    out = Path(out)
    rows = series(replay)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(out / "series.csv", buffer.getvalue())
    write_text(out / "series.json", json.dumps(rows, indent=1) + "\n")
    write_text(
        out / "actions.jsonl",
        "".join(json.dumps({**a, "Time": simulated_time(a["Time"])}) + "\n" for a in replay.actions),
    )
    write_text(out / "final-state.json", json.dumps(replay.final_state, indent=1) + "\n")
    write_text(out / "summary.json", json.dumps(summary(replay), indent=1) + "\n")
    for name, plot in zip(PLOTS, (plot_imbalance, plot_node_loads)):
        if replay.rows:
            plot(replay, out / name)
        else:
            _nothing(out / name)
    return out


def _nothing(path: Path) -> None:
    """The picture of a replay without a single row (no event, no round ran a phase)."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.text(0.5, 0.5, "no event and no PLB round in the simulated time", ha="center", va="center")
    ax.set_axis_off()
    write_figure(path, fig)


def plot_imbalance(replay: Replay, path: Path) -> None:
    """AvgStdDev and MaxMinRatio per metric over time; actions per round and cumulative movements."""
    rows = replay.rows
    times = [r.time for r in rows] + [max(replay.duration, rows[-1].time)]  # the last values hold to the end

    def held(values: list) -> list:
        return values + values[-1:]

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    top.step(times, held([r.needs.avg_std_dev for r in rows]), where="post", label="AvgStdDev", color="k")
    ratio = top.twinx()
    for metric in sorted({m for r in rows for m in r.needs.max_min_ratio}):
        values = [_number(r.needs.max_min_ratio.get(metric)) for r in rows]
        ratio.step(times, held([np.nan if v is None else v for v in values]), where="post", label=metric, alpha=0.6)
    top.set_ylabel("AvgStdDev")
    ratio.set_ylabel("max/min load")
    ratio.legend(fontsize=7, loc="upper right")
    bottom.bar(times[:-1], [r.counts["Actions"] for r in rows], width=max(replay.duration / 400, 1e-3), label="actions")
    bottom.step(
        times, held([r.cumulative_movements for r in rows]), where="post", color="C3", label="cumulative movements"
    )
    bottom.set_xlabel("simulated seconds")
    bottom.legend(fontsize=7)
    top.set_title("imbalance and movements over time")
    write_figure(path, fig)


def plot_node_loads(replay: Replay, path: Path) -> None:
    """One heatmap per metric: load per node (rows) over time (columns, each row's time)."""
    rows = [r for r in replay.rows if r.needs.node_loads]
    nodes = sorted({n for r in rows for n in r.needs.node_loads})
    metrics = sorted({m for r in rows for loads in r.needs.node_loads.values() for m in loads})
    per_metric = 0.3 * min(len(nodes), MAX_LABELLED_NODES) + (2.0 if len(nodes) > MAX_LABELLED_NODES else 0.0)
    fig, axes = plt.subplots(
        max(len(metrics), 1), 1, figsize=(9, per_metric * max(len(metrics), 1) + 1.5), squeeze=False
    )
    for ax, metric in zip(axes[:, 0], metrics):
        grid = np.array([[r.needs.node_loads.get(n, {}).get(metric, np.nan) for r in rows] for n in nodes])
        edges = [r.time for r in rows] + [max(replay.duration, rows[-1].time + 1e-3)]
        image = ax.pcolormesh(edges, np.arange(len(nodes) + 1), grid, shading="flat", cmap="viridis")
        if len(nodes) <= MAX_LABELLED_NODES:
            ax.set_yticks(np.arange(len(nodes)) + 0.5, nodes, fontsize=6)
        else:
            ax.set_yticks([])
        ax.set_ylabel(metric)
        fig.colorbar(image, ax=ax)
    axes[-1, 0].set_xlabel("simulated seconds")
    axes[0, 0].set_title("node loads over time")
    write_figure(path, fig)
