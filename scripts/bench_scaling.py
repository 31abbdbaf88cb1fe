"""Benchmark: how plbjax's Service Fabric annealer scales with chains, cluster size and memory.

Three sections, written together to PREFIX.json (with the machine and the command line) and drawn
in PREFIX.png:

kernel  moves/s of the full SF step (`plbjax.anneal.step` with `plbjax.sf.model()`: replica moves
        and primary swaps, every SF rule, incremental energy) against a minimal move kernel defined
        here (one random replica to one random node, capacity and replica-exclusion checks, change of
        the sum of squared node loads, Metropolis) on the same encoded cluster in the same run, at
        several chain counts: chains x steps / seconds, compile excluded, best of 3. Memory per chain:
        bytes of one chain's state; XLA's footprint of the compiled step loop (arguments, outputs and
        temporaries, less the shared problem) divided by the chains; on a GPU the allocator's peak
        over creating the chains, compiling and running, less what was in use before, divided by the
        chains (only when that peak is a new high of the process: the allocator's peak cannot be reset).
growth  both kernels' time per step at a fixed chain count, varying one of replicas, nodes and metrics
        at a time around a base cluster; with the generation, parsing, encoding and compile seconds.
fit     a large cluster (--big: 10,000 nodes, 1,000,000 replicas, 8 metrics; otherwise a small
        stand-in) annealed by `anneal` for a wall-time budget: initial vs best energy, steps, seconds,
        device memory.

Both kernels run at T = the median over chains of the largest |dE| of a valid move in a greedy
probe run (SF's T0 / 50); every write is masked, so the temperature changes acceptance, not cost.

    python scripts/bench_scaling.py --quick --out results/scaling_cpu_quick   # ~2 minutes on 2 CPU cores
    PYTHONPATH=. python3 scripts/bench_scaling.py --big --out results/scaling_h100   # ~6 minutes on one H100

The fit section runs first so that on a GPU its allocator peak is its own. Building the 1,000,000-replica
cluster is the slow part of --big, on the host's CPU: generate + parse_state + encode took 2-2.5 minutes
on the H100 machine (10,000 nodes, 8 metrics; parse_state most of it), about 20 s per 100,000 replicas
on a 2-core CPU, so --big leaves 1,000,000 out of the growth grid. --time-limit (default 500 s in full
mode) skips the measurements not yet started once it has passed.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from plbjax import anneal as A
from plbjax.baseline import (
    CLUSTER_SEED,
    SIZES,
    Contention,
    balancing_problem,
    machine,
    timed,
)
from plbjax.sf import ClusterSpec, Search, generate, model, parse_state
from plbjax.sf._model import energy as E  # the engine's exact energy and AvgStdDev of a placement (not exported)

MODEL = model()  # SF's search, SF's swap probability

QUICK = dict(
    kernel_size="1k",
    chains=[16, 256],
    steps=1000,
    growth_chains=16,
    growth_steps=1000,
    replicas=[1000, 5000],
    nodes=[50, 200],
    metrics=[2, 4],
    base_replicas=1000,
    base_nodes=50,
    base_metrics=2,
    fit_nodes=200,
    fit_replicas=20_000,
    fit_metrics=8,
    fit_chains=16,
    fit_seconds=10.0,
    time_limit=0.0,
)
FULL = dict(
    kernel_size="10k",
    chains=[1024, 16384, 65536],
    steps=1000,
    growth_chains=1024,
    growth_steps=500,
    replicas=[1000, 10_000, 100_000, 300_000, 1_000_000],
    nodes=[100, 1000, 10_000],
    metrics=[2, 4, 8],
    base_replicas=100_000,
    base_nodes=1000,
    base_metrics=4,
    fit_nodes=200,
    fit_replicas=20_000,
    fit_metrics=8,
    fit_chains=256,
    fit_seconds=60.0,
    time_limit=500.0,
)
BIG = dict(fit_nodes=10_000, fit_replicas=1_000_000, fit_metrics=8, replicas=[1000, 10_000, 100_000, 300_000])


# ------------------------------------------------------------------------------------ clusters


def cluster_spec(replicas: int, nodes: int, metrics: int, services: int) -> ClusterSpec:
    """About `replicas` replicas (3 per partition) on `nodes` nodes, shaped like bench_annealer's SIZES."""
    return ClusterSpec(
        nodes=nodes,
        fault_domains=min(10, nodes),
        upgrade_domains=min(10, nodes),
        metrics=metrics,
        services=services,
        partitions_per_service=max(1, round(replicas / (3 * services))),
        skew=0.8,
    )


def build(spec: ClusterSpec) -> tuple[Search, dict]:
    """The encoded cluster (bench_annealer's balancing scope) and its sizes and build seconds."""
    start = time.perf_counter()
    doc = generate(CLUSTER_SEED, spec)
    generated = time.perf_counter()
    state = parse_state(doc)
    parsed = time.perf_counter()
    problem, index = balancing_problem(state)
    encoded = time.perf_counter()
    return problem, dict(
        spec=dataclasses.asdict(spec),
        replicas=index.n_replicas,
        nodes=index.n_nodes,
        partitions=index.n_partitions,
        metrics=len(index.metrics),
        padded_shape=problem.cluster.shape,
        generate_seconds=generated - start,
        parse_seconds=parsed - generated,
        encode_seconds=encoded - parsed,
    )


def tree_bytes(tree) -> int:
    """Bytes of a pytree's arrays."""
    return sum(x.nbytes for x in jax.tree.leaves(tree))


# ------------------------------------------------------------------------------------ minimal kernel


class MinimalProblem(NamedTuple):
    capacity: jax.Array  # [N, M] (inf: unlimited)
    load: jax.Array  # [R, M] each replica's load in its initial role
    partition: jax.Array  # [R]
    partition_replicas: jax.Array  # [P, K] (-1 padded)
    initial_node: jax.Array  # [R] (-1: unplaced or padding)
    movable: jax.Array  # replicas that may move
    targets: jax.Array  # nodes that may receive a replica


class MinimalChain(NamedTuple):
    node_of: jax.Array  # [R]
    loads: jax.Array  # [N, M]
    energy: jax.Array  # sum of squared node loads
    key: jax.Array
    accepted: jax.Array
    largest_delta: jax.Array  # largest |dE| of a valid move (the temperature probe)


def minimal_problem(search: Search) -> MinimalProblem:
    """The minimal kernel's inputs, taken from the encoded cluster and scope the full kernel runs on."""
    problem, within = search.cluster, search.scope
    partition = np.maximum(np.asarray(problem.replica_partition), 0)
    primary = np.asarray(within.origin_primary)[partition] == np.arange(partition.shape[0])
    load = np.where(primary[:, None], np.asarray(problem.load_primary), np.asarray(problem.load_secondary))
    targets = np.flatnonzero(np.asarray(within.node_open & problem.node_up))
    return MinimalProblem(
        capacity=problem.capacity.astype(jnp.float32),
        load=jnp.asarray(load, jnp.float32),
        partition=jnp.asarray(partition, jnp.int32),
        partition_replicas=problem.partition_replicas,
        initial_node=within.origin_node,
        movable=within.movable[: int(within.n_movable)],
        targets=jnp.asarray(targets, jnp.int32),
    )


def minimal_chains(mp: MinimalProblem, keys: jax.Array) -> MinimalChain:
    """One minimal chain per key, all at the initial placement."""
    placed = mp.initial_node >= 0
    loads = (
        jnp.zeros(mp.capacity.shape, jnp.float32)
        .at[jnp.maximum(mp.initial_node, 0)]
        .add(jnp.where(placed[:, None], mp.load, 0.0))
    )
    n = keys.shape[0]
    tile = lambda x: jnp.broadcast_to(x, (n,) + x.shape)
    return MinimalChain(
        node_of=tile(mp.initial_node),
        loads=tile(loads),
        energy=tile(jnp.sum(loads**2)),
        key=keys,
        accepted=jnp.zeros(n, jnp.int32),
        largest_delta=jnp.zeros(n, jnp.float32),
    )


def minimal_step(mp: MinimalProblem, c: MinimalChain, temperature: jax.Array) -> MinimalChain:
    """One random replica to one random node: capacity and exclusion checks, Metropolis on sum(loads^2)."""
    words = jax.random.bits(c.key, (5,), jnp.uint32)
    r = mp.movable[A.draw(words[0], mp.movable.shape[0])]
    t = mp.targets[A.draw(words[1], mp.targets.shape[0])]
    a, load = c.node_of[r], mp.load[r]
    mates = mp.partition_replicas[mp.partition[r]]
    clash = jnp.any((mates >= 0) & (c.node_of[jnp.maximum(mates, 0)] == t))  # r itself when t == a
    valid = ~clash & jnp.all(c.loads[t] + load <= mp.capacity[t])
    delta = 2.0 * jnp.sum(load * (load + c.loads[t] - c.loads[a]))
    accept = valid & ((delta <= 0) | (A.uniform(words[2]) < jnp.exp(-delta / jnp.maximum(temperature, 1e-30))))
    moved = jnp.where(accept, load, 0.0)
    return MinimalChain(
        node_of=c.node_of.at[r].set(jnp.where(accept, t, a)),
        loads=c.loads.at[a].add(-moved).at[t].add(moved),
        energy=c.energy + jnp.where(accept, delta, 0.0),
        key=words[3:],
        accepted=c.accepted + accept.astype(jnp.int32),
        largest_delta=jnp.maximum(c.largest_delta, jnp.where(valid, jnp.abs(delta), 0.0)),
    )


# ------------------------------------------------------------------------------------ measuring


def step_loop(step: Callable, steps: int):
    """jit(problem, chains, temperature) -> the chains after `steps` vmapped `step(problem, chain, T)`."""

    def run(problem, chains, temperature):
        batched = jax.vmap(step, in_axes=(None, 0, None))
        return jax.lax.fori_loop(0, steps, lambda _, c: batched(problem, c, temperature), chains)

    return jax.jit(run)


def full_step(problem: Search, chain: A.Chain, temperature: jax.Array, config: A.KernelConfig | None = None) -> A.Chain:
    """plbjax's SF step (by default one proposal, SF's swap probability)."""
    return A.step(MODEL, problem, config or A.KernelConfig(), chain, temperature)


KERNELS = {
    "minimal": (minimal_problem, minimal_chains, minimal_step),
    "full": (lambda problem: problem, lambda problem, keys: A.init_chains(MODEL, problem, keys), full_step),
}


def device_memory() -> dict | None:
    """The device allocator's statistics (None on backends without them, e.g. CPU)."""
    return jax.devices()[0].memory_stats()


def device_peak_per_chain(before: dict | None, after: dict | None, chains: int) -> float | None:
    """Peak bytes over a span less those in use before it, per chain; None unless the peak is this span's."""
    if before is None or after is None or after["peak_bytes_in_use"] <= before["peak_bytes_in_use"]:
        return None
    return (after["peak_bytes_in_use"] - before["bytes_in_use"]) / chains


def measure(
    kernel: str, problem: Search, chains: int, steps: int, seed: int, tries: int = 1, room: int | None = None
) -> dict:
    """One kernel's moves/s, compile seconds, acceptance and memory at `chains` chains on `problem`.
    With `tries` > 1 (full kernel only): chains / tries chains, each proposing `tries` moves a step and
    applying every independent accepted one (parallel moves, `room` finished), so a step proposes
    as many moves as `chains` one-move chains."""
    inputs, make_chains, step = KERNELS[kernel]
    if tries > 1:
        step = functools.partial(step, config=A.KernelConfig(tries=tries, room=room, parallel=True))
        chains = max(1, chains // tries)
    data = inputs(problem)
    before = device_memory()
    state = make_chains(data, jax.random.split(jax.random.PRNGKey(seed), chains))
    loop = step_loop(step, steps)
    start = time.perf_counter()
    compiled = loop.lower(data, state, jnp.float32(0.0)).compile()
    compile_seconds = time.perf_counter() - start
    mem = compiled.memory_analysis()
    footprint = (
        mem.argument_size_in_bytes
        + mem.output_size_in_bytes
        + mem.temp_size_in_bytes
        - mem.alias_size_in_bytes
        - tree_bytes(data)
    )
    temperature = jnp.float32(np.median(np.asarray(compiled(data, state, jnp.float32(0.0)).largest_delta)))
    with Contention() as busy:
        _, seconds = timed(compiled, data, state, temperature)
    accepted = int(np.asarray(compiled(data, state, temperature).accepted).sum())
    peak = device_peak_per_chain(before, device_memory(), chains)
    return dict(
        chains=chains,
        tries=tries,
        room=A.KernelConfig(tries=tries, room=room).step_room,
        steps=steps,
        seconds=seconds,
        moves_per_second=chains * tries * steps / seconds,
        step_us=1e6 * seconds / steps,
        compile_seconds=compile_seconds,
        temperature=float(temperature),
        accepted_fraction=accepted / (chains * steps),
        state_bytes_per_chain=tree_bytes(state) / chains,
        xla_bytes_per_chain=footprint / chains,
        xla_temp_bytes=mem.temp_size_in_bytes,
        device_peak_bytes_per_chain=peak,
        other_processes_cores=busy.other_cores,
    )


def attempt(fn: Callable, *args) -> dict:
    """fn(*args), or the error it raised on the device (e.g. out of memory) so the other measurements go on."""
    try:
        return fn(*args)
    except jax.errors.JaxRuntimeError as err:
        print(f"   failed: {str(err).splitlines()[0][:200]}", flush=True)
        return dict(error=str(err)[:2000])


# ------------------------------------------------------------------------------------ sections


class Recorder:
    """The result document, written to PATH.json after every measurement, and the --time-limit clock."""

    def __init__(self, path: Path, time_limit: float, result: dict):
        self.path, self.time_limit, self.result = path, time_limit, result
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.started

    def expired(self) -> bool:
        """Whether measurements not yet started should be skipped."""
        return bool(self.time_limit) and self.elapsed() > self.time_limit

    def save(self) -> None:
        """Write the result as it stands."""
        self.result["total_wall_seconds"] = self.elapsed()
        self.path.with_suffix(".json").write_text(json.dumps(self.result, indent=1, default=float) + "\n")


def bench_kernels(args, rec: Recorder) -> None:
    """Minimal vs full kernel moves/s and memory per chain on one cluster, at each chain count."""
    problem, info = build(SIZES[args.kernel_size])
    section = rec.result["kernel"] = dict(size=args.kernel_size, cluster=info, steps=args.steps, runs=[])
    print(
        f"== kernel: {info['replicas']:,} replicas on {info['nodes']} nodes, {info['metrics']} metrics "
        f"(built in {info['generate_seconds'] + info['parse_seconds'] + info['encode_seconds']:.1f} s)",
        flush=True,
    )
    for chains in sorted(args.chains):
        if rec.expired():
            print(f"   {chains} chains skipped: --time-limit reached", flush=True)
            continue
        run = {
            kernel: attempt(measure, kernel, problem, chains, args.steps, args.seed) for kernel in ("minimal", "full")
        }
        if args.full_tries > 1:
            run["full_tries"] = attempt(
                measure, "full", problem, chains, args.steps, args.seed, args.full_tries, args.full_room
            )
            if "error" not in run["minimal"] and "error" not in run["full_tries"]:
                run["full_tries_over_minimal"] = (
                    run["full_tries"]["moves_per_second"] / run["minimal"]["moves_per_second"]
                )
                print(
                    f"   {chains:6d} proposals a step as {run['full_tries']['chains']} chains x {args.full_tries} "
                    f"tries: full {run['full_tries']['moves_per_second']:14,.0f} moves/s, "
                    f"full/minimal {run['full_tries_over_minimal']:.3f}",
                    flush=True,
                )
        run["chains"] = chains
        if "error" not in run["minimal"] and "error" not in run["full"]:
            run["full_over_minimal"] = run["full"]["moves_per_second"] / run["minimal"]["moves_per_second"]
            print(
                f"   {chains:6d} chains: minimal {run['minimal']['moves_per_second']:14,.0f} moves/s, full "
                f"{run['full']['moves_per_second']:14,.0f} moves/s, full/minimal {run['full_over_minimal']:.3f}; "
                f"bytes/chain {run['minimal']['state_bytes_per_chain']:,.0f} / "
                f"{run['full']['state_bytes_per_chain']:,.0f} (compile {run['minimal']['compile_seconds']:.1f} / "
                f"{run['full']['compile_seconds']:.1f} s)",
                flush=True,
            )
        section["runs"].append(run)
        rec.save()


def growth_points(args) -> list[tuple[int, int, int]]:
    """(replicas, nodes, metrics) varying one factor at a time around the base, each once, in run order."""
    base = (args.base_replicas, args.base_nodes, args.base_metrics)
    points = (
        [(r, base[1], base[2]) for r in args.replicas]
        + [(base[0], n, base[2]) for n in args.nodes]
        + [(base[0], base[1], m) for m in args.metrics]
    )
    return list(dict.fromkeys(points))


def bench_growth(args, rec: Recorder) -> None:
    """Both kernels' step time at a fixed chain count over the growth grid."""
    base = dict(replicas=args.base_replicas, nodes=args.base_nodes, metrics=args.base_metrics)
    section = rec.result["growth"] = dict(
        chains=args.growth_chains, steps=args.growth_steps, services=args.services, base=base, rows=[]
    )
    print(f"== growth: {args.growth_chains} chains, {args.growth_steps} steps", flush=True)
    for replicas, nodes, metrics in growth_points(args):
        if rec.expired():
            print(
                f"   {replicas:,} replicas / {nodes} nodes / {metrics} metrics skipped: --time-limit reached",
                flush=True,
            )
            continue
        problem, info = build(cluster_spec(replicas, nodes, metrics, args.services))
        row = dict(target=dict(replicas=replicas, nodes=nodes, metrics=metrics), cluster=info)
        for kernel in ("minimal", "full"):
            row[kernel] = attempt(measure, kernel, problem, args.growth_chains, args.growth_steps, args.seed)
        section["rows"].append(row)
        rec.save()
        full, minimal = row["full"], row["minimal"]
        if "error" not in full and "error" not in minimal:
            print(
                f"   {info['replicas']:>9,} replicas {info['nodes']:>6} nodes {info['metrics']} metrics: full "
                f"{full['step_us']:9.1f} us/step, minimal {minimal['step_us']:8.1f} us/step (built in "
                f"{info['generate_seconds'] + info['parse_seconds'] + info['encode_seconds']:.1f} s, compile "
                f"{full['compile_seconds']:.1f} s)",
                flush=True,
            )


def bench_fit(args, rec: Recorder) -> None:
    """`anneal` on the large cluster for a wall-time budget: does it fit, does it improve."""
    if rec.expired():
        print("== fit skipped: --time-limit reached", flush=True)
        return
    spec = cluster_spec(args.fit_replicas, args.fit_nodes, args.fit_metrics, args.services)
    print(f"== fit: generating {spec.total_replicas:,} replicas on {spec.nodes:,} nodes", flush=True)
    problem, info = build(spec)
    fit = rec.result["fit"] = dict(
        big=args.big, cluster=info, chains=args.fit_chains, tries=args.fit_tries, budget_seconds=args.fit_seconds
    )
    rec.save()
    print(
        f"   built in {info['generate_seconds']:.1f} + {info['parse_seconds']:.1f} + {info['encode_seconds']:.1f} s "
        "(generate + parse + encode); annealing",
        flush=True,
    )
    trace = []
    kernel = A.KernelConfig(tries=args.fit_tries)
    schedule = A.Schedule(chains=args.fit_chains, steps=None, seconds=args.fit_seconds, seed=args.seed)
    before = device_memory()
    start = time.perf_counter()
    with Contention() as busy:
        res = attempt(
            A.anneal,
            MODEL,
            problem,
            kernel,
            schedule,
            lambda done, blocks, elapsed, best: trace.append((elapsed, best)),
        )
    if isinstance(res, dict):
        fit.update(res)
        rec.save()
        return
    after = device_memory()
    node_of, primary_of = (jnp.asarray(x) for x in res.solution)
    fit.update(
        total_seconds=time.perf_counter() - start,
        seconds=res.seconds,
        compile_seconds=res.compile_seconds,
        steps_per_chain=res.steps,
        moves_per_second=args.fit_chains * args.fit_tries * res.steps / res.seconds,
        initial_energy=res.initial_energy,
        best_energy=res.energy,
        improved=res.energy < res.initial_energy,
        recomputed_energy=float(E.energy_of(problem, node_of, primary_of)),
        avg_std_dev_before=float(
            E.avg_std_dev(problem.cluster, problem.cluster.initial_node, problem.cluster.initial_primary)
        ),
        avg_std_dev_after=float(E.avg_std_dev(problem.cluster, node_of, primary_of)),
        state_bytes_per_chain=tree_bytes(A.init_chains(MODEL, problem, jax.random.split(jax.random.PRNGKey(0), 2))) / 2,
        device_bytes_in_use_before=before and before["bytes_in_use"],
        device_peak_bytes=after and after["peak_bytes_in_use"],  # of the process so far
        device_peak_bytes_per_chain=device_peak_per_chain(before, after, args.fit_chains),
        other_processes_cores=busy.other_cores,
        energy_trace=[(0.0, res.initial_energy)] + trace,
    )
    rec.save()
    print(
        f"   {args.fit_chains} chains x {args.fit_tries} tries: E {fit['initial_energy']:.6g} -> "
        f"{fit['best_energy']:.6g} in {fit['steps_per_chain']:,} steps/chain, {fit['seconds']:.1f} s (+ compile "
        f"{fit['compile_seconds']:.1f} s), {fit['moves_per_second']:,.0f} moves/s, "
        f"{fit['state_bytes_per_chain'] / 2**20:.1f} MiB state/chain"
        + (
            f", device peak {fit['device_peak_bytes_per_chain'] / 2**20:.1f} MiB/chain"
            if fit["device_peak_bytes_per_chain"]
            else ""
        ),
        flush=True,
    )


# ------------------------------------------------------------------------------------ plot

STYLES = {"minimal": dict(color="tab:gray", marker="s"), "full": dict(color="tab:blue", marker="o")}
FACTORS = ("replicas", "nodes", "metrics")


def _ok(runs: list[dict], kernel: str) -> list[dict]:
    """The runs whose `kernel` measurement succeeded."""
    return [r for r in runs if kernel in r and "error" not in r[kernel]]


def _count(v: int) -> str:
    """A count as a tick label: 300k, 1M for round values, else in full."""
    if v >= 1_000_000 and v % 1_000_000 == 0:
        return f"{v // 1_000_000}M"
    return f"{v // 1000}k" if v >= 10_000 and v % 1000 == 0 else f"{v:,}"


def _ticks(ax, values: list[int]) -> None:
    """x ticks at the measured values only (call after setting the scale)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(sorted(set(values)), [_count(v) for v in sorted(set(values))])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _not_run(ax, title: str) -> None:
    """An empty panel that says so."""
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes, color="gray")


def plot_throughput(ax, kernel: dict | None) -> None:
    """Moves/s of both kernels against chains, each point labelled with full / minimal."""
    if not kernel or not _ok(kernel["runs"], "full"):
        return _not_run(ax, "throughput")
    for name, style in STYLES.items():
        runs = _ok(kernel["runs"], name)
        ax.plot([r["chains"] for r in runs], [r[name]["moves_per_second"] for r in runs], label=name, **style)
    tried = [r for r in kernel["runs"] if "full_tries_over_minimal" in r]
    if tried:
        t = tried[0]["full_tries"]
        ax.plot(
            [r["chains"] for r in tried],
            [r["full_tries"]["moves_per_second"] for r in tried],
            "s--",
            color="tab:green",
            label=f"full, {t['tries']} tries a chain (room {t['room']}), parallel",
        )
        for r in tried:
            ax.annotate(
                f"{r['full_tries_over_minimal']:.2f}x",
                (r["chains"], r["full_tries"]["moves_per_second"]),
                textcoords="offset points",
                xytext=(4, -12),
                fontsize=8,
                color="tab:green",
            )
    for r in kernel["runs"]:
        if "full_over_minimal" in r:
            ax.annotate(
                f"{r['full_over_minimal']:.2f}x",
                (r["chains"], r["full"]["moves_per_second"]),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=8,
                color="tab:blue",
            )
    c = kernel["cluster"]
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="chains (proposals a step)",
        ylabel="moves / second",
        title=f"throughput, {c['replicas']:,} replicas, {c['nodes']} nodes (label: full / minimal)",
    )
    _ticks(ax, [r["chains"] for r in kernel["runs"]])


def plot_memory(ax, kernel: dict | None) -> None:
    """Bytes per chain against chains: chain state, XLA footprint of the step loop, device peak."""
    if not kernel or not _ok(kernel["runs"], "full"):
        return _not_run(ax, "memory per chain")
    for name, style in STYLES.items():
        runs = _ok(kernel["runs"], name)
        x = [r["chains"] for r in runs]
        ax.plot(x, [r[name]["state_bytes_per_chain"] for r in runs], ls="--", label=f"{name}: state", **style)
        ax.plot(x, [r[name]["xla_bytes_per_chain"] for r in runs], label=f"{name}: XLA footprint", **style)
        peaks = [
            (r["chains"], r[name]["device_peak_bytes_per_chain"])
            for r in runs
            if r[name]["device_peak_bytes_per_chain"]
        ]
        if peaks:
            x, y = zip(*peaks)
            ax.plot(x, y, ls=":", label=f"{name}: device peak", **style)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="chains",
        ylabel="bytes per chain",
        title="memory per chain (footprint: in + out + temporaries)",
    )
    _ticks(ax, [r["chains"] for r in kernel["runs"]])


def plot_fit(ax, fit: dict | None) -> None:
    """Best energy against wall seconds of the fit run."""
    if not fit or "energy_trace" not in fit:
        return _not_run(ax, "fit" if not fit else f"fit failed: {fit.get('error', '')[:60]}")
    t, e = zip(*fit["energy_trace"])
    ax.step(t, e, where="post", color="tab:blue")
    c = fit["cluster"]
    ax.set(xlabel="wall seconds (compile excluded)", ylabel="best energy")
    ax.set_title(
        f"fit: {c['replicas']:,} replicas, {c['nodes']:,} nodes, {c['metrics']} metrics, "
        f"{fit['chains']} chains\nE {fit['initial_energy']:.4g} -> {fit['best_energy']:.4g} "
        f"in {fit['seconds']:.0f} s",
        fontsize=10,
    )


def plot_growth(ax, growth: dict | None, factor: str) -> None:
    """Both kernels' step time against one factor, the others at the base."""
    base = growth["base"] if growth else {}
    others = [k for k in FACTORS if k != factor]
    rows = [r for r in growth["rows"] if all(r["target"][k] == base[k] for k in others)] if growth else []
    if not _ok(rows, "full"):
        return _not_run(ax, f"step time vs {factor}")
    for name, style in STYLES.items():
        ok = sorted(_ok(rows, name), key=lambda r: r["target"][factor])
        ax.plot([r["target"][factor] for r in ok], [r[name]["step_us"] for r in ok], label=name, **style)
    ax.set(
        xscale="linear" if factor == "metrics" else "log",
        yscale="log",
        xlabel=f"{factor} (requested)",
        ylabel=f"us per step ({growth['chains']} chains)",
        title=f"step time vs {factor} (" + ", ".join(f"{base[k]:,} {k}" for k in others) + ")",
    )
    _ticks(ax, [r["target"][factor] for r in _ok(rows, "full")])


def plot(result: dict, path: Path) -> None:
    """Throughput, memory, fit and step-time growth panels in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    plot_throughput(axes[0, 0], result.get("kernel"))
    plot_memory(axes[0, 1], result.get("kernel"))
    plot_fit(axes[0, 2], result.get("fit"))
    for ax, factor in zip(axes[1], FACTORS):
        plot_growth(ax, result.get("growth"), factor)
    for ax in axes.flat:
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    m = result["machine"]
    fig.suptitle(
        f"plbjax scaling on {m['cpu_model']} ({m['logical_cores']} cores), {m['jax_device_kind']}, "
        f"jax {m['jax_version']} {m['jax_backend']}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------ main


def parse_args(argv) -> argparse.Namespace:
    """Command-line options; unset ones from the --big, then --quick or full defaults."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes for a CPU smoke run (<= 3 minutes on 2 cores)")
    ap.add_argument(
        "--big",
        action="store_true",
        help="fit section on 10,000 nodes, 1,000,000 replicas, 8 metrics (growth replicas up to 300,000)",
    )
    ap.add_argument(
        "--sections",
        nargs="+",
        choices=["fit", "kernel", "growth"],
        default=["fit", "kernel", "growth"],
        help="what to run (in this order)",
    )
    ap.add_argument("--kernel-size", choices=list(SIZES), help="bench_annealer cluster of the kernel comparison")
    ap.add_argument("--chains", nargs="+", type=int, help="chain counts of the kernel comparison")
    ap.add_argument("--steps", type=int, help="steps per timed run of the kernel comparison")
    ap.add_argument(
        "--full-tries",
        type=int,
        default=1,
        help="also time the full step with this many proposals per step (parallel moves) at chains / "
        "tries chains: as many proposals a step as the minimal kernel's",
    )
    ap.add_argument("--full-room", type=int, help="room of the --full-tries runs (default: KernelConfig's)")
    ap.add_argument("--growth-chains", type=int, help="chains of the growth runs")
    ap.add_argument("--growth-steps", type=int, help="steps per timed growth run")
    ap.add_argument("--replicas", nargs="+", type=int, help="replica counts of the growth grid")
    ap.add_argument("--nodes", nargs="+", type=int, help="node counts of the growth grid")
    ap.add_argument("--metrics", nargs="+", type=int, help="metric counts of the growth grid")
    ap.add_argument("--base-replicas", type=int, help="replicas while nodes or metrics vary")
    ap.add_argument("--base-nodes", type=int, help="nodes while replicas or metrics vary")
    ap.add_argument("--base-metrics", type=int, help="metrics while replicas or nodes vary")
    ap.add_argument("--services", type=int, default=20, help="services of generated growth and fit clusters")
    ap.add_argument("--fit-nodes", type=int)
    ap.add_argument("--fit-replicas", type=int)
    ap.add_argument("--fit-metrics", type=int)
    ap.add_argument("--fit-chains", type=int)
    ap.add_argument("--fit-tries", type=int, default=1, help="proposals per step in the fit run")
    ap.add_argument("--fit-seconds", type=float, help="wall-time budget of the fit run")
    ap.add_argument(
        "--time-limit", type=float, help="seconds after which measurements not yet started are skipped (0: none)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="output path without suffix (default results/scaling_<backend>)")
    args = ap.parse_args(argv)
    for defaults in (BIG if args.big else {}, QUICK if args.quick else FULL):
        for name, value in defaults.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    info = machine()
    out = args.out or Path(__file__).resolve().parents[1] / "results" / f"scaling_{info['jax_backend']}"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"machine: {info['cpu_model']}, {info['logical_cores']} cores, {info['jax_device_kind']}, "
        f"jax {info['jax_version']} ({info['jax_backend']})",
        flush=True,
    )
    rec = Recorder(
        out,
        args.time_limit,
        dict(
            description=(
                "plbjax scaling: full SF step vs a minimal move kernel (moves/s, memory per chain), step "
                "time vs replicas/nodes/metrics, and a large cluster annealed within a wall-time budget"
            ),
            command=" ".join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv))),
            machine=info,
            options={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        ),
    )
    sections = dict(kernel=bench_kernels, fit=bench_fit, growth=bench_growth)
    for name in args.sections:
        sections[name](args, rec)
    rec.save()
    plot(rec.result, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')} in {rec.elapsed():.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
