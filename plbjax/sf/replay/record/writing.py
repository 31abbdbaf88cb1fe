"""A replay's output directory (timeline.md §3): series, actions, final state, summary and plots.

Every file is written atomically (`plbjax.files`). The series starts with the state at time 0 (a
`Start` row, when the replay's `Story` has it) and has §3's columns, then one per metric that any row
reports (`MaxMinRatio.<metric>`, sorted; empty where a row lacks it, `inf` where the smallest load is
0), then `What` (the row's story: `NodeDown N0, N3`, `Balancing: 6 moves, 1 swap`), `Held` (the
phases SF held back then, by which setting and until when: `narrative`) and one `Violations.<kind>`
per constraint kind any row breaks (replicas; the plan's kind names).
"""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from plbjax.files import write_figure, write_text
from plbjax.sf.replay.record.narrative import event_texts, events_json, held_at, holds_json, loads_json, sentences
from plbjax.sf.replay.record.observed import Beside
from plbjax.sf.replay.record.series import number, rows_of, simulated_time, time_average
from plbjax.sf.replay.record.versus import told, write_versus
from plbjax.sf.replay.state.invariants import Corrupted
from plbjax.sf.replay.types import Counts, Replay, Row
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
LABELLED_EVENTS = 20  # more marked event times: their lines are not labelled
MAX_LABELLED_NODES = 60  # more nodes: the heatmap's rows are not labelled, its height is capped


def series(replay: Replay) -> list[dict]:
    """The series rows as {column: value}: §3's, MaxMinRatio per metric (None where absent, "inf"
    where infinite), What, Held, then Violations per kind."""
    rows, texts = rows_of(replay), event_texts(replay.story)
    metrics = sorted({m for row in rows for m in row.needs.max_min_ratio})
    kinds = sorted({k for row in rows for k in row.needs.violations_by_kind})
    return [
        _columns(row)
        | {f"MaxMinRatio.{m}": _ratio(row.needs.max_min_ratio.get(m)) for m in metrics}
        | {"What": what(row, texts), "Held": held_at(replay.story, row.time)}
        | {f"Violations.{k}": row.needs.violations_by_kind.get(k, 0) for k in kinds}
        for row in rows
    ]


def what(row: Row, texts: dict[float, str] | None = None) -> str:
    """What a row records: the state at time 0; its events, every subject named from the story's
    `texts` (`narrative.event_texts`: `NodeDown N0, N3; LoadReport fabric:/Shop/Web 3 reports (CPU 15
    +40% a report)`), else as the loop described them (`18000 LoadReport events`); or its phase (and
    node type) and the actions it issued (`Balancing: 6 moves, 1 swap`, `Placement: no action`)."""
    if row.trigger == "Start":
        return "the initial state"
    if row.trigger == "Event":
        told = (texts or {}).get(row.time)
        return told or "; ".join(text for _, text in row.events) or "events of replicas no longer there"
    kinds = zip(Counts._fields[1:], row.counts[1:])
    done = ", ".join(_counted(n, kind[:-1]) for kind, n in kinds if n)
    return f"{row.phase}{' ' + row.node_type if row.node_type else ''}: {done or 'no action'}"


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _columns(row: Row) -> dict:
    imbalanced = sorted({metric for metric, _ in row.needs.imbalanced})
    return {
        "Time": simulated_time(row.time),
        "Trigger": row.trigger,
        "Phase": row.phase or "",
        "NodeType": row.node_type or "",
        **dict(zip(COLUMNS[4:10], row.counts)),
        "CumulativeMovements": row.cumulative_movements,
        "AvgStdDev": number(row.needs.avg_std_dev),
        "ImbalancedMetrics": ";".join(imbalanced),
        "Violations": row.needs.violations,
        "Unplaced": row.needs.unplaced,
    }


def _ratio(value: float | None) -> float | str | None:
    """A max/min ratio as written: "inf" where the smallest load is 0 (JSON has no infinity)."""
    return "inf" if value is not None and math.isinf(value) else number(value)


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
    "Initial",  # the state at time 0: AvgStdDev, ImbalancedMetrics, Violations, Unplaced
    "ClusterEvents",  # every event but load reports: {Time, Kind, Subjects}
    "LoadReports",  # per service: reports, times, each metric's hottest and coolest report
    "Held",  # every stretch a phase with work was held back: {Phase, Since, Until, Setting, Why, ...}
    # and "Fault" only when the replay's own state broke an invariant (then Interrupted is true);
    # write_outputs adds "Provenance", and "VersusSF" beside SF's observed day (`versus`)
)


def summary(replay: Replay) -> dict:
    """Rounds and actions by kind, churn, time-averaged imbalance, worst violations, wall time:
    the keys of timeline.md §3 in that order, then `CancelledActions` and the cluster's story
    (`SUMMARY_KEYS`). Actions by kind are the plan's action names (`MoveSecondary`, `AddInstance`,
    ...), as issued; a replay stopped early has `Interrupted` true and `SimulatedSeconds` the time it
    reached; `CancelledActions` counts those that no longer fitted when they completed. The time
    average runs from time 0 when the story has the state then."""
    actions: dict[str, int] = {}
    for action in replay.actions:
        actions[action["Action"]] = actions.get(action["Action"], 0) + 1
    rows, initial = rows_of(replay), replay.story.initial
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
        "Initial": None
        if initial is None
        else {
            "AvgStdDev": number(initial.avg_std_dev),
            "ImbalancedMetrics": sorted({m for m, _ in initial.imbalanced}),
            "Violations": initial.violations,
            "Unplaced": initial.unplaced,
        },
        "ClusterEvents": events_json(replay.story),
        "LoadReports": loads_json(replay.story),
        "Held": holds_json(replay.story, rows),
    } | ({"Fault": replay.fault} if replay.fault is not None else {})


def story(replay: Replay, beside: Beside | None = None) -> list[str]:
    """The end of a run in sentences: what was replayed, the rounds, the actions, the imbalance
    (from time 0 when the story has it), the violations, what is left unplaced, then the cluster's
    story (`narrative.sentences`: its events, load reports, what held phases back), and `beside` SF's
    observed day, when given, how the two compare (`versus.told`).

    A replay whose own state broke an invariant (`Replay.fault`: its record, written by
    `write_outputs`, ends at the time before, marked interrupted, with summary `Fault`) has no
    story: this raises `Corrupted`, the internal error `plbjax-replay` exits 1 with."""
    if replay.fault is not None:
        raise Corrupted(replay.fault)
    result, rows = summary(replay), rows_of(replay)
    rounds = ", ".join(f"{n} {phase}" for phase, n in result["Rounds"].items())
    actions = ", ".join(f"{n} {kind}" for kind, n in result["Actions"].items())
    cancelled = result["CancelledActions"]
    lines = [
        f"Replayed {replay.duration:g} simulated s in {replay.seconds:.1f} s"
        + (" (interrupted: the record ends there)." if replay.interrupted else "."),
        f"The PLB ran {_counted(sum(result['Rounds'].values()), 'round')}" + (f": {rounds}." if rounds else "."),
        f"They issued {_counted(len(replay.actions), 'action')}"
        + (f" ({actions}); {result['CumulativeMovements']} of them were movements (moves and swaps)" if actions else "")
        + (f"; {cancelled} no longer fitted when due and were cancelled." if cancelled else "."),
    ]
    if rows:
        lines.append(
            f"AvgStdDev went from {rows[0].needs.avg_std_dev:.4f} at {rows[0].time:g} s"
            + (" (the initial state)" if rows[0].trigger == "Start" else "")
            + " to "
            f"{rows[-1].needs.avg_std_dev:.4f} at the end, {result['TimeAveragedAvgStdDev']:.4f} on average over time."
        )
    worst = max(rows, key=lambda r: r.needs.violations, default=None)
    if worst is None or not worst.needs.violations:
        lines.append("No replica broke a hard constraint.")
    else:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(worst.needs.violations_by_kind.items()))
        lines.append(
            f"At worst {_counted(worst.needs.violations, 'replica')} broke a hard constraint "
            f"(from {worst.time:g} s{', ' + kinds if kinds else ''}); {rows[-1].needs.violations} at the end."
        )
    unplaced = result["FinalUnplaced"]
    lines.append(
        f"{_counted(unplaced, 'replica')} left to place or drop at the end."
        if unplaced
        else "Every replica placed at the end."
    )
    return lines + sentences(replay.story, rows) + ([told(replay, beside)] if beside else [])


def write_outputs(
    replay: Replay,
    out: str | Path,
    plans: Sequence[dict] = (),
    provenance: Mapping[str, Any] | None = None,
    beside: Beside | None = None,
) -> Path:
    """Write every output file into the folder `out` (created); returns it. `plans`: the rounds'
    plan documents, in order (`record.plans`), written to out/plans; `provenance`: how the replay
    was made (a plan's `Provenance`: versions, host, the timeline's SHA-256, config, command, seed),
    written into summary.json; `beside`: SF's observed day (each period's time, UTC time and state)
    and the probe that measures it: sf-series.csv, versus-sf.png and summary.json's `VersusSF` (`versus`)."""
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
    made = {"Provenance": dict(provenance)} if provenance else {}
    made |= {"VersusSF": write_versus(replay, beside, out)} if beside else {}
    write_text(out / "summary.json", json.dumps({**summary(replay), **made}, indent=1) + "\n")
    if plans:
        _write_plans(replay, out / "plans", plans)
    for name, plot in zip(PLOTS, (plot_imbalance, plot_node_loads)):
        if rows_of(replay):
            plot(replay, out / name)
        else:
            _nothing(out / name)
    return out


def _write_plans(replay: Replay, folder: Path, plans: Sequence[dict]) -> None:
    """Each round's plan document as NNNNN-Phase.json (a round's row per planner call: a plan a stop
    dropped has none), and index.json: each file's round time, phase and node type."""
    rounds = [row for row in replay.rows if row.trigger != "Event"]
    index = []
    for k, (row, plan) in enumerate(zip(rounds, plans)):
        name = f"{k:05d}-{row.phase}.json"
        write_text(folder / name, json.dumps(plan, indent=1) + "\n")
        index.append({"File": name, "Time": simulated_time(row.time), "Phase": row.phase, "NodeType": row.node_type})
    write_text(folder / "index.json", json.dumps(index, indent=1) + "\n")


def _nothing(path: Path) -> None:
    """The picture of a replay without a single row (no event, no round ran a phase)."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.text(0.5, 0.5, "no event and no PLB round in the simulated time", ha="center", va="center")
    ax.set_axis_off()
    write_figure(path, fig)


def plot_imbalance(replay: Replay, path: Path) -> None:
    """AvgStdDev and MaxMinRatio per metric over time, with a dotted line at each event time other
    than load reports (labelled with its events while there are at most `LABELLED_EVENTS`); actions
    per round and cumulative movements. One legend names every line."""
    rows, texts = rows_of(replay), event_texts(replay.story)
    times = [r.time for r in rows] + [max(replay.duration, rows[-1].time)]  # the last values hold to the end

    def held(values: list) -> list:
        return values + values[-1:]

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    top.step(times, held([r.needs.avg_std_dev for r in rows]), where="post", label="AvgStdDev", color="k")
    ratio = top.twinx()
    for metric in sorted({m for r in rows for m in r.needs.max_min_ratio}):
        values = [number(r.needs.max_min_ratio.get(metric)) for r in rows]
        ratio.step(
            times,
            held([np.nan if v is None else v for v in values]),
            where="post",
            label=f"{metric} max/min",
            alpha=0.6,
        )
    marked = [r for r in rows if any(kind != "LoadReport" for kind, _ in r.events)]
    for r in marked:
        for ax in (top, bottom):
            ax.axvline(r.time, color="grey", linestyle=":", linewidth=1, label="events" if ax is bottom else None)
        if len(marked) <= LABELLED_EVENTS:
            top.annotate(
                textwrap.shorten(what(r, texts), 40),
                (r.time, 1),
                xycoords=("data", "axes fraction"),
                xytext=(2, -2),
                textcoords="offset points",
                rotation=90,
                va="top",
                fontsize=6,
                color="dimgrey",
            )
    top.set_ylabel("AvgStdDev")
    ratio.set_ylabel("max/min load (gap: a node without load)")
    handles = [h for ax in (top, ratio) for h in ax.get_legend_handles_labels()[0]]
    ratio.legend(handles, [str(h.get_label()) for h in handles], fontsize=7, loc="upper right")
    bottom.bar(times[:-1], [r.counts.actions for r in rows], width=max(replay.duration / 400, 1e-3), label="actions")
    bottom.step(
        times, held([r.cumulative_movements for r in rows]), where="post", color="C3", label="cumulative movements"
    )
    bottom.set_xlabel("simulated seconds")
    handles, labels = bottom.get_legend_handles_labels()
    shown = dict(zip(labels, handles))  # one "events" entry for every marker
    bottom.legend(list(shown.values()), list(shown), fontsize=7)
    top.set_title("imbalance and movements over time")
    write_figure(path, fig)


def plot_node_loads(replay: Replay, path: Path) -> None:
    """One heatmap per metric: load per node (rows) over time (columns, each row's time)."""
    rows = [r for r in rows_of(replay) if r.needs.node_loads]
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
