"""The cluster state document (contract section 1): read, validate, fill in SF's defaults.

`load_state` reads JSON or YAML; `parse_state` checks a parsed document against
``schemas/state.schema.json`` and against Service Fabric's rules (references, uniqueness, ranges)
and returns a frozen `ClusterState`. Every problem is one `BadInput` naming the offending key or
value, e.g. ``small.yaml: Nodes[3].FaultDomain: 5 is not of type 'string'``. Tuples keep the
input order. The input is never modified.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from plbjax.errors import BadInput
from plbjax.settings import resolve_settings

# LoadBalancing/Constants.cpp: MetricWeightZero/Low/Medium/High.
METRIC_WEIGHTS = {"Zero": 0.0, "Low": 0.1, "Medium": 0.3, "High": 1.0}
# A metric without Weight is "Low": the default constructors of ServiceLoadMetricDescription
# (ServiceModel/ServiceLoadMetricDescription.cpp, Reliability/Failover/common/...) say so.
DEFAULT_METRIC_WEIGHT = "Low"
DEFAULT_MOVE_COST = "Low"
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
_LOAD_KEYS = ("PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad")
_BUILTIN_PROPERTIES = ("NodeName", "NodeType")


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
    status: str  # "Up" | "Down" | "Disabled"
    priority: int
    available_resources: dict[str, float] | None


@dataclass(frozen=True)
class Replica:
    """A replica or instance. `loads` holds only reported loads; others come from the metric."""

    replica_id: str | int  # as given, never rewritten
    role: str  # "Primary" | "Secondary" | "Instance"
    node: str | None  # None: not placed yet
    loads: dict[str, float]
    move_cost: str | None  # None: the service's DefaultMoveCost


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
    correlations: tuple[dict, ...]
    placement_policies: tuple[dict, ...]
    priority: int
    balancing_enabled: bool
    resource_governance: dict | None
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
    node_types: tuple[dict, ...]
    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    partitions: tuple[Partition, ...]
    upgrade: dict | None
    block_list: tuple[dict, ...]
    history: dict[str, tuple[str, ...]]  # str(ReplicaId) -> nodes
    resource_thresholds: dict[str, float]  # only the given ones
    document: dict  # deep copy of the validated input
    notes: tuple[str, ...] = ()  # what SF accepts but ignores, for the run summary
    _by_name: dict[str, Service] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {s.name: s for s in self.services})

    def metric_names(self) -> tuple[str, ...]:
        """Every metric of every service, sorted."""
        return tuple(sorted({m.name for s in self.services for m in s.metrics}))

    def service(self, name: str) -> Service:
        """The service called `name` (KeyError if none)."""
        return self._by_name[name]


# ---------------------------------------------------------------------------------- reading


def load_state(path: str | Path) -> ClusterState:
    """Read and validate the state document at `path`: .json, .yaml/.yml, or sniffed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None
    suffix = path.suffix.lower()
    if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip().startswith("{")):
        doc = _load_json(text, path)
    else:
        doc = _load_yaml(text, path)
    return parse_state(doc, str(path))


def _load_json(text: str, path: Path) -> object:
    def pairs(items: list[tuple[str, object]]) -> dict:
        out: dict = {}
        for key, value in items:
            if key in out:
                raise BadInput(f"{path}: invalid JSON: duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> float:
        raise BadInput(f"{path}: invalid JSON: {name} is not a number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader: _YamlLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            break  # construct_mapping reports it
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_YamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str, path: Path) -> object:
    try:
        return yaml.load(text, Loader=_YamlLoader)  # a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise BadInput(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: invalid YAML: {exc}") from None


# ------------------------------------------------------------------------------- validation


def parse_state(doc: Mapping, source: str = "<state>") -> ClusterState:
    """Validate a parsed state document and build its ClusterState; `doc` is not modified."""
    try:
        if not isinstance(doc, Mapping):
            got = "empty" if doc is None else f"a {type(doc).__name__}"
            raise BadInput(f"the document must be a mapping at the top level; it is {got}")
        doc = _plain_copy(doc, "")
        schema = _schema()
        if not _conforms(schema, doc):  # fast path; jsonschema names the problem
            import jsonschema   # only for the message: the fast path needs none

            error = jsonschema.exceptions.best_match(_validator().iter_errors(doc))
            if error is not None:
                raise BadInput(_describe(error))
        return _build(doc)
    except BadInput as exc:
        raise BadInput(f"{source}: {exc}") from None


@cache
def _schema() -> dict:
    """state.schema.json with every $ref replaced by its definition (the schema is not recursive)."""
    text = (Path(__file__).parent / "schemas" / "state.schema.json").read_text("utf-8")
    schema = json.loads(text)
    definitions = schema.pop("$defs")

    def inline(node: object) -> object:
        if isinstance(node, dict):
            node = {k: inline(v) for k, v in node.items()}
            ref = node.pop("$ref", None)
            return node if ref is None else inline(definitions[ref.removeprefix("#/$defs/")]) | node
        return [inline(v) for v in node] if isinstance(node, list) else node

    return inline(schema)


@cache
def _validator():
    """jsonschema's validator of the state schema, where "integer" means a JSON integer (jsonschema
    would also take 3.0, e.g. as a ReplicaId)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    strict = base.TYPE_CHECKER.redefine("integer", lambda _, v: _TYPES["integer"](v))
    return jsonschema.validators.extend(base, type_checker=strict)(_schema())


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _conforms(schema: dict, value: object) -> bool:
    """True only if `value` is valid against the inlined `schema`; False also when unsure.

    Handles just the keywords our schema uses; several times faster than jsonschema on big states.
    """
    is_dict, is_number = isinstance(value, dict), _TYPES["number"](value)
    for key, arg in schema.items():
        if key in ("description", "title", "$schema", "$id"):
            continue
        if key == "type":
            ok = any(_TYPES[t](value) for t in ([arg] if isinstance(arg, str) else arg))
        elif key == "enum":
            ok = any(_same(value, option) for option in arg)
        elif key == "const":
            ok = _same(value, arg)
        elif key == "required":
            ok = not is_dict or all(k in value for k in arg)
        elif key == "properties":
            ok = not is_dict or all(k not in value or _conforms(sub, value[k]) for k, sub in arg.items())
        elif key == "additionalProperties":
            known = schema.get("properties", {})
            extra = [v for k, v in value.items() if k not in known] if is_dict else []
            ok = all(_conforms(arg, v) for v in extra) if isinstance(arg, dict) else arg or not extra
        elif key == "propertyNames":
            ok = not is_dict or all(_conforms(arg, k) for k in value)
        elif key == "items":
            ok = not isinstance(value, list) or all(_conforms(arg, v) for v in value)
        elif key == "minimum":
            ok = not is_number or value >= arg
        elif key == "maximum":
            ok = not is_number or value <= arg
        elif key == "exclusiveMaximum":
            ok = not is_number or value < arg
        elif key == "minLength":
            ok = not isinstance(value, str) or len(value) >= arg
        else:
            return False
        if not ok:
            return False
    return True


# Loads, capacities and settings are searched in 32-bit floats, and the score squares node loads:
# larger numbers would overflow to infinities. Identifiers may be any size.
LARGEST = 1e15
_IDENTIFIERS = (".ReplicaId", ".PartitionId", ".InstanceId")


def _plain_copy(value: object, where: str) -> object:
    """Deep copy with string keys (YAML may give integer keys, e.g. ReplicaIds in History).

    Rejects NaN and infinities, which would pass the schema's range checks.
    """
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if type(key) is int:
                key = str(key)
            if not isinstance(key, str):
                raise BadInput(f"{where or 'top level'}: key {key!r} is not a string")
            out[key] = _plain_copy(item, _join(where, key))
        return out
    if isinstance(value, (list, tuple)):
        return [_plain_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"{where}: {value} is not a finite number")
    if (isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > LARGEST
            and not where.endswith(_IDENTIFIERS)):
        shown = f"{value:.6g}" if isinstance(value, float) or abs(value) < 1e30 else f"an integer of {len(str(abs(value)))} digits"
        raise BadInput(f"{where}: {shown} is beyond the largest number plbjax can search with ({LARGEST:g})")
    return value


def _join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _describe(error) -> str:
    """One line naming the path of the offending key or value."""
    where = ""
    for part in error.absolute_path:
        where = _join(where, part)
    where = where or "top level"
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties", {})
        extra = next(k for k in error.instance if k not in known)
        return f"{where}: unknown key {extra!r}"
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        return f"{where}: missing required key {missing!r}"
    return f"{where}: {error.message}"


def _claim(seen: dict, key: object, where: str, what: str) -> None:
    """Record `key` as first seen at `where`; BadInput if it was seen before."""
    if key in seen:
        raise BadInput(f"{where}: duplicate {what} (first at {seen[key]})")
    seen[key] = where


def _fault_domain(value: str, where: str) -> tuple[str, ...]:
    """``fd:/dc0/r0`` or ``/dc0/r0`` -> ("dc0", "r0")."""
    path = value[3:] if value.startswith("fd:") else value
    parts = path.split("/")
    if not path.startswith("/") or "" in parts[1:]:
        raise BadInput(f"{where}: {value!r} is not a fault domain like 'fd:/dc0/r0'")
    return tuple(parts[1:])


def _check_balancing_thresholds(values: dict, where: str) -> None:
    # LoadBalancing/Metric.cpp asserts BalancingThreshold >= 1 or == 0 (0: never balance).
    for metric, value in values.items():
        if value != 0 and value < 1:
            raise BadInput(f"{where}.{metric}: {value} must be 0 (never balance) or at least 1")


def _check_properties(values: dict, where: str) -> None:
    for name in _BUILTIN_PROPERTIES:
        if name in values:
            raise BadInput(f"{where}.{name}: {name} is a built-in node property and cannot be set")


# --------------------------------------------------------------------------------- building


def _build(doc: dict) -> ClusterState:
    document = _plain_copy(doc, "")  # a second, independent copy that nothing hands out
    settings = resolve_settings(doc.get("Settings"))
    _check_balancing_thresholds(doc.get("MetricBalancingThresholds", {}), "MetricBalancingThresholds")
    node_types = _node_types(doc.get("NodeTypes", []))
    nodes = _nodes(doc["Nodes"], node_types)
    node_names = {n.name for n in nodes}
    services = _services(doc["Services"])
    partitions = _partitions(doc["Partitions"], {s.name: s for s in services}, node_names)
    replica_ids = {str(r.replica_id) for p in partitions for r in p.replicas}
    metrics = sorted({m.name for s in services for m in s.metrics})

    def per_metric(key: str, default: float | bool, kind: type) -> dict:
        return {m: default for m in metrics} | {k: kind(v) for k, v in doc.get(key, {}).items()}

    return ClusterState(
        settings=settings,
        balancing_thresholds=per_metric("MetricBalancingThresholds", 1.0, float),
        activity_thresholds=per_metric("MetricActivityThresholds", 0.0, float),
        defragmentation_metrics=per_metric("DefragmentationMetrics", False, bool),
        node_buffer_percentage=per_metric("NodeBufferPercentage", 0.0, float),
        global_metric_weights={k: float(v) for k, v in doc.get("GlobalMetricWeights", {}).items()},
        node_types=tuple(node_types.values()),
        nodes=tuple(nodes),
        services=tuple(services),
        partitions=tuple(partitions),
        upgrade=_upgrade(doc.get("Upgrade"), services, nodes, replica_ids),
        block_list=_block_list(doc.get("BlockList", []), services, node_names),
        history=_history(doc.get("History", {}), replica_ids, node_names),
        resource_thresholds={k: float(v) for k, v in doc.get("ResourceThresholds", {}).items()},
        document=document,
        notes=_ignored_loads(doc["Services"]),
    )


def _ignored_loads(services: list[dict]) -> tuple[str, ...]:
    """Non-zero default loads a service's kind does not use (SF's ServiceLoadMetricDescription carries
    PrimaryDefaultLoad, SecondaryDefaultLoad and DefaultLoad whatever the kind)."""
    out = []
    for i, svc in enumerate(services):
        stateful = svc["ServiceKind"] == "Stateful"
        for j, metric in enumerate(svc.get("Metrics") or []):
            if stateful:
                unused = ["DefaultLoad"] if {"PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad"} <= set(metric) \
                    else []
            else:
                unused = [k for k in ("PrimaryDefaultLoad", "SecondaryDefaultLoad")
                          if k in metric and metric[k] != metric.get("DefaultLoad", 0)]
            out += [f"Services[{i}].Metrics[{j}].{k} = {metric[k]:g} ignored (a {svc['ServiceKind'].lower()} "
                    f"service uses {'Primary/SecondaryDefaultLoad' if stateful else 'DefaultLoad'})"
                    for k in unused if metric[k]]
    return tuple(out)


def _node_types(entries: list[dict]) -> dict[str, dict]:
    by_name: dict[str, dict] = {}
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"NodeTypes[{i}]"
        _claim(seen, entry["Name"], f"{where}.Name", f"node type {entry['Name']!r}")
        _check_properties(entry.get("PlacementProperties", {}), f"{where}.PlacementProperties")
        overrides = "PlacementAndLoadBalancingOverrides"
        _check_balancing_thresholds(
            entry.get(overrides, {}).get("MetricBalancingThresholdsPerNodeType", {}),
            f"{where}.{overrides}.MetricBalancingThresholdsPerNodeType")
        by_name[entry["Name"]] = entry
    return by_name


def _nodes(entries: list[dict], node_types: dict[str, dict]) -> list[Node]:
    nodes = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Nodes[{i}]"
        name = entry["NodeName"]
        _claim(seen, name, f"{where}.NodeName", f"NodeName {name!r}")
        type_name = entry.get("NodeType")
        if node_types and type_name is not None and type_name not in node_types:
            raise BadInput(f"{where}.NodeType: {type_name!r} is not among NodeTypes")
        node_type = node_types.get(type_name, {})
        _check_properties(entry.get("PlacementProperties", {}), f"{where}.PlacementProperties")
        properties = node_type.get("PlacementProperties", {}) | entry.get("PlacementProperties", {})
        properties["NodeName"] = name
        if type_name is not None:
            properties["NodeType"] = type_name
        capacities = node_type.get("Capacities", {}) | entry.get("Capacities", {})
        upgrade_domain = str(entry["UpgradeDomain"])
        if not upgrade_domain:
            raise BadInput(f"{where}.UpgradeDomain: must not be empty")
        available = entry.get("AvailableResources")
        nodes.append(Node(
            name=name,
            node_type=type_name,
            fault_domain=_fault_domain(entry["FaultDomain"], f"{where}.FaultDomain"),
            upgrade_domain=upgrade_domain,
            capacities={k: float(v) for k, v in capacities.items()},
            properties=properties,
            status=entry.get("NodeStatus", "Up"),
            priority=entry.get("Priority", 0),
            available_resources=None if available is None else {k: float(v) for k, v in available.items()},
        ))
    return nodes


def _services(entries: list[dict]) -> list[Service]:
    services = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Services[{i}]"
        name = entry["ServiceName"]
        _claim(seen, name, f"{where}.ServiceName", f"ServiceName {name!r}")
        stateful = entry["ServiceKind"] == "Stateful"
        kind = entry["ServiceKind"].lower()
        if stateful:
            target_key, other_key = "TargetReplicaSetSize", "InstanceCount"
        else:
            target_key, other_key = "InstanceCount", "TargetReplicaSetSize"
        if other_key in entry:
            raise BadInput(f"{where}.{other_key}: not used by a {kind} service (use {target_key})")
        if target_key not in entry:
            raise BadInput(f"{where}: a {kind} service needs {target_key}")
        target = entry[target_key]
        if not stateful and target == 0:
            raise BadInput(f"{where}.InstanceCount: 0; use at least 1, or -1 for one per node")
        for j, policy in enumerate(entry.get("PlacementPolicies", [])):
            policy_where = f"{where}.PlacementPolicies[{j}]"
            if policy["Type"] == "RequireDomainDistribution":
                continue
            if "DomainName" not in policy:
                raise BadInput(f"{policy_where}: {policy['Type']} needs DomainName")
            _fault_domain(policy["DomainName"], f"{policy_where}.DomainName")
        constraints = entry.get("PlacementConstraints", "").strip()
        services.append(Service(
            name=name,
            type_name=entry.get("ServiceTypeName"),
            stateful=stateful,
            target=target,
            placement_constraints=constraints or None,
            metrics=_metrics(entry.get("Metrics"), stateful, target, where),
            default_move_cost=entry.get("DefaultMoveCost", DEFAULT_MOVE_COST),
            correlations=tuple(entry.get("Correlations", [])),
            placement_policies=tuple(entry.get("PlacementPolicies", [])),
            priority=entry.get("Priority", 0),
            balancing_enabled=entry.get("BalancingPolicy", "Enabled") == "Enabled",
            resource_governance=entry.get("ResourceGovernance"),
            application=entry.get("ApplicationName", _application_of(name)),
        ))
    _check_correlations(services)
    return services


def _application_of(service_name: str) -> str | None:
    """fabric:/App/Svc -> fabric:/App (SF's naming convention), else None."""
    prefix = "fabric:/"
    parts = service_name[len(prefix):].split("/") if service_name.startswith(prefix) else []
    return prefix + parts[0] if len(parts) >= 2 and parts[0] else None


def _metrics(entries: list[dict] | None, stateful: bool, target: int, where: str) -> tuple[Metric, ...]:
    if not entries:
        entries = [{"Name": name, "Weight": weight} for name, weight in DEFAULT_METRICS]
    metrics = []
    seen: dict[str, str] = {}
    for j, entry in enumerate(entries):
        metric_where = f"{where}.Metrics[{j}]"
        name = entry["Name"]
        _claim(seen, name, f"{metric_where}.Name", f"metric {name!r}")
        given = [key for key in _LOAD_KEYS if key in entry]
        if name in BUILTIN_LOADS:
            if given:
                raise BadInput(f"{metric_where}.{given[0]}: {name} is a built-in metric; "
                               "SF derives its load from the replica role")
            (primary, secondary), instance = BUILTIN_LOADS[name]
            if not stateful:
                primary = secondary = instance
        elif stateful:
            default = entry.get("DefaultLoad", 0)
            primary = entry.get("PrimaryDefaultLoad", default)
            secondary = entry.get("SecondaryDefaultLoad", default)
            if target == 1:  # ServiceDescription::AlignSinletonReplicaDefLoads
                secondary = primary
        else:       # SF's descriptions carry all three loads; an instance's is DefaultLoad
            primary = secondary = entry.get("DefaultLoad", 0)
        weight_name = entry.get("Weight", DEFAULT_METRIC_WEIGHT)
        metrics.append(Metric(name, METRIC_WEIGHTS[weight_name], weight_name,
                              float(primary), float(secondary)))
    return tuple(metrics)


def _check_correlations(services: list[Service]) -> None:
    # SF's PLB keeps one affinitized (parent) service per service and rejects affinity chains
    # (LoadBalancing/ServiceDescription.h affinitizedService_; PlacementAndLoadBalancing::IsAffinityChain).
    position = {s.name: i for i, s in enumerate(services)}
    parent = {}
    for i, service in enumerate(services):
        where = f"Services[{i}].Correlations"
        if len(service.correlations) > 1:
            raise BadInput(f"{where}[1]: SF supports one correlation per service")
        for correlation in service.correlations:
            other = correlation["ServiceName"]
            if other not in position:
                raise BadInput(f"{where}[0].ServiceName: unknown service {other!r}")
            if other == service.name:
                raise BadInput(f"{where}[0].ServiceName: a service cannot be correlated with itself")
            parent[service.name] = other
    for child, other in parent.items():
        if other in parent:
            raise BadInput(f"Services[{position[child]}].Correlations[0].ServiceName: {other!r} is "
                           f"itself correlated with {parent[other]!r}; SF does not support affinity chains")


def _partitions(entries: list[dict], services: dict[str, Service], node_names: set[str]) -> list[Partition]:
    partitions = []
    seen_partitions: dict[tuple[str, str], str] = {}
    seen_replicas: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Partitions[{i}]"
        service = services.get(entry["ServiceName"])
        if service is None:
            raise BadInput(f"{where}.ServiceName: unknown service {entry['ServiceName']!r}")
        pid = entry["PartitionId"]
        _claim(seen_partitions, (service.name, str(pid)), f"{where}.PartitionId",
               f"PartitionId {pid!r} of service {service.name!r}")
        metric_names = [m.name for m in service.metrics]
        on_node: dict[str, str] = {}
        has_primary = False
        replicas = []
        for j, rep in enumerate(entry["Replicas"]):
            rep_where = f"{where}.Replicas[{j}]"
            rid, role, node = rep["ReplicaId"], rep["Role"], rep["NodeName"]
            _claim(seen_replicas, str(rid), f"{rep_where}.ReplicaId", f"ReplicaId {rid!r}")
            if service.stateful == (role == "Instance"):
                kind, roles = (("stateful", "Primary or Secondary") if service.stateful
                               else ("stateless", "Instance"))
                raise BadInput(f"{rep_where}.Role: {role!r} in {kind} service {service.name!r} (use {roles})")
            if role == "Primary":
                if has_primary:
                    raise BadInput(f"{rep_where}.Role: a second Primary in partition {pid!r}")
                has_primary = True
            if node is not None:
                if node not in node_names:
                    raise BadInput(f"{rep_where}.NodeName: unknown node {node!r}")
                if node in on_node:
                    raise BadInput(f"{rep_where}.NodeName: {node!r} already holds a replica of "
                                   f"partition {pid!r} ({on_node[node]})")
                on_node[node] = rep_where
            for metric in rep.get("Loads", {}):
                if metric not in metric_names:
                    raise BadInput(f"{rep_where}.Loads.{metric}: service {service.name!r} has no "
                                   f"metric {metric!r} (its metrics: {', '.join(metric_names)})")
                if metric in BUILTIN_LOADS:
                    raise BadInput(f"{rep_where}.Loads.{metric}: built-in metric; "
                                   "SF derives its load from the replica role")
            replicas.append(Replica(
                replica_id=rid,
                role=role,
                node=node,
                loads={k: float(v) for k, v in rep.get("Loads", {}).items()},
                move_cost=rep.get("MoveCost"),
            ))
        partitions.append(Partition(service.name, pid, tuple(replicas)))
    return partitions


def _upgrade(upgrade: dict | None, services: list[Service], nodes: list[Node],
             replica_ids: set[str]) -> dict | None:
    if upgrade is None:
        return None
    if upgrade["Scope"] == "Application":
        app = upgrade.get("ApplicationName")
        if app is None:
            raise BadInput("Upgrade.ApplicationName: required when Scope is 'Application'")
        if app not in {s.application for s in services}:
            raise BadInput(f"Upgrade.ApplicationName: no service belongs to {app!r}")
    domains = {n.upgrade_domain for n in nodes}
    done = [str(ud) for ud in upgrade.get("UpgradeDomainsDone", [])]
    for i, ud in enumerate(done):
        if ud not in domains:
            raise BadInput(f"Upgrade.UpgradeDomainsDone[{i}]: unknown upgrade domain {ud!r}")
    node_names = {n.name for n in nodes}
    for rid, node in upgrade.get("Snapshot", {}).items():
        if rid not in replica_ids:
            raise BadInput(f"Upgrade.Snapshot.{rid}: unknown ReplicaId {rid!r}")
        if node not in node_names:
            raise BadInput(f"Upgrade.Snapshot.{rid}: unknown node {node!r}")
    return upgrade | {"UpgradeDomainsDone": done} if "UpgradeDomainsDone" in upgrade else upgrade


def _block_list(entries: list[dict], services: list[Service],
                node_names: set[str]) -> tuple[dict, ...]:
    type_names = {s.type_name for s in services}
    for i, entry in enumerate(entries):
        if entry["NodeName"] not in node_names:
            raise BadInput(f"BlockList[{i}].NodeName: unknown node {entry['NodeName']!r}")
        if entry["ServiceTypeName"] not in type_names:
            raise BadInput(f"BlockList[{i}].ServiceTypeName: no service has ServiceTypeName "
                           f"{entry['ServiceTypeName']!r}")
    return tuple(entries)


def _history(history: dict, replica_ids: set[str], node_names: set[str]) -> dict[str, tuple[str, ...]]:
    for rid, history_nodes in history.items():
        if rid not in replica_ids:
            raise BadInput(f"History.{rid}: unknown ReplicaId {rid!r}")
        for i, node in enumerate(history_nodes):
            if node not in node_names:
                raise BadInput(f"History.{rid}[{i}]: unknown node {node!r}")
    return {rid: tuple(history_nodes) for rid, history_nodes in history.items()}
