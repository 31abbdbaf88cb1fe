"""Benchmark: effort that fits the work (issue 47), this tree against an earlier commit, interleaved.

Each measure runs the `plbjax` command as a user would, once with this tree and once with the
`--before` commit (a git worktree put first on sys.path, with its own compile cache), alternately,
`--repeat` times; the medians are compared within the run, so the machine's load weighs on both:

- `start`: starting JAX and running one op (the yardstick of the example's target);
- `example`, `example-cold`: the bundled example, warm (its programs compiled by an earlier run), and
  with an empty compile cache (what it left there is counted);
- `dump`, `dump-cold`: the bundled SF dump's imported state (three phases), warm and cold;
- `10k`: 10,000 replicas with 11 nodes over capacity, warm: process wall, search seconds, the
  constraint check's seconds, AvgStdDev after;
- `10k-cold`: the same with an empty compile cache (the first run of the shape);
- `quality`: AvgStdDev after the plan at 1k / 10k / 30k replicas with the defaults (same seeds), and
  each phase's steps per second (per-step speed);
- `seconds2`: `search.seconds=2` on the bundled SF dump's imported state: the seconds searched;
- `30k`: 30,000 replicas, 30 s, SF's throttles lifted, cold: energy against the one-core baseline's
  (scripts/bench_cli.py's scorer and baseline).

    python scripts/bench_effort.py --before 8ce95fa                      # all but 30k (~20 min)
    python scripts/bench_effort.py --before 8ce95fa --only 30k --repeat 1
Results: results/effort_cpu.json (rewritten after every run) and results/effort_cpu.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cli

from plbjax.baseline import machine

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(tempfile.gettempdir()) / "plbjax_bench_effort"
MEASURES = ("start", "example", "example-cold", "dump", "dump-cold", "10k", "10k-cold", "quality", "seconds2", "30k")
START = "import jax.numpy as jnp; (jnp.ones(3) + 1).block_until_ready()"
RUN = "import sys; from plbjax.console_scripts import plbjax; sys.exit(plbjax())"
IMPORT = "import sys; from plbjax.console_scripts import plbjax_import; sys.exit(plbjax_import())"


class Tree:
    """A plbjax source tree to run: this one, or a worktree of an earlier commit."""

    def __init__(self, name: str, path: Path):
        self.name, self.path, self.cache = name, path, WORK / f"cache-{name}"

    def env(self, cache: Path | None = None) -> dict:
        return dict(os.environ, PLBJAX_CACHE_DIR=str(cache or self.cache))

    def code(self, code: str) -> str:
        """`code` run with plbjax imported from this tree (first on sys.path: found before the
        installed copy; its Hydra config, `plbjax.conf`, is the installed one)."""
        return f"import sys; sys.path.insert(0, {str(self.path)!r}); {code}"

    def run(self, code: str, args: list[str], cache: Path | None = None, timeout: float = 1800) -> float:
        """Wall seconds of `python -c code args` in a scratch directory."""
        scratch = Path(tempfile.mkdtemp(dir=WORK))
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", self.code(code), *args],
            cwd=scratch,
            env=self.env(cache),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: exited {done.returncode}: {args}\n{done.stderr[-3000:]}")
        return wall

    def plan(self, state: Path, extra: list[str] = (), cache: Path | None = None) -> tuple[float, dict]:
        """(process wall seconds, plan document) of `plbjax state=STATE`."""
        out = Path(tempfile.mkdtemp(dir=WORK)) / "plan.json"
        wall = self.run(RUN, [f"state={state}", f"out={out}", f"hydra.run.dir={out.parent}/h", *extra], cache)
        return wall, json.loads(out.read_text())


def worktree(commit: str) -> Tree:
    path = WORK / f"before-{commit}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True)
    return Tree("before", path)


def _dump_state(tree: Tree) -> Path:
    """The bundled SF dump imported by `tree` (once)."""
    state = WORK / f"dump-state-{tree.name}.json"
    if not state.exists():
        tree.run(IMPORT, [str(ROOT / "tests" / "data" / "sf-dump" / "small"), "-o", str(state)])
    return state


def _programs(cache: Path | None) -> dict:
    """What a cold run left in its cache: XLA's executables and the stored lowered programs."""
    if cache is None:
        return {}
    files = [f for f in cache.rglob("*") if f.is_file()]
    return dict(cache_files=len(files), stored_programs=sum(f.parent.name == "programs" for f in files))


def _phase_seconds(plan: dict, phase: str) -> float:
    return float(plan["Search"]["PhaseSeconds"].get(phase, 0.0))


def measure(name: str, tree: Tree, repeat_index: int) -> dict:
    """One run of measure `name` with `tree`."""
    if name == "start":
        return dict(wall=tree.run(START, []))
    if name in ("example", "example-cold"):
        cache = Path(tempfile.mkdtemp(dir=WORK)) if name == "example-cold" else None
        if cache is None and repeat_index == 0:
            tree.plan(ROOT / "examples" / "small.yaml")  # warm its cache
        wall, plan = tree.plan(ROOT / "examples" / "small.yaml", cache=cache)
        return dict(wall=wall, search=plan["Search"]["Seconds"], after=plan["Score"]["After"], **_programs(cache))
    if name in ("dump", "dump-cold"):
        cache = Path(tempfile.mkdtemp(dir=WORK)) if name == "dump-cold" else None
        state = _dump_state(tree)
        if cache is None and repeat_index == 0:
            tree.plan(state)
        wall, plan = tree.plan(state, cache=cache)
        ran = [p["Phase"] for p in plan["Phases"] if p["Ran"]]
        return dict(wall=wall, search=plan["Search"]["Seconds"], phases=ran, **_programs(cache))
    if name in ("10k", "10k-cold"):
        path, _, _ = bench_cli.cluster_document(bench_cli.spec_for(10_000), 11)
        cold = name == "10k-cold"
        cache = Path(tempfile.mkdtemp(dir=WORK)) if cold else None
        if not cold and repeat_index == 0:
            tree.plan(path)
        wall, plan = tree.plan(path, cache=cache)
        return dict(
            wall=wall,
            search=plan["Search"]["Seconds"],
            compile=plan["Search"].get("CompileSeconds"),
            check=_phase_seconds(plan, "ConstraintCheck"),
            after=plan["Score"]["After"],
            movements=sum(p.get("Movements", {}).get("Used", 0) for p in plan["Phases"]),
        )
    if name == "quality":
        out = {}
        for replicas in (1_000, 10_000, 30_000):
            path, _, _ = bench_cli.cluster_document(bench_cli.spec_for(replicas))
            wall, plan = tree.plan(path)
            steps = {p["Phase"]: p["Steps"] / max(p["Seconds"], 1e-9) for p in plan["Search"]["Phases"] if p["Steps"]}
            out[str(replicas)] = dict(
                wall=wall, search=plan["Search"]["Seconds"], after=plan["Score"]["After"], steps_per_second=steps
            )
        return out
    if name == "seconds2":
        wall, plan = tree.plan(_dump_state(tree), ["search.seconds=2"])
        return dict(
            wall=wall, search=plan["Search"]["Seconds"], phases=[p["Phase"] for p in plan["Phases"] if p["Ran"]]
        )
    if name == "30k":
        path, doc, _ = bench_cli.cluster_document(bench_cli.spec_for(30_000), 31)
        wall, plan = tree.plan(path, ["search.seconds=30"], cache=Path(tempfile.mkdtemp(dir=WORK)))
        scorer = bench_cli.Scorer(doc)
        energy = scorer.energy(*scorer.apply(plan["Actions"]))
        base = bench_cli.run_base(scorer, float(plan["Search"]["Seconds"]), seed=0)
        return dict(
            wall=wall,
            search=plan["Search"]["Seconds"],
            compile=plan["Search"].get("CompileSeconds"),
            energy=energy,
            baseline=base["final_energy"],
            ratio=energy / base["final_energy"],
            minimal=plan["Search"].get("Minimal"),
        )
    raise ValueError(name)


def medians(runs: list[dict]) -> dict:
    """Per key, the median of the runs' numbers (nested dicts likewise)."""
    out = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = medians([r[key] for r in runs])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in runs)
        else:
            out[key] = value
    return out


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [
        n
        for n in ("example", "example-cold", "dump", "dump-cold", "10k", "10k-cold", "seconds2")
        if n in result["medians"].get("after", {})
    ]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for k, tree in enumerate(("before", "after")):
        values = [result["medians"][tree][n]["wall"] for n in names]
        ax.bar([i + 0.4 * k for i in range(len(names))], values, width=0.4, label=f"{tree} ({result[tree]})")
    ax.set_xticks([i + 0.2 for i in range(len(names))], names)
    ax.set_ylabel("process wall seconds (median)")
    ax.set_title(f"plbjax effort, {result['machine']['cpu_model']}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--only", nargs="*", choices=MEASURES, default=[m for m in MEASURES if m != "30k"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "effort_cpu.json")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    trees = [worktree(args.before), Tree("after", ROOT)]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    result = dict(machine=machine(), before=args.before, after=commit.stdout.strip(), runs={}, medians={})
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.only:
        for i in range(args.repeat):
            for tree in trees:
                run = measure(name, tree, i)
                result["runs"].setdefault(tree.name, {}).setdefault(name, []).append(run)
                print(f"{name} {tree.name} #{i}: {json.dumps(run)}", flush=True)
        for tree in trees:
            result["medians"].setdefault(tree.name, {})[name] = medians(result["runs"][tree.name][name])
        merged = dict(previous, **{k: v for k, v in result.items() if k not in ("runs", "medians")})
        for key in ("runs", "medians"):
            merged[key] = {
                t: dict(previous.get(key, {}).get(t, {}), **result[key].get(t, {})) for t in ("before", "after")
            }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(merged, indent=1))
        tmp.replace(args.out)
        plot(merged, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
