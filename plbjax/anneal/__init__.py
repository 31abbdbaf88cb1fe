"""A problem-agnostic simulated annealer: many chains, vmapped and jitted, for any `Model`.

A `Model` says how a problem is searched (start, propose, finish, apply, refresh, solution and
footprints, typed by the Protocols in `plbjax.anneal`); `KernelConfig` shapes the compiled step,
`Schedule` sets the chains, budget and temperatures; `anneal` runs them. The pure kernels (`init`,
`step`, `run_block`) are here for those who drive chains themselves; `check_model` checks a model
against its contract (for a problem's tests). Nothing here knows of Service Fabric or ROADEF.
"""

from plbjax.anneal._check import ExactEnergyFn, ModelReport, Tolerance, check_model, hot_chains
from plbjax.anneal._config import KernelConfig, Schedule
from plbjax.anneal._driver import (
    STOP,
    AnnealResult,
    anneal,
    clear_compiled,
    clear_compiled_if_crowded,
    enable_compilation_cache,
    init_chains,
    shard,
)
from plbjax.anneal._kernel import Chain, batched, draw, init, refresh, resample, run_block, step, uniform
from plbjax.anneal._model import (
    ApplyFn,
    FinishFn,
    FootprintFn,
    FootprintIdsFn,
    Model,
    ProposeFn,
    RefreshFn,
    SolutionFn,
    StartFn,
)
from plbjax.anneal._store import stored

__all__ = [
    "STOP",
    "AnnealResult",
    "ApplyFn",
    "Chain",
    "ExactEnergyFn",
    "FinishFn",
    "FootprintFn",
    "FootprintIdsFn",
    "KernelConfig",
    "Model",
    "ModelReport",
    "ProposeFn",
    "RefreshFn",
    "Schedule",
    "SolutionFn",
    "StartFn",
    "Tolerance",
    "anneal",
    "batched",
    "check_model",
    "clear_compiled",
    "clear_compiled_if_crowded",
    "draw",
    "enable_compilation_cache",
    "hot_chains",
    "init",
    "init_chains",
    "refresh",
    "resample",
    "run_block",
    "shard",
    "step",
    "stored",
    "uniform",
]
