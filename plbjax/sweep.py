"""Summary of a `plbjax -m` sweep: a table and a plot of moves against the imbalance they leave."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from plbjax.files import atomic_path, write_text


def collect(sweep_dir: Path) -> list[dict]:
    """One row per job directory holding a plan.json; `overrides` shows what varies across jobs."""
    rows, job_overrides = [], []
    for plan_path in sorted(sweep_dir.glob("*/plan.json"), key=lambda p: int(p.parent.name)
                            if p.parent.name.isdigit() else p.parent.name):
        plan = json.loads(plan_path.read_text())
        overrides_path = plan_path.parent / ".hydra" / "overrides.yaml"
        job_overrides.append(yaml.safe_load(overrides_path.read_text()) if overrides_path.exists() else [])
        rows.append({"job": plan_path.parent.name,
                     "actions": len(plan["Actions"]),
                     "score_before": plan["Score"]["Before"], "score_after": plan["Score"]["After"],
                     "seconds": plan["Search"]["Seconds"]})
    common = set.intersection(*map(set, job_overrides)) if job_overrides else set()
    for row, overrides in zip(rows, job_overrides):
        row["overrides"] = " ".join(o for o in overrides if o not in common)
    return [{"job": r["job"], "overrides": r["overrides"], **r} for r in rows]


def write_summary(sweep_dir: Path) -> list[dict]:
    """Write summary.csv, summary.md and summary.png into `sweep_dir`."""
    rows = collect(sweep_dir)
    if not rows:
        return rows
    with atomic_path(sweep_dir / "summary.csv") as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| job | overrides | actions | AvgStdDev before | AvgStdDev after | search s |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['job']} | {r['overrides']} | {r['actions']} | {r['score_before']:.4f} | "
              f"{r['score_after']:.4f} | {r['seconds']:.2f} |" for r in rows]
    write_text(sweep_dir / "summary.md", "\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r["actions"] for r in rows], [r["score_after"] for r in rows])
    for r in rows:
        ax.annotate(r["overrides"], (r["actions"], r["score_after"]), fontsize=6)
    ax.axhline(rows[0]["score_before"], color="grey", linestyle="--", label="before")
    ax.set_xlabel("actions in the plan")
    ax.set_ylabel("AvgStdDev after the plan")
    ax.set_title("plbjax sweep: moves vs resulting imbalance")
    ax.legend()
    fig.tight_layout()
    with atomic_path(sweep_dir / "summary.png") as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    print("\n".join(lines))
    return rows


class SweepSummary(Callback):
    """Hydra callback: after a multirun, summarise every job's plan."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        write_summary(Path(config.hydra.sweep.dir))
