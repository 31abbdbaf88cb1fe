"""Benchmark: how long the commands that search nothing take to start and finish, against starting
JAX (issue 58, "start at once").

Each case is a fresh interpreter that runs a command's entry point from plbjax.console_scripts with
its command line, as the installed script does; its wall seconds are the median of `--repeats`
runs, the cases taking turns so that load on the machine falls on all. The reference is a fresh
interpreter that imports JAX and runs one op (`jnp.ones(3).sum()`, the backend started). Each case
also says whether it imported jax. `plan start-up` is the `plbjax` command on the bundled example
up to its search: Hydra, the config and reading the state, with `plbjax.sf.plan` replaced by an exit
(the search's own start, tracing and compiling, is not in it).

Issue 58's targets (this 2-core CPU): `--version`, `plbjax-export --help`, `plbjax-apply --help`,
`plbjax-import --help` at most 0.5 x the JAX start; the plan's start-up at most 0.5 s beyond it.

    python scripts/bench_start.py [--repeats 5]
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


def run_once(code: str) -> tuple[float, bool]:
    """Wall seconds of one fresh interpreter running `code`, and whether it imported jax."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    told = [line for line in done.stderr.splitlines() if line.startswith("IMPORTED ")]
    if not told:
        raise RuntimeError(f"the case did not finish:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, told[-1].split()[1] == "True"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["Cases"])
    medians = [result["Cases"][n]["Median"] for n in names]
    reference = result["Cases"]["JAX start + one op"]["Median"]
    colours = [
        "tab:grey" if n == "JAX start + one op" else "tab:red" if result["Cases"][n]["ImportsJax"] else "tab:green"
        for n in names
    ]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(names) + 1.6))
    ax.barh(names[::-1], medians[::-1], color=colours[::-1])
    for y, value in enumerate(medians[::-1]):
        ax.text(value, y, f" {value:.2f} s ({value / reference:.2f}x)", va="center", fontsize=8)
    ax.axvline(reference, color="black", lw=0.8, ls="--", label=f"JAX start + one op ({reference:.2f} s)")
    ax.axvline(0.5 * reference, color="tab:blue", lw=0.8, ls=":", label="0.5 x JAX start (target)")
    ax.set_xlabel(f"wall seconds, median of {result['Repeats']} (green: no jax imported; red: jax imported)")
    ax.set_xlim(0, max(medians) * 1.35)
    m = result["Machine"]
    load = ", ".join(f"{x:.2f}" for x in result["LoadAverage"]["Start"])
    ax.set_title(
        f"Commands' start, {m.get('cpu_model', '?')}, {m.get('affinity_cores')} cores, load {load}\n"
        f"plbjax {str(m.get('git_commit') or '?')[:10]}",
        fontsize=9,
    )
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each case; the median counts (default: 5)")
    ap.add_argument("--out", default=str(ROOT / "results" / "start_cpu.json"), help="the JSON; the PNG beside it")
    args = ap.parse_args()
    from plbjax.baseline import machine

    load_start = list(os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        code = cases(Path(tmp))
        walls: dict[str, list[float]] = {name: [] for name in code}
        imports: dict[str, bool] = {}
        for _ in range(args.repeats):
            for name, source in code.items():
                wall, imported = run_once(source)
                walls[name].append(round(wall, 3))
                imports[name] = imported
    reference = statistics.median(walls["JAX start + one op"])
    result = {
        "Machine": machine(),
        "Repeats": args.repeats,
        "LoadAverage": {"Start": load_start, "End": list(os.getloadavg())},
        "Cases": {
            name: {
                "Seconds": walls[name],
                "Median": round(statistics.median(walls[name]), 3),
                "RatioToJaxStart": round(statistics.median(walls[name]) / reference, 2),
                "ImportsJax": imports[name],
            }
            for name in code
        },
    }
    result["PlanStartupBeyondJaxStart"] = round(
        result["Cases"]["plan start-up (to the search)"]["Median"] - reference, 3
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out.with_suffix(".png"))
    width = max(len(n) for n in code)
    for name, case in result["Cases"].items():
        jax_note = "jax" if case["ImportsJax"] else "no jax"
        print(f"{name.ljust(width)}  {case['Median']:6.3f} s  {case['RatioToJaxStart']:5.2f}x  {jax_note}")
    print(f"plan start-up beyond the JAX start: {result['PlanStartupBeyondJaxStart']:+.3f} s")
    print(f"load average {load_start} -> {result['LoadAverage']['End']}; wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
