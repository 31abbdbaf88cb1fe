"""A schema-valid state document to a `ClusterState`: Service Fabric's rules and defaults, kind by kind.

References, uniqueness and ranges the schema cannot say (node types, nodes, services and their
metrics and correlations, partitions and replicas, the upgrade, the block list, History), each
problem a `BadInput` naming its key; SF's defaults filled in (metrics, weights, loads, move costs).
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf._state.applications import application_notes, read_applications
from plbjax.sf._state.cluster import (
    BUILTIN_LOADS,
    DEFAULT_METRIC_WEIGHT,
    DEFAULT_METRICS,
    DEFAULT_MOVE_COST,
    METRIC_WEIGHTS,
    BlockEntry,
    ClusterState,
    CodePackage,
    Correlation,
    Metric,
    Node,
    NodeType,
    Partition,
    PlacementPolicy,
    Replica,
    ResourceGovernance,
    Service,
    Upgrade,
)
from plbjax.sf._state.columns import Columns
from plbjax.sf._state.expressions import parse as parse_constraint
from plbjax.sf._state.schema_check import plain_copy
from plbjax.sf._state.settings import resolve_settings
from plbjax.sf._state.vocabulary import Intent, NodeStatus, Role

_LOAD_KEYS = ("PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad")
_BUILTIN_PROPERTIES = ("NodeName", "NodeType")


def build_state(doc: dict, document: dict | None = None, columns: Columns | None = None) -> ClusterState:
    """The state of a schema-valid document (a private copy: the state shares its parts); `document`
    (default: a copy of `doc`) is kept as the state's document; `columns` are doc's Partitions, read."""
    if document is None:
        document = plain_copy(doc, "")  # a second, independent copy that nothing hands out
    settings = resolve_settings(doc.get("Settings"))
    _check_balancing_thresholds(doc.get("MetricBalancingThresholds", {}), "MetricBalancingThresholds")
    node_types = _node_types(doc.get("NodeTypes", []))
    nodes = _nodes(doc["Nodes"], node_types)
    node_names = {n.name for n in nodes}
    services = _services(doc["Services"])
    if columns is None:
        partitions = _partitions(doc["Partitions"], {s.name: s for s in services}, node_names)
        replica_ids = {str(r.replica_id) for p in partitions for r in p.replicas}
    else:
        partitions, replica_ids = columns.partitions({s.name: s for s in services}, nodes)
    metrics = sorted({m.name for s in services for m in s.metrics})
    applications = read_applications(doc.get("Applications", []), services, settings)

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
        upgrade=read_upgrade(doc.get("Upgrade"), services, nodes, replica_ids),
        block_list=read_block_list(doc.get("BlockList", []), services, node_names),
        history=read_history(doc.get("History", {}), replica_ids, node_names),
        resource_thresholds={k: float(v) for k, v in doc.get("ResourceThresholds", {}).items()},
        document=document,
        notes=_ignored_loads(doc["Services"]) + application_notes(applications, services, set(metrics)),
        applications=applications,
    )


def _ignored_loads(services: list[dict]) -> tuple[str, ...]:
    """Non-zero default loads a service's kind does not use (SF's ServiceLoadMetricDescription carries
    PrimaryDefaultLoad, SecondaryDefaultLoad and DefaultLoad whatever the kind), and those of a
    built-in metric (SF accepts them and loads it by role)."""
    out = []
    for i, svc in enumerate(services):
        stateful = svc["ServiceKind"] == "Stateful"
        for j, metric in enumerate(svc.get("Metrics") or []):
            if metric["Name"] in BUILTIN_LOADS:  # SF derives a built-in metric's load from the role
                out += [
                    f"Services[{i}].Metrics[{j}].{k} = {metric[k]:g} ignored ({metric['Name']} is a built-in "
                    "metric: its load is the replica's role)"
                    for k in _LOAD_KEYS
                    if metric.get(k)
                ]
                continue
            if stateful:
                unused = (
                    ["DefaultLoad"]
                    if {"PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad"} <= set(metric)
                    else []
                )
            else:
                unused = [
                    k
                    for k in ("PrimaryDefaultLoad", "SecondaryDefaultLoad")
                    if k in metric and metric[k] != metric.get("DefaultLoad", 0)
                ]
            out += [
                f"Services[{i}].Metrics[{j}].{k} = {metric[k]:g} ignored (a {svc['ServiceKind'].lower()} "
                f"service uses {'Primary/SecondaryDefaultLoad' if stateful else 'DefaultLoad'})"
                for k in unused
                if metric[k]
            ]
    return tuple(out)


def _node_types(entries: list[dict]) -> dict[str, NodeType]:
    by_name: dict[str, NodeType] = {}
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"NodeTypes[{i}]"
        _claim(seen, entry["Name"], f"{where}.Name", f"node type {entry['Name']!r}")
        _check_properties(entry.get("PlacementProperties", {}), f"{where}.PlacementProperties")
        overrides = "PlacementAndLoadBalancingOverrides"
        given = entry.get(overrides, {})
        balancing = given.get("MetricBalancingThresholdsPerNodeType", {})
        _check_balancing_thresholds(balancing, f"{where}.{overrides}.MetricBalancingThresholdsPerNodeType")
        by_name[entry["Name"]] = NodeType(
            name=entry["Name"],
            capacities={k: float(v) for k, v in entry.get("Capacities", {}).items()},
            properties=dict(entry.get("PlacementProperties", {})),
            balancing_thresholds={k: float(v) for k, v in balancing.items()},
            activity_thresholds={k: float(v) for k, v in given.get("MetricActivityThresholdsPerNodeType", {}).items()},
        )
    return by_name


def _nodes(entries: list[dict], node_types: dict[str, NodeType]) -> list[Node]:
    nodes = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Nodes[{i}]"
        name = entry["NodeName"]
        _claim(seen, name, f"{where}.NodeName", f"NodeName {name!r}")
        type_name = entry.get("NodeType")
        if node_types and type_name is not None and type_name not in node_types:
            raise BadInput(f"{where}.NodeType: {type_name!r} is not among NodeTypes")
        node_type = node_types.get(type_name) if type_name is not None else None
        _check_properties(entry.get("PlacementProperties", {}), f"{where}.PlacementProperties")
        properties = (node_type.properties if node_type is not None else {}) | entry.get("PlacementProperties", {})
        properties["NodeName"] = name
        if type_name is not None:
            properties["NodeType"] = type_name
        capacities = (node_type.capacities if node_type is not None else {}) | entry.get("Capacities", {})
        upgrade_domain = str(entry["UpgradeDomain"])
        if not upgrade_domain:
            raise BadInput(f"{where}.UpgradeDomain: must not be empty")
        available = entry.get("AvailableResources")
        status = NodeStatus(entry.get("NodeStatus", NodeStatus.UP))
        if "DeactivationIntent" in entry and status is not NodeStatus.DISABLED:
            raise BadInput(f"{where}.DeactivationIntent: only a Disabled node has one (NodeStatus {status})")
        nodes.append(
            Node(
                name=name,
                node_type=type_name,
                fault_domain=_fault_domain(entry["FaultDomain"], f"{where}.FaultDomain"),
                upgrade_domain=upgrade_domain,
                capacities={k: float(v) for k, v in capacities.items()},
                properties=properties,
                status=status,
                priority=entry.get("Priority", 0),
                available_resources=None if available is None else {k: float(v) for k, v in available.items()},
                deactivation_intent=(
                    Intent(entry.get("DeactivationIntent", Intent.PAUSE)) if status is NodeStatus.DISABLED else None
                ),
            )
        )
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
        try:
            parse_constraint(constraints)
        except BadInput as exc:
            raise BadInput(
                f"{where}.PlacementConstraints of service {name!r}: {str(exc).removeprefix('PlacementConstraints ')}"
            ) from None
        services.append(
            Service(
                name=name,
                type_name=entry.get("ServiceTypeName"),
                stateful=stateful,
                target=target,
                placement_constraints=constraints or None,
                metrics=_metrics(entry.get("Metrics"), stateful, target, where),
                default_move_cost=entry.get("DefaultMoveCost", DEFAULT_MOVE_COST),
                correlations=tuple(Correlation(c["ServiceName"], c["Scheme"]) for c in entry.get("Correlations", [])),
                placement_policies=tuple(
                    PlacementPolicy(p["Type"], p.get("DomainName")) for p in entry.get("PlacementPolicies", [])
                ),
                priority=entry.get("Priority", 0),
                balancing_enabled=entry.get("BalancingPolicy", "Enabled") == "Enabled",
                resource_governance=_resource_governance(entry.get("ResourceGovernance")),
                application=entry.get("ApplicationName", _application_of(name)),
            )
        )
    _check_correlations(services)
    return services


def _resource_governance(given: dict | None) -> ResourceGovernance | None:
    """A service's ResourceGovernance, as given (None: not given)."""
    if given is None:
        return None
    packages = tuple(
        CodePackage(p["Name"], p.get("CpuShares", 0), p.get("MemoryInMB", 0)) for p in given.get("CodePackages", [])
    )
    return ResourceGovernance(cpu_cores=given.get("CpuCores"), code_packages=packages)


def _application_of(service_name: str) -> str | None:
    """fabric:/App/Svc -> fabric:/App (SF's naming convention), else None."""
    prefix = "fabric:/"
    parts = service_name[len(prefix) :].split("/") if service_name.startswith(prefix) else []
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
        if name in BUILTIN_LOADS:  # default loads given are ignored (`_ignored_loads` notes them)
            (primary, secondary), instance = BUILTIN_LOADS[name]
            if not stateful:
                primary = secondary = instance
        elif stateful:
            default = entry.get("DefaultLoad", 0)
            primary = entry.get("PrimaryDefaultLoad", default)
            secondary = entry.get("SecondaryDefaultLoad", default)
            if target == 1:  # ServiceDescription::AlignSinletonReplicaDefLoads
                secondary = primary
        else:  # SF's descriptions carry all three loads; an instance's is DefaultLoad
            primary = secondary = entry.get("DefaultLoad", 0)
        weight_name = entry.get("Weight", DEFAULT_METRIC_WEIGHT)
        metrics.append(Metric(name, METRIC_WEIGHTS[weight_name], weight_name, float(primary), float(secondary)))
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
            other = correlation.service
            if other not in position:
                raise BadInput(f"{where}[0].ServiceName: unknown service {other!r}")
            if other == service.name:
                raise BadInput(f"{where}[0].ServiceName: a service cannot be correlated with itself")
            parent[service.name] = other
    for child, other in parent.items():
        if other in parent:
            raise BadInput(
                f"Services[{position[child]}].Correlations[0].ServiceName: {other!r} is "
                f"itself correlated with {parent[other]!r}; SF does not support affinity chains"
            )


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
        _claim(
            seen_partitions,
            (service.name, str(pid)),
            f"{where}.PartitionId",
            f"PartitionId {pid!r} of service {service.name!r}",
        )
        metric_names = [m.name for m in service.metrics]
        on_node: dict[str, str] = {}
        has_primary = False
        replicas = []
        for j, rep in enumerate(entry["Replicas"]):
            rep_where = f"{where}.Replicas[{j}]"
            rid, word, node = rep["ReplicaId"], rep["Role"], rep["NodeName"]
            role = Role(word)
            _claim(seen_replicas, str(rid), f"{rep_where}.ReplicaId", f"ReplicaId {rid!r}")
            if service.stateful == (role is Role.INSTANCE):
                kind, roles = ("stateful", "Primary or Secondary") if service.stateful else ("stateless", Role.INSTANCE)
                raise BadInput(f"{rep_where}.Role: {word!r} in {kind} service {service.name!r} (use {roles})")
            if role is Role.PRIMARY:
                if has_primary:
                    raise BadInput(f"{rep_where}.Role: a second Primary in partition {pid!r}")
                has_primary = True
            if node is not None:
                if node not in node_names:
                    raise BadInput(f"{rep_where}.NodeName: unknown node {node!r}")
                if node in on_node:
                    raise BadInput(
                        f"{rep_where}.NodeName: {node!r} already holds a replica of partition {pid!r} ({on_node[node]})"
                    )
                on_node[node] = rep_where
            for metric in rep.get("Loads", {}):
                if metric not in metric_names:
                    raise BadInput(
                        f"{rep_where}.Loads.{metric}: service {service.name!r} has no "
                        f"metric {metric!r} (its metrics: {', '.join(metric_names)})"
                    )
                if metric in BUILTIN_LOADS:
                    raise BadInput(
                        f"{rep_where}.Loads.{metric}: built-in metric; SF derives its load from the replica role"
                    )
            replicas.append(
                Replica(
                    replica_id=rid,
                    role=role,
                    node=node,
                    loads={k: float(v) for k, v in rep.get("Loads", {}).items()},
                    move_cost=rep.get("MoveCost"),
                )
            )
        partitions.append(Partition(service.name, pid, tuple(replicas)))
    return partitions


def read_upgrade(
    upgrade: dict | None, services: list[Service], nodes: list[Node], replica_ids: set[str]
) -> Upgrade | None:
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
    return Upgrade(
        in_progress=upgrade["InProgress"],
        scope=upgrade["Scope"],
        application=upgrade.get("ApplicationName"),
        domains_done=tuple(done),
        snapshot={str(rid): node for rid, node in upgrade.get("Snapshot", {}).items()},
    )


def read_block_list(entries: list[dict], services: list[Service], node_names: set[str]) -> tuple[BlockEntry, ...]:
    type_names = {s.type_name for s in services}
    for i, entry in enumerate(entries):
        if entry["NodeName"] not in node_names:
            raise BadInput(f"BlockList[{i}].NodeName: unknown node {entry['NodeName']!r}")
        if entry["ServiceTypeName"] not in type_names:
            raise BadInput(
                f"BlockList[{i}].ServiceTypeName: no service has ServiceTypeName {entry['ServiceTypeName']!r}"
            )
    return tuple(BlockEntry(entry["NodeName"], entry["ServiceTypeName"]) for entry in entries)


def read_history(history: dict, replica_ids: set[str], node_names: set[str]) -> dict[str, tuple[str, ...]]:
    for rid, history_nodes in history.items():
        if rid not in replica_ids:
            raise BadInput(f"History.{rid}: unknown ReplicaId {rid!r}")
        for i, node in enumerate(history_nodes):
            if node not in node_names:
                raise BadInput(f"History.{rid}[{i}]: unknown node {node!r}")
    return {rid: tuple(history_nodes) for rid, history_nodes in history.items()}


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
