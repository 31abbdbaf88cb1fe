"""Micro-benchmark: the replay's host work on a 1,000-node / 30,000-replica cluster (issue 40).

Times, on the cluster of `scripts/bench_replay.py` with its diurnal load reports every 5 minutes:
`events.apply_events` on one period's LoadReport batch (~18,000 events; the first batch on the
generated state, then each on the last one's result, with completion batches in between, as the
loop applies them), `InFlight.complete` on batches of `--actions` moves (random replicas to Up
nodes that hold none of their partition), and `Resident.replace` / `clean_history` after each
change, in CPU seconds of the process (the machine may be shared). Each batch applies to the
state the last one left, as the loop applies them; the garbage collector runs as in the loop
(`gc.freeze` at the start). `--dump` writes a digest of every state produced (as a document), to
compare two trees (same seed, same states).

    nice -n 5 python scripts/bench_replay_events.py                   # 4 load periods
    python scripts/bench_replay_events.py --periods 2 --out /tmp/events.json --dump /tmp/a.txt
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(samples: dict[str, list[float]], name: str, work: Callable):
    """`work()`, its CPU seconds (this process's: the machine may be shared) kept under `name`."""
    start = time.process_time()
    value = work()
    samples.setdefault(name, []).append(time.process_time() - start)
    return value


def _digest(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _moves(state, count: int, rng: random.Random) -> list:
    """`count` moves of replicas of distinct random partitions to Up nodes holding none of them."""
    from plbjax.sf import Action, ActionKind, NodeStatus

    up = [n.name for n in state.nodes if n.status is NodeStatus.UP]
    moves = []
    for part in rng.sample(state.partitions, count):
        replica = rng.choice(part.replicas)
        held = {r.node for r in part.replicas}
        target = rng.choice([n for n in up if n not in held])
        kind = ActionKind.move(replica.role)
        moves.append(Action(part.service, part.partition_id, replica.replica_id, kind, replica.node, target))
    return moves


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--periods", type=int, default=4, help="load-report periods (default 4)")
    ap.add_argument("--completions", type=int, default=5, help="completion batches after each period (default 5)")
    ap.add_argument("--actions", type=int, default=40, help="moves per completion batch (default 40)")
    ap.add_argument("--out", default=None, help="write the timings here (JSON)")
    ap.add_argument("--dump", default=None, help="write a digest of every document produced here")
    args = ap.parse_args(argv)

    import importlib.util

    from plbjax.baseline import CLUSTER_SEED
    from plbjax.sf import generate, parse_state, state_document
    from plbjax.sf.replay.scenarios import diurnal
    from plbjax.sf.replay.scheduler.inflight import InFlight
    from plbjax.sf.replay.state.resident import Resident
    from plbjax.sf.replay.timeline.events import Event, apply_events
    from plbjax.sf.replay.types import Stopwatch

    spec_path = ROOT / "scripts" / "bench_replay.py"
    loader = importlib.util.spec_from_file_location("bench_replay", spec_path)
    assert loader is not None and loader.loader is not None
    bench_replay = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(bench_replay)
    doc = generate(CLUSTER_SEED, bench_replay.spec_for(1000, 30000, 30, 3))
    timeline = diurnal(doc, seed=0, days=args.periods * 300 / 86400, every_minutes=5.0)
    batches: dict[float, list[Event]] = {}
    for i, e in enumerate(timeline["Events"]):
        fields = {k: v for k, v in e.items() if k not in ("Time", "Kind")}
        batches.setdefault(e["Time"], []).append(Event.read(e["Time"], e["Kind"], fields, i))

    gc.freeze()
    rng, flight, samples, digests = random.Random(0), InFlight(), {}, []
    ids = [str(r["ReplicaId"]) for p in doc["Partitions"] for r in p["Replicas"]]
    nodes = [n["NodeName"] for n in doc["Nodes"]]
    history = {rid: [rng.choice(nodes)] for rid in rng.sample(ids, 2000)}
    holder = Resident(parse_state({**doc, "History": history}), probe=None, stopwatch=Stopwatch())  # type: ignore[arg-type]

    def settle() -> None:
        _timed(samples, "clean_history", holder.clean_history)
        if args.dump:
            digests.append(_digest(state_document(holder.state)))

    for n, (now, events) in enumerate(sorted(batches.items())):
        name = "apply_events first" if n == 0 else "apply_events"
        batch = _timed(samples, name, lambda e=events, t=now: apply_events(holder.state, holder.places, e, t, True))
        assert len(batch.events) == len(events) and not batch.reread
        _timed(samples, "replace", lambda s=batch.state: holder.replace(s))
        settle()
        for k in range(args.completions):
            for action in _moves(holder.state, args.actions, rng):
                flight.issue(action, now + k, 1.0)
            after, touched, done = _timed(
                samples, "complete", lambda t=now + k + 1: flight.complete(holder.state, holder.places, t)
            )
            assert done == args.actions
            _timed(samples, "replace", lambda s=after, w=touched: holder.replace(s, w))
            settle()
        print(f"period {n}: {len(events)} load reports", flush=True)

    result = {
        name: {
            "Calls": len(s),
            "MinSeconds": round(min(s), 5),
            "MedianSeconds": round(statistics.median(s), 5),
            "TotalSeconds": round(sum(s), 4),
        }
        for name, s in samples.items()
    }
    result["Cluster"] = {"Replicas": len(ids), "Nodes": len(nodes), "ActionsPerCompletion": args.actions}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.dump:
        Path(args.dump).write_text("\n".join(digests) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
