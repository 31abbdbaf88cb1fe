"""Benchmark: the `plbjax` command's wall time as a user gets it (start-up, reading, tracing and
compiling or loading compiled code, search, decoding, writing), for this tree and for an earlier
commit, on the same clusters in the same session.

Cases: the bundled example and generated clusters of about N replicas (200 nodes, 40 services). Each
tree plans each case with its defaults, cold (an empty compilation cache) then `--repeats` times warm
(the cache the cold run filled; the fastest counts), the trees taking turns so that load on the
machine falls on both. `--sweep K`: a K-job Hydra sweep over balancing thresholds on the example
(warm), against one warm job of the same tree. The earlier commit is checked out into a temporary
git worktree and run from there (PYTHONPATH), so both use this machine's installed packages.

Issue 30's targets (2-core CPU): the example <= 5 s warm and <= 12 s cold; at 10k replicas the
process <= 2 x its search seconds + 5 s; a 10-job sweep <= 3 x one job.

    python scripts/bench_cli_wall.py --before ab94e9b --cases example 10000 100000 --sweep 10
Results: results/cli_wall_cpu.{json,png} (rewritten after every run).
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
EXAMPLE = ROOT / "examples" / "small.yaml"
THRESHOLDS = (1.05, 1.1, 1.2, 1.3, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 20, 50)


def run_plbjax(tree: Path, cache: Path, args: list[str], cwd: Path) -> float:
    """Wall seconds of one `plbjax` process from `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree), PLBJAX_CACHE_DIR=str(cache))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "plbjax.cli", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return round(time.perf_counter() - start, 2)


def plan_once(tree: Path, state: Path, cache: Path, work: Path) -> dict:
    """One plan: wall seconds and what the plan says of its search."""
    out = work / "plan.json"
    work.mkdir(parents=True, exist_ok=True)
    args = [f"state={state}", f"out={out}", "progress=false", f"hydra.run.dir={work / 'hydra'}"]
    wall = run_plbjax(tree, cache, args, work)
    plan = json.loads(out.read_text())
    return {
        "Wall": wall,
        "AvgStdDev": plan["Score"]["After"],
        "Actions": len(plan["Actions"]),
        "Search": plan["Search"],
    }


def sweep_once(tree: Path, cache: Path, jobs: int, work: Path) -> float:
    values = ",".join(str(t) for t in THRESHOLDS[:jobs])
    args = ["-m", f"state={EXAMPLE}", f"balancing.threshold={values}", "progress=false", f"hydra.sweep.dir={work}"]
    return run_plbjax(tree, cache, args, work.parent)


def state_for(case: str, work: Path) -> Path:
    if case == "example":
        return EXAMPLE
    state = work / f"cluster-{case}.json"
    partitions = max(1, round(int(case) / (3 * 40)))
    gen = ["--nodes", "200", "--services", "40", "--partitions-per-service", str(partitions), "--seed", "3"]
    subprocess.run([sys.executable, "-m", "plbjax.generate_cli", *gen, "-o", str(state)], check=True)
    return state


def targets(result: dict) -> dict:
    """Issue 30's targets, met or not, for what was measured."""
    out = {}
    example = result["Cases"].get("example", {})
    if "warm" in example.get("after", {}):
        out["example warm <= 5 s"] = example["after"]["warm"]["Wall"] <= 5
        out["example cold <= 12 s"] = example["after"]["cold"]["Wall"] <= 12
    ten = result["Cases"].get("10000", {}).get("after")
    if ten:
        for run in (r for r in ("cold", "warm") if r in ten):
            out[f"10k {run} <= 2 x search + 5 s"] = ten[run]["Wall"] <= 2 * ten[run]["Search"]["Seconds"] + 5
    if "after" in result.get("Sweep", {}):
        out["sweep <= 3 x one job"] = result["Sweep"]["after"]["PerOneJob"] <= 3
    return out


def measure(args, result: dict, work: Path, trees: dict[str, Path], save) -> None:
    for case in args.cases:
        state, runs = state_for(case, work), result["Cases"].setdefault(case, {})
        for run in ["cold"] + [f"warm{k}" for k in range(args.repeats)]:
            for name, tree in trees.items():
                measured = plan_once(tree, state, work / f"cache-{name}-{case}", work / name / case / run)
                runs.setdefault(name, {})[run] = measured
                warm = [v for k, v in runs[name].items() if k.startswith("warm") and k != "warm"]
                if warm:
                    runs[name]["warm"] = min(warm, key=lambda m: m["Wall"])
                print(case, name, run, measured["Wall"], "s", flush=True)
                save()
    if args.sweep:
        for name, tree in trees.items():
            cache = work / f"cache-{name}-example"
            one = plan_once(tree, EXAMPLE, cache, work / name / "sweep-one")["Wall"]
            wall = sweep_once(tree, cache, args.sweep, work / name / "sweep")
            result["Sweep"][name] = {"Jobs": args.sweep, "Wall": wall, "OneJob": one, "PerOneJob": round(wall / one, 2)}
            print("sweep", name, wall, "s; one job", one, "s", flush=True)
            save()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the earlier commit to compare with")
    ap.add_argument("--cases", nargs="+", default=["example", "10000"], help="'example' or a replica count")
    ap.add_argument("--repeats", type=int, default=2, help="warm runs per tree and case (the fastest counts)")
    ap.add_argument("--sweep", type=int, default=0, help="jobs of a threshold sweep on the example (0: none)")
    ap.add_argument("--out", default=str(ROOT / "results" / "cli_wall_cpu"))
    args = ap.parse_args()
    from plbjax.baseline import machine
    from plbjax.files import write_text

    result: dict = {"Machine": machine(), "Before": args.before, "Cases": {}, "Sweep": {}}

    def save() -> None:
        result["Ratio"] = {
            f"{case} {run}": round(runs["after"][run]["Wall"] / runs["before"][run]["Wall"], 3)
            for case, runs in result["Cases"].items()
            for run in ("cold", "warm")
            if run in runs.get("after", {}) and run in runs.get("before", {})
        }
        result["Targets"] = targets(result)
        write_text(Path(args.out).with_suffix(".json"), json.dumps(result, indent=1) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old = work / "before-tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "-q", str(old), args.before], check=True)
        try:
            measure(args, result, work, {"before": old, "after": ROOT}, save)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    plot(result, Path(args.out).with_suffix(".png"))
    return 0


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plbjax.files import write_figure

    bars = [
        (f"{case} {run} {name}", runs[name][run]["Wall"], "C7" if name == "before" else "C0")
        for case, runs in result["Cases"].items()
        for run in ("cold", "warm")
        for name in ("before", "after")
        if run in runs.get(name, {})
    ]
    bars += [
        (f"sweep x{s['Jobs']} {name}", s["Wall"], "C7" if name == "before" else "C0")
        for name, s in result["Sweep"].items()
    ]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(bars) + 1.2))
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color=[b[2] for b in bars])
    for y, (_, wall, _) in enumerate(bars):
        ax.text(wall, y, f" {wall:.1f} s", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("process wall seconds (plbjax defaults)")
    ax.set_title(
        f"{result['Machine'].get('cpu_model', '')}: before = {result['Before']} (grey), after (blue)", fontsize=9
    )
    write_figure(path, fig)


if __name__ == "__main__":
    sys.exit(main())
