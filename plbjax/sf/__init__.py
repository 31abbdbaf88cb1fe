"""Service Fabric's Cluster Resource Manager as a model for the annealer.

The state document (`load_state`, `parse_state`) is encoded into arrays (`encode`: a `Problem` and
the host-side `Index` of names); `model` is the search the annealer runs (SF's energy, constraints
and moves); `plan` runs SF's phases (placement, constraint check, balancing) and returns the plan
document, whose `Actions` `apply_actions` applies to a state document. `generate` makes random
clusters from a `ClusterSpec`. A `Session` holds a cluster encoded across PLB rounds (the replay's)
and takes each round's document as an update.
"""

from plbjax.sf._encoding.decoding import apply_actions, apply_to_partition, diff
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._encoding.problem import Index, Problem
from plbjax.sf._generator.clusters import generate
from plbjax.sf._generator.spec import ClusterSpec
from plbjax.sf._model.chain import model
from plbjax.sf._model.scope import Scope, Search, full_scope, scope
from plbjax.sf._phases.search_config import SearchConfig
from plbjax.sf._plan.findings import Findings, findings
from plbjax.sf._plan.planning import Plan, plan
from plbjax.sf._plan.session import Session
from plbjax.sf._state.cluster import ClusterState
from plbjax.sf._state.reading import load_state, parse_state

__all__ = [
    "ClusterSpec",
    "Findings",
    "findings",
    "ClusterState",
    "Index",
    "Plan",
    "Problem",
    "Scope",
    "Search",
    "SearchConfig",
    "Session",
    "apply_actions",
    "apply_to_partition",
    "diff",
    "encode",
    "full_scope",
    "generate",
    "load_state",
    "model",
    "parse_state",
    "plan",
    "scope",
]
