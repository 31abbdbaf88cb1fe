"""A problem-agnostic simulated annealer: many chains, vmapped and jitted, for any `Model`.

A `Model` says how a problem is searched (start, propose, finish, apply, refresh, solution and
footprints, typed by the Protocols in `plbjax.anneal`); `KernelConfig` shapes the compiled step,
`Schedule` sets the chains, budget and temperatures; `anneal` runs them. The pure kernels (`init`,
`step`, `run_block`) are here for those who drive chains themselves; `check_model` checks a model
against its contract (for a problem's tests). Nothing here knows of Service Fabric or ROADEF.

The names import on first use (PEP 562): the configuration's `KernelConfig` and `Schedule` need no
JAX, so a command's `--help` starts without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for pyright; at run time `__getattr__` imports them
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

# each public name -> (the module that defines it, its name there)
_HOMES = {
    "ExactEnergyFn": ("_check", "ExactEnergyFn"),
    "ModelReport": ("_check", "ModelReport"),
    "Tolerance": ("_check", "Tolerance"),
    "check_model": ("_check", "check_model"),
    "hot_chains": ("_check", "hot_chains"),
    "KernelConfig": ("_config", "KernelConfig"),
    "Schedule": ("_config", "Schedule"),
    "STOP": ("_driver", "STOP"),
    "AnnealResult": ("_driver", "AnnealResult"),
    "anneal": ("_driver", "anneal"),
    "clear_compiled": ("_driver", "clear_compiled"),
    "clear_compiled_if_crowded": ("_driver", "clear_compiled_if_crowded"),
    "enable_compilation_cache": ("_driver", "enable_compilation_cache"),
    "init_chains": ("_driver", "init_chains"),
    "shard": ("_driver", "shard"),
    "Chain": ("_kernel", "Chain"),
    "batched": ("_kernel", "batched"),
    "draw": ("_kernel", "draw"),
    "init": ("_kernel", "init"),
    "refresh": ("_kernel", "refresh"),
    "resample": ("_kernel", "resample"),
    "run_block": ("_kernel", "run_block"),
    "step": ("_kernel", "step"),
    "uniform": ("_kernel", "uniform"),
    "ApplyFn": ("_model", "ApplyFn"),
    "FinishFn": ("_model", "FinishFn"),
    "FootprintFn": ("_model", "FootprintFn"),
    "FootprintIdsFn": ("_model", "FootprintIdsFn"),
    "Model": ("_model", "Model"),
    "ProposeFn": ("_model", "ProposeFn"),
    "RefreshFn": ("_model", "RefreshFn"),
    "SolutionFn": ("_model", "SolutionFn"),
    "StartFn": ("_model", "StartFn"),
    "stored": ("_store", "stored"),
}

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


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _HOMES[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
