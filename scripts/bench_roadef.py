"""Benchmark: `plbjax-roadef` on the ROADEF/EURO 2012 sets A and B against the published results.

Each run is the challenge's solver command in a fresh process (start-up and compilation count
against the limit); its output is re-checked with the exact host objective. The score is the
challenge's: (cost - best known) / initial cost, beside the winning team's own 300 s result.

    python scripts/bench_roadef.py --seconds 20 --sets A                      # the 2-core CPU check
    python scripts/bench_roadef.py --seconds 30 300 --sets A B --label cpu    # rows into results/
    python scripts/bench_roadef.py --parallel 7 --pin 2 ...                   # 7 runs at once, 2 cores each
    python scripts/bench_roadef.py --report                                   # README table + PNG from the CSV
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from plbjax.roadef import costs, read_instance, read_solution, violations

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PLBJAX_ROADEF_DATA", ROOT.parent / "shared" / "benchmarks" / "roadef2012"))
CSV = ROOT / "results" / "roadef2012.csv"
FIELDS = [
    "label",
    "machine",
    "instance",
    "seconds",
    "cost",
    "initial",
    "best_seen",
    "score",
    "winner_300s",
    "winner_score",
    "wall_s",
    "feasible",
    "solver_says",
]


def reference() -> dict[str, dict]:
    with open(DATA / "reference.csv") as f:
        return {row["instance"]: row for row in csv.DictReader(f)}


def instances(sets: list[str]) -> list[str]:
    """Names in the reference table of the given sets whose model file is present."""
    return [n for n in reference() if n[0].upper() in sets and (DATA / f"model_{n}.txt").exists()]


def machine_name() -> str:
    cpu = (
        next(
            (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    return f"{cpu}, {os.cpu_count()} cores visible"


def run_one(name: str, seconds: float, solver_args: list[str], cores: list[int] | None) -> dict:
    ref = reference()[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "new.txt"
        cmd = [
            sys.executable,
            "-m",
            "plbjax.roadef.cli",
            "-t",
            str(seconds),
            "-p",
            str(DATA / f"model_{name}.txt"),
            "-i",
            str(DATA / f"assignment_{name}.txt"),
            "-o",
            str(out),
            *solver_args,
        ]
        if cores:
            cmd = ["taskset", "-c", ",".join(map(str, cores)), *cmd]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{name}: {done.stderr.strip()}")
        instance = read_instance(DATA / f"model_{name}.txt")
        original = read_solution(DATA / f"assignment_{name}.txt", instance)
        new = read_solution(out, instance)
    cost = costs(instance, original, new).total
    initial, best, winner = int(ref["initial_cost"]), int(ref["best_seen"]), int(ref["winner_S41_300s"])
    return dict(
        instance=name,
        seconds=seconds,
        cost=cost,
        initial=initial,
        best_seen=best,
        score=f"{(cost - best) / initial:.6f}",
        winner_300s=winner,
        winner_score=f"{(winner - best) / initial:.6f}",
        wall_s=f"{wall:.1f}",
        feasible=not violations(instance, original, new),
        solver_says=done.stderr.strip().splitlines()[-1],
    )


def run(args) -> None:
    names = args.instances or instances(args.sets)
    jobs = [(n, s) for s in args.seconds for n in names]
    slots = [list(range(i * args.pin, (i + 1) * args.pin)) if args.pin else None for i in range(args.parallel)]
    free = list(range(args.parallel))
    machine = args.machine or machine_name()

    def job(item):
        slot = free.pop()
        try:
            row = run_one(*item, args.solver_args.split(), slots[slot])
        finally:
            free.append(slot)
        row.update(label=args.label, machine=machine)
        print(
            f"{row['instance']:>5} {row['seconds']:>4} s  cost {row['cost']:>12}  score {float(row['score']):.4%}  "
            f"(winner 300 s {float(row['winner_score']):.4%})  wall {row['wall_s']} s",
            flush=True,
        )
        return row

    with ThreadPoolExecutor(args.parallel) as pool:
        rows = list(pool.map(job, jobs))
    out = Path(args.out)
    new_file = not out.exists()
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new_file:
            writer.writeheader()
        writer.writerows(rows)
    for s in args.seconds:
        scores = [float(r["score"]) for r in rows if r["seconds"] == s]
        print(f"{args.label} {s} s: mean score {sum(scores) / len(scores):.4%} over {len(scores)} instances")


def report(path: Path) -> None:
    """Markdown table (one row per instance, a column per label and budget) and a PNG of scores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader(open(path)))
    columns = sorted({(r["label"], float(r["seconds"])) for r in rows}, key=lambda c: (c[0], c[1]))
    names = list(dict.fromkeys(r["instance"] for r in rows))
    cell = {(r["instance"], r["label"], float(r["seconds"])): r for r in rows}
    head = (
        ["instance", "initial", "best seen"]
        + [f"{lab} {s:g} s cost (score)" for lab, s in columns]
        + ["winner 300 s (score)"]
    )
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for n in names:
        any_row = next(r for r in rows if r["instance"] == n)
        line = [n, any_row["initial"], any_row["best_seen"]]
        for lab, s in columns:
            r = cell.get((n, lab, s))
            line.append(f"{r['cost']} ({float(r['score']):.2%})" if r else "")
        line.append(f"{any_row['winner_300s']} ({float(any_row['winner_score']):.2%})")
        print("| " + " | ".join(line) + " |")
    for lab, s in columns:
        for group in ("a", "b"):
            scores = [float(cell[(n, lab, s)]["score"]) for n in names if n.startswith(group) and (n, lab, s) in cell]
            if scores:
                print(f"- {lab} {s:g} s, set {group.upper()}: mean score {sum(scores) / len(scores):.2%}")
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / (len(columns) + 1)
    for i, (lab, s) in enumerate(columns):
        ax.bar(
            [j + i * width for j in range(len(names))],
            [100 * float(cell[(n, lab, s)]["score"]) if (n, lab, s) in cell else 0 for n in names],
            width,
            label=f"plbjax {lab} {s:g} s",
        )
    ax.bar(
        [j + len(columns) * width for j in range(len(names))],
        [100 * float(next(r for r in rows if r["instance"] == n)["winner_score"]) for n in names],
        width,
        label="winner (S41) 300 s",
        color="k",
    )
    ax.set_xticks([j + 0.4 for j in range(len(names))], names)
    ax.set_ylabel("score, % of initial cost above best known")
    ax.set_yscale("symlog", linthresh=1)
    ax.legend(fontsize=8)
    ax.set_title("ROADEF/EURO 2012: plbjax-roadef vs the winner's 300 s results")
    machines = sorted({f"{r['label']} {float(r['seconds']):g} s: {r['machine']}" for r in rows})
    fig.text(0.01, 0.01, "\n".join(machines), fontsize=6, va="bottom")
    fig.tight_layout(rect=(0, 0.03 * len(machines), 1, 1))
    fig.savefig(path.with_suffix(".png"), dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, nargs="+", default=[30.0, 300.0])
    parser.add_argument("--sets", nargs="+", default=["A", "B"], choices=["A", "B"])
    parser.add_argument("--instances", nargs="+", help="instance names (default: every one of --sets)")
    parser.add_argument("--label", default="cpu", help="column label (device), e.g. cpu or h100")
    parser.add_argument("--machine", help="machine description stored with each row (default: from /proc/cpuinfo)")
    parser.add_argument("--solver-args", default="", help="extra plbjax-roadef arguments, e.g. '--chains 64'")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--pin", type=int, default=0, help="cores per run, pinned with taskset (0: no pinning)")
    parser.add_argument("--out", default=str(CSV))
    parser.add_argument("--report", action="store_true", help="print the README table and write the PNG")
    args = parser.parse_args()
    if args.report:
        report(Path(args.out))
    else:
        run(args)


if __name__ == "__main__":
    main()
