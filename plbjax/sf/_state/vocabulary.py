"""plbjax's one vocabulary: roles, statuses and action kinds as enums, and the typed `Action`.

Each enum is a `StrEnum` whose values are the words of plbjax's documents (the state, plan and
timeline contract), so a member is written to a document as its word. Service Fabric's own words
where they differ (its REST API says `ActiveSecondary`, `IdleSecondary`, `None` for roles) are
mapped here once, by `Role.from_sf` and `Role.sf`, and nowhere else: the doors (the state and dump
readers, the REST client, the simulator, the plan and record writers) call them, and code inside
compares members, never words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Role(StrEnum):
    """A replica's role: a stateful partition's primary or secondary, a stateless instance."""

    PRIMARY = "Primary"
    SECONDARY = "Secondary"
    INSTANCE = "Instance"

    @classmethod
    def from_sf(cls, word: str | None) -> Role | None:
        """The role SF's REST API or query reports (`ReplicaRole`): an active or idle secondary is a
        secondary; `None`, `Unknown` and SF's auxiliary roles (still being built) have none."""
        return _SF_ROLES.get(word or "")

    def sf(self) -> str:
        """SF's word for this role in its REST answers (a secondary is `ActiveSecondary`)."""
        return _TO_SF[self]


_SF_ROLES = {
    "Primary": Role.PRIMARY,
    "ActiveSecondary": Role.SECONDARY,
    "IdleSecondary": Role.SECONDARY,
    "Secondary": Role.SECONDARY,
    "Instance": Role.INSTANCE,
}
_TO_SF = {Role.PRIMARY: "Primary", Role.SECONDARY: "ActiveSecondary", Role.INSTANCE: "None"}
IDLE_SECONDARY = "IdleSecondary"  # SF's role of a secondary still being built (its REST word)


class ReplicaStatus(StrEnum):
    """SF's `ReplicaStatus` of a replica on a live cluster (its REST words)."""

    READY = "Ready"
    IN_BUILD = "InBuild"
    STANDBY = "Standby"
    DOWN = "Down"
    DROPPED = "Dropped"
    INVALID = "Invalid"

    @property
    def placed(self) -> bool:
        """The replica holds a place on its node (SF counts its load there)."""
        return self in (ReplicaStatus.READY, ReplicaStatus.IN_BUILD, ReplicaStatus.DOWN)


class HealthState(StrEnum):
    """SF's HealthState words (GetClusterHealth, an entity's GetHealth), aggregated to the worst."""

    OK = "Ok"
    WARNING = "Warning"
    ERROR = "Error"
    UNKNOWN = "Unknown"

    @classmethod
    def from_sf(cls, word: object) -> HealthState:
        """SF's word (any case); Unknown for a missing or unknown word (SF's Invalid too)."""
        return next((h for h in cls if h.value.lower() == str(word or "").lower()), cls.UNKNOWN)

    @classmethod
    def read(cls, word: object) -> HealthState:
        """SF's word as it writes it (ValueError for a word SF does not use)."""
        return cls(str(word))

    @property
    def rank(self) -> int:
        """How bad: SF aggregates to the worst of Ok < Warning < Error (Unknown below Ok)."""
        return (HealthState.UNKNOWN, HealthState.OK, HealthState.WARNING, HealthState.ERROR).index(self)


class NodeStatus(StrEnum):
    """A node's status in the state document (SF's `NodeStatus`, its deactivating and deactivated
    nodes both `Disabled`)."""

    UP = "Up"
    DOWN = "Down"
    DISABLED = "Disabled"

    @classmethod
    def from_sf(cls, word: str) -> NodeStatus | None:
        """The status of a node SF reports (`Disabling` is still deactivating: Disabled); None for a
        word that is not a node's running state (`Invalid`, `Unknown`, `Removed`)."""
        return _SF_NODE_STATUSES.get(word)


_SF_NODE_STATUSES = {
    "Up": NodeStatus.UP,
    "Down": NodeStatus.DOWN,
    "Disabled": NodeStatus.DISABLED,
    "Disabling": NodeStatus.DISABLED,
    "Enabling": NodeStatus.UP,
}


class Intent(StrEnum):
    """SF's `NodeDeactivationIntent` of a Disabled node."""

    PAUSE = "Pause"
    RESTART = "Restart"
    REMOVE_DATA = "RemoveData"
    REMOVE_NODE = "RemoveNode"

    @property
    def keeps_replicas(self) -> bool:
        """Pause and Restart keep a node's replicas where they are (SF's PLB moves none off it)."""
        return self in (Intent.PAUSE, Intent.RESTART)


class ActionKind(StrEnum):
    """What a plan's action does, in the plan document's words."""

    MOVE_PRIMARY = "MovePrimary"
    MOVE_SECONDARY = "MoveSecondary"
    MOVE_INSTANCE = "MoveInstance"
    SWAP_PRIMARY_SECONDARY = "SwapPrimarySecondary"
    ADD_PRIMARY = "AddPrimary"
    ADD_SECONDARY = "AddSecondary"
    ADD_INSTANCE = "AddInstance"
    PROMOTE_SECONDARY = "PromoteSecondary"
    DROP_PRIMARY = "DropPrimary"
    DROP_SECONDARY = "DropSecondary"
    DROP_INSTANCE = "DropInstance"

    @classmethod
    def move(cls, role: Role) -> ActionKind:
        """Moving a replica of `role`."""
        return _BY_VERB["Move"][role]

    @classmethod
    def add(cls, role: Role) -> ActionKind:
        """Adding a replica of `role`."""
        return _BY_VERB["Add"][role]

    @classmethod
    def drop(cls, role: Role) -> ActionKind:
        """Dropping a replica of `role`."""
        return _BY_VERB["Drop"][role]

    @property
    def role(self) -> Role | None:
        """The role of the replica a move, add or drop acts on (None for a swap or a promotion)."""
        return _ROLE_OF.get(self)

    @property
    def is_move(self) -> bool:
        """A replica changes node (a move; SF's MovePrimary/MoveSecondary/MoveInstance)."""
        return self in (ActionKind.MOVE_PRIMARY, ActionKind.MOVE_SECONDARY, ActionKind.MOVE_INSTANCE)

    @property
    def is_add(self) -> bool:
        """A new replica is built on the target."""
        return self in (ActionKind.ADD_PRIMARY, ActionKind.ADD_SECONDARY, ActionKind.ADD_INSTANCE)

    @property
    def is_drop(self) -> bool:
        """A surplus replica goes."""
        return self in (ActionKind.DROP_PRIMARY, ActionKind.DROP_SECONDARY, ActionKind.DROP_INSTANCE)

    @property
    def is_movement(self) -> bool:
        """A movement SF's throttles count and an operator sends: a move or a primary swap."""
        return self.is_move or self is ActionKind.SWAP_PRIMARY_SECONDARY


_BY_VERB = {verb: {role: ActionKind(verb + role.value) for role in Role} for verb in ("Move", "Add", "Drop")}
_ROLE_OF = {kind: role for verb in _BY_VERB.values() for role, kind in verb.items()}

Id = str | int  # a partition's or replica's id, as the document gives it

# The fields of a plan document's action that `Action` holds by name; the others are its notes.
_FIELDS = {
    "ServiceName": "service",
    "PartitionId": "partition",
    "ReplicaId": "replica",
    "Action": "kind",
    "SourceNode": "source",
    "TargetNode": "target",
}


@dataclasses.dataclass(frozen=True)
class Action:
    """One action of a plan: `kind` applied to `replica` of (`service`, `partition`), from node
    `source` (None for an add) to node `target` (None for a drop). `notes` holds the document's
    other fields in order (`Phase`, `Reason`, a replay's `Time`, ...), written back as they came."""

    service: str
    partition: Id
    replica: Id | None
    kind: ActionKind
    source: str | None
    target: str | None
    notes: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_document(cls, fields: Mapping[str, Any]) -> Action:
        """An action of a plan document (its `Actions[i]`); raises KeyError or ValueError when a
        field is missing or its kind unknown."""
        return cls(
            service=fields["ServiceName"],
            partition=fields["PartitionId"],
            replica=fields["ReplicaId"],
            kind=ActionKind(fields["Action"]),
            source=fields.get("SourceNode"),
            target=fields.get("TargetNode"),
            notes={k: v for k, v in fields.items() if k not in _FIELDS},
        )

    def document(self) -> dict[str, Any]:
        """The plan document's form of this action."""
        return {
            "ServiceName": self.service,
            "PartitionId": self.partition,
            "ReplicaId": self.replica,
            "Action": str(self.kind),
            "SourceNode": self.source,
            "TargetNode": self.target,
            **self.notes,
        }

    @property
    def role_before(self) -> Role | None:
        """The replica's role before the action (None for an add: it had none)."""
        if self.kind is ActionKind.PROMOTE_SECONDARY:
            return Role.SECONDARY
        if self.kind is ActionKind.SWAP_PRIMARY_SECONDARY:
            return Role.PRIMARY
        return None if self.kind.is_add else self.kind.role

    @property
    def role_after(self) -> Role | None:
        """The replica's role after the action (None for a drop: it is gone)."""
        if self.kind is ActionKind.PROMOTE_SECONDARY:
            return Role.PRIMARY
        if self.kind is ActionKind.SWAP_PRIMARY_SECONDARY:
            return Role.SECONDARY
        return None if self.kind.is_drop else self.kind.role
