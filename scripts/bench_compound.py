"""Benchmark: SF's compound move (issue 48.5), this tree against an earlier commit, interleaved.

Where a partition has as many replicas as there are fault or upgrade domains, no replica can move
alone; compound moves (a move, then its domain repairs) reach the nodes single moves cannot. Each
measure runs the `plbjax` command as a user would (`bench_effort.Tree`: the whole process, warm),
with this tree and the `--before` commit alternately, for `--seeds` search seeds:

- `grid`: SF's BalancingWithFaultAndUpgradeDomainTest1 made larger: 50 nodes, two in each pair of
  five fault and five upgrade domains, 200 five-replica partitions (1,000 replicas) all on the ten
  nodes of two "diagonals" (one replica per fault and upgrade domain), 40 nodes empty;
- `example`: the bundled example (three replicas over three fault domains: compound moves too);
- `example-cold`: the same with an empty compile cache (what the larger program costs to build).

Reported per tree and seed: AvgStdDev after, movements, process wall seconds.

    python scripts/bench_compound.py --before 8c9dc97
Results: results/compound_cpu.json and results/compound_cpu.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_effort import ROOT, WORK, Tree, worktree

from plbjax.baseline import machine
from plbjax.files import write_figure, write_text

DOMAINS, PER_CELL, PARTITIONS = 5, 2, 200


def grid_document(seed: int = 0) -> dict:
    """`grid` (module docstring), random loads on two metrics."""
    rng = np.random.default_rng(seed)
    metrics = ["CPU", "Memory"]
    nodes = [
        {
            "NodeName": f"N{f}{u}{k}",
            "FaultDomain": f"fd:/dc{f}",
            "UpgradeDomain": f"UD{u}",
            "Capacities": {m: 10_000 for m in metrics},
        }
        for f in range(DOMAINS)
        for u in range(DOMAINS)
        for k in range(PER_CELL)
    ]
    service = {
        "ServiceName": "fabric:/Grid/S",
        "ServiceTypeName": "T",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": DOMAINS,
        "Metrics": [
            {"Name": m, "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 5} for m in metrics
        ],
    }
    partitions = []
    for p in range(PARTITIONS):
        shift = p % 2  # the diagonal: fault domain f in upgrade domain (f + shift) % DOMAINS
        replicas = [
            {
                "ReplicaId": f"{p}-{f}",
                "Role": "Primary" if f == p % DOMAINS else "Secondary",
                "NodeName": f"N{f}{(f + shift) % DOMAINS}0",
                "Loads": {m: int(rng.integers(5, 40)) for m in metrics},
            }
            for f in range(DOMAINS)
        ]
        partitions.append({"ServiceName": service["ServiceName"], "PartitionId": str(p), "Replicas": replicas})
    return {"SchemaVersion": 1, "Nodes": nodes, "Services": [service], "Partitions": partitions}


def run(tree: Tree, state: Path, seed: int, cold: bool = False) -> dict:
    cache = Path(tempfile.mkdtemp(dir=WORK)) if cold else None
    wall, plan = tree.plan(state, [f"search.seed={seed}"], cache=cache)
    return dict(
        wall=wall,
        after=plan["Score"]["After"],
        before=plan["Score"]["Before"],
        movements=sum(p.get("Movements", {}).get("Used", 0) for p in plan["Phases"]),
        nodes_used=len({a["TargetNode"] for a in plan["Actions"] if a.get("TargetNode")}),
    )


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["runs"]["after"])
    fig, axes = plt.subplots(2, len(names), figsize=(3 * len(names), 5), squeeze=False)
    for column, name in enumerate(names):
        for row, (key, label) in enumerate((("after", "AvgStdDev after"), ("wall", "process wall s"))):
            ax = axes[row, column]
            for k, tree in enumerate(("before", "after")):
                values = [r[key] for r in result["runs"][tree][name]]
                ax.scatter([k] * len(values), values, label=f"{tree} ({result[tree]})")
            ax.set_xticks([0, 1], ["before", "after"])
            ax.set_title(name if row == 0 else "", fontsize=9)
            ax.set_ylabel(label if column == 0 else "")
    fig.suptitle(f"compound moves, each seed, {result['machine']['cpu_model']}", fontsize=9)
    fig.tight_layout()
    write_figure(path, fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "compound_cpu.json")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    grid = WORK / "grid.json"
    grid.write_text(json.dumps(grid_document()))
    example = ROOT / "examples" / "small.yaml"
    states = {"grid": (grid, False), "example": (example, False), "example-cold": (example, True)}
    trees = [worktree(args.before), Tree("after", ROOT)]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    result = dict(machine=machine(), before=args.before, after=commit.stdout.strip(), runs={}, medians={})
    for name, (state, cold) in states.items():
        for tree in trees:
            tree.plan(state)  # warm its compile cache
        for seed in range(2 if cold else args.seeds):
            for tree in trees:
                one = run(tree, state, seed, cold)
                result["runs"].setdefault(tree.name, {}).setdefault(name, []).append(one)
                print(f"{name} {tree.name} seed {seed}: {json.dumps(one)}", flush=True)
        for tree in trees:
            runs = result["runs"][tree.name][name]
            result["medians"].setdefault(tree.name, {})[name] = {
                k: statistics.median(r[k] for r in runs) for k in runs[0]
            }
        write_text(args.out, json.dumps(result, indent=1) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps(result["medians"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
