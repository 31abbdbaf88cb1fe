"""The state document -> a `ClusterState` (frozen domain types), the first step of the flow.

    reading.py       load_state / parse_state: JSON or YAML, checked, then built
    schema_check.py  the document against schemas/state.schema.json (a fast path, then jsonschema)
    columns.py       the Partitions of a large document read a column at a time
    building.py      SF's rules and defaults, kind by kind, into the types of cluster.py
    applications.py  SF's application groups (Applications) checked and read into Application records
    cluster.py       ClusterState, Node, Service, Partition, Replica, Metric and the records read once
                     (NodeType, Correlation, PlacementPolicy, ResourceGovernance, Upgrade, BlockEntry,
                     Application);
                     SF's constants
    settings.py      SF's PlacementAndLoadBalancing settings, each with SF's default
    expressions.py   placement constraint expressions, parsed once
    governance.py    resource governance: the built-in CPU and memory metrics
    rendering.py     a ClusterState back to a state document (a replay's final state, a document edit)
    completion.py    an Action completed on a typed Partition, as the Failover Manager completes it
    vocabulary.py    Role, ReplicaStatus, NodeStatus, HealthState, Intent, ActionKind and the typed Action:
                     SF's words mapped once, compared as members everywhere else

Reads nothing else of plbjax.sf; `_encoding` reads it.
"""

from plbjax.sf._state.cluster import BUILTIN_LOADS, DEFAULT_METRICS, INTENTS, ClusterState, Partition, Replica
from plbjax.sf._state.completion import completed
from plbjax.sf._state.expressions import node_mask
from plbjax.sf._state.expressions import parse as parse_placement_constraint
from plbjax.sf._state.governance import apply_resource_governance, governed_again
from plbjax.sf._state.reading import gc_paused, load_state, parse_state
from plbjax.sf._state.rendering import partition_document, replica_document, state_document
from plbjax.sf._state.settings import PLB_SETTINGS, resolve_settings
from plbjax.sf._state.vocabulary import (
    IDLE_SECONDARY,
    Action,
    ActionKind,
    HealthState,
    Intent,
    NodeStatus,
    ReplicaStatus,
    Role,
)

__all__ = [
    "Action",
    "ActionKind",
    "IDLE_SECONDARY",
    "HealthState",
    "Intent",
    "NodeStatus",
    "ReplicaStatus",
    "Role",
    "BUILTIN_LOADS",
    "ClusterState",
    "DEFAULT_METRICS",
    "INTENTS",
    "PLB_SETTINGS",
    "Partition",
    "Replica",
    "apply_resource_governance",
    "gc_paused",
    "governed_again",
    "load_state",
    "node_mask",
    "parse_placement_constraint",
    "parse_state",
    "partition_document",
    "replica_document",
    "state_document",
    "completed",
    "resolve_settings",
]
