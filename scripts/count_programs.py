"""Count the search programs plans build, per shape bucket, and their size: tracing and lowering only.

Each state of a corpus is planned with the defaults while every block program the search asks for is
traced and lowered (as the program store does) but neither compiled nor run: the search keeps its
start, so a plan costs seconds. Recorded per program: what makes it one program (its lowered text),
the shape bucket (padded nodes, replicas, partitions), the StableHLO operations (what XLA compiles:
its time grows with them) and the seconds tracing and lowering took. With `--compile`, each distinct
program is also compiled by XLA and timed (the first plan of a shape pays it).

The corpus: the bundled example, the bundled SF dump (imported), generated clusters of 1k, 10k and
30k replicas, and the example with each of SF's optional rules a program may specialise on switched
on: an affinity correlation, a defragmentation metric, resource thresholds, a preferred primary
domain, and loose domains (no compound moves).

    python scripts/count_programs.py --out results/programs_cpu.json [--compile] [--only example ...]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import yaml
from jax import export

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cli

import plbjax
from plbjax.anneal import _driver
from plbjax.baseline import machine

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "small.yaml"
DUMP = ROOT / "tests" / "data" / "sf-dump" / "small"


def _example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def _variant(change: Callable[[dict], None]) -> Callable[[], dict]:
    def build() -> dict:
        doc = copy.deepcopy(_example())
        change(doc)
        return doc

    return build


def _affinity(doc: dict) -> None:
    doc["Services"][1]["Correlations"] = [{"ServiceName": doc["Services"][0]["ServiceName"], "Scheme": "Affinity"}]


def _defrag(doc: dict) -> None:
    doc["DefragmentationMetrics"] = {"CPU": True}


def _thresholds(doc: dict) -> None:
    doc["ResourceThresholds"] = {"CPU": 0.8}


def _preferred(doc: dict) -> None:
    domain = doc["Nodes"][0]["FaultDomain"]
    doc["Services"][0]["PlacementPolicies"] = [{"Type": "PreferPrimaryDomain", "DomainName": domain}]


def _loose(doc: dict) -> None:
    """Twice the fault and upgrade domains' names: no partition fills every domain (no compound moves)."""
    for k, node in enumerate(doc["Nodes"]):
        node["FaultDomain"], node["UpgradeDomain"] = f"fd:/dc{k}", f"UD{k}"


def _dump() -> dict:
    from plbjax.sf.live import import_dump

    return import_dump(str(DUMP))[0]


def _generated(replicas: int) -> Callable[[], dict]:
    return lambda: bench_cli.cluster_document(bench_cli.spec_for(replicas))[1]


CORPUS: dict[str, Callable[[], dict]] = {
    "example": _example,
    "example+affinity": _variant(_affinity),
    "example+defrag": _variant(_defrag),
    "example+thresholds": _variant(_thresholds),
    "example+preferred": _variant(_preferred),
    "example-compound": _variant(_loose),
    "sf-dump": _dump,
    "1k": _generated(1_000),
    "10k": _generated(10_000),
    "30k": _generated(30_000),
}


def _specs(tree) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(tree)]


def _lowered(fn, kept, carried) -> export.Exported:
    """fn(kept, carried) traced and lowered over flat leaves, as the program store keeps it."""
    kept_tree, carried_tree = jax.tree.structure(kept), jax.tree.structure(carried)
    flat = lambda k, c: jax.tree.leaves(fn(jax.tree.unflatten(kept_tree, k), jax.tree.unflatten(carried_tree, c)))
    return export.export(jax.jit(flat))(_specs(kept), _specs(carried))


class Recorder:
    """Stands in for the store's `compiled`: traces and lowers a block program, keeps what it is (two
    programs are one when their lowered modules are the same text)."""

    def __init__(self, compile_: bool) -> None:
        self.compile, self.programs, self.case = compile_, {}, ""

    def __call__(self, fn, kept, carried):
        start = time.perf_counter()
        exported = _lowered(fn, kept, carried)
        lowered = time.perf_counter() - start
        key = hashlib.sha256(exported.mlir_module_serialized).hexdigest()
        if key not in self.programs:
            cluster = getattr(kept[0], "cluster", kept[0])
            entry = {
                "bucket": [int(cluster.node_up.shape[0]), int(cluster.replica_partition.shape[0])],
                "partitions": int(cluster.partition_service.shape[0]),
                "chains": int(carried.key.shape[0]),
                "features": str(getattr(cluster, "features", "")),
                "operations": exported.mlir_module().count("stablehlo."),
                "trace_lower_seconds": round(lowered, 2),
                "cases": [],
            }
            if self.compile:
                start = time.perf_counter()
                jax.jit(exported.call).lower(_specs(kept), _specs(carried)).compile()
                entry["compile_seconds"] = round(time.perf_counter() - start, 2)
            self.programs[key] = entry
        if self.case not in self.programs[key]["cases"]:
            self.programs[key]["cases"].append(self.case)
        return lambda kept, carried: carried


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(CORPUS), default=list(CORPUS))
    parser.add_argument("--compile", action="store_true", help="also compile each program with XLA, timed")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "programs_cpu.json")
    args = parser.parse_args(argv)
    recorder = Recorder(args.compile)
    _driver.compiled = recorder  # the driver's store call: traced and lowered, never run
    cases = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.only:
            path = Path(scratch) / f"{name}.json"
            path.write_text(json.dumps(CORPUS[name]()))
            recorder.case = name
            before = len(recorder.programs)
            start = time.perf_counter()
            plbjax.plan(plbjax.load_state(str(path)))
            cases[name] = {
                "new_programs": len(recorder.programs) - before,
                "seconds": round(time.perf_counter() - start, 2),
            }
            print(name, json.dumps(cases[name]), flush=True)
    buckets: dict[str, int] = {}
    for entry in recorder.programs.values():
        label = "x".join(map(str, entry["bucket"]))
        buckets[label] = buckets.get(label, 0) + 1
    result = {"machine": machine(), "cases": cases, "programs_per_bucket": buckets, "programs": recorder.programs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(args.out)
    for entry in recorder.programs.values():
        print(json.dumps({k: v for k, v in entry.items() if k != "features"}))
    print("programs per bucket (nodes x replicas):", buckets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
