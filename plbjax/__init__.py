"""plbjax: Service Fabric's Cluster Resource Manager (PLB) as a vectorised simulated-annealing optimizer.

Three wings: `plbjax.anneal`, a problem-agnostic annealer (`Model`, kernels, driver);
`plbjax.sf`, Service Fabric's model and phases; `plbjax.roadef`, the ROADEF/EURO 2012 problem.
The names here are what most users need: load a state document, plan it, apply the plan.

They are imported on first use (PEP 562), so that `import plbjax` costs nothing and a command that
searches nothing (`--version`, `plbjax-export`, ...) never imports JAX.
"""

from __future__ import annotations

import importlib as _importlib
import signal as _signal
import sys as _sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for pyright; at run time `__getattr__` imports them
    from plbjax.anneal import KernelConfig, Model, Schedule
    from plbjax.errors import BadInput
    from plbjax.sf import (
        ClusterSpec,
        ClusterState,
        Index,
        Problem,
        SearchConfig,
        apply_actions,
        diff,
        encode,
        generate,
        load_state,
        parse_state,
        plan,
    )

# each public name -> the module that defines it
_HOMES = {
    **dict.fromkeys(["KernelConfig", "Model", "Schedule"], "plbjax.anneal"),
    "BadInput": "plbjax.errors",
    **dict.fromkeys(
        [
            "ClusterSpec",
            "ClusterState",
            "Index",
            "Problem",
            "SearchConfig",
            "apply_actions",
            "diff",
            "encode",
            "generate",
            "load_state",
            "parse_state",
            "plan",
        ],
        "plbjax.sf",
    ),
}
# the subpackages `import plbjax` once imported with the names, so `plbjax.sf.plan` still works
_SUBPACKAGES = ("anneal", "errors", "sf")

__all__ = [
    "BadInput",
    "ClusterSpec",
    "ClusterState",
    "Index",
    "KernelConfig",
    "Model",
    "Problem",
    "Schedule",
    "SearchConfig",
    "apply_actions",
    "diff",
    "encode",
    "generate",
    "load_state",
    "parse_state",
    "plan",
]


def __getattr__(name: str) -> object:
    """A public name (or one of `_SUBPACKAGES`), imported on first use and kept (PEP 562)."""
    if name in _SUBPACKAGES:
        value = _importlib.import_module(f"{__name__}.{name}")
    elif name in _HOMES:
        value = getattr(_importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBPACKAGES})


# The packages that start native threads when imported (numpy's BLAS pool, jaxlib's): their first
# import, wherever it comes from once plbjax is imported, runs with SIGINT and SIGTERM blocked.
_THREADED = frozenset({"numpy", "jax", "jaxlib"})


class _SignalsStayWithTheMainThread:
    """A meta-path finder that finds nothing itself: for the first import of a package of
    `_THREADED` it asks the finders after it and wraps the loader's `exec_module` in a block of
    SIGINT and SIGTERM. A thread the import starts then holds both signals blocked, as it was started
    with them, so the kernel hands the process's signals to the main thread, which raises at once,
    even blocked in a socket read (else Ctrl-C could wait out the read's 60-s timeout)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in _THREADED or name in _sys.modules:
            return None
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is cls or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module") or not hasattr(loader, "__dict__"):
            return spec
        execute = loader.exec_module

        def exec_module(module) -> None:
            held = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM})
            try:
                execute(module)
            finally:
                _signal.pthread_sigmask(_signal.SIG_SETMASK, held)
                vars(loader).pop("exec_module", None)

        loader.exec_module = exec_module
        return spec


if not any(f is _SignalsStayWithTheMainThread for f in _sys.meta_path):
    _sys.meta_path.insert(0, _SignalsStayWithTheMainThread)
