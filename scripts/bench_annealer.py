"""Benchmark: plbjax's vmapped annealer against a sequential compiled annealer (numba baseline).

The question is solution quality per wall-second: for each cluster size, plbjax `anneal` runs with a
fixed wall-time budget at a few chain counts and the numba baseline (plbjax.baseline: one
chain, same energy, moves, validity rules and temperature schedule, plbjax's T0) runs for the same
wall time. Recorded per run: moves/s, best energy vs wall time, final energy, compile seconds,
AvgStdDev before/after; per size also where plbjax's step time goes (steps alone at 1 and C chains,
the exact refresh alone). With --reach, every configuration runs again with shorter budgets, which
says how soon plbjax reaches the baseline's final energy. Writes a JSON and a PNG naming the machine.

    python scripts/bench_annealer.py                 # full run (~10-15 minutes on 2 CPU cores)
    python scripts/bench_annealer.py --quick         # smoke run (two small sizes, short budgets)
    python scripts/bench_annealer.py --sizes 100k8 300k --chains 1x65536m --seconds 60 --reach 1 2 3 6 \
        --same-t0 --profile-chains 0 --out results/annealer_h100_parallel   # GPU (~6 minutes on one H100)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax import anneal as A
from plbjax.baseline import (
    CLUSTER_SEED,
    SIZES,
    Contention,
    balancing_problem,
    compile_kernels,
    machine,
    probe_temperature,
    problem_arrays,
    run_baseline,
    timed,
    wait_idle,
)
from plbjax.sf import ClusterSpec, generate, model, parse_state
from plbjax.sf._model import energy as E  # the engine's exact energy and AvgStdDev of a placement (not exported)

ROOT = Path(__file__).resolve().parents[1]
MODEL = model()  # SF's search, SF's swap probability
WAIT_IDLE = 0.0  # --wait-idle: seconds to wait for other processes to go quiet before each run

# ------------------------------------------------------------------------------------ plbjax


def parse_run(spec: str) -> dict:
    """A --chains entry: C, CxT, CxTrR (R: room) with flags m (parallel moves), p (population)."""
    m = re.fullmatch(r"(\d+)(?:x(\d+))?(?:r(\d+))?([mp]*)", str(spec))
    if m is None:
        raise SystemExit(f"--chains: cannot read {spec!r} (C, CxT or CxTrR, then flags m/p)")
    chains, tries, room, flags = m.groups()
    return dict(
        chains=int(chains),
        tries=int(tries or 1),
        room=int(room) if room else None,
        population="p" in flags,
        parallel="m" in flags,
    )


def run_plbjax(
    problem,
    chains: int,
    seconds: float,
    seed: int,
    tries: int = 1,
    population: bool = False,
    parallel: bool = False,
    t0: float | None = None,
    room: int | None = None,
) -> dict:
    trace, planned = [], [0]

    def progress(done, blocks, elapsed, best):
        trace.append((round(elapsed, 4), best))
        planned[0] = blocks

    kernel = A.KernelConfig(tries=tries, parallel=parallel, room=room, population=population)
    schedule = A.Schedule(chains=chains, steps=None, seconds=seconds, seed=seed, initial_temperature=t0)
    wait_idle(f"plbjax {chains} chains", WAIT_IDLE)
    start = time.perf_counter()
    with Contention() as busy:
        res = A.anneal(MODEL, problem, kernel, schedule, progress=progress)
    total = time.perf_counter() - start
    node_of, primary_of = (jnp.asarray(x) for x in res.solution)
    return dict(
        chains=chains,
        tries=tries,
        room=kernel.step_room,
        population=population,
        parallel=parallel,
        steps_per_chain=res.steps,
        seconds=res.seconds,
        blocks_done=len(trace),
        blocks_planned=planned[0],  # done < planned: stopped before the final T
        compile_seconds=res.compile_seconds,
        other_seconds=total - res.seconds - res.compile_seconds,  # init chains (+ its compile)
        moves_per_second=chains * tries * res.steps / res.seconds,  # proposals evaluated
        initial_energy=res.initial_energy,
        best_energy=res.energy,
        recomputed_energy=float(E.energy_of(problem, node_of, primary_of)),
        avg_std_dev_after=float(E.avg_std_dev(problem.cluster, node_of, primary_of)),
        initial_temperature=res.initial_temperature,
        accepted=res.accepted,
        other_processes_cores=busy.other_cores,
        energy_trace=[(0.0, res.initial_energy)] + trace,
    )


def profile_plbjax(problem, chains: int, steps: int, t: float) -> dict:
    """Where a block's time goes: `steps` plain steps (no refresh) at 2 and `chains` chains, and one
    exact refresh of `chains` chains (run once per block of 1,000 steps). (2, not 1: with a batch of
    one XLA copies the whole chain state every step, which is not the floor a batch pays.)"""
    kernel = A.KernelConfig()

    @eqx.filter_jit
    def steps_only(problem, chains_, temperature):
        def body(_, c):
            return jax.vmap(A.step, in_axes=(None, None, None, 0, None))(MODEL, problem, kernel, c, temperature)

        return jax.lax.fori_loop(0, steps, body, chains_).state.energy

    @eqx.filter_jit
    def refresh_only(problem, chains_):
        return jax.vmap(A.refresh, in_axes=(None, None, 0))(MODEL, problem, chains_).state.energy

    out = {}
    for c in sorted({2, chains}):
        ch = A.init_chains(MODEL, problem, jax.random.split(jax.random.PRNGKey(0), c))
        comp, sec = timed(steps_only, problem, ch, jnp.float32(t))
        out[f"step_us_{c}_chains"] = 1e6 * sec / steps
        out[f"step_compile_seconds_{c}_chains"] = comp
        if c == chains:
            comp, sec = timed(refresh_only, problem, ch)
            out[f"refresh_ms_{c}_chains"] = 1e3 * sec
            out["refresh_compile_seconds"] = comp
    block = out[f"step_us_{chains}_chains"] * 1e-6 * kernel.block_steps + out[f"refresh_ms_{chains}_chains"] * 1e-3
    out["chains"] = chains
    out["refresh_share_of_block"] = out[f"refresh_ms_{chains}_chains"] * 1e-3 / block
    out["us_per_chain_step"] = out[f"step_us_{chains}_chains"] / chains
    return out


# ------------------------------------------------------------------------------------ comparison


def best_at(trace, t: float) -> float:
    """Best energy a run had reached by wall time t (its trace is a step function)."""
    value = trace[0][1]
    for when, best in trace:
        if when <= t + 1e-9:
            value = best
    return value


def bench_size(
    name: str,
    spec: ClusterSpec,
    chains: list[str],
    seconds: float,
    seed: int,
    profile_chains: int | None,
    profile_steps: int,
    same_t0: bool = False,
    reach: list[float] = (),
) -> dict:
    print(f"== {name}: generating {spec.total_replicas} replicas on {spec.nodes} nodes", flush=True)
    start = time.perf_counter()
    doc = generate(CLUSTER_SEED, spec)
    state = parse_state(doc)
    gen_s = time.perf_counter() - start
    start = time.perf_counter()
    problem, index = balancing_problem(state)
    enc_s = time.perf_counter() - start
    a0 = float(E.avg_std_dev(problem.cluster, problem.cluster.initial_node, problem.cluster.initial_primary))
    row = dict(
        name=name,
        spec=dataclasses.asdict(spec),
        nodes=index.n_nodes,
        replicas=index.n_replicas,
        partitions=index.n_partitions,
        metrics=len(index.metrics),
        padded_shape=problem.cluster.shape,
        movable=int(problem.scope.n_movable),
        swappable=int(problem.scope.n_swappable),
        generate_parse_seconds=gen_s,
        encode_seconds=enc_s,
        avg_std_dev_before=a0,
        budget_seconds=seconds,
        plbjax=[],
    )
    arrays = problem_arrays(problem)
    # --same-t0: every run starts at SF's T0 from the baseline's probe (no greedy probe block), so
    # runs differ only in how they spend the same temperature schedule.
    shared_t0 = probe_temperature(arrays, seed) if same_t0 else None

    for spec_ in chains:
        run = run_plbjax(problem, seconds=seconds, seed=seed, t0=shared_t0, **parse_run(spec_))
        row["plbjax"].append(run)
        print(
            f"   plbjax {_config(run)}: {run['moves_per_second']:12,.0f} moves/s  "
            f"{run['steps_per_chain']:8d} steps/chain  E {run['initial_energy']:.6g} -> "
            f"{run['best_energy']:.6g}  (compile {run['compile_seconds']:.1f}s, others used "
            f"{run['other_processes_cores'] or 0:.2f} cores)",
            flush=True,
        )

    t0 = row["plbjax"][0]["initial_temperature"]
    run_baseline(arrays, steps=1000, seed=seed, t0=t0, checkpoints=1)  # touch every page once
    wait_idle("the baseline", WAIT_IDLE)
    with Contention() as busy:
        base = run_baseline(arrays, steps=None, seconds=seconds, seed=seed, t0=t0, checkpoints=60)
    node_of, primary_of = jnp.asarray(base["node_of"], jnp.int32), jnp.asarray(base["primary_of"], jnp.int32)
    row["baseline"] = dict(
        steps=base["steps"],
        seconds=base["seconds"],
        moves_per_second=base["steps"] / base["seconds"],
        initial_energy=base["initial_energy"],
        best_energy=base["best_energy"],
        recomputed_energy=float(E.energy_of(problem, node_of, primary_of)),
        avg_std_dev_after=float(E.avg_std_dev(problem.cluster, node_of, primary_of)),
        accepted=base["accepted"],
        initial_temperature=t0,
        other_processes_cores=busy.other_cores,
        energy_trace=base["energy_trace"],
    )
    print(
        f"   baseline    1 chain : {row['baseline']['moves_per_second']:12,.0f} moves/s  "
        f"{base['steps']:8d} steps        E {base['initial_energy']:.6g} -> {base['best_energy']:.6g}  "
        f"(others used {busy.other_cores or 0:.2f} cores)",
        flush=True,
    )

    # Equal time = equal budget: each run fits its whole temperature schedule into `seconds`, so the
    # runs are compared by their final bests (their actual seconds are recorded next to them). The
    # baseline's best at the plbjax run's elapsed time is kept too, but a schedule's last chunk is where
    # most of the gain lands, so that value is only meaningful when the baseline ran longer.
    for run in row["plbjax"]:
        run["baseline_energy_at_same_time"] = base["best_energy"]
        run["baseline_trace_energy_at_plbjax_seconds"] = best_at(base["energy_trace"], run["seconds"])
        run["energy_ratio_vs_baseline"] = run["best_energy"] / base["best_energy"]
        run["moves_per_second_ratio_vs_baseline"] = run["moves_per_second"] / row["baseline"]["moves_per_second"]
    # --reach: every configuration again with shorter budgets; the shortest whose best energy is at or
    # below the baseline's final energy is how soon plbjax reaches it.
    row["reach"] = []
    for spec_ in chains if reach else ():
        for budget in sorted(reach):
            run = run_plbjax(problem, seconds=budget, seed=seed, t0=shared_t0, **parse_run(spec_))
            run["budget_seconds"] = budget
            run["reaches_baseline"] = run["best_energy"] <= base["best_energy"]
            row["reach"].append(run)
            print(
                f"   reach  {_config(run)} in {budget:g} s: E {run['best_energy']:.6g} "
                f"({'at or below' if run['reaches_baseline'] else 'above'} the baseline's "
                f"{base['best_energy']:.6g} after {base['seconds']:.0f} s)",
                flush=True,
            )
    soonest = min((r for r in row["reach"] if r["reaches_baseline"]), key=lambda r: r["seconds"], default=None)
    best = min(row["plbjax"], key=lambda r: r["best_energy"])
    row["summary"] = dict(
        plbjax_best_chains=_config(best),
        plbjax_best_energy=best["best_energy"],
        plbjax_seconds=best["seconds"],
        baseline_energy_at_same_time=best["baseline_energy_at_same_time"],
        baseline_final_energy=base["best_energy"],
        baseline_seconds=base["seconds"],
        energy_ratio=best["energy_ratio_vs_baseline"],
        plbjax_moves_per_second=best["moves_per_second"],
        plbjax_max_moves_per_second=max(r["moves_per_second"] for r in row["plbjax"]),
        baseline_moves_per_second=row["baseline"]["moves_per_second"],
        initial_energy=best["initial_energy"],
        avg_std_dev_before=a0,
        avg_std_dev_after_plbjax=best["avg_std_dev_after"],
        avg_std_dev_after_baseline=row["baseline"]["avg_std_dev_after"],
        reach_config=_config(soonest) if soonest else None,
        reach_seconds=soonest["seconds"] if soonest else None,
        reach_speedup=base["seconds"] / soonest["seconds"] if soonest else None,
    )
    print(
        f"   best plbjax ({_config(best)}) / baseline at equal time: "
        f"{best['best_energy']:.6g} / {best['baseline_energy_at_same_time']:.6g} = "
        f"{best['energy_ratio_vs_baseline']:.4f}",
        flush=True,
    )

    if profile_chains:
        row["plbjax_profile"] = profile_plbjax(problem, profile_chains, profile_steps, t0 * 1e-2)
        p = row["plbjax_profile"]
        print(
            f"   profile: step {p['step_us_2_chains']:.0f} us at 2 chains, "
            f"{p[f'step_us_{profile_chains}_chains']:.0f} us at {profile_chains}; refresh "
            f"{p[f'refresh_ms_{profile_chains}_chains']:.1f} ms ({100 * p['refresh_share_of_block']:.0f}% "
            "of a block)",
            flush=True,
        )
    return row


# ------------------------------------------------------------------------------------ plot


def _config(run: dict) -> str:
    """A plbjax run's label: chains, tries per step when more than one, parallel moves, population annealing."""
    tries = run.get("tries", 1)
    room = run.get("room") or A.KernelConfig(tries=tries).step_room
    return (
        f"{run['chains']} chains"
        + (f" x {tries} tries" if tries > 1 else "")
        + (f" (room {room})" if tries > room else "")
        + (", parallel" if run.get("parallel") else "")
        + (", population" if run.get("population") else "")
    )


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result["sizes"]
    n = len(sizes)
    cols = max(n, 2)
    fig, axes = plt.subplots(2, cols, figsize=(4.2 * cols, 7.5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, row in zip(axes[0], sizes):
        e0 = row["plbjax"][0]["initial_energy"]
        for i, run in enumerate(row["plbjax"]):
            t, e = zip(*run["energy_trace"])
            ax.step(t, np.array(e) / e0, where="post", color=colors[i % len(colors)], label=f"plbjax {_config(run)}")
        t, e = zip(*row["baseline"]["energy_trace"])
        ax.step(t, np.array(e) / e0, where="post", color="k", lw=2, label="numba baseline (1 chain)")
        labels = [_config(r) for r in row["plbjax"]]
        for run in row.get("reach", []):
            ax.plot(
                run["seconds"],
                run["best_energy"] / e0,
                "o",
                mfc="none",
                color=colors[labels.index(_config(run)) % len(colors)],
            )
        if row.get("reach"):
            ax.axhline(row["baseline"]["best_energy"] / e0, color="k", ls=":", lw=1)
        ax.set_title(f"{row['replicas']:,} replicas, {row['nodes']} nodes")
        ax.set_xlabel("wall seconds (compile excluded)")
        ax.set_ylabel("best energy / initial energy")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[0, n:]:
        ax.axis("off")

    chain_counts = sorted({_config(r) for row in sizes for r in row["plbjax"]})
    x = np.arange(n)
    width = 0.8 / (len(chain_counts) + 1)
    ax = axes[1, 0]
    for i, c in enumerate(chain_counts):
        vals = [next((r["moves_per_second"] for r in row["plbjax"] if _config(r) == c), np.nan) for row in sizes]
        ax.bar(x + i * width, vals, width, color=colors[i % len(colors)], label=f"plbjax {c}")
    ax.bar(
        x + len(chain_counts) * width,
        [row["baseline"]["moves_per_second"] for row in sizes],
        width,
        color="k",
        label="numba baseline",
    )
    ax.set_xticks(x + 0.4 - width / 2, [f"{row['replicas']:,}" for row in sizes])
    ax.set_xlabel("replicas")
    ax.set_ylabel("proposed moves / second")
    ax.set_yscale("log")
    ax.set_title("throughput")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")

    ax = axes[1, 1]
    for i, c in enumerate(chain_counts):
        vals = [
            next((r["energy_ratio_vs_baseline"] for r in row["plbjax"] if _config(r) == c), np.nan) for row in sizes
        ]
        ax.bar(x + i * width, vals, width, color=colors[i % len(colors)], label=f"plbjax {c}")
    ax.axhline(1.0, color="k", lw=1)
    ax.set_xticks(x + 0.4 - width, [f"{row['replicas']:,}" for row in sizes])
    ax.set_xlabel("replicas")
    ax.set_ylabel("plbjax best energy / baseline best energy")
    ax.set_title("final energy ratio, equal budget (<1: plbjax better)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    for ax in axes[1, 2:]:
        ax.axis("off")

    m = result["machine"]
    device = "" if m["jax_backend"] == "cpu" else f" + {m.get('jax_device_kind', m['jax_backend'])}"
    cores = m.get("affinity_cores") or m["logical_cores"]
    cores = f"{cores} of {m['logical_cores']} cores" if cores != m["logical_cores"] else f"{cores} cores"
    fig.suptitle(
        f"plbjax vs numba baseline (1 CPU thread) on {m['cpu_model']} ({cores})"
        f"{device}, jax {m['jax_version']} {m['jax_backend']}, {result['budget_seconds']:g} s per run",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------ main


def merge(paths: list[Path], out: Path, note: str = "") -> int:
    """One result from several runs (e.g. sizes split over calls): sizes concatenated, per-run
    machine and command kept in `parts`. The runs must share the machine, budget and seed."""
    parts = [json.loads(p.read_text()) for p in paths]
    first = parts[0]
    for other in parts[1:]:
        for key in ("cpu_model", "affinity_cores", "jax_version", "jax_backend", "plbjax_sources_sha256"):
            if other["machine"].get(key) != first["machine"].get(key):
                raise SystemExit(f"cannot merge: machine {key} differs ({paths[0]} vs another)")
        if other["budget_seconds"] != first["budget_seconds"] or other["seed"] != first["seed"]:
            raise SystemExit("cannot merge: budget or seed differs")
    result = dict(
        first,
        sizes=[row for part in parts for row in part["sizes"]],
        chains=sorted({str(c) for part in parts for c in part["chains"]}),
        total_wall_seconds=sum(part["total_wall_seconds"] for part in parts),
        baseline_compile_seconds=max(part["baseline_compile_seconds"] for part in parts),
        command=" && ".join(part["command"] for part in parts),
        parts=[dict(file=p.name, command=part["command"], machine=part["machine"]) for p, part in zip(paths, parts)],
    )
    if note:
        result["note"] = note
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: sizes 100 and 1k, 3 s, 8/64 chains")
    ap.add_argument("--sizes", nargs="+", choices=list(SIZES), help="cluster sizes to run")
    ap.add_argument(
        "--chains",
        nargs="+",
        help="plbjax chain counts, or CxT for C chains of T tries per step, CxTrR with "
        "room R; suffix m: every independent accepted proposal applied (parallel moves), p: population "
        "annealing (default 8 64 256)",
    )
    ap.add_argument(
        "--reach",
        nargs="+",
        type=float,
        default=[],
        metavar="SECONDS",
        help="also run every configuration with these shorter budgets (circles in the plot) and report the "
        "shortest that reaches the baseline's final energy",
    )
    ap.add_argument("--seconds", type=float, help="wall-time budget per run (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--same-t0",
        action="store_true",
        help="every run starts at SF's T0 from the baseline's probe (default: each plbjax run probes its "
        "own, the baseline takes the first run's)",
    )
    ap.add_argument(
        "--profile-chains", type=int, default=64, help="chain count of the step-time breakdown (0: skip it)"
    )
    ap.add_argument("--profile-steps", type=int, default=200)
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="before each timed run wait up to this many seconds for other processes to go quiet",
    )
    ap.add_argument(
        "--out", type=Path, help="output path without suffix (default results/annealer_cpu; with --quick a temp dir)"
    )
    ap.add_argument("--note", default="", help="free text stored in the result (e.g. how the machine was set up)")
    ap.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="no run: merge these result files (sizes run separately) into --out (.json/.png)",
    )
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out or ROOT / "results" / "annealer_cpu", args.note)

    global WAIT_IDLE
    WAIT_IDLE = args.wait_idle
    sizes = args.sizes or (["100", "1k"] if args.quick else ["100", "1k", "10k", "100k"])
    chains = args.chains or ([8, 64] if args.quick else [8, 64, 256])
    seconds = args.seconds or (3.0 if args.quick else 20.0)
    out = args.out or (
        Path(tempfile.gettempdir()) / "annealer_cpu_quick" if args.quick else ROOT / "results" / "annealer_cpu"
    )
    out.parent.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    info = machine()
    print(
        f"machine: {info['cpu_model']}, {info['logical_cores']} cores, jax {info['jax_version']} "
        f"({info['jax_backend']}), load {info['load_average_at_start']}",
        flush=True,
    )
    numba_compile = compile_kernels()
    print(f"numba baseline compiled in {numba_compile:.1f} s (or loaded from its cache)", flush=True)

    rows = [
        bench_size(
            name,
            SIZES[name],
            chains,
            seconds,
            args.seed,
            args.profile_chains,
            args.profile_steps,
            args.same_t0,
            args.reach,
        )
        for name in sizes
    ]
    result = dict(
        description=(
            "plbjax anneal (vmapped chains, wall-time budget) vs a sequential numba annealer "
            "with the same energy, moves, validity rules and temperature schedule (plbjax's T0), "
            "same wall time per run; energies are SF energies (lower is better)"
        ),
        command=" ".join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv))),
        note=args.note,
        machine=info,
        budget_seconds=seconds,
        chains=chains,
        seed=args.seed,
        baseline_compile_seconds=numba_compile,
        total_wall_seconds=None,
        sizes=rows,
    )
    result["total_wall_seconds"] = time.perf_counter() - started
    json_path, png_path = out.with_suffix(".json"), out.with_suffix(".png")
    json_path.write_text(json.dumps(result, indent=1, default=float) + "\n")
    plot(result, png_path)

    print(
        "\n  size   replicas  best C  plbjax moves/s  baseline moves/s   initial E  plbjax E (s)"
        "        baseline E (s)       ratio"
    )
    for row in rows:
        s = row["summary"]
        print(
            f"{row['name']:>6} {row['replicas']:>10,} {s['plbjax_best_chains']:>7} "
            f"{s['plbjax_moves_per_second']:>15,.0f} {s['baseline_moves_per_second']:>17,.0f} "
            f"{s['initial_energy']:>11.5g} {s['plbjax_best_energy']:>10.5g} ({s['plbjax_seconds']:4.1f}) "
            f"{s['baseline_final_energy']:>12.5g} ({s['baseline_seconds']:4.1f}) {s['energy_ratio']:>10.3f}"
        )
        if s.get("reach_seconds"):
            print(
                f"        {s['reach_config']} reached the baseline's final energy in {s['reach_seconds']:.2f} s: "
                f"{s['reach_speedup']:.1f}x sooner"
            )
    print(f"\nwrote {json_path} and {png_path} in {result['total_wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
