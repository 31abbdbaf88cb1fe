"""Service Fabric's Cluster Resource Manager as a model for the annealer.

The flow runs through six private folders, each behind its face (its `__init__`), each reading only
the ones before it:

    _state      the state document -> ClusterState         (load_state, parse_state; the vocabulary:
                                                            Role, ActionKind, Action, statuses)
    _encoding   ClusterState <-> arrays: Problem, Index     (encode, apply_actions, diff)
    _model      SF's energy, constraints and moves          (model, scope)
    _phases     placement, constraint check, balancing      (Phase, SearchConfig)
    _plan       the phases in SF's order -> the plan        (plan, Session, findings)
    _generator  synthetic clusters                          (generate, ClusterSpec)

`live/` talks to a running cluster and `replay/` plays timelines through this face (the replay
also reads `_state`'s default metrics and settings).
"""

from plbjax.sf._encoding import Index, Problem, apply_actions, apply_to_partition, diff, encode
from plbjax.sf._generator import ClusterSpec, generate
from plbjax.sf._model import Scope, Search, full_scope, model, scope
from plbjax.sf._phases import PHASES, Phase, SearchConfig
from plbjax.sf._plan import REFRESH_ACTIONS, Findings, Plan, Session, findings, plan
from plbjax.sf._state import (
    IDLE_SECONDARY,
    INTENTS,
    Action,
    ActionKind,
    ClusterState,
    Intent,
    NodeStatus,
    ReplicaStatus,
    Role,
    load_state,
    parse_state,
)

__all__ = [
    "Action",
    "ActionKind",
    "IDLE_SECONDARY",
    "Intent",
    "NodeStatus",
    "ReplicaStatus",
    "Role",
    "ClusterSpec",
    "Findings",
    "findings",
    "ClusterState",
    "Index",
    "INTENTS",
    "PHASES",
    "Phase",
    "Problem",
    "Plan",
    "REFRESH_ACTIONS",
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
