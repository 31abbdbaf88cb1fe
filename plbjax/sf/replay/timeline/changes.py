"""What each kind of timeline event changes, as a typed record read once from the event's fields
(`read_change`, the timeline's door): its shape is checked there (`Intent: 'Reboot' is not one
of ...`); references to the cluster (a node, a service, a metric) are checked when it is applied.
A record's `subject` says what it is about, for the record."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from plbjax.errors import BadInput
from plbjax.sf import INTENTS, Intent, Role

Id = str | int  # a partition's or replica's id as the timeline gives it
Document = Mapping[str, object]  # a node, service or partition object a timeline event brings
SERVICE_CHANGES = frozenset(
    {
        "InstanceCount",
        "TargetReplicaSetSize",
        "Metrics",
        "PlacementConstraints",
        "PlacementPolicies",
        "Correlations",
        "DefaultMoveCost",
        "Priority",
        "BalancingPolicy",
    }
)
SETTINGS_MAPPINGS = frozenset(
    {
        "Settings",
        "MetricBalancingThresholds",
        "MetricActivityThresholds",
        "DefragmentationMetrics",
        "NodeBufferPercentage",
        "GlobalMetricWeights",
        "ResourceThresholds",
    }
)


@dataclass(frozen=True)
class _OfNode:
    """A change to one node, by name."""

    KIND: ClassVar[str]
    node: str

    @property
    def subject(self) -> str:
        return str(self.node)


@dataclass(frozen=True)
class NodeDown(_OfNode):
    KIND: ClassVar[str] = "NodeDown"


@dataclass(frozen=True)
class NodeUp(_OfNode):
    KIND: ClassVar[str] = "NodeUp"


@dataclass(frozen=True)
class NodeRemoved(_OfNode):
    KIND: ClassVar[str] = "NodeRemoved"


@dataclass(frozen=True)
class NodeDisabled(_OfNode):
    """SF's deactivation with its intent (default Pause)."""

    KIND: ClassVar[str] = "NodeDisabled"
    intent: Intent = Intent.PAUSE


@dataclass(frozen=True)
class NodeEnabled(_OfNode):
    KIND: ClassVar[str] = "NodeEnabled"
    intent: Intent | None = None


@dataclass(frozen=True)
class NodeAdded:
    KIND: ClassVar[str] = "NodeAdded"
    node: Document  # the node object, as the state document has its nodes

    @property
    def name(self) -> object:
        return self.node["NodeName"]

    @property
    def subject(self) -> str:
        return str(self.name or "")


@dataclass(frozen=True)
class LoadReport:
    """A replica's loads (`replica`), a partition's replicas' (`partition`, `role`), or the service's
    default loads (neither)."""

    KIND: ClassVar[str] = "LoadReport"
    service: str
    loads: Mapping[str, float]
    partition: Id | None = None
    replica: Id | None = None
    role: Role | None = None

    @property
    def of_replicas(self) -> bool:
        """It reports to replicas (a partition's or one), not to the service's default loads."""
        return self.partition is not None or self.replica is not None

    @property
    def subject(self) -> str:
        return str(self.service)


@dataclass(frozen=True)
class ServiceCreated:
    """A service and its partitions (None: one partition 0 with no replicas)."""

    KIND: ClassVar[str] = "ServiceCreated"
    service: Document
    partitions: tuple[Document, ...] | None = None

    @property
    def name(self) -> object:
        return self.service["ServiceName"]

    @property
    def subject(self) -> str:
        return str(self.name or "")


@dataclass(frozen=True)
class ServiceDeleted:
    KIND: ClassVar[str] = "ServiceDeleted"
    service: str

    @property
    def subject(self) -> str:
        return str(self.service)


@dataclass(frozen=True)
class ServiceUpdated:
    """Changes merged into the service (only the fields in `SERVICE_CHANGES`)."""

    KIND: ClassVar[str] = "ServiceUpdated"
    service: str
    changes: Document

    @property
    def subject(self) -> str:
        return str(self.service)


@dataclass(frozen=True)
class ReplicaFailed:
    KIND: ClassVar[str] = "ReplicaFailed"
    replica: Id

    @property
    def subject(self) -> str:
        return str(self.replica)


@dataclass(frozen=True)
class UpgradeStarted:
    KIND: ClassVar[str] = "UpgradeStarted"
    scope: str
    domains: tuple[object, ...]
    application: str | None = None

    @property
    def subject(self) -> str:
        return " ".join(str(x) for x in (self.scope, self.application) if x)


@dataclass(frozen=True)
class UpgradeDomainCompleted:
    KIND: ClassVar[str] = "UpgradeDomainCompleted"
    domain: object

    @property
    def subject(self) -> str:
        return str(self.domain)


@dataclass(frozen=True)
class UpgradeCompleted:
    KIND: ClassVar[str] = "UpgradeCompleted"

    @property
    def subject(self) -> str:
        return ""


@dataclass(frozen=True)
class SettingsChanged:
    """Mappings merged into the state's (`Settings` by SF's names, thresholds and weights by metric)."""

    KIND: ClassVar[str] = "SettingsChanged"
    changes: Mapping[str, Document]

    @property
    def subject(self) -> str:
        return "+".join(sorted(self.changes))


@dataclass(frozen=True)
class _BlockListEntry:
    """A block-list entry: no replica of `service_type` on `node`."""

    KIND: ClassVar[str]
    node: str
    service_type: str

    @property
    def entry(self) -> tuple[str, str]:
        """The block-list entry (node, service type): the same entry added again replaces its Until."""
        return self.node, self.service_type

    @property
    def subject(self) -> str:
        return f"{self.node}/{self.service_type}"


@dataclass(frozen=True)
class BlockListAdded(_BlockListEntry):
    """An entry added, until `until` (None: for good)."""

    KIND: ClassVar[str] = "BlockListAdded"
    until: float | None = None


@dataclass(frozen=True)
class BlockListExpired(_BlockListEntry):
    """Not a timeline kind: the loop applies it at a BlockListAdded event's Until."""

    KIND: ClassVar[str] = "BlockListExpired"


Change = (
    NodeDown
    | NodeUp
    | NodeRemoved
    | NodeDisabled
    | NodeEnabled
    | NodeAdded
    | LoadReport
    | ServiceCreated
    | ServiceDeleted
    | ServiceUpdated
    | ReplicaFailed
    | UpgradeStarted
    | UpgradeDomainCompleted
    | UpgradeCompleted
    | SettingsChanged
    | BlockListAdded
    | BlockListExpired
)

# Kind -> (required fields, optional fields), besides Time and Kind.
KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "NodeDown": (frozenset({"NodeName"}), frozenset()),
    "NodeUp": (frozenset({"NodeName"}), frozenset()),
    "NodeAdded": (frozenset({"Node"}), frozenset()),
    "NodeRemoved": (frozenset({"NodeName"}), frozenset()),
    "NodeDisabled": (frozenset({"NodeName"}), frozenset({"Intent"})),
    "NodeEnabled": (frozenset({"NodeName"}), frozenset({"Intent"})),
    "LoadReport": (frozenset({"ServiceName", "Loads"}), frozenset({"PartitionId", "ReplicaId", "Role"})),
    "ServiceCreated": (frozenset({"Service"}), frozenset({"Partitions"})),
    "ServiceDeleted": (frozenset({"ServiceName"}), frozenset()),
    "ServiceUpdated": (frozenset({"ServiceName", "Changes"}), frozenset()),
    "ReplicaFailed": (frozenset({"ReplicaId"}), frozenset()),
    "UpgradeStarted": (frozenset({"Scope", "UpgradeDomains"}), frozenset({"ApplicationName"})),
    "UpgradeDomainCompleted": (frozenset({"UpgradeDomain"}), frozenset()),
    "UpgradeCompleted": (frozenset(), frozenset()),
    "SettingsChanged": (frozenset(), SETTINGS_MAPPINGS),
    "BlockListAdded": (frozenset({"NodeName", "ServiceTypeName"}), frozenset({"Until"})),
}


def read_change(kind: str, fields: Mapping) -> Change:
    """The typed change of a `kind` event with these `fields` (every key but Time and Kind); a bad
    shape raises `BadInput` naming the field."""
    reader = _READERS.get(kind)
    if reader is None:
        raise BadInput(f"Kind: unknown event kind {kind!r}")
    return reader(fields)


def _intent(value: object) -> Intent:
    if value not in INTENTS:
        raise BadInput(f"Intent: {value!r} is not one of {', '.join(INTENTS)}")
    return Intent(value)


def _role(value: object) -> Role | None:
    if value is not None and value not in tuple(Role):
        raise BadInput(f"Role: {value!r} is not Primary, Secondary or Instance")
    return None if value is None else Role(value)


def _named(value: object, key: str, name: str, what: str) -> Document:
    if not isinstance(value, Mapping) or name not in value:
        raise BadInput(f"{key}: a {what} object with a {name} is required")
    return value


def _list(value: object, key: str) -> list:
    if not isinstance(value, list):
        raise BadInput(f"{key}: a list is required")
    return value


def _node_added(f: Mapping) -> NodeAdded:
    return NodeAdded(_named(f["Node"], "Node", "NodeName", "node"))


def _load_report(f: Mapping) -> LoadReport:
    return LoadReport(f["ServiceName"], f["Loads"], f.get("PartitionId"), f.get("ReplicaId"), _role(f.get("Role")))


def _service_created(f: Mapping) -> ServiceCreated:
    service = _named(f["Service"], "Service", "ServiceName", "service")
    name, partitions = service["ServiceName"], f.get("Partitions")
    if partitions is not None and (
        not isinstance(partitions, list)
        or any(not isinstance(p, Mapping) or p.get("ServiceName", name) != name for p in partitions)
    ):
        raise BadInput(f"Partitions: a list of partition objects of {name!r} is required")
    return ServiceCreated(service, None if partitions is None else tuple(partitions))


def _service_updated(f: Mapping) -> ServiceUpdated:
    changes = f["Changes"]
    if not isinstance(changes, Mapping):
        raise BadInput("Changes: a mapping {field: value} is required")
    for key in changes:
        if key not in SERVICE_CHANGES:
            raise BadInput(f"Changes.{key}: not a field an update may change ({', '.join(sorted(SERVICE_CHANGES))})")
    return ServiceUpdated(f["ServiceName"], changes)


def _upgrade_started(f: Mapping) -> UpgradeStarted:
    scope, app = f["Scope"], f.get("ApplicationName")
    if scope not in ("Cluster", "Application"):
        raise BadInput(f"Scope: {scope!r} is not Cluster or Application")
    if scope == "Application" and app is None:
        raise BadInput("ApplicationName: required when Scope is 'Application'")
    return UpgradeStarted(scope, tuple(_list(f["UpgradeDomains"], "UpgradeDomains")), app)


def _settings_changed(f: Mapping) -> SettingsChanged:
    for key, values in f.items():
        if not isinstance(values, Mapping):
            raise BadInput(f"{key}: a mapping is required")
    return SettingsChanged(dict(f))


def _block_list_added(f: Mapping) -> BlockListAdded:
    until = f.get("Until")
    return BlockListAdded(f["NodeName"], f["ServiceTypeName"], None if until is None else float(until))


_READERS: dict[str, Callable[[Mapping], Change]] = {
    "NodeDown": lambda f: NodeDown(f["NodeName"]),
    "NodeUp": lambda f: NodeUp(f["NodeName"]),
    "NodeAdded": _node_added,
    "NodeRemoved": lambda f: NodeRemoved(f["NodeName"]),
    "NodeDisabled": lambda f: NodeDisabled(f["NodeName"], _intent(f.get("Intent", Intent.PAUSE))),
    "NodeEnabled": lambda f: NodeEnabled(f["NodeName"], None if f.get("Intent") is None else _intent(f["Intent"])),
    "LoadReport": _load_report,
    "ServiceCreated": _service_created,
    "ServiceDeleted": lambda f: ServiceDeleted(f["ServiceName"]),
    "ServiceUpdated": _service_updated,
    "ReplicaFailed": lambda f: ReplicaFailed(f["ReplicaId"]),
    "UpgradeStarted": _upgrade_started,
    "UpgradeDomainCompleted": lambda f: UpgradeDomainCompleted(f["UpgradeDomain"]),
    "UpgradeCompleted": lambda f: UpgradeCompleted(),
    "SettingsChanged": _settings_changed,
    "BlockListAdded": _block_list_added,
}
