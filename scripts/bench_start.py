"""Benchmark: how long the commands that search nothing take to start and finish, against starting
JAX (issue 58, "start at once").

Each case is a fresh interpreter that runs a command's entry point from plbjax.console_scripts with
its command line, as the installed script does; its wall seconds are the median of `--repeats`
runs, the cases taking turns so that load on the machine falls on all. The reference is a fresh
interpreter that imports JAX and runs one op (`jnp.ones(3).sum()`, the backend started). Each case
also says whether it imported jax. `plan start-up` is the `plbjax` command on the bundled example
up to its search: Hydra, the config and reading the state, with `plbjax.sf.plan` replaced by an exit
(the search's own start, tracing and compiling, is not in it).

`--before COMMIT`: the same cases from that commit's tree too (`git archive` into a temporary
directory, run with PYTHONPATH, so both use this machine's installed packages), the trees taking
turns.

Issue 58's targets (this 2-core CPU): `--version`, `plbjax-export --help`, `plbjax-apply --help`,
`plbjax-import --help` at most 0.5 x the JAX start; the plan's start-up at most 0.5 s beyond it.

    python scripts/bench_start.py [--repeats 5] [--before cf8aacb]
Results: results/start_cpu.{json,png}.
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

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
EXAMPLE = ROOT / "examples" / "small.yaml"

JAX_START = "import jax, jax.numpy as jnp\njnp.ones(3).sum().block_until_ready()\nimported = True\n"
ENTRY = """import sys
sys.argv = [{prog!r}, *{args!r}]
from plbjax import console_scripts
try:
    console_scripts.{entry}()
except SystemExit:
    pass
imported = "jax" in sys.modules
"""
TO_SEARCH = """import os, sys
import plbjax.sf

def _searching(*args, **kwargs):
    print("IMPORTED", "jax" in sys.modules, file=sys.stderr, flush=True)
    os._exit(0)

plbjax.sf.plan = _searching  # the search is where start-up ends
sys.argv = ["plbjax", *{args!r}]
from plbjax import console_scripts
console_scripts.plbjax()
"""
TELL = '\nprint("IMPORTED", imported, file=sys.stderr, flush=True)\n'


def cases(work: Path) -> dict[str, str]:
    """Case name -> the Python code of its process."""

    def entry(prog: str, *args: str) -> str:
        return ENTRY.format(prog=prog, args=list(args), entry=prog.replace("-", "_")) + TELL

    plan_args = [f"state={EXAMPLE}", f"out={work / 'plan.json'}", "progress=false", f"hydra.run.dir={work / 'run'}"]
    return {
        "JAX start + one op": "import sys\n" + JAX_START + TELL,
        "plbjax --version": entry("plbjax", "--version"),
        "plbjax-export --help": entry("plbjax-export", "--help"),
        "plbjax-apply --help": entry("plbjax-apply", "--help"),
        "plbjax-import --help": entry("plbjax-import", "--help"),
        "plbjax-dump --help": entry("plbjax-dump", "--help"),
        "plbjax-generate --help": entry("plbjax-generate", "--help"),
        "plbjax --help": entry("plbjax", "--help"),
        "plbjax-import (bundled dump)": entry(
            "plbjax-import", str(DATA / "sf-dump" / "small"), "-o", str(work / "state.json")
        ),
        "plbjax-export (sfctl)": entry(
            "plbjax-export", str(DATA / "pinned" / "example.json"), "--format", "sfctl", "-o", str(work / "plan.sh")
        ),
        "plbjax-generate (a state)": entry("plbjax-generate", "--nodes", "40", "-o", str(work / "generated.json")),
        "plan start-up (to the search)": TO_SEARCH.format(args=plan_args),
    }


def run_once(code: str, tree: Path) -> tuple[float, bool]:
    """Wall seconds of one fresh interpreter running `code` with plbjax from `tree`, and whether it
    imported jax."""
    env = dict(os.environ, PYTHONPATH=str(tree))  # `python -c` puts its directory first: the tree's
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    told = [line for line in done.stderr.splitlines() if line.startswith("IMPORTED ")]
    if not told:
        raise RuntimeError(f"the case did not finish:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, told[-1].split()[1] == "True"


def _colour(name: str, case: dict) -> str:
    """The reference grey; a case that imported jax red, one that did not green."""
    return "tab:grey" if name == "JAX start + one op" else "tab:red" if case["ImportsJax"] else "tab:green"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["Cases"])[::-1]
    before = result.get("Before")
    reference = result["Cases"]["JAX start + one op"]["Median"]
    height = 0.4 if before else 0.8
    fig, ax = plt.subplots(figsize=(9, (0.55 if before else 0.35) * len(names) + 1.8))
    for y, name in enumerate(names):
        case = result["Cases"][name]
        top = y + (height / 2 if before else 0)
        ax.barh(top, case["Median"], height=height, color=_colour(name, case))
        ax.text(
            case["Median"], top, f" {case['Median']:.2f} s ({case['RatioToJaxStart']:.2f}x)", va="center", fontsize=7
        )
        if before:
            was = before["Cases"][name]
            ax.barh(y - height / 2, was["Median"], height=height, color=_colour(name, was), alpha=0.35, hatch="//")
            ax.text(
                was["Median"],
                y - height / 2,
                f" before: {was['Median']:.2f} s ({was['RatioToJaxStart']:.2f}x)",
                va="center",
                fontsize=7,
                color="dimgrey",
            )
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.axvline(reference, color="black", lw=0.8, ls="--", label=f"JAX start + one op ({reference:.2f} s)")
    ax.axvline(0.5 * reference, color="tab:blue", lw=0.8, ls=":", label="0.5 x JAX start (target)")
    shown = "; hatched: before, " + before["Commit"] if before else ""
    ax.set_xlabel(f"wall seconds, median of {result['Repeats']} (green: no jax imported; red: jax{shown})", fontsize=8)
    longest = max(c["Median"] for c in [*result["Cases"].values(), *(before["Cases"].values() if before else [])])
    ax.set_xlim(0, longest * 1.45)
    m = result["Machine"]
    load = ", ".join(f"{x:.2f}" for x in result["LoadAverage"]["Start"])
    ax.set_title(
        f"Commands' start, {m.get('cpu_model', '?')}, {m.get('affinity_cores')} cores, load average {load}\n"
        f"plbjax {str(m.get('git_commit') or '?')[:10]}",
        fontsize=9,
    )
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def measure(code: dict[str, str], trees: dict[str, Path], repeats: int) -> dict[str, dict]:
    """{tree: {case: its result}}, the trees and cases taking turns `repeats` times."""
    walls = {t: {name: [] for name in code} for t in trees}
    imports: dict[str, dict[str, bool]] = {t: {} for t in trees}
    for _ in range(repeats):
        for name, source in code.items():
            for t, tree in trees.items():
                wall, imported = run_once(source, tree)
                walls[t][name].append(round(wall, 3))
                imports[t][name] = imported
    out = {}
    for t in trees:
        reference = statistics.median(walls[t]["JAX start + one op"])
        out[t] = {
            name: {
                "Seconds": walls[t][name],
                "Median": round(statistics.median(walls[t][name]), 3),
                "RatioToJaxStart": round(statistics.median(walls[t][name]) / reference, 2),
                "ImportsJax": imports[t][name],
            }
            for name in code
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each case; the median counts (default: 5)")
    ap.add_argument("--before", metavar="COMMIT", help="also measure this commit's tree, the trees taking turns")
    ap.add_argument("--out", default=str(ROOT / "results" / "start_cpu.json"), help="the JSON; the PNG beside it")
    args = ap.parse_args()
    from plbjax.baseline import machine

    load_start = list(os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"After": ROOT}
        if args.before:
            old = Path(tmp) / "before"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before], check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            trees["Before"] = old
        measured = measure(cases(Path(tmp)), trees, args.repeats)
    result = {
        "Machine": machine(),
        "Repeats": args.repeats,
        "LoadAverage": {"Start": load_start, "End": list(os.getloadavg())},
        "Cases": measured["After"],
    }
    startup = result["Cases"]["plan start-up (to the search)"]["Median"]
    result["PlanStartupBeyondJaxStart"] = round(startup - result["Cases"]["JAX start + one op"]["Median"], 3)
    if args.before:
        result["Before"] = {"Commit": args.before, "Cases": measured["Before"]}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out.with_suffix(".png"))
    width = max(len(n) for n in result["Cases"])
    for name, case in result["Cases"].items():
        line = f"{name.ljust(width)}  {case['Median']:6.3f} s  {case['RatioToJaxStart']:5.2f}x"
        line += "  jax   " if case["ImportsJax"] else "  no jax"
        if args.before:
            was = result["Before"]["Cases"][name]
            line += f"   before: {was['Median']:6.3f} s  {was['RatioToJaxStart']:5.2f}x"
        print(line)
    print(f"plan start-up beyond the JAX start: {result['PlanStartupBeyondJaxStart']:+.3f} s")
    print(f"load average {load_start} -> {result['LoadAverage']['End']}; wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
