"""Regenerate the result tables of docs/benchmarks.md from results/.

    python scripts/docs_benchmarks.py            # rewrite the tables in docs/benchmarks.md
    python scripts/docs_benchmarks.py --check    # exit 1 if docs/benchmarks.md is out of date

docs/benchmarks.md is hand-written; only the text between a pair of markers

    <!-- BEGIN generated: NAME -->
    <!-- END generated: NAME -->

is replaced, by the table NAME in TABLES below, built from the result file it names. The file is
rewritten atomically (a temporary file, then a rename) and only when something changed, so running
the script twice leaves the same file. A marker naming no table, or a result file that is missing,
is an error (exit 2) and nothing is written.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
DOC = ROOT / "docs" / "benchmarks.md"
BLOCK = re.compile(
    r"(<!-- BEGIN generated: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- END generated: (?P=name) -->)", re.S
)


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _int(x: float) -> str:
    return f"{x:,.0f}"


def _energy(x: float) -> str:
    return f"{x:,.1f}" if abs(x) < 1000 else f"{x:,.0f}"


def _rate(x: float) -> str:
    """Moves or proposals per second: 213k, 1.66M, 1.35G."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            value = x / div
            return f"{value:.3g}{unit}"
    return f"{x:.0f}"


def _ratio(x: float, digits: int = 2) -> str:
    text = f"{x:.{digits}f}"
    return f"**{text}**" if x <= 1 else text


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _run_label(run: dict) -> str:
    text = f"{run['chains']} chain" + ("s" if run["chains"] != 1 else "")
    if run.get("tries", 1) != 1:
        text += f" × {run['tries']:,} tries"
        if run.get("room") is not None:
            text += f" (room {run['room']:,})"
    if run.get("parallel"):
        text += ", parallel"
    if run.get("population"):
        text += ", population"
    return text


def _machine(d: dict) -> str:
    m = d.get("machine", {})
    kind = m.get("jax_device_kind", "")
    cores = f"{m.get('affinity_cores', '?')} cores"
    where = f"{m.get('cpu_model', '?')}, {cores}"
    if kind and kind != "cpu":
        where = f"{kind}, host CPU {m.get('cpu_model', '?')}"
    return f"{where}; jax {m.get('jax_version', '?')}"


def _source(name: str, d: dict, extra: str = "") -> str:
    command = d.get("command", "")
    command = f", `{command.split(' --out ')[0]}`" if command else ""
    return f"\n\n<sub>`results/{name}`{command}; {_machine(d)}{extra}.</sub>"


def cli_cpu(name: str = "cli_cpu.json") -> str:
    """The `plbjax` command against the baseline given the same search seconds."""
    d = _load(name)
    settings = list(d["settings"])
    head = ["replicas", "nodes"]
    for s in settings:
        title = "defaults" if not d["settings"][s] else " ".join(f"`{a}`" for a in d["settings"][s])
        head += [f"{title}: search s", "ratio"]
    rows = []
    for size in d["sizes"]:
        row = [_int(size["replicas"]), _int(size["nodes"])]
        for s in settings:
            run = size["runs"][s]
            row += [f"{run['plbjax']['search_seconds']:.1f}", _ratio(run["ratio"], 3)]
        rows.append(row)
    return _table(head, rows) + _source(name, d)


def load_cpu(name: str = "load_cpu.json") -> str:
    """Seconds per stage from file to plan (best of the runs), and the peak memory."""
    d = _load(name)
    stages = d["stages"]
    before = d.get("before", {})
    head = ["replicas", "nodes"] + stages[:3] + ["read + validate + encode", "(old reader)"] + stages[3:] + ["peak RSS"]
    rows = []
    for size in d["sizes"]:
        best = size["summary"]["best_seconds"]
        old = before.get(str(size["replicas"]), {}).get("best_load_seconds")
        rows.append(
            [_int(size["replicas"]), _int(size["nodes"])]
            + [f"{best[s]:.2f}" for s in stages[:3]]
            + [f"**{size['summary']['best_load_seconds']:.1f}**", f"{old:.1f}" if old else ""]
            + [f"{best[s]:.2f}" for s in stages[3:]]
            + [f"{size['summary']['peak_rss_mb'] / 1024:.1f} GiB"]
        )
    return _table(head, rows) + _source(
        name,
        d,
        "; seconds, best of the runs; old reader: the replica-by-replica "
        "reading and encoding that the column-wise one replaced",
    )


def annealer_best(name: str) -> str:
    """Per cluster: the best plbjax run against the baseline for the same wall time."""
    d = _load(name)
    rows = []
    for size in d["sizes"]:
        runs = size["plbjax"]
        best = min(runs, key=lambda r: r["best_energy"])
        base = size["baseline"]
        rows.append(
            [
                _int(size["replicas"]),
                _int(size["nodes"]),
                str(size["metrics"]),
                _run_label(best),
                _rate(best["moves_per_second"]),
                _rate(base["moves_per_second"]),
                _energy(best["best_energy"]),
                _energy(best["baseline_energy_at_same_time"]),
                _ratio(best["energy_ratio_vs_baseline"]),
            ]
        )
    head = [
        "replicas",
        "nodes",
        "metrics",
        "best plbjax run",
        "plbjax proposals/s",
        "baseline moves/s",
        "plbjax best energy",
        "baseline energy",
        "plbjax / baseline",
    ]
    budget = d.get("budget_seconds")
    return _table(head, rows) + _source(name, d, f"; {budget:g} s per run" if budget else "")


def annealer_runs(name: str) -> str:
    """Every run on every cluster, and the baseline's."""
    d = _load(name)
    rows = []
    for size in d["sizes"]:
        cluster = f"{_int(size['replicas'])} replicas, {_int(size['nodes'])} nodes, {size['metrics']} metrics"
        for run in size["plbjax"]:
            rows.append(
                [
                    cluster,
                    "plbjax, " + _run_label(run),
                    _rate(run["moves_per_second"]),
                    _energy(run["best_energy"]),
                    _ratio(run["energy_ratio_vs_baseline"]),
                ]
            )
        base = size["baseline"]
        rows.append(
            [cluster, "numba baseline, 1 chain", _rate(base["moves_per_second"]), _energy(base["best_energy"]), "1"]
        )
    head = ["cluster", "run", "proposals/s", "best energy", "/ baseline"]
    budget = d.get("budget_seconds")
    return _table(head, rows) + _source(name, d, f"; {budget:g} s per run" if budget else "")


def annealer_reach(name: str = "annealer_h100_parallel.json") -> str:
    """How much sooner plbjax reaches the baseline's final energy (runs with --reach)."""
    d = _load(name)
    rows = []
    for size in d["sizes"]:
        base = size["baseline"]
        reach = sorted(size.get("reach", []), key=lambda r: r["budget_seconds"])
        first = next((r for r in reach if r["reaches_baseline"]), None)
        run = min(size["plbjax"], key=lambda r: r["best_energy"])
        cluster = f"{_int(size['replicas'])} replicas, {_int(size['nodes'])} nodes, {size['metrics']} metrics"
        reached = f"{first['budget_seconds']:g} s ({_energy(first['best_energy'])})" if first else "not reached"
        sooner = f"**{base['seconds'] / first['seconds']:.0f}×**" if first else ""
        rows.append(
            [
                cluster,
                _energy(base["best_energy"]),
                reached,
                sooner,
                f"{_energy(run['best_energy'])} ({_ratio(run['energy_ratio_vs_baseline'])})",
            ]
        )
    budget = d.get("budget_seconds", 60)
    head = [
        "cluster",
        f"baseline after {budget:g} s",
        "plbjax budget that reaches it",
        "sooner",
        f"plbjax after {budget:g} s (/ baseline)",
    ]
    return _table(head, rows) + _source(name, d)


def scaling_kernel(name: str) -> str:
    """The full SF step against the minimal kernel, moves per second."""
    d = _load(name)
    rows = []
    has_tries = any("full_tries" in r for r in d["kernel"]["runs"])
    for run in d["kernel"]["runs"]:
        row = [
            _int(run["chains"]),
            _rate(run["minimal"]["moves_per_second"]),
            _rate(run["full"]["moves_per_second"]),
            f"{run['full_over_minimal']:.2f}",
        ]
        if has_tries:
            t = run.get("full_tries")
            row += [
                _run_label(t) if t else "",
                _rate(t["moves_per_second"]) if t else "",
                f"**{run['full_tries_over_minimal']:.2f}**" if t else "",
            ]
        rows.append(row)
    head = ["chains (proposals a step)", "minimal kernel moves/s", "full SF step moves/s", "full / minimal"]
    if has_tries:
        head += ["full, with tries", "moves/s", "/ minimal"]
    cluster = d["kernel"]["cluster"]
    extra = f"; {_int(cluster['replicas'])} replicas, {cluster['nodes']} nodes, {cluster['metrics']} metrics"
    return _table(head, rows) + _source(name, d, extra)


def _no_commit(text: str) -> str:
    """A machine note without the commit it names (the table is about results, not history)."""
    return re.sub(r"(the )?code of (commit )?[0-9a-f]{7,40}\b", "earlier code", text)


def roadef(name: str = "roadef2012.csv") -> str:
    """Cost and score per instance, a column per label and budget (the latest row of each), and the
    mean score per set. Labels of old code (`label@commit`) are left out."""
    rows = [r for r in csv.DictReader((RESULTS / name).open()) if "@" not in r["label"]]
    columns = sorted({(r["label"], float(r["seconds"])) for r in rows})
    names = sorted({r["instance"] for r in rows})
    cell = {(r["instance"], r["label"], float(r["seconds"])): r for r in rows}
    head = (
        ["instance", "initial", "best known"]
        + [f"{lab} {s:g} s: cost (score)" for lab, s in columns]
        + ["winner 300 s (score)"]
    )
    out = []
    for n in names:
        first = next(r for r in rows if r["instance"] == n)
        line = [n, first["initial"], first["best_seen"]]
        for lab, s in columns:
            r = cell.get((n, lab, s))
            line.append(f"{r['cost']} ({float(r['score']):.2%})" if r else "")
        line.append(f"{first['winner_300s']} ({float(first['winner_score']):.2%})")
        out.append(line)
    means = []
    for lab, s in columns:
        for group in ("a", "b"):
            scores = [float(cell[(n, lab, s)]["score"]) for n in names if n.startswith(group) and (n, lab, s) in cell]
            if scores:
                means.append(f"{lab} {s:g} s, set {group.upper()}: **{sum(scores) / len(scores):.2%}**")
    machines = []
    for lab, s in columns:
        used = sorted({_no_commit(r["machine"]) for (n, la, se), r in cell.items() if (la, se) == (lab, s)})
        machines.append(f"{lab} {s:g} s: " + " and ".join(used))
    return (
        _table(head, out)
        + "\n\nMean score: "
        + "; ".join(means)
        + "."
        + f"\n\n<sub>`results/{name}`, the latest row of each instance, label and budget. "
        + "; ".join(machines)
        + ".</sub>"
    )


def validity(name: str = "validity_sweep.json") -> str:
    """The long tier of the random-validity suite."""
    d = _load(name)
    families = len({r["family"] for r in d["records"]})
    kinds = ", ".join(f"{k}: {v}" for k, v in d["breaks_by_kind"].items()) or "none"
    return (
        _table(
            ["clusters", "shapes", "plans with a break", "breaks by kind", "minutes"],
            [[_int(d["clusters"]), str(families), str(d["clusters_with_breaks"]), kinds, f"{d['seconds'] / 60:.0f}"]],
        )
        + f"\n\n<sub>`results/{name}`; {d['machine']}, jax {d['jax']}.</sub>"
    )


def apply_concurrency(name: str = "apply-concurrency.json") -> str:
    """plbjax-apply on the SF simulator: the defaults against one move at a time."""
    d = _load(name)
    rows = [
        [
            run["name"],
            f"`{' '.join(run['options'])}`" if run["options"] else "defaults",
            f"{run['wall_seconds']:.1f}",
            f"{run['simulated_seconds']:.0f}",
            f"{run['max_concurrent']} / {run['max_concurrent_per_node']}",
        ]
        for run in d["runs"]
    ]
    head = ["run", "options", "wall s", "simulated s", "most moves at once (cluster / node)"]
    m = d["machine"]
    return (
        _table(head, rows)
        + f"\n\n{d['moves']} moves of {d['move_simulated_seconds']:g} simulated s; "
        + f"speed-up {d['simulated_speedup']:.1f}x (simulated), {d['wall_speedup']:.1f}x (wall)."
        + f"\n\n<sub>`results/{name}`, `python scripts/bench_apply.py`; {m['node']}, {m['cpus']} CPUs.</sub>"
    )


TABLES = {
    "cli_cpu": cli_cpu,
    "load_cpu": load_cpu,
    "annealer_cpu": lambda: annealer_best("annealer_cpu.json"),
    "annealer_cpu_parallel": lambda: annealer_best("annealer_cpu_parallel.json"),
    "annealer_cpu_screened": lambda: annealer_best("annealer_cpu_screened.json"),
    "annealer_cpu_screened_own_t0": lambda: annealer_best("annealer_cpu_screened_own_t0.json"),
    "annealer_cpu_two_devices": lambda: annealer_runs("annealer_cpu_two_devices.json"),
    "annealer_cpu_population": lambda: annealer_runs("annealer_cpu_population.json"),
    "annealer_h100": lambda: annealer_runs("annealer_h100.json"),
    "annealer_h100_8m": lambda: annealer_runs("annealer_h100_8m.json"),
    "annealer_h100_parallel": annealer_reach,
    "scaling_h100_tries": lambda: scaling_kernel("scaling_h100_tries.json"),
    "roadef2012": roadef,
    "validity_sweep": validity,
    "apply_concurrency": apply_concurrency,
}


def render(text: str) -> str:
    """`text` with every generated block replaced by its table."""

    def block(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"docs/benchmarks.md: no table named {name!r} (known: {', '.join(TABLES)})")
        return match.group(1) + TABLES[name]().rstrip("\n") + "\n" + match.group(4)

    return BLOCK.sub(block, text)


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the document is out of date; write nothing")
    parser.add_argument("--doc", type=Path, default=DOC, help="the document to update (default docs/benchmarks.md)")
    args = parser.parse_args()
    old = args.doc.read_text()
    try:
        new = render(old)
    except (KeyError, OSError, ValueError) as exc:
        print(f"docs_benchmarks: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.check:
        if new != old:
            print(f"docs_benchmarks: {args.doc} is out of date; run python scripts/docs_benchmarks.py", file=sys.stderr)
            sys.exit(1)
        return
    if new != old:
        write_atomic(args.doc, new)
        print(f"docs_benchmarks: {args.doc} updated")
    else:
        print(f"docs_benchmarks: {args.doc} already up to date")


if __name__ == "__main__":
    main()
