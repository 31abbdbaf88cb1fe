"""Summary of a `plbjax -m` sweep: a table and a plot of moves against the imbalance they leave."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from plbjax.files import atomic_path, write_figure, write_text

FAILED = "failed.txt"  # a sweep job that refused its input says why here
REPLAY_SUMMARY = "summary.json"  # a replay job's summary (plbjax-replay writes its record to the job directory)


def collect(sweep_dir: Path) -> list[dict]:
    """One row per job directory; `overrides` shows what varies across jobs. A job without a plan
    (bad input, killed, crashed) is listed with its status and no numbers."""
    rows, job_overrides = [], []
    jobs = [p.parent.parent for p in sweep_dir.glob("*/.hydra/overrides.yaml")]
    for job in sorted(jobs, key=lambda p: (0, int(p.name)) if p.name.isdigit() else (1, p.name)):
        job_overrides.append(yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()) or [])
        row = {
            "job": job.name,
            "status": "ok",
            "actions": None,
            "score_before": None,
            "score_after": None,
            "seconds": None,
        }
        if (job / "plan.json").exists():
            plan = json.loads((job / "plan.json").read_text())
            row.update(
                actions=len(plan["Actions"]),
                score_before=plan["Score"]["Before"],
                score_after=plan["Score"]["After"],
                seconds=plan["Search"]["Seconds"],
            )
            if plan["Search"].get("Interrupted"):
                row["status"] = "interrupted"
        elif (job / REPLAY_SUMMARY).exists():  # a replay: churn against time-averaged imbalance
            replayed = json.loads((job / REPLAY_SUMMARY).read_text())
            row.update(
                actions=replayed["CumulativeMovements"],
                score_after=replayed["TimeAveragedAvgStdDev"],
                seconds=replayed["Seconds"],
            )
        else:
            failed = job / FAILED
            row["status"] = failed.read_text().strip() if failed.exists() else "no plan (killed or crashed)"
        rows.append(row)
    common = set.intersection(*map(set, job_overrides)) if job_overrides else set()
    for row, overrides in zip(rows, job_overrides):
        row["overrides"] = " ".join(o for o in overrides if o not in common)
    return [{"job": r["job"], "overrides": r["overrides"], **r} for r in rows]


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
    lines = [
        "| job | overrides | status | actions | AvgStdDev before | AvgStdDev after | search s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['job']} | {r['overrides']} | {r['status']} | {_number(r['actions'], 'd')} | "
        f"{_number(r['score_before'], '.4f')} | {_number(r['score_after'], '.4f')} | "
        f"{_number(r['seconds'], '.2f')} |"
        for r in rows
    ]
    write_text(sweep_dir / "summary.md", "\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planned = [r for r in rows if r["actions"] is not None]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r["actions"] for r in planned], [r["score_after"] for r in planned])
    for r in planned:
        ax.annotate(r["overrides"], (r["actions"], r["score_after"]), fontsize=6)
    if planned and planned[0]["score_before"] is not None:
        ax.axhline(planned[0]["score_before"], color="grey", linestyle="--", label="before")
    if len(planned) < len(rows):
        ax.text(
            0.02,
            0.02,
            f"{len(rows) - len(planned)} job(s) without a plan: see summary.md",
            transform=ax.transAxes,
            fontsize=7,
            color="tab:red",
        )
    replays = any(r["score_before"] is None for r in planned)
    ax.set_xlabel("movements over the replay" if replays else "actions in the plan")
    ax.set_ylabel("time-averaged AvgStdDev" if replays else "AvgStdDev after the plan")
    ax.set_title("plbjax sweep: churn vs imbalance")
    if not replays:
        ax.legend()
    write_figure(sweep_dir / "summary.png", fig, dpi=120)
    print("\n".join(lines))
    return rows


class SweepSummary(Callback):
    """Hydra callback: after a multirun, summarise every job's plan."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        write_summary(Path(config.hydra.sweep.dir))
