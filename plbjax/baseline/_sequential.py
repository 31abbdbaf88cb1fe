"""One sequential simulated-annealing chain compiled with numba (see `plbjax.baseline`).

The same encoded arrays as plbjax (a `plbjax.sf.Problem`, converted to numpy once), the same replica
moves and primary swaps, the same validity rules, the same energy (SF's energy plus the
constraint-violation penalties) with the same incremental update as the SF model's `evaluate`,
Metropolis acceptance and the same geometric temperature schedule (T0 -> T0 * final_ratio over the
run), all in float64 and in plain sequential loops.

Differences that favour the baseline (it is the thing to beat):
  * only the chosen proposal is built (plbjax builds several kinds of proposal and selects one);
  * the best energy is tracked at every step, not at block boundaries: the best placement is kept
    as the current one plus an undo log of the moves accepted since, materialised only when the
    log grows past R + P entries or at the end (O(1) amortised per step);
  * float64 needs no frequent exact refresh: the statistics are recomputed from scratch every
    `refresh_steps` steps (default 100,000) instead of every 1,000.

Rules the baseline does not implement (affinity, preferred primary domains, defragmentation,
resource thresholds, history, closed nodes, the per-partition throttle) make `problem_arrays` raise
NotImplementedError; the benchmark's generated clusters use none of them. The movement throttles'
budget it honours: no step takes the chain past it. Nor does it propose exchanges (two replicas
trading nodes), which plbjax's model mixes in.

The modules: `_arrays` (the Problem as numpy arrays, the chain's state), `energy_of` (the energy and
penalty kernels), `_chain` (the step loop); this one is the driver (`run_baseline`, `energy`,
`probe_temperature`, `compile_kernels`). Kernels are cached on disk (numba cache=True:
plbjax/baseline/__pycache__/, git-ignored); a cold compile takes 15-30 s.
"""

from __future__ import annotations

import time

import numpy as np

from plbjax.baseline._arrays import ACC, BEST, LOGMODE, Arrays, E, State, problem_arrays
from plbjax.baseline._chain import anneal, materialise, seed_chain
from plbjax.baseline._energy import refresh_stats
from plbjax.sf import (
    ClusterSpec,
    ClusterState,
    Index,
    Search,
    encode,
    full_scope,
    generate,
    parse_state,
    scope,
)


def balancing_problem(state: ClusterState) -> tuple[Search, Index]:
    """The encoded cluster scoped like plan's balancing phase on a cluster where every service is
    imbalanced and nothing is throttled: everything may move (`full_scope`: every placed replica
    moves, stateful primaries swap with a placed secondary), no constraint may get worse."""
    problem, index = encode(state)
    return scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index)), index


def _new_state(A: Arrays, S: int, N: int, Ms: int) -> State:
    R, M = A.load_primary.shape
    P = A.partition_replicas.shape[0]
    log = R + P
    st = State(
        node_of=A.initial_node.copy(),
        primary_of=A.initial_primary.copy(),
        loads=np.zeros((N, M)),
        local=np.zeros((S, N, Ms)),
        g_total=np.zeros(M),
        g_sq=np.zeros(M),
        g_centre=np.zeros(M),
        l_total=np.zeros((S, Ms)),
        l_sq=np.zeros((S, Ms)),
        l_centre=np.zeros((S, Ms)),
        sc=np.zeros(9),
        best_node_of=A.initial_node.copy(),
        best_primary_of=A.initial_primary.copy(),
        log_kind=np.zeros(log, np.int64),
        log_index=np.zeros(log, np.int64),
        log_value=np.zeros(log, np.int64),
    )
    refresh_stats(A, st)
    st.sc[BEST] = st.sc[E]
    st.sc[LOGMODE] = 1  # best = current (empty log)
    return st


def _init(problem: Search | Arrays, seed: int):
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    S, Ms = A.service_metrics.shape
    N = A.node_up.shape[0]
    seed_chain(int(seed))
    return A, _new_state(A, S, N, Ms)


_compile_seconds: float | None = None


def compile_kernels() -> float:
    """Compile every kernel on a tiny problem; returns the seconds it took (0 once compiled)."""
    global _compile_seconds
    if _compile_seconds is not None:
        return 0.0
    start = time.perf_counter()
    tiny, _ = balancing_problem(
        parse_state(
            generate(0, ClusterSpec(nodes=8, services=2, partitions_per_service=2, fault_domains=2, upgrade_domains=2))
        )
    )
    A, st = _init(tiny, 0)
    anneal(A, st, 0, 20, 1.0, 1e-4, 0.3, 5, True)
    anneal(A, st, 0, 20, 1.0, 1e-4, 0.3, 5, False)
    materialise(st)
    _compile_seconds = time.perf_counter() - start
    return _compile_seconds


def energy(problem: Search | Arrays, node_of: np.ndarray, primary_of: np.ndarray) -> float:
    """The baseline's float64 energy of any placement (SF's energy plus the penalties), from scratch."""
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    S, Ms = A.service_metrics.shape
    st = _new_state(A, S, A.node_up.shape[0], Ms)
    st.node_of[:] = node_of
    st.primary_of[:] = primary_of
    refresh_stats(A, st)
    return float(st.sc[E])


def probe_temperature(
    problem: Search | Arrays, seed: int = 0, probes: int = 50, swap_probability: float = 0.3, factor: float = 50.0
) -> float:
    """SF's initial temperature: `factor` x the largest |dE| of `probes` random valid moves."""
    compile_kernels()
    A, st = _init(problem, seed)
    found = anneal(A, st, 0, probes, 1.0, 1.0, swap_probability, 1 << 62, True)
    return factor * found if found > 0 else max(float(st.sc[E]), 1.0)


def run_baseline(
    problem: Search | Arrays,
    steps: int | None = None,
    seed: int = 0,
    t0: float | None = None,
    final_ratio: float = 1e-4,
    swap_probability: float = 0.3,
    checkpoints: int = 50,
    seconds: float | None = None,
    refresh_steps: int = 100_000,
) -> dict:
    """Anneal one chain for `steps` steps, or (steps=None) for `seconds` of wall time.

    The schedule T0 -> T0 * final_ratio is geometric in the fraction of the run done, run in
    `checkpoints` chunks with (elapsed, best energy) recorded after each. With `seconds`, each chunk
    covers an equal share of the remaining schedule and gets the steps the measured rate fits into
    an equal share of the remaining time (as plbjax fits its blocks to a budget), so the run ends
    at the final temperature close to `seconds`. Compilation is excluded (kernels are compiled on
    a tiny problem first). Returns dict(best_energy, initial_energy, energy_trace=[(seconds, best)],
    steps, seconds, accepted, t0, node_of, primary_of (the best placement), compile_seconds).
    """
    compile_s = compile_kernels()
    A = problem if isinstance(problem, Arrays) else problem_arrays(problem)
    if t0 is None:
        t0 = probe_temperature(A, seed, swap_probability=swap_probability)
    if steps is None and seconds is None:
        raise ValueError("give steps or seconds")
    chunks = max(int(checkpoints), 1)
    rate = _calibrate(A, seconds, seed, t0, swap_probability, refresh_steps) if steps is None else 0.0
    A, st = _init(A, seed)
    initial = float(st.sc[E])
    temperature = lambda frac: float(t0) * float(final_ratio) ** frac
    trace = [(0.0, initial)]
    done, frac, elapsed = 0, 0.0, 0.0
    start = time.perf_counter()
    for k in range(chunks):
        left = chunks - k
        if steps is not None:
            n = (int(steps) * (k + 1)) // chunks - done
        else:
            assert seconds is not None  # steps or seconds is given
            if done:
                rate = done / elapsed
            n = int(rate * max(seconds - elapsed, 0.0) / left)
        n = max(n, 1)
        nxt = frac + (1.0 - frac) / left
        anneal(A, st, done, n, temperature(frac), temperature(nxt), float(swap_probability), int(refresh_steps), False)
        done, frac = done + n, nxt
        elapsed = time.perf_counter() - start
        trace.append((elapsed, float(st.sc[BEST])))
    materialise(st)
    return dict(
        best_energy=float(st.sc[BEST]),
        initial_energy=initial,
        energy_trace=trace,
        steps=done,
        seconds=elapsed,
        accepted=int(st.sc[ACC]),
        t0=float(t0),
        node_of=st.best_node_of.copy(),
        primary_of=st.best_primary_of.copy(),
        compile_seconds=compile_s,
    )


def _calibrate(A, seconds, seed, t0, swap_probability, refresh_steps) -> float:
    """Steps per second of a short hot run (>= 1% of the budget; the run then re-measures itself)."""
    n = 20_000
    while True:
        _, st = _init(A, seed)
        start = time.perf_counter()
        anneal(A, st, 0, n, float(t0), float(t0), float(swap_probability), int(refresh_steps), False)
        took = time.perf_counter() - start
        if took >= max(0.01 * seconds, 0.02) or n >= 1 << 34:
            return n / took
        n *= 4
