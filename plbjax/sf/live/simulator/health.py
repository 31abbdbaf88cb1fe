"""Health, upgrade, version and load answers, as SF shapes them, and the faults a test injects for them.

Shapes: the Service Fabric REST reference (learn.microsoft.com/rest/api/servicefabric: sfclient-api-
getclusterhealth, -getnodehealth, -getpartitionhealth, -getapplicationhealth, -getservicehealth,
-getclusterupgradeprogress, -getclusterversion, -getclusterloadinformation, -getnodeloadinfo) and the
models of azure-servicefabric (ClusterHealth, NodeHealth, PartitionHealth, ApplicationHealth, ServiceHealth,
ClusterUpgradeProgressObject, ClusterVersion, ClusterLoadInfo, NodeLoadInfo). An entity's aggregated
health is the worst of its own (injected) state and its children's, as SF's default health policies
(no unhealthy percentage allowed, warnings not errors) aggregate. A partition below its target replica
count is Warning, as SF reports it; a Down node Error.

Faults: ``POST /$/SimulatorFault?Kind=...`` (api-version not needed), the route behind `inject`:

- ``Kind=Health&Entity=partition|node|application|service&Name=ID&HealthState=Ok|Warning|Error|Unknown``
- ``Kind=Upgrade[&Seconds=S][&Application=ID]``: a cluster upgrade (the application's) starts now and rolls
  for S simulated seconds (default: until the simulator stops);
- ``Kind=BalancerMove&PartitionId=ID&CurrentNodeName=A&NewNodeName=B``: SF's balancer moves the replica.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from plbjax.sf import HealthState, NodeStatus, ReplicaStatus
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.simulator.cluster import Cluster, Partition, Refused, Replica, Upgrade
from plbjax.sf.live.simulator.records import (
    NODE_CAPACITY,
    DomainState,
    MetricLoad,
    UpgradeState,
    take,
    worst,
)
from plbjax.sf.live.simulator.served import Served

FAULT_ROUTE = "SimulatorFault"
CODE_VERSION = "10.1.1951.9590"
NEVER = "0001-01-01T00:00:00.000Z"


# --- health -------------------------------------------------------------------------------------


def _event(kind: str, state: HealthState) -> list[Json]:
    """The health event an injected state shows (none when Ok)."""
    if state is HealthState.OK:
        return []
    return [
        {
            "SourceId": "Simulator",
            "Property": f"Injected{kind.title()}Fault",
            "HealthState": state.value,
            "TimeToLiveInMilliSeconds": "P10675199DT2H48M5.4775807S",
            "Description": f"The simulator's injected {kind} fault.",
            "SequenceNumber": "1",
            "RemoveWhenExpired": False,
            "SourceUtcTimestamp": NEVER,
            "LastModifiedUtcTimestamp": NEVER,
            "IsExpired": False,
        }
    ]


def _entity(kind: str, own: HealthState, aggregated: HealthState, extra: Json) -> Json:
    """The common part of an EntityHealth answer."""
    return {
        "AggregatedHealthState": aggregated.value,
        "HealthEvents": _event(kind, own),
        "UnhealthyEvaluations": [],
        **extra,
    }


def partition_state(c: Cluster, part: Partition) -> HealthState:
    """A partition's aggregated health: its injected state; Warning when below its target count."""
    short = HealthState.WARNING if c.short(part) else HealthState.OK
    return worst([c.health_of("partition", part.pid.lower()), short])


def node_state(c: Cluster, name: str) -> HealthState:
    return c.health_of("node", name)


def service_state(s: Served, sid: str) -> HealthState:
    c = s.cluster
    parts = [c.partitions[p.lower()] for p in s.service_partitions.get(sid, []) if p.lower() in c.partitions]
    return worst([c.health_of("service", sid), *(partition_state(c, p) for p in parts)])


def _services(s: Served, app_id: str) -> list[Json]:
    rel = f"services/{app_id}.json"
    return s.items(rel) if rel in s.files else []


def application_state(s: Served, app_id: str) -> HealthState:
    own = s.cluster.health_of("application", app_id)
    return worst([own, *(service_state(s, str(i.get("Id"))) for i in _services(s, app_id))])


def _app(s: Served, app_id: str) -> Json:
    found = [a for a in s.items("applications.json") if a.get("Id") == app_id]
    if not found:
        raise Refused("FABRIC_E_APPLICATION_NOT_FOUND", "Application not found.")
    return found[0]


def cluster(s: Served) -> Json:
    """ClusterHealth: the worst of the nodes' and applications' states."""
    nodes = [{"Name": n, "AggregatedHealthState": node_state(s.cluster, n).value} for n in s.node_items]
    apps = [
        {"Name": a.get("Name"), "AggregatedHealthState": application_state(s, str(a.get("Id"))).value}
        for a in s.items("applications.json")
    ]
    states = [HealthState.read(e["AggregatedHealthState"]) for e in [*nodes, *apps]]
    return _entity(
        "cluster", HealthState.OK, worst(states), {"NodeHealthStates": nodes, "ApplicationHealthStates": apps}
    )


def node(s: Served, name: str) -> Json:
    """NodeHealth."""
    own = node_state(s.cluster, name)
    return _entity("node", own, own, {"Name": name})


def partition(s: Served, part: Partition) -> Json:
    """PartitionHealth with its replicas' states."""
    c = s.cluster
    replicas = []
    for r in part.replicas:
        if r.status == ReplicaStatus.DROPPED:
            continue
        state = HealthState.WARNING if r.status == ReplicaStatus.DOWN else HealthState.OK
        kind = "Stateful" if part.stateful else "Stateless"  # an instance's id is a ReplicaId here too (SF's)
        replicas.append(
            {"ServiceKind": kind, "AggregatedHealthState": state.value, "PartitionId": part.pid, "ReplicaId": r.rid}
        )
    own = c.health_of("partition", part.pid.lower())
    return _entity(
        "partition", own, partition_state(c, part), {"PartitionId": part.pid, "ReplicaHealthStates": replicas}
    )


def service(s: Served, sid: str) -> Json:
    """ServiceHealth with its partitions' states."""
    if sid not in s.service_partitions:
        raise Refused("FABRIC_E_SERVICE_DOES_NOT_EXIST", "Service does not exist.")
    c = s.cluster
    parts = [c.partitions[p.lower()] for p in s.service_partitions[sid] if p.lower() in c.partitions]
    states = [{"PartitionId": p.pid, "AggregatedHealthState": partition_state(c, p).value} for p in parts]
    name = s.service_names.get(sid) or f"fabric:/{sid.replace('~', '/')}"
    own = c.health_of("service", sid)
    return _entity("service", own, service_state(s, sid), {"Name": name, "PartitionHealthStates": states})


def application(s: Served, app_id: str) -> Json:
    """ApplicationHealth with its services' states."""
    app = _app(s, app_id)
    services = [
        {"ServiceName": i.get("Name"), "AggregatedHealthState": service_state(s, str(i.get("Id"))).value}
        for i in _services(s, app_id)
    ]
    own = s.cluster.health_of("application", app_id)
    extra = {"Name": app.get("Name"), "ServiceHealthStates": services, "DeployedApplicationHealthStates": []}
    return _entity("application", own, application_state(s, app_id), extra)


# --- upgrade and version --------------------------------------------------------------------------


def _code_version(s: Served) -> str:
    return str(
        next((n.raw.get("CodeVersion") for n in s.node_items.values() if n.raw.get("CodeVersion")), CODE_VERSION)
    )


def upgrade_progress(s: Served) -> Json:
    """ClusterUpgradeProgressObject: RollingForwardInProgress while an injected upgrade rolls (its domains
    done one by one), else RollingForwardCompleted at the nodes' code version."""
    c = s.cluster
    domains = sorted({str(n.raw.get("UpgradeDomain", "0")) for n in s.node_items.values()})
    rolling = c.upgrade()
    if rolling is None:
        done = c.upgraded()
        version = done[-1].code_version if done else _code_version(s)
        states = [{"Name": d, "State": DomainState.COMPLETED.value} for d in domains]
        return _progress(version, UpgradeState.COMPLETED, states, "", 0.0)
    share = (c.clock - rolling.started) / rolling.seconds if math.isfinite(rolling.seconds) else 0.0
    current = min(int(share * len(domains)), len(domains) - 1) if domains else 0
    states = [
        {"Name": d, "State": (DomainState.COMPLETED if i < current else DomainState.IN_PROGRESS if i == current
                              else DomainState.PENDING).value}
        for i, d in enumerate(domains)
    ]  # fmt: skip
    following = domains[current + 1] if current + 1 < len(domains) else ""
    elapsed = (c.clock - rolling.started) * 1000
    return _progress(rolling.code_version, UpgradeState.ROLLING_FORWARD, states, following, elapsed)


def _progress(version: str, state: UpgradeState, domains: list[Json], following: str, elapsed: float) -> Json:
    return {
        "CodeVersion": version,
        "ConfigVersion": "1",
        "UpgradeDomains": domains,
        "UpgradeState": state.value,
        "NextUpgradeDomain": following,
        "RollingUpgradeMode": "UnmonitoredAuto",
        "UpgradeDurationInMilliseconds": str(int(elapsed)),
        "UpgradeDomainDurationInMilliseconds": "0",
        "UnhealthyEvaluations": [],
        "StartTimestampUtc": NEVER,
        "FailureTimestampUtc": NEVER,
        "FailureReason": "None",
        "IsNodeByNode": False,
    }


def version(s: Served) -> Json:
    """ClusterVersion."""
    done = s.cluster.upgraded()
    return {"Version": done[-1].code_version if done else _code_version(s)}


def application_upgrade(s: Served, app_id: str) -> Json:
    """ApplicationUpgradeProgressInfo: RollingForwardInProgress while an injected upgrade of it rolls."""
    app, c = _app(s, app_id), s.cluster
    rolling, done = c.upgrade(app_id), c.upgraded(app_id)
    state = UpgradeState.ROLLING_FORWARD if rolling else UpgradeState.COMPLETED
    version = rolling.code_version if rolling else done[-1].code_version if done else app.get("TypeVersion", "")
    domains = sorted({str(n.raw.get("UpgradeDomain", "0")) for n in s.node_items.values()})
    domain = DomainState.IN_PROGRESS if rolling else DomainState.COMPLETED
    return {
        "Name": app.get("Name"),
        "TypeName": app.get("TypeName"),
        "TargetApplicationTypeVersion": version,
        "UpgradeDomains": [{"Name": d, "State": domain.value} for d in domains],
        "UpgradeState": state.value,
        "NextUpgradeDomain": "",
        "RollingUpgradeMode": "UnmonitoredAuto",
        "UpgradeDurationInMilliseconds": "0",
        "UpgradeDomainDurationInMilliseconds": "0",
        "UnhealthyEvaluations": [],
        "StartTimestampUtc": NEVER,
        "FailureTimestampUtc": NEVER,
        "FailureReason": "None",
        "UpgradeStatusDetails": "",
    }


def replica(s: Served, part: Partition, found: Replica) -> Json:
    """ReplicaHealth (StatefulServiceReplicaHealth / StatelessServiceInstanceHealth): Warning when Down."""
    state = HealthState.WARNING if found.status == ReplicaStatus.DOWN else HealthState.OK
    ids = {"ReplicaId": found.rid} if part.stateful else {"InstanceId": found.rid}
    kind = "Stateful" if part.stateful else "Stateless"
    return _entity("replica", HealthState.OK, state, {"ServiceKind": kind, "PartitionId": part.pid, **ids})


# --- loads ----------------------------------------------------------------------------------------


def _capacity(s: Served, name: str) -> dict[str, float]:
    """The node's capacities: the state's, else the dump's stored Get Node Load answer's."""
    caps = dict(s.cluster.capacities.get(name, {}))
    stored = s.files.get(f"node-load/{name}.json")
    rows = stored.get("NodeLoadMetricInformation", []) if isinstance(stored, dict) else []
    for row in rows:
        metric = take(MetricLoad, NODE_CAPACITY, row)
        if metric.name not in caps and metric.capacity is not None:
            caps[metric.name] = float(str(metric.capacity))
    return caps


def node_load(s: Served, name: str) -> Json:
    """NodeLoadInfo: the loads of the replicas on the node now, against its capacities. From a dump: its
    stored answer, each metric's load changed by what the replicas moved in or out since it was read."""
    loads, caps = s.cluster.node_loads(name), _capacity(s, name)
    stored = s.files.get(f"node-load/{name}.json")
    if isinstance(stored, dict):
        base = s.cluster.baseline.get(name, {})
        return {
            **stored,
            "NodeLoadMetricInformation": [
                _moved(row, loads, base) for row in stored.get("NodeLoadMetricInformation", [])
            ],
        }
    rows = []
    if s.cluster.nodes.get(name) == NodeStatus.DOWN:
        loads = {}
    for metric in sorted(set(loads) | set(caps)):
        load, capacity = loads.get(metric, 0.0), caps.get(metric, 0.0)
        left = capacity - load if capacity else 0.0
        rows.append(
            {
                "Name": metric,
                "NodeCapacity": _number(capacity),
                "NodeLoad": _number(load),
                "NodeRemainingCapacity": _number(max(left, 0.0)),
                "IsCapacityViolation": bool(capacity) and load > capacity,
                "NodeBufferedCapacity": _number(capacity),
                "NodeRemainingBufferedCapacity": _number(max(left, 0.0)),
                "CurrentNodeLoad": load,
                "NodeCapacityRemaining": max(left, 0.0),
                "BufferedNodeCapacityRemaining": max(left, 0.0),
                "PlannedNodeLoadRemoval": 0.0,
            }
        )
    return {"NodeName": name, "NodeLoadMetricInformation": rows}


def _moved(row: Json, loads: dict[str, float], base: dict[str, float]) -> Json:
    """A stored NodeLoadMetricInformation row with the load the moves since brought in or took out."""
    metric = take(MetricLoad, NODE_CAPACITY, row)
    delta = loads.get(metric.name, 0.0) - base.get(metric.name, 0.0)
    if not delta:
        return row
    capacity = float(str(metric.capacity or 0))
    load = float(str(row.get("NodeLoad", 0))) + delta
    left = max(capacity - load, 0.0) if capacity else 0.0
    changed = {"NodeLoad": _number(load), "CurrentNodeLoad": load, "NodeRemainingCapacity": _number(left)}
    changed |= {"NodeCapacityRemaining": left, "IsCapacityViolation": bool(capacity) and load > capacity}
    return {**row, **{k: v for k, v in changed.items() if k in row}}


def cluster_load(s: Served) -> Json:
    """ClusterLoadInfo: per metric, the cluster's load and capacity and the least and most loaded nodes."""
    per_node = {n: s.cluster.node_loads(n) for n in s.node_items if s.cluster.nodes.get(n) != NodeStatus.DOWN}
    caps = {n: _capacity(s, n) for n in per_node}
    metrics = sorted({m for loads in per_node.values() for m in loads} | {m for c in caps.values() for m in c})
    rows = []
    for metric in metrics:
        values = {n: per_node[n].get(metric, 0.0) for n in per_node}
        low = min(values, key=lambda n: (values[n], n)) if values else ""
        high = max(values, key=lambda n: (values[n], n)) if values else ""
        load, capacity = sum(values.values()), sum(c.get(metric, 0.0) for c in caps.values())
        rows.append(
            {
                "Name": metric,
                "IsBalancedBefore": True,
                "IsBalancedAfter": True,
                "DeviationBefore": "0",
                "DeviationAfter": "0",
                "BalancingThreshold": "1",
                "Action": "NoActionNeeded",
                "ActivityThreshold": "0",
                "ClusterCapacity": _number(capacity),
                "ClusterLoad": _number(load),
                "CurrentClusterLoad": load,
                "ClusterRemainingCapacity": _number(max(capacity - load, 0.0)),
                "ClusterCapacityRemaining": max(capacity - load, 0.0),
                "IsClusterCapacityViolation": bool(capacity) and load > capacity,
                "NodeBufferPercentage": 0.0,
                "ClusterBufferedCapacity": _number(capacity),
                "BufferedClusterCapacityRemaining": max(capacity - load, 0.0),
                "ClusterRemainingBufferedCapacity": _number(max(capacity - load, 0.0)),
                "MinNodeLoadValue": _number(values.get(low, 0.0)),
                "MinimumNodeLoad": values.get(low, 0.0),
                "MinNodeLoadNodeId": _node_id(s, low),
                "MaxNodeLoadValue": _number(values.get(high, 0.0)),
                "MaximumNodeLoad": values.get(high, 0.0),
                "MaxNodeLoadNodeId": _node_id(s, high),
                "PlannedLoadRemoval": 0.0,
            }
        )
    return {"LastBalancingStartTimeUtc": NEVER, "LastBalancingEndTimeUtc": NEVER, "LoadMetricInformation": rows}


def _node_id(s: Served, name: str) -> Json:
    listed = s.node_items.get(name)
    node_id = listed.raw.get("Id") if listed else None
    return node_id if isinstance(node_id, dict) else {"Id": name}


def _number(value: float) -> str:
    """A load as SF's int64-as-string fields write it."""
    return str(int(round(value)))


def replica_detail(s: Served, part: Partition, replica: Replica) -> Json:
    """DeployedServiceReplicaDetailInfo of a replica with no stored answer: its kind and id, no reports."""
    ids = {"ReplicaId": replica.rid} if part.stateful else {"InstanceId": replica.rid}
    return {
        "ServiceKind": "Stateful" if part.stateful else "Stateless",
        "ServiceName": s.service_names.get(part.service_id) or "",
        "PartitionId": part.pid,
        "CurrentServiceOperation": "None",
        "ReportedLoad": [],
        **ids,
    }


CLUSTER_ROUTES: dict[str, Callable[[Served], Json]] = {
    "GetClusterHealth": cluster,
    "GetUpgradeProgress": upgrade_progress,
    "GetClusterVersion": version,
    "GetLoadInformation": cluster_load,
}


# --- faults ---------------------------------------------------------------------------------------


def inject(c: Cluster, query: dict[str, str]) -> None:
    """The fault the control route's query names (lock held); E_INVALIDARG (400) for a bad one."""
    q = {k.lower(): v for k, v in query.items()}
    kind = q.get("kind", "")
    try:
        if kind == "Health":
            entity, name = q["entity"], q["name"]
            if entity not in ("partition", "node", "application", "service"):
                raise ValueError(f"Entity {entity!r}: partition, node, application or service")
            c.health[(entity, name.lower() if entity == "partition" else name)] = HealthState.read(q["healthstate"])
        elif kind == "Upgrade":
            version = q.get("version", "10.1.2175.9590" if "application" not in q else "2.0.0")
            c.upgrades.append(Upgrade(c.clock, float(q.get("seconds", "inf")), version, q.get("application")))
        elif kind == "BalancerMove":
            c.balancer_move(q["partitionid"], q["currentnodename"], q["newnodename"])
        else:
            raise ValueError(f"Kind {kind!r}: Health, Upgrade or BalancerMove")
    except (KeyError, ValueError, StopIteration) as exc:
        raise Refused("E_INVALIDARG", f"Bad simulator fault: {exc}") from None
