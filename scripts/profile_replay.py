"""Profile a replay's steady state: the 30,000-replica diurnal benchmark cluster of `bench_replay.py`,
played to `--warm` simulated hours (compilation, the first rounds), then profiled with cProfile to
`--hours`. Prints the replay's timings by part over the profiled window and the cProfile listing;
the profile goes to `--out` (read it with `python -m pstats`).

    python scripts/profile_replay.py --warm 0.5 --hours 1.0 --out /tmp/replay.prof
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=float, default=0.5, help="simulated hours before profiling")
    ap.add_argument("--hours", type=float, default=1.0, help="simulated hours in all")
    ap.add_argument("--out", default="/tmp/replay.prof")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("bench_replay", ROOT / "scripts" / "bench_replay.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    from plbjax import anneal
    from plbjax.baseline import CLUSTER_SEED
    from plbjax.config import ReplayConfig
    from plbjax.sf import generate
    from plbjax.sf.replay import parse_timeline, replay
    from plbjax.sf.replay.engine import engine
    from plbjax.sf.replay.scenarios import diurnal

    anneal.enable_compilation_cache()
    state = generate(CLUSTER_SEED, bench.spec_for(1000, 30000, 30, 3))
    timeline = parse_timeline(diurnal(state, seed=0, days=args.hours / 24, every_minutes=5.0))
    config = ReplayConfig()
    planner, probe = engine(config.search, rounds=config.rounds)
    profile, mark = cProfile.Profile(), {}

    def progress(now, timings, rounds, movements) -> None:
        if not mark and now >= args.warm * 3600:
            mark.update(wall=time.perf_counter(), timings=dict(timings), rounds=dict(rounds))
            profile.enable()

    record = replay(timeline, planner, probe, seed=0, progress=progress)
    profile.disable()
    if not mark:
        raise SystemExit("the replay ended before --warm")
    wall = time.perf_counter() - mark["wall"]
    parts = {k: round(v - mark["timings"].get(k, 0.0), 2) for k, v in record.timings.items()}
    rounds = {k: v - mark["rounds"].get(k, 0) for k, v in record.rounds.items()}
    print(f"profiled {args.hours - args.warm:.2f} simulated h in {wall:.1f} s: {parts}; rounds {rounds}")
    profile.dump_stats(args.out)
    pstats.Stats(args.out).sort_stats("cumulative").print_stats(60)


if __name__ == "__main__":
    main()
