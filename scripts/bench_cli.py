"""Benchmark: quality per second of the `plbjax` command line against the sequential baseline.

For each cluster size (about 1k to 100k replicas) a synthetic state document is generated once
(`plbjax.sf._generator.clusters`, cached under the temp directory) with SF's movement throttles lifted in its
`Settings` (`GlobalMovementThrottleThreshold` 0: no global limit; `MaxPercentageToMove` 1: balancing
may move every replica; `MovementPerPartitionThrottleThreshold` 0: no per-partition limit) and, with
`--overloaded N`, the N most loaded nodes over capacity (the constraint check's work). Then, per
setting (`default`: no search overrides, what a user gets from `plbjax state=... out=...`;
`cpu`: `+preset=cpu`), the script

  1. runs `plbjax state=DOC out=PLAN hydra.run.dir=...` as a subprocess, exactly as a user would,
     and reads the plan: the search seconds the CLI spent (`Search.Seconds`: every phase's search,
     compilation excluded, as the contract says), steps, the action list;
  2. applies the plan's `Actions` to the document (its own small applier, not plbjax's) to get the
     final placement;
  3. runs the sequential numba annealer (`plbjax.baseline`: one chain on one core, SF's
     energy, moves and validity rules, SF's T0 probe, the same final temperature ratio) on the same
     document for the same number of search seconds;
  4. scores both final placements with the baseline's own energy code (`plbjax.baseline.energy`:
     SF's energy `(AvgStdDev + 0.001) * (cost + replicas + 1000)` plus the penalties,
     float64), so both sides are scored by the same code, independent of the engine.

ratio = plbjax final energy / baseline final energy at equal search time (<= 1: plbjax not behind).
Also recorded: initial energy, AvgStdDev before/after (the plan's and recomputed), the CLI process's
wall seconds (start-up, parsing, compilation included), search seconds (and per phase, the plan's
`Search.PhaseSeconds`), steps, actions, the baseline's moves/s, and how busy the rest of the machine
was during each timed run. Results go to `results/cli_cpu.json` (rewritten after every run) and
`results/cli_cpu.png`.

    python scripts/bench_cli.py                       # 1k, 10k, 30k, 100k replicas (~20-25 min on 2 cores)
    python scripts/bench_cli.py --quick               # smoke test: ~1k replicas, 5-s searches (~2 min)
    python scripts/bench_cli.py --sizes 10000 --settings cpu --out /tmp/x
    python scripts/bench_cli.py --sizes 30000 --seconds 30 --overloaded 10   # a few violations to fix
    python scripts/bench_cli.py --report results/cli_cpu.json   # print the README table of a result
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import plbjax
from plbjax import baseline as bn
from plbjax.baseline import CLUSTER_SEED, Contention, machine, wait_idle
from plbjax.sf import ClusterSpec, generate, parse_state
from plbjax.sf._model import energy as E  # the engine's AvgStdDev of a placement (not exported)
from plbjax.sf._phases import movement_budget
from plbjax.warm import spec_for  # the benchmarks' clusters, shared with plbjax-warm --replicas

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(tempfile.gettempdir()) / "plbjax_bench_cli"

# SF's movement throttles lifted (_phase.movement_budget: a threshold of 0 is off; MaxPercentageToMove
# 0 would turn balancing off, so 1 = every replica may move).
LIFTED = {"GlobalMovementThrottleThreshold": 0, "MaxPercentageToMove": 1.0, "MovementPerPartitionThrottleThreshold": 0}

# setting name -> extra command-line arguments
SETTINGS = {"default": [], "cpu": ["+preset=cpu"]}

MOVES = {"MovePrimary", "MoveSecondary", "MoveInstance"}
WAIT_IDLE = 0.0  # --wait-idle: seconds to wait for other processes to go quiet before each run


# ------------------------------------------------------------------------------------ clusters


def overload(doc: dict, nodes: int) -> None:
    """The `nodes` most loaded nodes (by their fullest metric) given capacities of 90% of their load
    in every metric, so the constraint check has a few capacity violations to fix."""
    loads: dict[str, dict[str, float]] = {n["NodeName"]: {} for n in doc["Nodes"]}
    for partition in doc["Partitions"]:
        for replica in partition["Replicas"]:
            held = loads[replica["NodeName"]]
            for metric, load in replica["Loads"].items():
                held[metric] = held.get(metric, 0) + load
    fullest = lambda node: max(loads[node["NodeName"]][m] / c for m, c in node["Capacities"].items())
    for node in sorted(doc["Nodes"], key=fullest, reverse=True)[:nodes]:
        node["Capacities"] = {m: int(0.9 * loads[node["NodeName"]][m]) for m in node["Capacities"]}


def cluster_document(spec: ClusterSpec, overloaded: int = 0) -> tuple[Path, dict, float]:
    """(path, document, seconds to generate) of the spec's document with the throttles lifted and
    `overloaded` nodes over capacity (`overload`); cached by the spec's, the settings' and that
    count's hash (the count only when not 0, so earlier documents keep their names)."""
    keyed = [dataclasses.asdict(spec), LIFTED] + ([overloaded] if overloaded else [])
    key = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:12]
    path = CACHE / f"cluster_{spec.total_replicas}_{key}.json"
    start = time.perf_counter()
    if path.exists():
        doc = json.loads(path.read_text())
    else:
        doc = generate(CLUSTER_SEED, spec)
        doc["Settings"] = dict(doc.get("Settings") or {}, **LIFTED)
        overload(doc, overloaded)
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)
    return path, doc, time.perf_counter() - start


# ------------------------------------------------------------------------------------ scoring


class Scorer:
    """The baseline's energy of any placement of one document (the baseline's own float64 code)."""

    def __init__(self, doc: dict):
        self.state = parse_state(doc)
        R = sum(len(p.replicas) for p in self.state.partitions)
        budget = movement_budget(self.state, "Balancing", R)
        if budget < R:
            raise SystemExit(
                f"the throttles are not lifted: balancing may make only {budget} movements "
                f"of {R} replicas with Settings {LIFTED} (did a setting's zero value change "
                "meaning? see phases.movement_budget)"
            )
        self.problem, self.index = bn.balancing_problem(self.state)
        self.arrays = bn.problem_arrays(self.problem)
        ix = self.index
        self.node_id = {name: n for n, name in enumerate(ix.nodes)}
        self.row = {}
        for p, rows in enumerate(ix.partition_rows):
            service, pid = ix.partitions[p]
            for r in rows:
                self.row[(service, str(pid), str(ix.replica_ids[r]))] = (p, r)

    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(self.arrays.initial_node).copy(), np.asarray(self.arrays.initial_primary).copy())

    def apply(self, actions: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """(node_of, primary_of) after the plan's actions, applied in order (moves and swaps only;
        the generated clusters need no adds or drops)."""
        node_of, primary_of = self.initial()
        for act in actions:
            key = (act["ServiceName"], str(act["PartitionId"]), str(act["ReplicaId"]))
            if key not in self.row:
                raise ValueError(f"action on an unknown replica: {act}")
            p, r = self.row[key]
            src, dst = self.node_id.get(act["SourceNode"], -1), self.node_id.get(act["TargetNode"], -1)
            if node_of[r] != src:
                raise ValueError(f"action {act}: the replica is on node {node_of[r]}, not {src}")
            if act["Action"] in MOVES:
                if any(node_of[q] == dst for q in self.index.partition_rows[p]):
                    raise ValueError(f"action {act}: the target holds a replica of the partition")
                if (act["Action"] == "MovePrimary") != (primary_of[p] == r):
                    raise ValueError(f"action {act}: the replica's role differs")
                node_of[r] = dst
            elif act["Action"] == "SwapPrimarySecondary":
                other = [q for q in self.index.partition_rows[p] if node_of[q] == dst]
                if primary_of[p] != r or len(other) != 1:
                    raise ValueError(f"action {act}: not a primary and a secondary of the partition")
                primary_of[p] = other[0]
            else:
                raise ValueError(f"action {act['Action']} not expected on a generated cluster")
        return node_of, primary_of

    def energy(self, node_of, primary_of) -> float:
        """The baseline's energy of the placement (statistics recomputed from scratch)."""
        return bn.energy(self.arrays, node_of, primary_of)

    def avg_std_dev(self, node_of, primary_of) -> float:
        node_of, primary_of = np.asarray(node_of, np.int32), np.asarray(primary_of, np.int32)
        return float(E.avg_std_dev(self.problem.cluster, node_of, primary_of))

    def movements(self, node_of, primary_of) -> tuple[int, int]:
        """(replicas off their input node, partitions whose primary changed)."""
        n0, p0 = self.initial()
        return int(np.sum(node_of != n0)), int(np.sum(primary_of != p0))


# ------------------------------------------------------------------------------------ runs


def plbjax_command() -> list[str]:
    """The installed `plbjax` console script of this interpreter's environment."""
    exe = Path(sys.executable).parent / "plbjax"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "plbjax.cli"]


def run_cli(doc_path: Path, workdir: Path, extra: list[str], timeout: float) -> dict:
    """One `plbjax` run as a user would start it; the plan and what the process took."""
    workdir.mkdir(parents=True, exist_ok=True)
    plan_path = workdir / "plan.json"
    plan_path.unlink(missing_ok=True)
    cmd = plbjax_command() + [f"state={doc_path}", f"out={plan_path}", f"hydra.run.dir={workdir / 'hydra'}", *extra]
    start = time.perf_counter()
    with Contention() as busy:
        done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    (workdir / "stdout.txt").write_text(done.stdout)
    (workdir / "stderr.txt").write_text(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"plbjax exited {done.returncode}: {shlex.join(cmd)}\n{done.stderr[-3000:]}")
    plan = json.loads(plan_path.read_text())
    # the child's CPU time is not this process's: Contention counts it as "other"; subtract it
    child = os.times()
    return dict(
        command=shlex.join(cmd),
        plan=plan,
        wall_seconds=wall,
        busy=busy,
        child_cpu_seconds=child.children_user + child.children_system,
        stdout=done.stdout,
    )


def run_plbjax(scorer: Scorer, doc_path: Path, setting: str, extra: list[str], workdir: Path) -> dict:
    wait_idle(f"plbjax {setting}", WAIT_IDLE)
    before = os.times()
    out = run_cli(doc_path, workdir, SETTINGS[setting] + extra, timeout=3600)
    plan = out["plan"]
    search = plan["Search"]
    node_of, primary_of = scorer.apply(plan["Actions"])
    moved, swapped = scorer.movements(node_of, primary_of)
    child_cpu = out["child_cpu_seconds"] - (before.children_user + before.children_system)
    other = None
    if out["busy"].other_cores is not None:
        other = max(out["busy"].other_cores - child_cpu / out["wall_seconds"], 0.0)
    counts = {}
    for act in plan["Actions"]:
        counts[act["Action"]] = counts.get(act["Action"], 0) + 1
    return dict(
        setting=setting,
        command=out["command"],
        wall_seconds=out["wall_seconds"],
        search_seconds=float(search["Seconds"]),
        phase_seconds=search.get("PhaseSeconds"),
        steps=int(search["Steps"]),
        chains=search.get("Chains"),
        backend=search.get("Backend"),
        interrupted=bool(search.get("Interrupted")),
        phases=[dict(phase=p["Phase"], ran=p["Ran"], reason=p["Reason"]) for p in plan["Phases"]],
        actions=len(plan["Actions"]),
        action_counts=counts,
        replicas_moved=moved,
        primaries_changed=swapped,
        avg_std_dev_before=plan["Score"]["Before"],
        avg_std_dev_after=plan["Score"]["After"],
        avg_std_dev_after_recomputed=scorer.avg_std_dev(node_of, primary_of),
        final_energy=scorer.energy(node_of, primary_of),
        cpu_cores_used=child_cpu / max(out["wall_seconds"], 1e-9),
        other_processes_cores=other,
        summary=out["stdout"].strip().splitlines()[:3],
    )


def run_base(scorer: Scorer, seconds: float, seed: int) -> dict:
    arrays = scorer.arrays
    bn.run_baseline(arrays, steps=1000, seed=seed, checkpoints=1)  # touch every page once
    wait_idle("the baseline", WAIT_IDLE)
    with Contention() as busy:
        base = bn.run_baseline(arrays, steps=None, seconds=max(seconds, 0.05), seed=seed, checkpoints=50)
    node_of, primary_of = base["node_of"], base["primary_of"]
    moved, swapped = scorer.movements(node_of, primary_of)
    return dict(
        seconds=base["seconds"],
        steps=base["steps"],
        moves_per_second=base["steps"] / max(base["seconds"], 1e-9),
        accepted=base["accepted"],
        initial_temperature=base["t0"],
        best_energy_reported=base["best_energy"],
        final_energy=scorer.energy(node_of, primary_of),
        avg_std_dev_after=scorer.avg_std_dev(node_of, primary_of),
        replicas_moved=moved,
        primaries_changed=swapped,
        other_processes_cores=busy.other_cores,
        energy_trace=base["energy_trace"],
    )


# ------------------------------------------------------------------------------------ output


def write(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.with_suffix(".json")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=float) + "\n")
    tmp.replace(path)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["sizes"] if r["runs"]]
    if not rows:
        return
    settings = [s for s in SETTINGS if any(s in r["runs"] for r in rows)]
    colors = {"default": "tab:blue", "cpu": "tab:orange"}
    x = np.arange(len(rows))
    width = 0.8 / max(len(settings), 1)
    labels = [f"{r['replicas']:,}\n({r['nodes']:,} nodes)" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))

    ax = axes[0]
    for i, s in enumerate(settings):
        vals = [r["runs"][s]["ratio"] if s in r["runs"] else np.nan for r in rows]
        bars = ax.bar(
            x + (i - (len(settings) - 1) / 2) * width,
            vals,
            width,
            color=colors.get(s),
            label="plbjax" + ("" if s == "default" else f" +preset={s}") + " (CLI)",
        )
        for b, v in zip(bars, vals):
            if np.isfinite(v):
                ax.annotate(f"{v:.3f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="k", lw=1)
    finite = [r["runs"][s]["ratio"] for r in rows for s in settings if s in r["runs"]]
    ax.set_ylim(min(0.9, min(finite) - 0.02), max(1.1, max(finite) + 0.03))
    ax.set_xticks(x, labels)
    ax.set_xlabel("replicas")
    ax.set_ylabel("plbjax final energy / baseline final energy")
    ax.set_title("equal search time (<= 1: plbjax not behind)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")

    ax = axes[1]
    for i, s in enumerate(settings):
        search = [r["runs"][s]["plbjax"]["search_seconds"] if s in r["runs"] else np.nan for r in rows]
        wall = [r["runs"][s]["plbjax"]["wall_seconds"] if s in r["runs"] else np.nan for r in rows]
        pos = x + (i - (len(settings) - 1) / 2) * width
        ax.bar(pos, wall, width, color=colors.get(s), alpha=0.35)
        ax.bar(
            pos,
            search,
            width,
            color=colors.get(s),
            label=("defaults" if s == "default" else f"+preset={s}") + ": search (pale: whole process)",
        )
        for at, r in zip(pos, rows):
            note = _phase_note(r["runs"].get(s, {}).get("plbjax", {}).get("phase_seconds"))
            if note:
                ax.annotate(note, (at, 1.0), ha="center", va="bottom", fontsize=7, color="white")
    ax.set_xticks(x, labels)
    ax.set_xlabel("replicas")
    ax.set_ylabel("seconds (the baseline gets the search seconds)")
    ax.set_title("CLI time per run", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")

    m = result["machine"]
    cores = m.get("affinity_cores") or m["logical_cores"]
    fig.suptitle(
        f"plbjax CLI vs sequential numba baseline (1 thread), throttles lifted, on {m['cpu_model']} "
        f"({cores} cores), jax {m['jax_version']} {m['jax_backend']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _phase_note(seconds: dict | None) -> str:
    """The plan's wall seconds by phase (its first search's compilation or loading included), a line each."""
    phases = ("Placement", "ConstraintCheck", "Balancing", "FewestMovements")
    seconds = seconds or {}
    return "\n".join(f"{p} {seconds[p]:.1f} s" for p in phases if seconds.get(p, 0) >= 0.05)


def table(result: dict) -> str:
    """The README table: ratio per size for the defaults and +preset=cpu."""
    lines = [
        "| replicas | nodes | initial energy | defaults: search s | energy | baseline | ratio "
        "| +preset=cpu: search s | energy | baseline | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["sizes"]:
        cells = [f"{r['replicas']:,}", f"{r['nodes']:,}", f"{r['initial_energy']:,.1f}"]
        for s in SETTINGS:
            run = r["runs"].get(s)
            if run is None:
                cells += ["", "", "", ""]
                continue
            ratio = f"{run['ratio']:.3f}"
            cells += [
                f"{run['plbjax']['search_seconds']:.1f}",
                f"{run['plbjax']['final_energy']:,.1f}",
                f"{run['baseline']['final_energy']:,.1f}",
                f"**{ratio}**" if run["ratio"] <= 1 else ratio,
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=None, help="replica counts, comma-separated (default 1000,10000,30000,100000)")
    ap.add_argument(
        "--settings",
        default=",".join(SETTINGS),
        help=f"CLI settings to run, comma-separated, of {', '.join(SETTINGS)} (default: all)",
    )
    ap.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="pass search.seconds=S to every CLI run (default: the CLI's own default, 60)",
    )
    ap.add_argument("--cli-args", default="", help="more CLI overrides for every run (quoted, space-separated)")
    ap.add_argument("--seed", type=int, default=0, help="search.seed of the CLI and the baseline's seed")
    ap.add_argument(
        "--overloaded",
        type=int,
        default=0,
        help="give the N most loaded nodes capacities of 90%% of their load (capacity violations for the "
        "constraint check to fix; default 0: none)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke test: 1000 replicas, search.seconds=5, output in the temp directory"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output path without suffix (default results/cli_cpu; with --quick a temp path)",
    )
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="before each timed run wait up to this many seconds for other processes to go quiet",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the runs already in --out's JSON and do only the missing (size, setting) pairs, so "
        "the benchmark can be split over several calls (e.g. --sizes 1000,10000 then "
        "--sizes 30000 --resume then --sizes 100000 --resume)",
    )
    ap.add_argument("--note", default="", help="free text stored in the result")
    ap.add_argument("--report", type=Path, metavar="JSON", help="no run: print the README table of a result")
    args = ap.parse_args(argv)
    if args.report:
        print(table(json.loads(args.report.read_text())))
        return 0

    global WAIT_IDLE
    WAIT_IDLE = args.wait_idle
    sizes = [int(s) for s in (args.sizes or ("1000" if args.quick else "1000,10000,30000,100000")).split(",")]
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"--settings: unknown {unknown}; known: {list(SETTINGS)}")
    seconds = args.seconds if args.seconds is not None else (5.0 if args.quick else None)
    extra = shlex.split(args.cli_args) + [f"search.seed={args.seed}"]
    if seconds is not None:
        extra.append(f"search.seconds={seconds:g}")
    out = args.out or (Path(tempfile.gettempdir()) / "cli_cpu_quick" if args.quick else ROOT / "results" / "cli_cpu")

    started = time.perf_counter()
    info = machine()
    print(
        f"machine: {info['cpu_model']}, {info['logical_cores']} cores, jax {info['jax_version']} "
        f"({info['jax_backend']}), load {info['load_average_at_start']}",
        flush=True,
    )
    numba_compile = bn.compile_kernels()
    print(f"numba baseline compiled in {numba_compile:.1f} s (or loaded from its cache)", flush=True)
    result = dict(
        description=(
            "`plbjax` CLI (as a user runs it; SF's movement throttles lifted in the document) vs the "
            "sequential numba annealer (plbjax.baseline, one chain, one core) for the CLI's "
            "search seconds (Search.Seconds, compilation excluded); both final placements scored by "
            "the baseline's float64 SF energy; ratio = plbjax / baseline (<= 1: plbjax not behind)"
        ),
        command=" ".join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv))),
        note=args.note,
        machine=info,
        plbjax_command=shlex.join(plbjax_command()),
        settings={s: SETTINGS[s] for s in settings},
        extra_cli_args=extra,
        lifted_throttles=LIFTED,
        seed=args.seed,
        environment={k: os.environ.get(k) for k in ("PYTHONPATH", "XLA_FLAGS", "PLBJAX_CACHE_DIR", "JAX_PLATFORMS")},
        plbjax_package=str(Path(plbjax.__file__).resolve().parent),
        overloaded_nodes=args.overloaded,
        wait_idle_seconds=args.wait_idle,
        baseline_compile_seconds=numba_compile,
        total_wall_seconds=None,
        sizes=[],
        parts=[],
    )
    result["parts"].append(
        dict(
            command=result["command"],
            git_commit=info["git_commit"],
            git_dirty_files=info["git_dirty_files"],
            plbjax_sources_sha256=info["plbjax_sources_sha256"],
            load_average_at_start=info["load_average_at_start"],
            sizes=sizes,
            settings=settings,
        )
    )
    previous_wall = 0.0
    if args.resume and out.with_suffix(".json").exists():
        old = json.loads(out.with_suffix(".json").read_text())
        for key in ("cpu_model", "logical_cores", "jax_version", "jax_backend", "plbjax_sources_sha256"):
            if old["machine"].get(key) != info.get(key):
                print(
                    f"warning: --resume: {key} differs from the earlier runs' "
                    f"({old['machine'].get(key)!r} then {info.get(key)!r})",
                    flush=True,
                )
        if old.get("overloaded_nodes", 0) != args.overloaded:
            raise SystemExit(f"--resume: the earlier runs had {old.get('overloaded_nodes', 0)} overloaded nodes")
        if old.get("extra_cli_args") != extra:
            raise SystemExit(f"--resume: the earlier runs used CLI arguments {old.get('extra_cli_args')}, now {extra}")
        result["sizes"] = old["sizes"]
        result["parts"] = old.get("parts", []) + result["parts"]
        result["settings"] = dict(old.get("settings", {}), **result["settings"])
        previous_wall = old.get("total_wall_seconds") or 0.0
    workroot = Path(tempfile.mkdtemp(prefix="bench_cli_"))
    for replicas in sizes:
        done = next((r for r in result["sizes"] if r["requested"] == replicas), None)
        if done is not None and all("ratio" in done["runs"].get(s, {}) for s in settings):
            print(f"== {done['replicas']:,} replicas: already done ({', '.join(settings)})", flush=True)
            continue
        spec = spec_for(replicas)
        doc_path, doc, gen_s = cluster_document(spec, args.overloaded)
        scorer = Scorer(doc)
        n0, p0 = scorer.initial()
        row = dict(
            requested=replicas,
            replicas=scorer.index.n_replicas,
            nodes=scorer.index.n_nodes,
            partitions=scorer.index.n_partitions,
            metrics=len(scorer.index.metrics),
            spec=dataclasses.asdict(spec),
            document=str(doc_path),
            document_seconds=gen_s,
            initial_energy=scorer.energy(n0, p0),
            avg_std_dev_before=scorer.avg_std_dev(n0, p0),
            runs={},
        )
        if done is not None:
            row["runs"] = {s: run for s, run in done["runs"].items() if "ratio" in run}
            result["sizes"].remove(done)
        result["sizes"].append(row)
        result["sizes"].sort(key=lambda r: r["requested"])
        print(
            f"== {row['replicas']:,} replicas, {row['nodes']:,} nodes, {row['partitions']:,} partitions "
            f"({doc_path.name}); initial energy {row['initial_energy']:.6g}",
            flush=True,
        )
        for setting in settings:
            if setting in row["runs"]:
                continue
            pl = run_plbjax(scorer, doc_path, setting, extra, workroot / f"{replicas}_{setting}")
            print(
                f"   plbjax {setting:8s}: {pl['wall_seconds']:6.1f} s process, {pl['search_seconds']:6.2f} s search, "
                f"{pl['steps']:8d} steps, {pl['actions']:6d} actions, E {pl['final_energy']:.6g} "
                f"(AvgStdDev {pl['avg_std_dev_before']:.4f} -> {pl['avg_std_dev_after']:.4f}, "
                f"others used {pl['other_processes_cores'] or 0:.2f} cores)",
                flush=True,
            )
            gap = abs(pl["avg_std_dev_after_recomputed"] - pl["avg_std_dev_after"])
            if gap > 1e-3 * max(pl["avg_std_dev_after"], 1e-3):
                print(
                    f"   warning: the applied actions give AvgStdDev {pl['avg_std_dev_after_recomputed']:.6f}, "
                    f"the plan says {pl['avg_std_dev_after']:.6f}",
                    flush=True,
                )
            row["runs"][setting] = dict(plbjax=pl)
            write(result, out)
            base = run_base(scorer, pl["search_seconds"], args.seed)
            ratio = pl["final_energy"] / base["final_energy"]
            row["runs"][setting].update(baseline=base, ratio=ratio)
            print(
                f"   baseline         : {base['seconds']:6.2f} s, {base['steps']:10d} proposals "
                f"({base['moves_per_second']:,.0f}/s), E {base['final_energy']:.6g}; ratio {ratio:.4f}"
                f"{'' if ratio <= 1 else '  (behind)'}",
                flush=True,
            )
            result["total_wall_seconds"] = previous_wall + time.perf_counter() - started
            write(result, out)
            plot(result, out.with_suffix(".png"))

    result["total_wall_seconds"] = previous_wall + time.perf_counter() - started
    write(result, out)
    plot(result, out.with_suffix(".png"))
    print("\n" + table(result))
    print(f"\nwrote {out.with_suffix('.json')} and {out.with_suffix('.png')} in {result['total_wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
