"""The numba baseline: one sequential simulated-annealing chain, compiled, for Service Fabric's problem.

It is the annealer a user would write instead of plbjax, and the baseline every performance claim
about plbjax is a ratio against (scripts/bench_annealer.py, bench_cli.py, bench_scaling.py). It is
kept apart on purpose: it re-implements SF's energy, its constraint penalties, the moves and their
validity rules independently, in float64 numpy/numba loops, reading only the encoded `Problem`, so
that it also checks plbjax's jitted code (tests/baseline/test_baseline.py) rather than sharing its mistakes.
`plbjax-baseline` (plbjax.cli) plans with it: `sequential_plan` writes its best placement as a plan
document of plbjax's shape, under SF's movement throttles.

numba is a test and benchmark extra (`pip install plbjax[test]`): importing `plbjax.baseline` needs it.

    from plbjax.baseline import balancing_problem, run_baseline
    problem, index = balancing_problem(state)
    out = run_baseline(problem, steps=1_000_000, seed=0)      # or seconds=10.0

The benchmark scripts' shared helpers (cluster sizes, machine description, contention, waiting for
an idle machine, timing) are here too.
"""

from plbjax.baseline._arrays import Arrays, problem_arrays
from plbjax.baseline._bench import (
    CLUSTER_SEED,
    SIZES,
    Contention,
    machine,
    timed,
    wait_idle,
)
from plbjax.baseline._energy import domain_violation
from plbjax.baseline._plan import SequentialPlan, balancing_limits, sequential_plan
from plbjax.baseline._sequential import (
    balancing_problem,
    compile_kernels,
    energy,
    probe_temperature,
    run_baseline,
)

__all__ = [
    "CLUSTER_SEED",
    "SIZES",
    "Arrays",
    "Contention",
    "SequentialPlan",
    "balancing_limits",
    "balancing_problem",
    "compile_kernels",
    "domain_violation",
    "energy",
    "machine",
    "probe_temperature",
    "problem_arrays",
    "run_baseline",
    "sequential_plan",
    "timed",
    "wait_idle",
]
