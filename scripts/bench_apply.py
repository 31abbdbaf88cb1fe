"""Benchmark: plbjax-apply's concurrency against one move at a time, on the SF simulator.

A synthetic plan of 500 movements (swaps, secondary and instance moves over a generated cluster of 40
nodes and about 1,000 replicas; tests/sf/live/test_apply.py's `synthetic_plan`) is applied twice to a fresh
simulator whose moves take 2 simulated seconds (clock_rate 8: 0.25 s of wall): with the defaults
(--per-node 2 --max-in-flight 20) and with --max-in-flight 1. Both poll every 0.05 s. Recorded: wall
and simulated seconds of each, their ratios, the most moves in flight at once, the machine.

    python scripts/bench_apply.py                      # ~4 minutes on 2 CPU cores
    python scripts/bench_apply.py --moves 100 --out /tmp/apply   # a quick look

`--scripts`: the exported scripts' cost per step instead. The first `--moves` movements of the same plan
(default here 12) exported as an sfctl script (run with the real sfctl, installed by the test extra, and
with the tests' stand-in tests/bin/sfctl) and as a curl script, each run on a fresh simulator with
PLBJAX_POLL_SECONDS=0.1; recorded: wall seconds per step of each.

    python scripts/bench_apply.py --scripts --out results/apply-scripts   # ~1 minute
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plbjax.files import write_figure, write_text
from plbjax.sf.live.apply import main as apply_main
from plbjax.sf.live.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "sf" / "live")]
from test_apply import synthetic_plan  # noqa: E402 (the tests' plan builder, from their directory)

CLOCK_RATE, BUILD_SECONDS, POLL = 8.0, 2.0, "0.05"


def run(state: dict, work: Path, name: str, extra: list[str]) -> dict:
    """One application of the plan in `work` to a fresh simulator: its times and concurrency."""
    sim = Simulator.from_state(state, build_seconds=BUILD_SECONDS, swap_seconds=BUILD_SECONDS, clock_rate=CLOCK_RATE)
    journal = work / f"{name}.journal.json"
    with sim.serve() as url:
        began, wall = sim.now(), time.perf_counter()
        args = [str(work / "plan.json"), "--state", str(work / "state.json"), "--endpoint", url, "--insecure"]
        try:
            apply_main([*args, "--poll", POLL, "--no-progress", "--journal", str(journal), *extra])
        except SystemExit as exc:
            assert not exc.code, f"plbjax-apply exited {exc.code}"
        wall, simulated = time.perf_counter() - wall, sim.now() - began
    return {
        "name": name,
        "options": extra,
        "wall_seconds": round(wall, 2),
        "simulated_seconds": round(simulated, 2),
        "moves": len(sim.moves),
        "sum_of_move_seconds": round(sum(m.finished - m.started for m in sim.moves if m.finished is not None), 2),
        "max_concurrent": sim.max_concurrent(),
        "max_concurrent_per_node": sim.max_concurrent_per_node(),
    }


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    names = [r["name"] for r in result["runs"]]
    for ax, key, label in zip(axes, ("wall_seconds", "simulated_seconds"), ("wall s", "simulated s")):
        bars = ax.bar(names, [r[key] for r in result["runs"]], color=["tab:blue", "tab:gray"])
        ax.bar_label(bars, fmt="%.0f")
        ax.set_ylabel(label)
    fig.suptitle(
        f"plbjax-apply, {result['moves']} moves: {result['simulated_speedup']:.1f}x simulated, "
        f"{result['wall_speedup']:.1f}x wall ({result['machine']['cpus']} CPUs)",
        fontsize=10,
    )
    write_figure(out.with_suffix(".png"), fig)


def script(state: dict, work: Path, fmt: str, sfctl: str) -> dict:
    """The plan in `work` exported as `fmt` and run to its end on a fresh simulator: wall seconds per step."""
    from plbjax.sf.live.export import main as export_main

    out = work / f"moves-{fmt}-{sfctl}"
    export_main([str(work / "plan.json"), "--format", fmt, "--state", str(work / "state.json"), "-o", str(out)])
    stand_in = str(ROOT / "tests" / "bin")
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p != stand_in]
    sim = Simulator.from_state(state, build_seconds=BUILD_SECONDS, swap_seconds=BUILD_SECONDS, clock_rate=CLOCK_RATE)
    with sim.serve() as url:
        env = os.environ | {
            "HOME": str(work / f"home-{fmt}-{sfctl}"),
            "PATH": os.pathsep.join([stand_in, *path] if sfctl == "stand-in" else path),
            "PLBJAX_ENDPOINT": url,
            "PLBJAX_POLL_SECONDS": "0.1",
            "PYTHONWARNINGS": "ignore",
        }
        if fmt == "sfctl":
            subprocess.run(["sfctl", "cluster", "select", "--endpoint", url], env=env, check=True, capture_output=True)
        wall = time.perf_counter()
        done = subprocess.run(["bash", str(out)], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - wall
    assert done.returncode == 0, done.stderr[-2000:]
    steps = len(json.loads((work / "plan.json").read_text())["Actions"])
    name = {"rest": "curl", "sfctl": f"sfctl ({sfctl})"}[fmt]
    return {"name": name, "steps": steps, "wall_seconds": round(wall, 2), "per_step": round(wall / steps, 2)}


def scripts(args: argparse.Namespace, state: dict, work: Path) -> None:
    """The exported scripts' cost per step (--scripts)."""
    moves = args.moves if args.moves != 500 else 12
    (work / "plan.json").write_text(json.dumps(synthetic_plan(state, moves)))
    runs = [
        script(state, work, "sfctl", "real"),
        script(state, work, "sfctl", "stand-in"),
        script(state, work, "rest", ""),
    ]
    version = subprocess.run(["sfctl", "--version"], capture_output=True, text=True).stdout.split()[0]
    result = {
        "benchmark": "the exported scripts' cost per step on the SF simulator",
        "steps": moves,
        "move_wall_seconds": BUILD_SECONDS / CLOCK_RATE,
        "poll_seconds": 0.1,
        "sfctl": version,
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
    }
    write_text(Path(args.out).with_suffix(".json"), json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=500)
    parser.add_argument("--out", default=str(ROOT / "results" / "apply-concurrency"), help="path without suffix")
    parser.add_argument("--scripts", action="store_true", help="the exported scripts' cost per step instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        command = ["plbjax-generate", "--nodes", "40", "--services", "20", "--partitions-per-service", "17"]
        subprocess.run([*command, "-o", str(work / "state.json")], check=True, capture_output=True)
        state = json.loads((work / "state.json").read_text())
        if args.scripts:
            return scripts(args, state, work)
        (work / "plan.json").write_text(json.dumps(synthetic_plan(state, args.moves)))
        runs = [run(state, work, "defaults", []), run(state, work, "one at a time", ["--max-in-flight", "1"])]
    result = {
        "benchmark": "plbjax-apply concurrency on the SF simulator",
        "moves": args.moves,
        "clock_rate": CLOCK_RATE,
        "move_simulated_seconds": BUILD_SECONDS,
        "poll_seconds": float(POLL),
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
        "simulated_speedup": round(runs[1]["simulated_seconds"] / runs[0]["simulated_seconds"], 2),
        "wall_speedup": round(runs[1]["wall_seconds"] / runs[0]["wall_seconds"], 2),
    }
    out = Path(args.out)
    write_text(out.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
    plot(result, out)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
