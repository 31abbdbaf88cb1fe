"""Benchmark: the `plbjax` command's wall time as a user gets it (start-up, reading, compiling or
loading compiled code, search, decoding, writing), for this tree and for an earlier commit, on the
same generated cluster in the same session.

Each tree plans the cluster twice with its defaults: cold (an empty compilation cache) and warm (the
cache the cold run filled). The earlier commit is checked out into a temporary git worktree and run
from there (PYTHONPATH), so both use this machine's installed packages.

    python scripts/bench_cli_wall.py --before 69d9876 --replicas 10000
Results: results/cli_wall_cpu.{json,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def plan_once(tree: Path, state: Path, cache: Path, out: Path) -> dict:
    """One `plbjax` run from `tree`: its wall seconds and the plan's score, actions and search."""
    env = dict(os.environ, PYTHONPATH=str(tree), PLBJAX_CACHE_DIR=str(cache))
    args = [sys.executable, "-m", "plbjax.cli", f"state={state}", f"out={out}", "progress=false"]
    start = time.perf_counter()
    subprocess.run([*args, f"hydra.run.dir={out.parent / 'hydra'}"], cwd=tree, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    plan = json.loads(out.read_text())
    return {"Wall": round(wall, 2), "Score": plan["Score"], "Actions": len(plan["Actions"]), "Search": plan["Search"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the earlier commit to compare with")
    ap.add_argument("--replicas", type=int, default=10_000)
    ap.add_argument("--out", default=str(ROOT / "results" / "cli_wall_cpu"))
    args = ap.parse_args()
    from plbjax.baseline import machine
    from plbjax.files import write_text

    result: dict = {"Machine": machine(), "Before": args.before, "Runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        state = work / "cluster.json"
        partitions = max(1, round(args.replicas / (3 * 40)))
        gen = ["--nodes", "200", "--services", "40", "--partitions-per-service", str(partitions), "--seed", "3"]
        subprocess.run([sys.executable, "-m", "plbjax.sf._generator", *gen, "-o", str(state)], check=True)
        result["Replicas"] = sum(len(p["Replicas"]) for p in json.loads(state.read_text())["Partitions"])
        old = work / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "-q", str(old), args.before], check=True)
        try:
            for name, tree in (("before", old), ("after", ROOT)):
                for run in ("cold", "warm"):
                    out = work / name / run / "plan.json"
                    out.parent.mkdir(parents=True)
                    result["Runs"][f"{name} {run}"] = plan_once(tree, state, work / f"cache-{name}", out)
                    print(name, run, result["Runs"][f"{name} {run}"]["Wall"], "s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    runs = result["Runs"]
    result["Ratio"] = {
        run: round(runs[f"after {run}"]["Wall"] / runs[f"before {run}"]["Wall"], 3) for run in ("cold", "warm")
    }
    write_text(Path(args.out).with_suffix(".json"), json.dumps(result, indent=1) + "\n")
    plot(result, Path(args.out).with_suffix(".png"))
    return 0


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plbjax.files import write_figure

    names = list(result["Runs"])
    walls = [result["Runs"][n]["Wall"] for n in names]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.barh(names, walls, color=["C7", "C7", "C0", "C0"])
    for y, (name, wall) in enumerate(zip(names, walls)):
        ax.text(
            wall, y, f" {wall:.1f} s, AvgStdDev {result['Runs'][name]['Score']['After']:.4f}", va="center", fontsize=8
        )
    ax.invert_yaxis()
    ax.set_xlabel("wall seconds")
    ax.set_title(f"plbjax defaults, {result['Replicas']} replicas; before = {result['Before']}", fontsize=9)
    write_figure(path, fig)


if __name__ == "__main__":
    sys.exit(main())
