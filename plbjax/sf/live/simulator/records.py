"""The simulator's door: a state document and a dump's stored answers read once into typed records.

Each record names, in its KEYS table, the key SF (or the state document) spells each field with; a key
that is absent leaves the field's default, as `.get(key, default)` would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from plbjax.sf import HealthState
from plbjax.sf.live.reading.fields import Json

T = TypeVar("T")
METRIC_SECTIONS = (
    "MetricBalancingThresholds",
    "MetricActivityThresholds",
    "DefragmentationMetrics",
    "NodeBufferPercentage",
    "GlobalMetricWeights",
)


class UpgradeState(StrEnum):
    """SF's UpgradeState words of a cluster upgrade the simulator shows."""

    ROLLING_FORWARD = "RollingForwardInProgress"
    COMPLETED = "RollingForwardCompleted"


class DomainState(StrEnum):
    """SF's UpgradeDomainState words."""

    PENDING = "Pending"
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"


def worst(states: list[HealthState]) -> HealthState:
    """SF's aggregated health state: the worst; Ok when there is none."""
    return max(states, key=lambda h: h.rank, default=HealthState.OK)


def take(record: Callable[..., T], keys: dict[str, str], item: Json, **extra: object) -> T:
    """`record` of `item`: each field from the key `keys` names for it, absent keys left at the default."""
    return record(**{attr: item[key] for attr, key in keys.items() if key in item}, **extra)


# --- the state document -------------------------------------------------------------------------


@dataclass(frozen=True)
class StateNode:
    """A state document's node."""

    name: str
    status: str = "Up"
    intent: str | None = None
    node_type: str | None = None
    upgrade_domain: object = None
    fault_domain: object = None
    properties: Json | None = None
    capacities: Json | None = None
    raw: Json = field(default_factory=dict)


NODE = {
    "name": "NodeName",
    "status": "NodeStatus",
    "intent": "DeactivationIntent",
    "node_type": "NodeType",
    "upgrade_domain": "UpgradeDomain",
    "fault_domain": "FaultDomain",
    "properties": "PlacementProperties",
    "capacities": "Capacities",
}


@dataclass(frozen=True)
class Correlation:
    """A service's affinity to another service."""

    service: str
    scheme: str


@dataclass(frozen=True)
class StateService:
    """A state document's service; `move_cost_specified`: whether it names a DefaultMoveCost."""

    name: str
    kind: str
    app: str | None = None
    type_name: str | None = None
    constraints: str | None = None
    correlations: list[Json] | None = None
    metrics: list[Json] | None = None
    policies: list[Json] | None = None
    move_cost: str | None = None
    target: int | str = 3
    instances: int | str = -1
    move_cost_specified: bool = False

    @property
    def stateful(self) -> bool:
        return self.kind == "Stateful"

    @property
    def app_name(self) -> str:
        """Its application: ApplicationName, else the service name's parent."""
        return self.app or self.name.rsplit("/", 1)[0]

    def affinities(self) -> list[Correlation]:
        return [take(Correlation, {"service": "ServiceName", "scheme": "Scheme"}, c) for c in self.correlations or []]


SERVICE = {
    "name": "ServiceName",
    "kind": "ServiceKind",
    "app": "ApplicationName",
    "type_name": "ServiceTypeName",
    "constraints": "PlacementConstraints",
    "correlations": "Correlations",
    "metrics": "Metrics",
    "policies": "PlacementPolicies",
    "move_cost": "DefaultMoveCost",
    "target": "TargetReplicaSetSize",
    "instances": "InstanceCount",
}


@dataclass(frozen=True)
class Metric:
    """A service's load metric and its default loads."""

    name: str
    primary: float | None = None
    secondary: float | None = None
    default: float | None = None


METRIC = {
    "name": "Name",
    "primary": "PrimaryDefaultLoad",
    "secondary": "SecondaryDefaultLoad",
    "default": "DefaultLoad",
}


@dataclass(frozen=True)
class StateApplication:
    """A state document's application group: its capacities, SF-worded per metric."""

    name: str
    minimum: int = 0
    maximum: int = 0
    metrics: list[Json] | None = None


APPLICATION = {"name": "ApplicationName", "minimum": "MinimumNodes", "maximum": "MaximumNodes", "metrics": "Metrics"}


@dataclass(frozen=True)
class AppMetric:
    """An application group's capacity in one metric (0: none)."""

    name: str
    reservation: float = 0
    total: float = 0


APP_METRIC = {"name": "Name", "reservation": "ReservationCapacity", "total": "TotalApplicationCapacity"}


@dataclass(frozen=True)
class StateReplica:
    """A state document's replica; `rid` as the document spells it (a number or a string)."""

    rid: object = None
    node: str | None = None
    role: object = None
    loads: Json | None = None
    raw: Json = field(default_factory=dict)


@dataclass(frozen=True)
class StatePartition:
    """A state document's partition and its replicas."""

    service: str
    pid: object
    replicas: list[StateReplica]
    raw: Json = field(default_factory=dict)


@dataclass(frozen=True)
class NodeType:
    """A node type of the cluster manifest: its placement properties and capacities."""

    name: str
    properties: Json | None = None
    capacities: Json | None = None


@dataclass(frozen=True)
class State:
    """A state document as records; `sections`: the PLB settings and metric sections the manifest writes."""

    nodes: list[StateNode]
    services: list[StateService]
    partitions: list[StatePartition]
    node_types: list[NodeType]
    sections: dict[str, Json]
    applications: list[StateApplication] = field(default_factory=list)


@dataclass(frozen=True)
class _Document:
    """The state document's top level, its lists still SF-worded."""

    nodes: list[Json] = field(default_factory=list)
    services: list[Json] = field(default_factory=list)
    partitions: list[Json] = field(default_factory=list)
    node_types: list[Json] | None = None
    settings: Json | None = None
    applications: list[Json] | None = None


DOCUMENT = {
    "nodes": "Nodes",
    "services": "Services",
    "partitions": "Partitions",
    "node_types": "NodeTypes",
    "settings": "Settings",
    "applications": "Applications",
}


@dataclass(frozen=True)
class _Rows:
    """A state partition, its replicas still SF-worded."""

    service: str
    pid: object
    replicas: list[Json]


PARTITION = {"service": "ServiceName", "pid": "PartitionId", "replicas": "Replicas"}
REPLICA_OF_STATE = {"rid": "ReplicaId", "node": "NodeName", "role": "Role", "loads": "Loads"}
NODE_TYPE = {"name": "Name", "properties": "PlacementProperties", "capacities": "Capacities"}


def read_state(doc: Json) -> State:
    """The records of a (validated) state document."""
    top = take(_Document, DOCUMENT, doc)
    sections = {"PlacementAndLoadBalancing": top.settings or {}}
    sections |= {name: doc[name] for name in METRIC_SECTIONS if doc.get(name)}
    return State(
        [take(StateNode, NODE, n, raw=n) for n in top.nodes],
        [take(StateService, SERVICE, s, move_cost_specified="DefaultMoveCost" in s) for s in top.services],
        [_partition(p) for p in top.partitions],
        [take(NodeType, NODE_TYPE, t) for t in top.node_types or []],
        sections,
        [take(StateApplication, APPLICATION, a) for a in top.applications or []],
    )


def _partition(part: Json) -> StatePartition:
    rows = take(_Rows, PARTITION, part)
    replicas = [take(StateReplica, REPLICA_OF_STATE, r, raw=r) for r in rows.replicas]
    return StatePartition(rows.service, rows.pid, replicas, part)


# --- a dump's stored answers --------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """An application or service as Get Application/Service Info List shows it."""

    id: str
    name: str | None = None
    kind: str | None = None


LISTED = {"id": "Id", "name": "Name", "kind": "ServiceKind"}


@dataclass(frozen=True)
class ListedNode:
    """A node as Get Node Info List shows it, `raw` its whole NodeInfo."""

    name: str
    status: str | None = None
    raw: Json = field(default_factory=dict)


LISTED_NODE = {"name": "Name", "status": "NodeStatus"}


@dataclass(frozen=True)
class Description:
    """The counts of a ServiceDescription (Get Service Description)."""

    kind: str | None = None
    target: int | str = 3
    instances: int | str = -1


DESCRIPTION = {"kind": "ServiceKind", "target": "TargetReplicaSetSize", "instances": "InstanceCount"}


@dataclass(frozen=True)
class ListedReplica:
    """A replica or instance as Get Replica Info List shows it."""

    node: str
    status: str
    replica_id: object = None
    instance_id: object = None
    role: str | None = None
    address: object = None

    def rid(self, stateful: bool) -> str:
        """Its ReplicaId (stateful) or InstanceId, either when the other is missing."""
        first, second = (self.replica_id, self.instance_id) if stateful else (self.instance_id, self.replica_id)
        return str(first if first is not None else second)

    def any_id(self) -> object:
        """Its ReplicaId, else its InstanceId (None if neither)."""
        return self.replica_id if self.replica_id is not None else self.instance_id


REPLICA = {
    "node": "NodeName",
    "status": "ReplicaStatus",
    "replica_id": "ReplicaId",
    "instance_id": "InstanceId",
    "role": "ReplicaRole",
    "address": "Address",
}


@dataclass(frozen=True)
class ListedNodeType:
    """A node's type as NodeInfo names it."""

    name: str | None = None


LISTED_NODE_TYPE = {"name": "Type"}


@dataclass(frozen=True)
class Constraints:
    """A ServiceDescription's placement constraints."""

    constraints: str = ""


CONSTRAINTS = {"constraints": "PlacementConstraints"}


@dataclass(frozen=True)
class MetricLoad:
    """One metric of a load answer: a replica's ReportedLoad row, or a node's capacity row."""

    name: str
    value: object = None
    capacity: object = None


REPORTED = {"name": "Name", "value": "Value"}
NODE_CAPACITY = {"name": "Name", "capacity": "NodeCapacity"}
