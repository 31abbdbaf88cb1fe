"""Summary of a `plbjax -m` sweep: a table with a column per swept key, the same aggregated over
repeated seeds, and a plot of moves against the imbalance they leave."""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from plbjax.files import atomic_path, write_figure, write_text

FAILED = "failed.txt"  # a sweep job that refused its input or failed says why here
REPLAY_SUMMARY = "summary.json"  # a replay job's summary (plbjax-replay writes its record to the job directory)
SEED = "search.seed"  # the key whose values are repeats of one configuration
FAILURES: list[str] = []  # the jobs of the last sweep summarised that failed ("3: bad input: ...")
AGGREGATED = "summary-by-config.csv"  # the jobs grouped by everything swept but the seed
JOBS_TABLE = "jobs.parquet"  # summary.csv's rows as a typed Parquet table

PLAN_COLUMNS = (
    "actions",  # the plan's Actions
    "movements",  # the movements the phases counted against their throttles (Phases[].Movements.Used)
    "energy",  # the best energy of the last phase searched (Search.Phases[-1].Energy), when the plan has it
    "score_before",
    "score_after",
    "steps",  # Search.Steps: every phase's steps per chain
    "seconds",
    "imbalanced_before",
    "imbalanced_after",
    "version",
    "program",  # the command that made the plan (Provenance.Command[0]: plbjax, plbjax-baseline)
    "input_sha256",  # the state's SHA-256 (Provenance.Input.Sha256): plbjax-compare joins on it
)
REPLAY_COLUMNS = (
    "time_averaged_avg_std_dev",
    "movements",
    "rounds",
    "max_violations",
    "final_unplaced",
    "wall_seconds",
    "version",  # the plbjax that made the job's plan or record
    "program",
    "input_sha256",  # the timeline's SHA-256
)
AGGREGATES = {  # the numbers aggregated over seeds
    "plan": ("energy", "score_after", "actions", "movements", "seconds"),
    "replay": ("time_averaged_avg_std_dev", "movements", "max_violations", "wall_seconds"),
}


def _key_value(override: str) -> tuple[str, str]:
    """`+settings.X=1` -> ("settings.X", "1")."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def _jobs(sweep_dir: Path) -> list[Path]:
    jobs = [p.parent.parent for p in sweep_dir.glob("*/.hydra/overrides.yaml")]
    return sorted(jobs, key=lambda p: (0, int(p.name)) if p.name.isdigit() else (1, p.name))


def collect(sweep_dir: Path) -> list[dict]:
    """One row per job directory: `job`, a column per swept key (the keys whose values differ
    between jobs), `status`, then a plan's (`PLAN_COLUMNS`, steps and T0 per phase searched) or a
    replay's numbers (`REPLAY_COLUMNS`: the record's summary.json). A job without a plan (bad input,
    failed, killed) is listed with its status and no numbers."""
    jobs = _jobs(sweep_dir)
    overrides = [dict(map(_key_value, yaml.safe_load((j / ".hydra/overrides.yaml").read_text()) or [])) for j in jobs]
    swept = [k for k in dict.fromkeys(k for o in overrides for k in o) if len({o.get(k) for o in overrides}) > 1]
    replays = any(_is_replay(job) for job in jobs)
    rows = []
    for job, values in zip(jobs, overrides):
        row = {"job": job.name, **{k: values.get(k, "") for k in swept}, "status": "ok"}
        row |= dict.fromkeys(REPLAY_COLUMNS if replays else PLAN_COLUMNS)
        failed = job / FAILED
        if (job / "plan.json").exists():
            row |= _plan_numbers(json.loads((job / "plan.json").read_text()))
        elif (job / REPLAY_SUMMARY).exists():  # a replay: churn against time-averaged imbalance
            row |= _replay_numbers(json.loads((job / REPLAY_SUMMARY).read_text()))
        elif not failed.exists():
            row["status"] = f"no {'record' if replays else 'plan'} (killed or crashed)"
        if failed.exists():  # also a job that failed after writing its plan (e.g. its plot)
            row["status"] = failed.read_text().strip().splitlines()[0]
        rows.append(row)
    phase_columns = list(dict.fromkeys(k for r in rows for k in r if k.startswith(("steps_", "t0_"))))
    return [{**r, **{c: r.get(c) for c in phase_columns}} for r in rows]


def _plan_numbers(plan: dict) -> dict:
    """A plan job's numbers; `steps_<Phase>` and `t0_<Phase>` for each phase searched (the plan's
    `Search.Phases` records, when it has them)."""
    searched = [(record["Phase"], record) for record in plan["Search"].get("Phases", [])]
    numbers = {
        "actions": len(plan["Actions"]),
        "movements": sum((p.get("Movements") or {}).get("Used", 0) for p in plan["Phases"]),
        "energy": searched[-1][1].get("Energy") if searched else None,
        "score_before": plan["Score"]["Before"],
        "score_after": plan["Score"]["After"],
        "steps": plan["Search"]["Steps"],
        "seconds": plan["Search"]["Seconds"],
        "imbalanced_before": _imbalanced(plan, "IsBalancedBefore"),
        "imbalanced_after": _imbalanced(plan, "IsBalancedAfter"),
        "version": plan["Search"].get("Version"),
        **_made(plan),
    }
    for phase, search in searched:
        numbers[f"steps_{phase}"] = search.get("Steps")
        numbers[f"t0_{phase}"] = search.get("InitialTemperature")
    if plan["Search"].get("Interrupted"):
        numbers["status"] = "interrupted"
    return numbers


def _replay_numbers(replayed: dict) -> dict:
    numbers = {
        "time_averaged_avg_std_dev": replayed["TimeAveragedAvgStdDev"],
        "movements": replayed["CumulativeMovements"],
        "rounds": ", ".join(f"{phase} {n}" for phase, n in replayed["Rounds"].items()) or "-",
        "max_violations": replayed["MaxViolations"],
        "final_unplaced": replayed["FinalUnplaced"],
        "wall_seconds": replayed["Seconds"],
        "version": replayed.get("Version"),
        **_made(replayed),
    }
    if replayed.get("Interrupted"):
        numbers["status"] = f"interrupted at {replayed['SimulatedSeconds']:g} simulated s"
    return numbers


def _made(document: dict) -> dict:
    """The program and input hash of a plan's or record's `Provenance` (None where it has none)."""
    made = document.get("Provenance") or {}
    return {"program": (made.get("Command") or [None])[0], "input_sha256": (made.get("Input") or {}).get("Sha256")}


def _is_replay(job: Path) -> bool:
    """A job of `plbjax-replay` (its config names a timeline), whether or not it wrote a record."""
    config = job / ".hydra" / "config.yaml"
    return (job / REPLAY_SUMMARY).exists() or (
        config.exists() and "timeline" in (yaml.safe_load(config.read_text()) or {})
    )


def _imbalanced(plan: dict, when: str) -> str:
    """The metrics the plan's Balance calls imbalanced (over both thresholds) `when`, or '-'."""
    return ", ".join(dict.fromkeys(b["Metric"] for b in plan["Balance"] if not b[when])) or "-"


def swept_keys(rows: list[dict]) -> list[str]:
    """The rows' columns that name swept keys (between `job` and `status`)."""
    columns = list(rows[0])
    return columns[1 : columns.index("status")]


def aggregate(rows: list[dict]) -> list[dict]:
    """The jobs grouped by every swept key but the seed: per group the jobs that finished (`n`) and
    of each number its mean, standard deviation (sample; 0 for one job), the mean's 95 % confidence
    interval (Student's t over the seeds), min and max."""
    keys = [k for k in swept_keys(rows) if k != SEED]
    numbers = AGGREGATES["replay" if "time_averaged_avg_std_dev" in rows[0] else "plan"]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for values, members in groups.items():
        done = [r for r in members if r["status"] == "ok"]
        group = {**dict(zip(keys, values)), "jobs": " ".join(r["job"] for r in members), "n": len(done)}
        for name in numbers:
            group |= _spread(name, [r[name] for r in done if r.get(name) is not None])
        out.append(group)
    return out


# Student's t, 97.5th percentile, by degrees of freedom 1..30 (a two-sided 95 % interval)
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95 % interval with `df` degrees of freedom (a table to
    30, then the Cornish-Fisher expansion about the normal's 1.95996, within 1e-4)."""
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _spread(name: str, values: list[float]) -> dict:
    """Mean, sample standard deviation, the mean's 95 % confidence interval (Student's t over the
    jobs: seeds; none for one job), min and max."""
    fields = ("mean", "std", "ci95_low", "ci95_high", "min", "max")
    if not values:
        return dict.fromkeys(f"{name}_{f}" for f in fields)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    half = t975(len(values) - 1) * std / math.sqrt(len(values)) if len(values) > 1 else None
    low, high = (None, None) if half is None else (mean - half, mean + half)
    return dict(zip((f"{name}_{f}" for f in fields), (mean, std, low, high, min(values), max(values))))


def _number(value, digits: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, digits)


def write_csv(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_jobs_table(path: Path, rows: list[dict]) -> None:
    """The jobs as a Parquet table (pyarrow; pandas, polars and DuckDB read it): every column of
    summary.csv, typed (numbers as numbers, missing ones null; a column mixing text and numbers as
    text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def column(name: str):
        values = [row.get(name) for row in rows]
        try:
            return pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array([None if v is None else str(v) for v in values], pa.string())

    names = list(dict.fromkeys(k for row in rows for k in row))
    with atomic_path(path) as tmp:
        pq.write_table(pa.table({name: column(name) for name in names}), tmp)


def write_summary(sweep_dir: Path) -> list[dict]:
    """Write summary.csv, jobs.parquet (the same, typed), summary-by-config.csv, summary.md and
    summary.png into `sweep_dir`; the failed jobs are kept in FAILURES."""
    rows = collect(sweep_dir)
    FAILURES[:] = [f"{r['job']}: {r['status']}" for r in rows if r["status"] not in ("ok", "interrupted")]
    if not rows:
        return rows
    write_csv(sweep_dir / "summary.csv", rows)
    write_jobs_table(sweep_dir / JOBS_TABLE, rows)
    groups = aggregate(rows)
    write_csv(sweep_dir / AGGREGATED, groups)
    made = ", ".join(sorted({r["version"] for r in rows if r["version"]})) or "unknown"
    lines = [f"{len(rows)} job(s) by plbjax {made}", "", *_table(rows)]
    if any(g["jobs"].count(" ") for g in groups):  # some configuration ran more than once
        over = f"Over seeds ({SEED}): mean ± standard deviation, the mean's 95 % confidence interval (Student's t"
        lines += ["", f"{over} over the seeds), [min, max]", "", *_aggregated_table(groups)]
    if FAILURES:
        lines += ["", "Failed:", *(f"- job {failure}" for failure in FAILURES)]
    write_text(sweep_dir / "summary.md", "\n".join(lines) + "\n")
    write_figure(sweep_dir / "summary.png", figure(rows), dpi=120)
    print("\n".join(lines))
    also = f"summary.csv, {JOBS_TABLE}, {AGGREGATED}, summary.png"
    print(f"sweep summary written to {sweep_dir / 'summary.md'} (and {also})")
    return rows


def markdown_table(head: Iterable[str], cells: Iterable[Iterable[str]]) -> list[str]:
    head = list(head)
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(row) + " |" for row in cells),
    ]


def _table(rows: list[dict]) -> list[str]:
    """The summary as a Markdown table: a plan's numbers, or a replay's (time-averaged)."""
    keys = swept_keys(rows)
    if "time_averaged_avg_std_dev" in rows[0]:
        head = ["time-averaged AvgStdDev", "movements", "rounds", "max violations", "unplaced at the end", "wall s"]
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
        head = ["actions", "energy", "AvgStdDev before", "AvgStdDev after", "imbalanced before", "imbalanced after"]
        t0 = [k for k in rows[0] if k.startswith("t0_") and k != "t0_FewestMovements"]  # that one is ~0
        head += ["steps", *(f"T0 {k[3:]}" for k in t0), "search s"]
        cells = [
            (
                _number(r["actions"], "d"),
                _number(r["energy"], ".6g"),
                _number(r["score_before"], ".4f"),
                _number(r["score_after"], ".4f"),
                r["imbalanced_before"] or "-",
                r["imbalanced_after"] or "-",
                _number(r["steps"], "d"),
                *(_number(r[k], ".4g") for k in t0),
                _number(r["seconds"], ".2f"),
            )
            for r in rows
        ]
    return markdown_table(
        ["job", *keys, "status", *head],
        ([r["job"], *(str(r[k]) for k in keys), r["status"], *c] for r, c in zip(rows, cells)),
    )


def _aggregated_table(groups: list[dict]) -> list[str]:
    """The groups as a Markdown table: each number as mean ± std (95 % CI low to high) [min, max]."""
    keys = list(groups[0])[: list(groups[0]).index("jobs")]
    numbers = [k[: -len("_mean")] for k in groups[0] if k.endswith("_mean")]
    digits = {"actions": ".3g", "movements": ".3g", "max_violations": ".3g", "energy": ".6g"}

    def cell(group: dict, name: str) -> str:
        if group[f"{name}_mean"] is None:
            return "-"
        d = digits.get(name, ".4f")
        m, s, lo, hi = (format(group[f"{name}_{x}"], d) for x in ("mean", "std", "min", "max"))
        low, high = group[f"{name}_ci95_low"], group[f"{name}_ci95_high"]
        ci = "" if low is None else f" (95 % CI {format(low, d)} to {format(high, d)})"
        return f"{m} ± {s}{ci} [{lo}, {hi}]"

    return markdown_table(
        [*keys, "jobs", "n", *numbers],
        ([*(str(g[k]) for k in keys), g["jobs"], str(g["n"]), *(cell(g, n) for n in numbers)] for g in groups),
    )


def figure(rows: list[dict]):
    """Churn against imbalance: per configuration (every swept key but the seed) the mean over its
    seeds with the 95 % confidence interval of each (Student's t) as error bars, named in the legend
    by its swept keys; every job a faint dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    replays = "rounds" in rows[0]
    churn, left = ("movements", "time_averaged_avg_std_dev") if replays else ("actions", "score_after")
    keys = [k for k in swept_keys(rows) if k != SEED]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    done = [r for r in rows if r.get(churn) is not None and r.get(left) is not None]
    ax.scatter([r[churn] for r in done], [r[left] for r in done], s=12, color="grey", alpha=0.35, label="one job")
    for group in aggregate(rows):
        if group[f"{churn}_mean"] is None or group[f"{left}_mean"] is None:
            continue
        named = ", ".join(f"{k}={group[k]}" for k in keys) or "every job"
        ax.errorbar(
            [group[f"{churn}_mean"]],
            [group[f"{left}_mean"]],
            xerr=_interval(group, churn),
            yerr=_interval(group, left),
            fmt="o",
            capsize=3,
            label=f"{named} (n={group['n']})",
        )
    if done and done[0].get("score_before") is not None:
        ax.axhline(done[0]["score_before"], color="grey", linestyle="--", label="AvgStdDev before")
    ax.set_xlabel("movements over the replay" if replays else "actions in the plan")
    ax.set_ylabel("time-averaged AvgStdDev" if replays else "AvgStdDev after the plan")
    ax.set_title("plbjax sweep: churn against imbalance, mean and 95 % CI over seeds", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.margins(0.1)
    fig.tight_layout()
    return fig


def _interval(group: dict, name: str) -> list[list[float]] | None:
    """The error bar of a number's mean: its 95 % confidence interval (None for one job)."""
    low, mean, high = (group[f"{name}_{x}"] for x in ("ci95_low", "mean", "ci95_high"))
    return None if low is None else [[mean - low], [high - mean]]


class SweepSummary(Callback):
    """Hydra callback: after a multirun, summarise every job's plan."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        write_summary(Path(config.hydra.sweep.dir))
