"""plbjax: Service Fabric's Cluster Resource Manager (PLB) as a vectorised simulated-annealing optimizer.

Three wings: `plbjax.anneal`, a problem-agnostic annealer (`Model`, kernels, driver);
`plbjax.sf`, Service Fabric's model and phases; `plbjax.roadef`, the ROADEF/EURO 2012 problem.
The names here are what most users need: load a state document, plan it, apply the plan.
"""

import signal as _signal

# A thread the imports start (jaxlib starts one) holds SIGINT and SIGTERM blocked, as it was started
# with them: the kernel then hands the process's signals to the main thread, which raises at once,
# even blocked in a socket read (else Ctrl-C could wait out the read's 60-s timeout).
_held = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM})
try:
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
finally:
    _signal.pthread_sigmask(_signal.SIG_SETMASK, _held)

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
