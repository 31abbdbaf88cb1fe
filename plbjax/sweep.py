"""Summary of a `plbjax -m` sweep: a table and a plot of moves against the imbalance they leave."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from plbjax.files import atomic_path, write_figure, write_text

FAILED = "failed.txt"  # a sweep job that refused its input says why here
REPLAY_SUMMARY = "summary.json"  # a replay job's summary (plbjax-replay writes its record to the job directory)


def collect(sweep_dir: Path) -> list[dict]:
    """One row per job directory; `overrides` shows what varies across jobs. A job without a plan
    (bad input, killed, crashed) is listed with its status and no numbers. A replay sweep's rows
    have their own columns (`REPLAY_COLUMNS`: the record's summary.json)."""
    rows, job_overrides = [], []
    jobs = [p.parent.parent for p in sweep_dir.glob("*/.hydra/overrides.yaml")]
    replays = any(_is_replay(job) for job in jobs)
    for job in sorted(jobs, key=lambda p: (0, int(p.name)) if p.name.isdigit() else (1, p.name)):
        job_overrides.append(yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()) or [])
        row = {"job": job.name, "status": "ok", **dict.fromkeys(REPLAY_COLUMNS if replays else PLAN_COLUMNS)}
        if (job / "plan.json").exists():
            plan = json.loads((job / "plan.json").read_text())
            row.update(
                actions=len(plan["Actions"]),
                score_before=plan["Score"]["Before"],
                score_after=plan["Score"]["After"],
                seconds=plan["Search"]["Seconds"],
                imbalanced_before=_imbalanced(plan, "IsBalancedBefore"),
                imbalanced_after=_imbalanced(plan, "IsBalancedAfter"),
                version=plan["Search"].get("Version"),
            )
            if plan["Search"].get("Interrupted"):
                row["status"] = "interrupted"
        elif (job / REPLAY_SUMMARY).exists():  # a replay: churn against time-averaged imbalance
            replayed = json.loads((job / REPLAY_SUMMARY).read_text())
            row.update(
                time_averaged_avg_std_dev=replayed["TimeAveragedAvgStdDev"],
                movements=replayed["CumulativeMovements"],
                rounds=", ".join(f"{phase} {n}" for phase, n in replayed["Rounds"].items()) or "-",
                max_violations=replayed["MaxViolations"],
                final_unplaced=replayed["FinalUnplaced"],
                wall_seconds=replayed["Seconds"],
                version=replayed.get("Version"),
            )
            if replayed.get("Interrupted"):
                row["status"] = f"interrupted at {replayed['SimulatedSeconds']:g} simulated s"
        else:
            failed = job / FAILED
            missing = f"no {'record' if replays else 'plan'} (killed or crashed)"
            row["status"] = failed.read_text().strip() if failed.exists() else missing
        rows.append(row)
    common = set.intersection(*map(set, job_overrides)) if job_overrides else set()
    for row, overrides in zip(rows, job_overrides):
        row["overrides"] = " ".join(o for o in overrides if o not in common)
    return [{"job": r["job"], "overrides": r["overrides"], **r} for r in rows]


PLAN_COLUMNS = ("actions", "score_before", "score_after", "seconds", "imbalanced_before", "imbalanced_after", "version")
REPLAY_COLUMNS = (
    "time_averaged_avg_std_dev",
    "movements",
    "rounds",
    "max_violations",
    "final_unplaced",
    "wall_seconds",
    "version",  # the plbjax that made the job's plan or record
)


def _is_replay(job: Path) -> bool:
    """A job of `plbjax-replay` (its config names a timeline), whether or not it wrote a record."""
    config = job / ".hydra" / "config.yaml"
    return (job / REPLAY_SUMMARY).exists() or (
        config.exists() and "timeline" in (yaml.safe_load(config.read_text()) or {})
    )


def _imbalanced(plan: dict, when: str) -> str:
    """The metrics the plan's Balance calls imbalanced (over both thresholds) `when`, or '-'."""
    return ", ".join(dict.fromkeys(b["Metric"] for b in plan["Balance"] if not b[when])) or "-"


def _number(value, digits: str) -> str:
    return "-" if value is None else format(value, digits)


def write_summary(sweep_dir: Path) -> list[dict]:
    """Write summary.csv, summary.md and summary.png into `sweep_dir`."""
    rows = collect(sweep_dir)
    if not rows:
        return rows
    with atomic_path(sweep_dir / "summary.csv") as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    made = ", ".join(sorted({r["version"] for r in rows if r["version"]})) or "unknown"
    lines = [f"{len(rows)} job(s) by plbjax {made}", "", *_table(rows)]
    write_text(sweep_dir / "summary.md", "\n".join(lines) + "\n")
    write_figure(sweep_dir / "summary.png", figure(rows), dpi=120)
    print("\n".join(lines))
    print(f"sweep summary written to {sweep_dir / 'summary.md'} (and summary.csv, summary.png)")
    return rows


def _table(rows: list[dict]) -> list[str]:
    """The summary as a Markdown table: a plan's numbers, or a replay's (time-averaged)."""
    if "movements" in rows[0]:
        head = (
            "| job | overrides | status | time-averaged AvgStdDev | movements | rounds | max violations | "
            "unplaced at the end | wall s |"
        )
        cells = [
            (
                _number(r["time_averaged_avg_std_dev"], ".4f"),
                _number(r["movements"], "d"),
                r["rounds"] or "-",
                _number(r["max_violations"], "d"),
                _number(r["final_unplaced"], "d"),
                _number(r["wall_seconds"], ".2f"),
            )
            for r in rows
        ]
    else:
        head = (
            "| job | overrides | status | actions | AvgStdDev before | AvgStdDev after | imbalanced before | "
            "imbalanced after | search s |"
        )
        cells = [
            (
                _number(r["actions"], "d"),
                _number(r["score_before"], ".4f"),
                _number(r["score_after"], ".4f"),
                r["imbalanced_before"] or "-",
                r["imbalanced_after"] or "-",
                _number(r["seconds"], ".2f"),
            )
            for r in rows
        ]
    return [
        head,
        "|---" * head.count(" | ") + "|---|",
        *(f"| {r['job']} | {r['overrides']} | {r['status']} | " + " | ".join(c) + " |" for r, c in zip(rows, cells)),
    ]


def _point(row: dict) -> tuple | None:
    """(churn, imbalance left) of a job: a plan's actions and AvgStdDev after, a replay's movements
    and time-averaged AvgStdDev; None without numbers."""
    churn, left = ("movements", "time_averaged_avg_std_dev") if "movements" in row else ("actions", "score_after")
    return None if row[churn] is None else (row[churn], round(row[left], 4))


def figure(rows: list[dict]):
    """Churn against imbalance, a point per outcome labelled with its jobs' numbers (jobs that end
    alike share a point and a label); beside it, what each job varied."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planned = [r for r in rows if _point(r) is not None]
    points: dict[tuple, list[str]] = {}
    for r in planned:
        points.setdefault(_point(r) or (), []).append(r["job"])
    fig, (ax, key) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    ax.scatter([x for x, _ in points], [y for _, y in points])
    if planned and planned[0].get("score_before") is not None:
        ax.axhline(planned[0]["score_before"], color="grey", linestyle="--", label="before")
        ax.legend(fontsize=7, loc="lower left")
    labels = [
        ax.annotate(", ".join(jobs), (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
        for (x, y), jobs in points.items()
    ]
    replays = "movements" in rows[0]
    ax.set_xlabel("movements over the replay" if replays else "actions in the plan")
    ax.set_ylabel("time-averaged AvgStdDev" if replays else "AvgStdDev after the plan")
    ax.set_title("plbjax sweep: churn vs imbalance", fontsize=10)
    ax.margins(0.15)
    key.axis("off")
    listed = [
        f"{r['job']}: {r['overrides'] or '(defaults)'}" + ("" if r["status"] == "ok" else f" ({r['status']})")
        for r in rows
    ]
    _apart(fig, labels + ([ax.get_legend()] if ax.get_legend() else []))
    key.text(0, 1, "\n".join(textwrap.shorten(line, 60) for line in listed), va="top", fontsize=7, family="monospace")
    return fig


def _apart(fig, artists: list) -> None:
    """Move each point label up, a few points at a time, until it overlaps no artist before it."""
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    placed = [a.get_window_extent(renderer) for a in artists if not hasattr(a, "xyann")]  # the legend
    for label in (a for a in artists if hasattr(a, "xyann")):
        for _ in range(40):
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
            label.xyann = (label.xyann[0], label.xyann[1] + 6)
        placed.append(label.get_window_extent(renderer))


class SweepSummary(Callback):
    """Hydra callback: after a multirun, summarise every job's plan."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        write_summary(Path(config.hydra.sweep.dir))
