"""The random-validity suite's long tier: many random clusters planned, each plan checked.

Clusters come from `tests/validity.py` (every feature plbjax supports, in families of one shape so a
family compiles once) and are planned through `plbjax.plan` with the same two search settings as
the fast tier in tests/sf/plan/test_validity.py (alternating by family); the checker there shares no code
with the engine. Results, rewritten after every family: `results/validity_sweep.json` (every
cluster: its features, actions, unplaced replicas, seconds and breaks) and `.png` (feature coverage
and breaks found).

    python scripts/validity_sweep.py --clusters 2000 --per-family 25      # ~30 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[1]
# The one sys.path entry in scripts/: the sweep is the long tier of tests/sf/plan/test_validity.py and runs its
# random-cluster generator, its checker (tests/validity.py, which on purpose shares no code with
# plbjax) and its search settings, so they stay with the tests rather than in the package.
sys.path.insert(0, str(ROOT / "tests"))

from test_validity import CONFIGS  # noqa: E402
from validity import breaks, random_cluster  # noqa: E402

from plbjax import parse_state, plan  # noqa: E402
from plbjax.anneal import clear_compiled  # noqa: E402


def features(doc: dict) -> list[str]:
    """What a cluster uses, for the coverage count."""
    nodes, services, parts = doc["Nodes"], doc["Services"], doc["Partitions"]
    target = {s["ServiceName"]: s.get("TargetReplicaSetSize", s.get("InstanceCount")) for s in services}
    policies = {p["Type"] for s in services for p in s.get("PlacementPolicies", [])}
    checks = {
        "Down node": any(n.get("NodeStatus") == "Down" for n in nodes),
        "Disabled node": any(n.get("NodeStatus") == "Disabled" for n in nodes),
        "hierarchical FD": any(n["FaultDomain"].count("/") > 1 for n in nodes),
        "node priority": any("Priority" in n for n in nodes),
        "InstanceCount -1": -1 in target.values(),
        "missing replicas": any(
            0 <= target[p["ServiceName"]] and len(p["Replicas"]) < target[p["ServiceName"]] for p in parts
        ),
        "empty partition": any(not p["Replicas"] for p in parts),
        "surplus replicas": any(0 <= target[p["ServiceName"]] < len(p["Replicas"]) for p in parts),
        "placement constraint": any("PlacementConstraints" in s for s in services),
        "affinity": any("Correlations" in s for s in services),
        "resource governance": any("ResourceGovernance" in s for s in services),
        "service priority": any("Priority" in s for s in services),
        "default metrics": any("Metrics" not in s for s in services),
        "node buffer": "NodeBufferPercentage" in doc,
        "defragmentation": "DefragmentationMetrics" in doc,
        "blocklist": "BlockList" in doc,
        "upgrade": "Upgrade" in doc,
        "history": "History" in doc,
        "throttles": any(
            k in doc["Settings"]
            for k in ("GlobalMovementThrottleThreshold", "MaxPercentageToMove", "MovementPerPartitionThrottleThreshold")
        ),
        "move costs": doc["Settings"].get("UseMoveCostReports", False),
        "constraint priorities": any(k.endswith("ConstraintPriority") for k in doc["Settings"]),
    }
    checks |= {policy: True for policy in policies}
    return sorted(k for k, v in checks.items() if v)


def write(out: Path, records: list[dict], started: float) -> None:
    kinds = Counter(b.split(":")[0] for r in records for b in r["breaks"])
    summary = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "configs": {k: str(v) for k, v in CONFIGS.items()},
        "clusters": len(records),
        "clusters_with_breaks": sum(bool(r["breaks"]) for r in records),
        "breaks_by_kind": dict(kinds),
        "seconds": round(time.time() - started, 1),
        "records": records,
    }
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, out.with_suffix(".json"))
    coverage = Counter(f for r in records for f in r["features"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [2, 1]})
    names = sorted(coverage, key=coverage.get)
    a.barh(names, [coverage[n] for n in names], color="tab:blue")
    a.set_xlabel("clusters using it")
    a.set_title(f"{len(records)} random clusters: features covered")
    cumulative = [sum(bool(r["breaks"]) for r in records[: i + 1]) for i in range(len(records))]
    b.plot(range(1, len(records) + 1), cumulative, color="tab:red")
    b.set_xlabel("clusters planned")
    b.set_ylabel("plans that break a hard rule")
    b.set_ylim(bottom=0, top=max(cumulative + [1]) * 1.2)
    b.set_title(f"breaks: {summary['clusters_with_breaks']} ({summary['machine']})", fontsize=9)
    fig.tight_layout()
    tmp_png = out.with_suffix(".tmp.png")
    fig.savefig(tmp_png, dpi=90)
    plt.close(fig)
    os.replace(tmp_png, out.with_suffix(".png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=2000)
    parser.add_argument("--per-family", type=int, default=25)
    parser.add_argument("--first-family", type=int, default=1000, help="families below it are the fast tier's")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "validity_sweep")
    parser.add_argument("--resume", action="store_true", help="keep the records in --out and go on after them")
    args = parser.parse_args()
    records, started = [], time.time()
    families = -(-args.clusters // args.per_family)
    first = args.first_family
    if args.resume and args.out.with_suffix(".json").exists():
        previous = json.loads(args.out.with_suffix(".json").read_text())
        records, started = previous["records"], started - previous["seconds"]
        families -= len({r["family"] for r in records})
        first = max(r["family"] for r in records) + 1
    for family in range(first, first + families):
        clear_compiled()  # one process, many shapes: free the previous family's programs
        config = "parallel" if family % 2 else "chains"
        for seed in range(family * args.per_family, (family + 1) * args.per_family):
            doc, predicates = random_cluster(seed, family)
            t = time.time()
            try:
                result = plan(parse_state(doc), CONFIGS[config]).document()
                found = breaks(doc, predicates, result)
            except Exception as exc:  # a crash is a finding too; the sweep goes on
                result, found = {"Actions": [], "Unplaced": []}, [f"crash: {type(exc).__name__}: {exc}"]
            records.append(
                {
                    "seed": seed,
                    "family": family,
                    "config": config,
                    "nodes": len(doc["Nodes"]),
                    "services": len(doc["Services"]),
                    "partitions": len(doc["Partitions"]),
                    "replicas": sum(len(p["Replicas"]) for p in doc["Partitions"]),
                    "features": features(doc),
                    "actions": len(result["Actions"]),
                    "unplaced": len(result["Unplaced"]),
                    "seconds": round(time.time() - t, 2),
                    "breaks": found,
                }
            )
            if found:
                print(f"seed {seed}: {found}", flush=True)
        write(args.out, records, started)
        print(
            f"family {family}: {len(records)} clusters, "
            f"{sum(bool(r['breaks']) for r in records)} with breaks, {time.time() - started:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
