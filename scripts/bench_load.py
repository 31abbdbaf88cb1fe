"""Benchmark: a state document from file to plan, stage by stage, at 10k, 100k and 1M replicas.

For each size a synthetic state document (`plbjax.sf._generator.clusters`: 100 replicas per node, 3 replicas per
partition, 334 partitions per service, 3 metrics, 4 node types, a fifth of the services constrained
to a node type, a fifth stateless, 10 x 5 hierarchical fault domains, 10 upgrade domains) is
generated once and cached under the temp directory as JSON (indented, as `plbjax-generate` writes
it). Then, in a fresh Python process per run (so that peak memory is that run's), the script times
what `plbjax state=DOC out=PLAN` does, stage by stage:

  read      the file into a Python document (JSON parsing, duplicate keys refused);
  validate  the document into a `ClusterState`: the JSON Schema and every semantic rule checked,
            Service Fabric's defaults filled in (plbjax.sf._state.cluster);
  encode    resource governance and the encoding into the dense `Problem` (plbjax.sf._encoding.encoder), as
            the plan's first step (`preparation.governed_encoding`, which `plan_encoded` then takes);
  compile   the annealer's compilation (`AnnealResult.compile_seconds`, summed over the phases);
  search    the phases' searches, a token 1,000 steps x 2 chains each (`AnnealResult.seconds`);
  decode    the rest of `plan` and its document: re-encodings it does (also shown on their own as
            `encode_in_plan`), assessments, surplus drops, the decoding into actions and reports;
  write     the plan as indented JSON to a file.

Peak resident memory (`ru_maxrss`) is recorded after each stage, as is the CPU time the process
used and how many cores other processes kept busy meanwhile (the machine is shared: wall time
under contention overstates). The goal of issue 23 is read + validate + encode <= 20 s at 1M
replicas on the 2-core CPU. Results go to `results/load_cpu.json` (rewritten after every run)
and `results/load_cpu.png`.

    python scripts/bench_load.py                         # 10k, 100k, 1M; 2 runs each (~10 min)
    python scripts/bench_load.py --sizes 10000 --runs 1  # smoke test
    python scripts/bench_load.py --load-only             # read, validate, encode only
    PYTHONPATH=/other/checkout python scripts/bench_load.py --load-only --out /tmp/before
                                                         # the same stages with another plbjax

The stages are timed one by one, so the script calls plbjax.sf's private stage functions (`_state`'s
reader and parser, `governance`, `preparation`, `_plan`): what `load_state` and `plan` do, split where they
split. It needs numba (plbjax.baseline's machine description and contention measure).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(tempfile.gettempdir()) / "plbjax_bench_load"
STAGES = ("read", "validate", "encode", "compile", "search", "decode", "write")
LOAD_STAGES = ("read", "validate", "encode")
GOAL_SECONDS = 20.0


def spec_for(replicas: int):
    """About `replicas` replicas in the shape above (1,002 per service)."""
    from plbjax.sf import ClusterSpec

    services = max(1, round(replicas / 1002))
    return ClusterSpec(
        nodes=max(100, replicas // 100),
        node_types=4,
        fault_domains=10,
        racks_per_fault_domain=5,
        upgrade_domains=10,
        metrics=3,
        services=services,
        partitions_per_service=334,
        replicas_per_partition=3,
        stateless_fraction=0.2,
        placement_constraint_fraction=0.2,
        skew=0.5,
    )


def document(replicas: int) -> tuple[Path, float | None]:
    """The cached document of this size (generated if missing) and the seconds generating took."""
    from plbjax.baseline import CLUSTER_SEED
    from plbjax.generate_cli import _dump  # indented, as plbjax-generate writes it
    from plbjax.sf import generate

    spec = spec_for(replicas)
    digest = hashlib.sha256(json.dumps(dataclasses.asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    path = CACHE / f"state_{replicas}_{digest}.json"
    if path.exists():
        return path, None
    CACHE.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tmp = path.with_suffix(".tmp.json")
    _dump(generate(CLUSTER_SEED, spec), str(tmp))
    tmp.replace(path)
    return path, time.perf_counter() - start


# ------------------------------------------------------------------------------ one run (child)


def _rss_mb() -> tuple[float, float]:
    """(peak, current) resident memory of this process in MiB."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        current = float("nan")
    return peak, current


def run_once(path: Path, load_only: bool) -> dict:
    """Every stage on the document at `path`, in this process."""
    from plbjax.baseline import Contention

    start = time.perf_counter()
    import jax.numpy as jnp  # started before timing: the CLI has it running before it reads the state

    jnp.zeros(1).block_until_ready()
    jax_init = time.perf_counter() - start

    from plbjax.sf._phases import fewest_movements as _fewest_movements
    from plbjax.sf._phases import phase as _phase
    from plbjax.sf._phases import preparation as _preparation
    from plbjax.sf._plan import planning as _plan
    from plbjax.sf._state import reading as S

    out: dict = {
        "stages": {},
        "cpu": {},
        "other_cores": {},
        "peak_rss_mb": {},
        "rss_mb": {},
        "jax_init_seconds": jax_init,
    }

    def timed(stage: str, fn):
        with Contention() as busy:
            cpu, start = time.process_time(), time.perf_counter()
            value = fn()
            out["stages"][stage] = time.perf_counter() - start
            out["cpu"][stage] = time.process_time() - cpu
        out["other_cores"][stage] = busy.other_cores
        out["peak_rss_mb"][stage], out["rss_mb"][stage] = _rss_mb()
        return value

    out["rss_mb"]["start"] = _rss_mb()[1]

    def read():
        with S.gc_paused():
            return S._load_json(path.read_text(encoding="utf-8"), path)

    read_doc = [timed("read", read)]

    def validate():  # as load_state: the document it read is its own
        with S.gc_paused():
            return S._parse(read_doc.pop(), str(path), owned=True)

    state = timed("validate", validate)

    encoded = timed("encode", lambda: _preparation.governed_encoding(state))  # the plan's first step, as `plan` runs it
    problem, index = encoded.problem, encoded.index
    out["replicas"], out["nodes"] = index.n_replicas, index.n_nodes
    out["partitions"], out["metrics"] = index.n_partitions, len(index.metrics)
    out["shape"] = problem.shape
    del problem, index
    if load_only:
        return out

    from plbjax.files import write_text
    from plbjax.sf import SearchConfig

    searches, in_plan = [], []
    anneal, encode_in_plan = _phase.anneal, _preparation.encode

    def counting_anneal(*args, **kwargs):
        result = anneal(*args, **kwargs)
        searches.append(result)
        return result

    def counting_encode(*args, **kwargs):
        start = time.perf_counter()
        result = encode_in_plan(*args, **kwargs)
        in_plan.append(time.perf_counter() - start)
        return result

    _phase.anneal = _fewest_movements.anneal = counting_anneal
    _preparation.encode = counting_encode
    config = SearchConfig(chains=2, steps=1_000, seconds=None, block_steps=1_000, seed=0, tries=1, parallel=False)
    try:
        plan = timed("plan", lambda: _plan.plan_encoded(encoded, config).document())
    finally:
        _phase.anneal = _fewest_movements.anneal = anneal
        _preparation.encode = encode_in_plan
    whole, cpu_whole = out["stages"].pop("plan"), out["cpu"].pop("plan")
    busy, peak, rss = out["other_cores"].pop("plan"), out["peak_rss_mb"].pop("plan"), out["rss_mb"].pop("plan")
    compile_s = sum(r.compile_seconds for r in searches)
    search_s = sum(r.seconds for r in searches)
    out["stages"]["compile"], out["stages"]["search"] = compile_s, search_s
    out["stages"]["decode"] = whole - compile_s - search_s
    out["encode_in_plan"] = in_plan
    out["plan_seconds"], out["plan_cpu"] = whole, cpu_whole
    for stage in ("compile", "search", "decode"):
        out["other_cores"][stage], out["peak_rss_mb"][stage], out["rss_mb"][stage] = busy, peak, rss
    out["searches"] = len(searches)
    out["actions"] = len(plan["Actions"])
    with tempfile.TemporaryDirectory() as tmp:
        timed("write", lambda: write_text(Path(tmp) / "plan.json", json.dumps(plan, indent=2, allow_nan=False) + "\n"))
    return out


# ------------------------------------------------------------------------------------ driver


def machine() -> dict:
    import plbjax
    from plbjax.baseline import machine as annealer_machine

    info = annealer_machine()
    info["plbjax"] = str(Path(plbjax.__file__).parent)
    return info


def write(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(out)


def summarize(runs: list[dict]) -> dict:
    """Per stage the fastest run's seconds (the least disturbed by other processes), and the peak
    memory over the runs."""
    best = {stage: min(r["stages"][stage] for r in runs) for stage in runs[0]["stages"]}
    load = min(sum(r["stages"][s] for s in LOAD_STAGES) for r in runs)
    return dict(
        best_seconds=best,
        best_load_seconds=load,
        best_load_cpu_seconds=min(sum(r["cpu"][s] for s in LOAD_STAGES) for r in runs),
        peak_rss_mb=max(max(r["peak_rss_mb"].values()) for r in runs),
        peak_rss_mb_after_load=max(r["peak_rss_mb"]["encode"] for r in runs),
    )


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [s for s in result["sizes"] if s.get("runs")]
    if not sizes:
        return
    colors = dict(zip(STAGES, ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")))
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 4.6), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        best = size["summary"]["best_seconds"]
        bottom = 0.0
        for stage in STAGES:
            if stage in best:
                ax.bar(0, best[stage], bottom=bottom, color=colors[stage], label=stage, width=0.6)
                if best[stage] > 0.04 * sum(best.values()):
                    ax.text(
                        0,
                        bottom + best[stage] / 2,
                        f"{stage} {best[stage]:.1f} s",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white",
                    )
                bottom += best[stage]
        before = (result.get("before") or {}).get(str(size["replicas"]))
        if before:
            bottom = 0.0
            for stage in LOAD_STAGES:
                ax.bar(1, before["best_seconds"][stage], bottom=bottom, color=colors[stage], width=0.6, alpha=0.45)
                bottom += before["best_seconds"][stage]
            ax.text(1, bottom, f"before\n{bottom:.1f} s", ha="center", va="bottom", fontsize=8)
        load = size["summary"]["best_load_seconds"]
        ax.axhline(load, color="black", lw=0.8, ls=":")
        ax.text(0.31, load, f" now: read+\n validate+encode\n {load:.1f} s", va="bottom", fontsize=7)
        if size["replicas"] >= 900_000:
            ax.axhline(GOAL_SECONDS, color="red", lw=0.8, ls="--")
            ax.text(
                1.48,
                GOAL_SECONDS,
                f"goal: read+validate+encode <= {GOAL_SECONDS:g} s",
                ha="right",
                va="bottom",
                fontsize=7,
                color="red",
            )
        ax.set_xlim(-0.5, 1.5 if before else 1.1)
        ax.set_xticks([0, 1] if before else [0], ["now", "before (load stages)"] if before else ["now"], fontsize=8)
        ax.set_ylabel("seconds (fastest of the runs, per stage)")
        ax.set_title(
            f"{size['replicas']:,} replicas, {size['nodes']:,} nodes\n"
            f"peak RSS {size['summary']['peak_rss_mb'] / 1024:.2f} GiB",
            fontsize=9,
        )
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    m = result["machine"]
    fig.suptitle(
        f"plbjax: state file to plan, by stage, on {m['cpu_model']} "
        f"({m.get('affinity_cores') or m['logical_cores']} cores, shared)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _before(path: Path) -> dict:
    """Per size (replicas as a string) the summary, note and machine of another result."""
    other = json.loads(path.read_text())
    return {
        str(size["replicas"]): dict(
            size["summary"], note=other.get("note"), plbjax=other["machine"].get("plbjax"), runs=size["runs"]
        )
        for size in other["sizes"]
        if size.get("runs")
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--runs", type=int, default=2, help="fresh processes per size (the fastest counts)")
    ap.add_argument("--load-only", action="store_true", help="read, validate and encode only")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "load_cpu")
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--before",
        type=Path,
        help="a --load-only result of another plbjax (e.g. the code before a "
        "change) to keep beside this one's: its load stages are drawn as a second bar",
    )
    ap.add_argument("--replot", action="store_true", help="only add --before to the existing result and redraw it")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        json.dump(run_once(args.child, args.load_only), sys.stdout)
        return 0
    json_out, png_out = args.out.with_suffix(".json"), args.out.with_suffix(".png")
    if args.replot:
        result = json.loads(json_out.read_text())
        if args.before:
            result["before"] = _before(args.before)
        write(result, json_out)
        plot(result, png_out)
        print(f"wrote {json_out} and {png_out}")
        return 0

    info = machine()
    print(f"machine: {info['cpu_model']}, {info['logical_cores']} cores; plbjax from {info['plbjax']}", flush=True)
    result = dict(
        benchmark="bench_load",
        goal=f"read + validate + encode <= {GOAL_SECONDS:g} s at 1M replicas",
        note=args.note,
        machine=info,
        stages=list(STAGES),
        load_only=args.load_only,
        search=dict(chains=2, steps=1_000, block_steps=1_000),
        sizes=[],
    )
    if args.before:
        result["before"] = _before(args.before)
    for replicas in args.sizes:
        path, generated = document(replicas)
        entry = dict(
            replicas=replicas,
            spec=dataclasses.asdict(spec_for(replicas)),
            document=str(path),
            document_bytes=path.stat().st_size,
            generate_seconds=generated,
            runs=[],
        )
        result["sizes"].append(entry)
        for run in range(args.runs):
            command = [sys.executable, str(Path(__file__).resolve()), "--child", str(path)]
            command += ["--load-only"] if args.load_only else []
            done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                entry["error"] = done.stderr[-3000:]
                write(result, json_out)
                return 1
            one = json.loads(done.stdout)
            entry["runs"].append(one)
            entry.update(replicas=one["replicas"], nodes=one["nodes"], partitions=one["partitions"])
            entry["summary"] = summarize(entry["runs"])
            stages = ", ".join(f"{s} {t:.2f}" for s, t in one["stages"].items())
            print(
                f"{replicas:>9,} replicas run {run + 1}: {stages} s; peak RSS "
                f"{max(one['peak_rss_mb'].values()):.0f} MiB",
                flush=True,
            )
            write(result, json_out)
            plot(result, png_out)
        s = entry["summary"]
        print(
            f"{replicas:>9,} replicas: read+validate+encode {s['best_load_seconds']:.2f} s "
            f"({s['best_load_cpu_seconds']:.2f} s CPU), peak RSS {s['peak_rss_mb']:.0f} MiB",
            flush=True,
        )
    print(f"wrote {json_out} and {png_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
