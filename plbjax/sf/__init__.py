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

The names are imported on first use (PEP 562), each from its folder, so that a command that reads
only the vocabulary (`plbjax-export`, `plbjax-import`, the live wing) imports `_state` alone and
never JAX, which the folders from `_encoding` on import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for pyright; at run time `__getattr__` imports them
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
        HealthState,
        Intent,
        NodeStatus,
        Partition,
        Replica,
        ReplicaStatus,
        Role,
        completed,
        load_state,
        parse_placement_constraint,
        parse_state,
        state_document,
    )

# each public name -> the folder whose face defines it
_HOMES = {
    **dict.fromkeys(["Index", "Problem", "apply_actions", "apply_to_partition", "diff", "encode"], "_encoding"),
    **dict.fromkeys(["ClusterSpec", "generate"], "_generator"),
    **dict.fromkeys(["Scope", "Search", "full_scope", "model", "scope"], "_model"),
    **dict.fromkeys(["PHASES", "Phase", "SearchConfig"], "_phases"),
    **dict.fromkeys(["REFRESH_ACTIONS", "Findings", "Plan", "Session", "findings", "plan"], "_plan"),
    **dict.fromkeys(
        [
            "IDLE_SECONDARY",
            "INTENTS",
            "Action",
            "ActionKind",
            "ClusterState",
            "HealthState",
            "Intent",
            "NodeStatus",
            "Partition",
            "Replica",
            "ReplicaStatus",
            "Role",
            "completed",
            "load_state",
            "parse_placement_constraint",
            "parse_state",
            "state_document",
        ],
        "_state",
    ),
}

__all__ = [
    "Action",
    "ActionKind",
    "IDLE_SECONDARY",
    "HealthState",
    "Intent",
    "NodeStatus",
    "ReplicaStatus",
    "Role",
    "Partition",
    "Replica",
    "completed",
    "state_document",
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
    "parse_placement_constraint",
    "parse_state",
    "plan",
    "scope",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its folder on first use and kept (module attribute access, PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
