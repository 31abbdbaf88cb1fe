"""Benchmark: `plbjax-replay` on a 1,000-node / 30,000-replica cluster over 24 simulated hours (issue 24).

A synthetic cluster (`plbjax.sf.generate`: 1,000 nodes in 10 fault and 10 upgrade domains, 30
services of 333 partitions of 3 replicas, a fifth stateless, 3 metrics; its Settings empty, so SF's
default timers: PLBRefreshGap 1 s, MinPlacementInterval 1 s, MinConstraintCheckInterval 1 s,
MinLoadBalancingInterval 5 s) gets a diurnal timeline (`scenarios.diurnal`): every 5 minutes every
partition's replicas of each role report loads following a daily sine with noise (about 18,000
LoadReport events per period, 5.2 million over 24 hours). The replay runs as `plbjax-replay` runs
it: the engine's planner with the replay's default per-round search (`ReplayConfig`: 2,000 steps a
phase in blocks of 500, quick balancing rounds as long as what changed asks, `round_search`; `--rounds
fixed`: every round the full search) and the engine's probe.

Measured: wall seconds to generate the timeline, to load it (validate: every event played on the
state), the replay itself split by `Replay.timings` (applying events, the probe, the planner's own work, its
searches, the rest of the loop; `HostShare`: all but the searches), and writing the record
(`write_outputs`); simulated hours per wall minute of the replay (and of load + replay + record);
rounds by phase; XLA compilations (count and seconds). The goal: the 24 simulated hours in at most
10 wall minutes on the 2-core CPU (issue 40: 2.4 simulated hours per wall minute, a host share of at
most 15 %). `--quality BEFORE AFTER` compares two records' imbalance and movements.

Results go to results/replay_cpu.json (rewritten every ~15 s while the replay runs, so an
interrupted run leaves its numbers; `"Finished": false` until the end) and results/replay_cpu.png.

    nice -n 10 python scripts/bench_replay.py                        # the benchmark (24 h)
    python scripts/bench_replay.py --hours 0.5 --nodes 100 --replicas 3000 --out /tmp/smoke
    python scripts/bench_replay.py --quality RECORD_BEFORE RECORD_AFTER --out results/replay_quality
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_WALL_SECONDS = 600.0
GOAL_SIMULATED_HOURS = 24.0


def spec_for(nodes: int, replicas: int, services: int, metrics: int):
    from plbjax.sf import ClusterSpec

    per_service = max(1, round(replicas / (3 * services)))
    return ClusterSpec(
        nodes=nodes,
        fault_domains=10,
        upgrade_domains=10,
        metrics=metrics,
        services=services,
        partitions_per_service=per_service,
        replicas_per_partition=3,
        stateless_fraction=0.2,
        skew=0.5,
    )


class Compilations:
    """XLA compilations seen (jax.monitoring's backend-compile durations)."""

    def __init__(self):
        import jax

        self.count, self.seconds = 0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._heard)

    def _heard(self, event: str, duration: float, **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1
            self.seconds += duration


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=GOAL_SIMULATED_HOURS, help="simulated hours (default 24)")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--replicas", type=int, default=30000)
    ap.add_argument("--services", type=int, default=30)
    ap.add_argument("--metrics", type=int, default=3)
    ap.add_argument("--every-minutes", type=float, default=5.0, help="load report period (default 5)")
    ap.add_argument(
        "--round-seconds", type=float, default=None, help="each round's search seconds (default: ReplayConfig's search)"
    )
    ap.add_argument("--round-steps", type=int, default=None, help="each phase's search steps (default: ReplayConfig's)")
    ap.add_argument("--block-steps", type=int, default=None, help="the search's block (default: ReplayConfig's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "results" / "replay_cpu"), help="results path without suffix")
    ap.add_argument("--record", default=None, help="write the replay's record here (default: a temp folder)")
    ap.add_argument(
        "--compare", nargs="+", metavar="JSON", help="only plot these results' progress together (--out.png)"
    )
    ap.add_argument(
        "--quality",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="only compare two records' imbalance and movements (folders of series.csv; --out.json/.png)",
    )
    ap.add_argument("--rounds", default=None, help="adaptive or fixed (default: ReplayConfig's)")
    args = ap.parse_args(argv)
    if args.compare:
        compare([Path(p) for p in args.compare], Path(args.out).with_suffix(".png"))
        return 0
    if args.quality:
        quality(*(Path(p) for p in args.quality), Path(args.out))
        return 0
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 PID: where it is now, on stderr

    from plbjax import anneal
    from plbjax.baseline import CLUSTER_SEED, Contention, machine
    from plbjax.config import ReplayConfig
    from plbjax.files import write_text
    from plbjax.sf import generate
    from plbjax.sf.replay import parse_timeline, replay, summary, write_outputs
    from plbjax.sf.replay.engine import engine
    from plbjax.sf.replay.scenarios import diurnal

    anneal.enable_compilation_cache()
    compilations = Compilations()
    search, rounds = ReplayConfig().search, args.rounds or ReplayConfig().rounds
    if args.round_seconds is not None:
        search = dataclasses.replace(search, seconds=args.round_seconds)
    if args.round_steps is not None:
        search = dataclasses.replace(search, steps=args.round_steps)
    if args.block_steps is not None:
        search = dataclasses.replace(search, block_steps=args.block_steps)
    out = Path(args.out)
    spec = spec_for(args.nodes, args.replicas, args.services, args.metrics)
    result: dict = {
        "Machine": machine(),
        "Cluster": dataclasses.asdict(spec),
        "ClusterSeed": CLUSTER_SEED,
        "Search": dataclasses.asdict(search),
        "RoundSearch": rounds,
        "Seed": args.seed,
        "LoadReportMinutes": args.every_minutes,
        "Goal": {"SimulatedHours": GOAL_SIMULATED_HOURS, "WallSeconds": GOAL_WALL_SECONDS},
        "Finished": False,
        "Seconds": {},
        "Progress": [],
    }

    def save() -> None:
        write_text(out.with_suffix(".json"), json.dumps(result, indent=1) + "\n")

    def stage(name: str, work):
        start = time.perf_counter()
        value = work()
        result["Seconds"][name] = round(time.perf_counter() - start, 3)
        print(f"{name}: {result['Seconds'][name]:.1f} s", flush=True)
        save()
        return value

    state = stage("generate_state", lambda: generate(CLUSTER_SEED, spec))
    result["Replicas"] = sum(len(p["Replicas"]) for p in state["Partitions"])
    result["Nodes"] = len(state["Nodes"])
    doc = stage(
        "generate_timeline",
        lambda: diurnal(state, seed=args.seed, days=args.hours / 24, every_minutes=args.every_minutes),
    )
    result["Events"] = len(doc["Events"])
    timeline = stage("load_timeline", lambda d=doc: parse_timeline(d))
    del doc
    last = [time.perf_counter()]

    def progress(now: float, timings, rounds, movements) -> None:
        wall = time.perf_counter() - started
        if time.perf_counter() - last[0] < 15.0:
            return
        last[0] = time.perf_counter()
        result["Progress"].append(
            {
                "Wall": round(wall, 2),
                "Simulated": now,
                "Timings": {k: round(v, 2) for k, v in timings.items()},
                "Rounds": dict(rounds),
                "Movements": movements,
                "Calls": dict(calls),
                "Compilations": compilations.count,
                "Session": held(),
            }
        )
        result["SimulatedSeconds"], result["Seconds"]["replay"] = now, round(wall, 3)
        result["SimulatedHoursPerWallMinute"] = round(now / 3600 / (wall / 60), 3) if wall > 0 else None
        result["ReplayTimings"] = {k: round(v, 3) for k, v in timings.items()}
        result["Rounds"], result["Compilations"] = (
            dict(rounds),
            {"Count": compilations.count, "Seconds": round(compilations.seconds, 2)},
        )
        print(
            f"  simulated {now / 3600:6.2f} h in {wall:7.1f} s  {result['ReplayTimings']}  {dict(rounds)}", flush=True
        )
        save()

    calls = {"probe": 0, "planner": 0}
    planner, probe = engine(search, rounds=rounds)
    held = lambda: {"Encodings": planner.session.encodings, "Updates": planner.session.updates}

    def counted(part: str, work):
        def call(*a):
            calls[part] += 1
            return work(*a)

        return call

    started = time.perf_counter()
    with Contention() as contention:
        record = replay(
            timeline,
            counted("planner", planner),
            counted("probe", probe),
            seed=args.seed,
            progress=progress,
        )
    wall = time.perf_counter() - started
    result["Seconds"]["replay"] = round(wall, 3)
    result["OtherCoresBusy"] = None if contention.other_cores is None else round(contention.other_cores, 2)
    result["Progress"].append(
        {
            "Wall": round(wall, 2),
            "Simulated": record.duration,
            "Timings": {k: round(v, 2) for k, v in record.timings.items()},
            "Rounds": dict(record.rounds),
            "Calls": dict(calls),
            "Compilations": compilations.count,
            "Session": held(),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        stage("record", lambda: write_outputs(record, args.record or Path(tmp) / "record"))
    total = sum(result["Seconds"][k] for k in ("load_timeline", "replay", "record"))
    result.update(
        Finished=True,
        SimulatedSeconds=record.duration,
        SimulatedHoursPerWallMinute=round(record.duration / 3600 / (wall / 60), 3),
        SimulatedHoursPerWallMinuteWithLoadAndRecord=round(record.duration / 3600 / (total / 60), 3),
        ReplayTimings={k: round(v, 3) for k, v in record.timings.items()},
        HostShare=round(1 - record.timings.get("search", 0.0) / max(sum(record.timings.values()), 1e-9), 4),
        Rounds=dict(record.rounds),
        Calls=calls,
        Session=held(),
        Compilations={"Count": compilations.count, "Seconds": round(compilations.seconds, 2)},
        Summary={k: v for k, v in summary(record).items() if k != "Seconds"},
        GoalMet=record.duration >= GOAL_SIMULATED_HOURS * 3600 - 1e-6 and wall <= GOAL_WALL_SECONDS,
    )
    save()
    plot(result, out.with_suffix(".png"))
    print(
        f"{record.duration / 3600:g} simulated h in {wall:.1f} s: {result['SimulatedHoursPerWallMinute']} "
        f"simulated h per wall minute; {result['ReplayTimings']}; rounds {dict(record.rounds)}; "
        f"{compilations.count} compilation(s)",
        flush=True,
    )
    return 0


def plot(result: dict, path: Path) -> None:
    """Simulated hours against wall seconds (with the goal's line), and where the wall time went."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plbjax.files import write_figure

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    points = [(0.0, 0.0)] + [(p["Wall"], p["Simulated"] / 3600) for p in result["Progress"]]
    left.plot([w for w, _ in points], [h for _, h in points], marker=".", label="replay")
    left.plot([0, GOAL_WALL_SECONDS], [0, GOAL_SIMULATED_HOURS], "k--", lw=1, label="goal: 24 h in 10 min")
    left.set_xlabel("wall seconds (replay)")
    left.set_ylabel("simulated hours")
    left.set_title(
        f"{result['Nodes']} nodes, {result['Replicas']} replicas: "
        f"{result['SimulatedHoursPerWallMinute']} simulated h / wall min",
        fontsize=9,
    )
    left.legend(fontsize=8)
    parts = {
        "load timeline": result["Seconds"].get("load_timeline", 0.0),
        **{f"replay: {k}": v for k, v in result.get("ReplayTimings", {}).items()},
        "record": result["Seconds"].get("record", 0.0),
    }
    names = list(parts)
    right.barh(names, [parts[n] for n in names], color=["C7"] + ["C0"] * (len(names) - 2) + ["C7"])
    for y, name in enumerate(names):
        right.text(parts[name], y, f" {parts[name]:.1f}", va="center", fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("wall seconds")
    right.set_title(f"where the wall time went (rounds: {result.get('Rounds', {})})", fontsize=8)
    write_figure(path, fig)


def _series(record: Path) -> list[dict]:
    import csv

    with open(record / "series.csv", newline="") as f:
        return list(csv.DictReader(f))


def quality(before: Path, after: Path, out: Path) -> None:
    """Two records of the same timeline side by side: time-averaged AvgStdDev (as the summary
    computes it), cumulative movements, their ratios, and AvgStdDev after each balancing round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plbjax.files import write_figure, write_text

    result: dict = {"Records": {"Before": str(before), "After": str(after)}}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for name, record in (("Before", before), ("After", after)):
        rows, summary = _series(record), json.loads((record / "summary.json").read_text())
        rounds = [r for r in rows if r["Phase"] == "Balancing"]
        result[name] = {
            "TimeAveragedAvgStdDev": summary["TimeAveragedAvgStdDev"],
            "CumulativeMovements": summary["CumulativeMovements"],
            "Rounds": summary["Rounds"],
            "MeanAvgStdDevAfterBalancing": sum(float(r["AvgStdDev"]) for r in rounds) / max(len(rounds), 1),
        }
        hours = [float(r["Time"]) / 3600 for r in rounds]
        top.plot(hours, [float(r["AvgStdDev"]) for r in rounds], ".", ms=2, label=f"{name.lower()}: {record.name}")
        bottom.plot([float(r["Time"]) / 3600 for r in rows], [int(r["CumulativeMovements"]) for r in rows], label=name)
    result["Ratios"] = {
        k: round(result["After"][k] / result["Before"][k], 4) if result["Before"][k] else None
        for k in ("TimeAveragedAvgStdDev", "CumulativeMovements", "MeanAvgStdDevAfterBalancing")
    }
    top.set_ylabel("AvgStdDev after each balancing round")
    top.set_title(f"after / before: {result['Ratios']}", fontsize=8)
    top.legend(fontsize=8)
    bottom.set_ylabel("cumulative movements")
    bottom.set_xlabel("simulated hours")
    bottom.legend(fontsize=8)
    write_figure(out.with_suffix(".png"), fig)
    write_text(out.with_suffix(".json"), json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["Ratios"]))


def compare(paths: list[Path], path: Path) -> None:
    """Simulated hours against wall seconds of several results (runs stopped early included)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plbjax.files import write_figure

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for p in paths:
        result = json.loads(p.read_text())
        points = [(0.0, 0.0)] + [(x["Wall"], x["Simulated"] / 3600) for x in result["Progress"]]
        commit = result["Machine"].get("git_commit", "?")[:7]
        ax.plot([w for w, _ in points], [h for _, h in points], marker=".", ms=3, label=f"{p.stem} ({commit})")
    ax.plot([0, GOAL_WALL_SECONDS], [0, GOAL_SIMULATED_HOURS], "k--", lw=1, label="goal: 24 h in 10 min")
    ax.set_xlabel("wall seconds (replay)")
    ax.set_ylabel("simulated hours")
    ax.set_title(
        f"plbjax-replay, {result['Nodes']} nodes, {result['Replicas']} replicas, {result['Machine']['cpu_model']}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    write_figure(path, fig)


if __name__ == "__main__":
    sys.exit(main())
