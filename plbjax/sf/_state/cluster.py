"""The cluster state (contract section 1) as frozen domain types, with Service Fabric's constants.

`ClusterState` holds a validated state document's nodes, services, partitions and replicas
(`Node`, `Service`, `Partition`, `Replica`, a service's `Metric`), SF's defaults filled in, and the
document's other parts as typed records read once (`NodeType`, a service's `Correlation`,
`PlacementPolicy` and `ResourceGovernance`, the `Upgrade`, the block list's `BlockEntry`, the
application groups' `Application` and `ApplicationMetric`); the
readers that build it are `reading` (documents) and `building` (SF's rules); `rendering` writes
it back. Tuples keep the input order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from plbjax.sf._state.vocabulary import Intent, NodeStatus, Role

# LoadBalancing/Constants.cpp: MetricWeightZero/Low/Medium/High.
METRIC_WEIGHTS = {"Zero": 0.0, "Low": 0.1, "Medium": 0.3, "High": 1.0}
# A metric without Weight is "Low": the default constructors of ServiceLoadMetricDescription
# (ServiceModel/ServiceLoadMetricDescription.cpp, Reliability/Failover/common/...) say so.
DEFAULT_METRIC_WEIGHT = "Low"
DEFAULT_MOVE_COST = "Low"
_REPLICAS, _SERVICE = attrgetter("replicas"), attrgetter("service")
# Built-in metrics ignore default loads; SF derives the load from the role
# (LoadBalancing/Service.cpp, Service::GetDefaultMetricLoad):
# name -> ((primary, secondary) of a stateful replica, load of a stateless instance).
# So a stateless instance counts 0 in PrimaryCount and ReplicaCount, 1 in InstanceCount and Count.
BUILTIN_LOADS = {
    "PrimaryCount": ((1.0, 0.0), 0.0),
    "SecondaryCount": ((0.0, 1.0), 0.0),
    "ReplicaCount": ((1.0, 1.0), 0.0),
    "InstanceCount": ((0.0, 0.0), 1.0),
    "Count": ((1.0, 1.0), 1.0),
}
# A service that declares no metrics gets these (LoadBalancing/ServiceDescription.cpp,
# ServiceDescription::AddDefaultMetrics, called from PlacementAndLoadBalancing::UpdateService).
DEFAULT_METRICS = (("PrimaryCount", "High"), ("ReplicaCount", "Medium"), ("Count", "Low"))
# Loads, capacities and settings are searched in 32-bit floats, and the score squares node loads:
# larger numbers would overflow to infinities. Identifiers may be any size.
LARGEST = 1e15
# A Disabled node's DeactivationIntent (SF's NodeDeactivationIntent but Invalid).
INTENTS = tuple(Intent)


@dataclass(frozen=True)
class NodeType:
    """A node type (NodeTypes[]): what its nodes share, and its PLB overrides."""

    name: str
    capacities: dict[str, float]  # Capacities, a node's own override them
    properties: dict[str, str | int | float | bool]  # PlacementProperties, a node's own override them
    balancing_thresholds: dict[str, float]  # MetricBalancingThresholdsPerNodeType
    activity_thresholds: dict[str, float]  # MetricActivityThresholdsPerNodeType


@dataclass(frozen=True)
class Correlation:
    """A service's affinity to another service, its parent (Services[].Correlations[])."""

    service: str  # ServiceName: the parent
    scheme: str  # "Affinity" | "AlignedAffinity" | "NonAlignedAffinity"


@dataclass(frozen=True)
class PlacementPolicy:
    """A service's domain policy (Services[].PlacementPolicies[])."""

    kind: str  # Type: "RequireDomainDistribution" | "PreferPrimaryDomain" | "RequiredDomain" | "InvalidDomain"
    domain: str | None  # DomainName, e.g. "fd:/dc0" (None only for RequireDomainDistribution)


@dataclass(frozen=True)
class CodePackage:
    """A code package of a governed service (ResourceGovernance.CodePackages[])."""

    name: str
    cpu_shares: int  # CpuShares, 0 when not given
    memory_in_mb: float  # MemoryInMB as given, 0 when not given


@dataclass(frozen=True)
class ResourceGovernance:
    """A service's ResourceGovernance (its service package's), as given."""

    cpu_cores: float | None  # CpuCores as given; None when not given
    code_packages: tuple[CodePackage, ...]


@dataclass(frozen=True)
class Upgrade:
    """The upgrade in the document (Upgrade), its references checked."""

    in_progress: bool
    scope: str  # "Cluster" | "Application"
    application: str | None  # ApplicationName (Scope "Application")
    domains_done: tuple[str, ...]  # UpgradeDomainsDone, as text
    snapshot: dict[str, str]  # str(ReplicaId) -> the node it was on when the upgrade started


@dataclass(frozen=True)
class BlockEntry:
    """A node blocklisted for a service type (BlockList[])."""

    node: str  # NodeName
    service_type: str  # ServiceTypeName


@dataclass(frozen=True)
class ApplicationMetric:
    """An application's capacity in one metric (Applications[].Metrics[]; SF's
    ApplicationMetricDescription): None where SF sets no limit (0 or absent)."""

    name: str
    node_capacity: float | None  # MaximumCapacity: its most load on one node
    reservation: float  # ReservationCapacity: load held on each node it occupies (0: none)
    total_capacity: float | None  # TotalApplicationCapacity: its most load in the cluster


@dataclass(frozen=True)
class Application:
    """An application group (Applications[]; SF's ApplicationDescription with its
    ApplicationCapacity): the services whose ApplicationName is `name` belong to it."""

    name: str
    minimum_nodes: int  # MinimumNodes (0: none)
    maximum_nodes: int | None  # MaximumNodes: its scaleout count (None: no limit)
    metrics: tuple[ApplicationMetric, ...]

    @property
    def limits(self) -> bool:
        """It limits something: a scaleout count, a capacity or a reservation."""
        capacities = (
            m.node_capacity is not None or m.total_capacity is not None or m.reservation > 0 for m in self.metrics
        )
        return self.maximum_nodes is not None or any(capacities)


@dataclass(frozen=True)
class Metric:
    """A service's metric with its weight and default loads (instance load = primary_load)."""

    name: str
    weight: float  # Zero 0, Low 0.1, Medium 0.3, High 1
    weight_name: str
    primary_load: float
    secondary_load: float


@dataclass(frozen=True)
class Node:
    """A node; capacities and properties already merged with its node type's."""

    name: str
    node_type: str | None
    fault_domain: tuple[str, ...]  # "fd:/dc0/r0" -> ("dc0", "r0")
    upgrade_domain: str
    capacities: dict[str, float]  # a metric absent here is unlimited on this node
    properties: dict[str, str | int | float | bool]  # includes NodeName and NodeType
    status: NodeStatus
    priority: int
    available_resources: dict[str, float] | None
    deactivation_intent: Intent | None = None  # a Disabled node's (default Pause)

    @property
    def keeps_replicas(self) -> bool:
        """Deactivated with Intent Pause or Restart: its replicas stay where they are (SF's PLB moves
        none off a deactivated node; only RemoveData and RemoveNode have them built elsewhere)."""
        return self.deactivation_intent is not None and self.deactivation_intent.keeps_replicas


@dataclass(frozen=True)
class Replica:
    """A replica or instance. `loads` holds only reported loads; others come from the metric."""

    replica_id: str | int  # as given, never rewritten
    role: Role
    node: str | None  # None: not placed yet
    loads: dict[str, float]
    move_cost: str | None  # None: the service's DefaultMoveCost

    def with_loads(self, loads: dict[str, float]) -> Replica:
        """This replica with other reported loads (a replay's load reports make tens of thousands
        a period: the record is copied field by field rather than built again)."""
        copied = object.__new__(Replica)
        copied.__dict__.update(self.__dict__, loads=loads)
        return copied


@dataclass(frozen=True)
class Partition:
    """A partition and its replicas; fewer replicas than the target = replicas to place."""

    service: str
    partition_id: str | int
    replicas: tuple[Replica, ...]


@dataclass(frozen=True)
class Service:
    """A service with SF's defaults filled in (metrics, move cost, priority, balancing)."""

    name: str
    type_name: str | None
    stateful: bool
    target: int  # TargetReplicaSetSize or InstanceCount (-1: one per eligible node)
    placement_constraints: str | None
    metrics: tuple[Metric, ...]
    default_move_cost: str
    correlations: tuple[Correlation, ...]  # at most one (SF keeps one parent per service)
    placement_policies: tuple[PlacementPolicy, ...]
    priority: int
    balancing_enabled: bool
    resource_governance: ResourceGovernance | None
    application: str | None  # ApplicationName, default fabric:/App for fabric:/App/Svc


@dataclass(frozen=True)
class ClusterState:
    """A validated cluster state. Per-metric maps cover every metric of `metric_names()`."""

    settings: dict  # every PLB setting (resolve_settings)
    balancing_thresholds: dict[str, float]  # default 1
    activity_thresholds: dict[str, float]  # default 0
    defragmentation_metrics: dict[str, bool]  # default False
    node_buffer_percentage: dict[str, float]  # default 0
    global_metric_weights: dict[str, float]  # only the given ones (SF's default is computed)
    node_types: tuple[NodeType, ...]
    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    partitions: tuple[Partition, ...]
    upgrade: Upgrade | None
    block_list: tuple[BlockEntry, ...]
    history: dict[str, tuple[str, ...]]  # str(ReplicaId) -> nodes
    resource_thresholds: dict[str, float]  # only the given ones
    # deep copy of the validated input; a replay's typed updates leave its Partitions and History
    # behind (`rendering.state_document` writes the state), so it is not part of the state's value
    document: dict = field(compare=False)
    notes: tuple[str, ...] = ()  # what SF accepts but ignores, for the run summary
    applications: tuple[Application, ...] = ()  # application groups (Applications), in input order
    _by_name: dict[str, Service] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {s.name: s for s in self.services})

    def metric_names(self) -> tuple[str, ...]:
        """Every metric of every service, sorted."""
        return tuple(sorted({m.name for s in self.services for m in s.metrics}))

    def service(self, name: str) -> Service:
        """The service called `name` (KeyError if none)."""
        return self._by_name[name]

    def replica_count(self) -> int:
        """Replicas the cluster should run: each partition's target, or the replicas it has if more."""
        target = {s.name: s.target for s in self.services}
        parts = self.partitions
        return sum(map(max, map(len, map(_REPLICAS, parts)), map(target.__getitem__, map(_SERVICE, parts))))
