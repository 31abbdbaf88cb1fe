"""plbjax: Service Fabric's Cluster Resource Manager (PLB) as a vectorised simulated-annealing optimizer.

Three wings: `plbjax.anneal`, a problem-agnostic annealer (`Model`, kernels, driver);
`plbjax.sf`, Service Fabric's model and phases; `plbjax.roadef`, the ROADEF/EURO 2012 problem.
The names here are what most users need: load a state document, plan it, apply the plan.
"""

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
