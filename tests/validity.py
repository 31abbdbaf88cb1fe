"""Random clusters with every feature plbjax supports, and a checker of plans that shares no code
with the engine (its own parsing, apply, loads and rules), for the random-validity suite.

`random_cluster(seed)` draws a state document: 12-40 nodes of 1-3 node types in hierarchical fault
domains, Down and Disabled nodes (each deactivation intent), node priorities and buffers; stateful and stateless services
(InstanceCount -1 too) with placement constraints, blocklists, Required/InvalidDomain and
RequireDomainDistribution, affinity, priorities, move costs and resource governance; partitions with
replicas missing, in surplus or on Down nodes; tight and loose capacities; throttles on and off; an
upgrade in progress with a snapshot; History. Placement constraints are drawn with their own Python
predicate, so the checker never evaluates SF's expression language with the engine's parser.

`breaks(doc, plan)` lists every hard rule the plan newly breaks: its Actions must apply to the input
and reproduce the plan's LoadsAfter; no replica may land on a node that is not Up, outside its
placement constraint or blocklisted, and none running on a node that blocks its type may leave it
(in transition); no node within capacity before may end above it; replica exclusion,
fault/upgrade-domain spread and affinity that held must hold; every replica still missing is listed
in `Unplaced`, no partition keeps more replicas than its target, and a service on every node keeps no
instance where it may not go.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

RG_CPU, RG_MEMORY = "servicefabric:/_CpuCores", "servicefabric:/_MemoryInMB"
METRICS = ("CPU", "Memory")
COLORS = ("Blue", "Green", "Red")


# ----------------------------------------------------------------------------- random clusters


def _constraint(rng: random.Random, types: list[str]):
    """(SF expression, Python predicate over a node dict) or (None, always true)."""
    kind = rng.choice(["none", "none", "type", "color", "disk", "both"])
    if kind == "type" and len(types) > 1:
        t = rng.choice(types)
        return f"NodeType == {t}", lambda n: n["NodeType"] == t
    if kind == "color":
        a, b = rng.sample(COLORS, 2)
        return f"NodeColor == {a} || NodeColor == {b}", lambda n: n["props"]["NodeColor"] in (a, b)
    if kind == "disk":
        d = rng.choice([100, 200])
        return f"Disk >= {d}", lambda n: n["props"]["Disk"] >= d
    if kind == "both":
        a = rng.choice(COLORS)
        return f"(NodeColor != {a}) && Disk > 50", lambda n: n["props"]["NodeColor"] != a and n["props"]["Disk"] > 50
    return None, lambda n: True


def random_cluster(seed: int, family: int | None = None) -> tuple[dict, dict]:
    """A random state document and, per service name, the Python predicate of its constraint.

    Clusters of one `family` share their shape (node, service and partition counts, metrics, which
    rules are in use), so they share one compiled search; `seed` draws the rest (statuses, loads,
    capacities, constraints, placements, settings). Without a family every cluster has its own shape."""
    shape, rng = random.Random(f"shape-{seed if family is None else family}"), random.Random(seed)
    n_nodes, n_types = shape.randint(12, 40), shape.randint(1, 3)
    types = [f"T{i}" for i in range(n_types)]
    metrics = list(METRICS[: shape.randint(1, 2)])
    racks, fds, uds = shape.choice([1, 1, 2]), shape.randint(2, 5), shape.randint(2, 5)
    tight = rng.random() < 0.5
    doc: dict = {
        "SchemaVersion": 1,
        "Settings": _settings(rng),
        "NodeTypes": [],
        "Nodes": [],
        "Services": [],
        "Partitions": [],
    }
    if rng.random() < 0.3:
        doc["NodeBufferPercentage"] = {metrics[0]: rng.choice([0.1, 0.2])}
    if shape.random() < 0.2:
        doc["DefragmentationMetrics"] = {metrics[-1]: True}
    doc["MetricBalancingThresholds"] = {m: rng.choice([1.0, 1.2, 2.0]) for m in metrics}
    cap = {m: rng.choice([40, 80, 200]) for m in metrics}
    for t in types:
        doc["NodeTypes"].append({"Name": t, "Capacities": {m: cap[m] * rng.choice([1, 2]) for m in metrics}})
    for i in range(n_nodes):
        doc["Nodes"].append(_node(rng, i, types, metrics, cap, fds, racks, uds))
    predicates = {}
    for k in range(shape.randint(2, 7)):
        svc, predicates[f"fabric:/App{k % 2}/S{k}"] = _service(shape, rng, k, metrics, types, fds, tight)
        doc["Services"].append(svc)
    _correlate(shape, doc["Services"])
    _partitions(shape, rng, doc, predicates)
    if rng.random() < 0.1:
        doc["BlockList"] = [
            {
                "NodeName": rng.choice(doc["Nodes"])["NodeName"],
                "ServiceTypeName": rng.choice(doc["Services"])["ServiceTypeName"],
            }
        ]
    if shape.random() < 0.1:
        _upgrade(rng, doc)
    replicas = [r for p in doc["Partitions"] for r in p["Replicas"] if r["NodeName"] is not None]
    if replicas and shape.random() < 0.2:
        rep = rng.choice(replicas)
        doc["History"] = {str(rep["ReplicaId"]): [rng.choice(doc["Nodes"])["NodeName"]]}
    return doc, predicates


def tiny_cluster(seed: int) -> dict:
    """A small random state document whose stateful partitions often lack a primary (all their
    replicas secondaries, at, below or above the target), on Up, Disabled (each intent) and Down
    nodes, with tight capacities; every one pads to the same shapes (arrays.FLOORS), so a batch
    of them shares one compiled search."""
    rng = random.Random(f"tiny-{seed}")
    nodes = []
    for i in range(rng.randint(5, 10)):
        node = {
            "NodeName": f"N{i}",
            "FaultDomain": f"fd:/dc{i % 4}",
            "UpgradeDomain": f"UD{i % 3}",
            "Capacities": {"Load": rng.choice([12, 20, 30, 60])},
        }
        r = rng.random()
        if r < 0.12:
            node["NodeStatus"] = "Down"
        elif r < 0.35:
            node["NodeStatus"] = "Disabled"
            intent = rng.choice([None, "Pause", "Restart", "RemoveData", "RemoveNode"])
            if intent:
                node["DeactivationIntent"] = intent
        nodes.append(node)
    services, partitions, ids = [], [], iter(range(1, 100))
    for k in range(rng.randint(1, 2)):
        target = rng.choice([2, 3])
        metric = {"Name": "Load", "Weight": "High"}
        metric |= {"PrimaryDefaultLoad": rng.choice([5, 10, 25, 40]), "SecondaryDefaultLoad": rng.choice([2, 5])}
        service = {"ServiceName": f"fabric:/A/S{k}", "ServiceKind": "Stateful", "TargetReplicaSetSize": target}
        service["Metrics"] = [metric]
        if rng.random() < 0.3:
            service["PlacementPolicies"] = [{"Type": "PreferPrimaryDomain", "DomainName": f"fd:/dc{rng.randrange(4)}"}]
        services.append(service)
    rows = 14  # replica rows (those to create too) left under FLOORS["R"], with the two instances
    for service in services:
        target = service["TargetReplicaSetSize"]
        for p in range(rng.randint(1, 3)):
            headless = rng.random() < 0.6
            count = max(1, target + rng.choice([-1, 0, 0, 1]))
            if max(count, target) > rows:
                break
            rows -= max(count, target)
            hosts = rng.sample([n["NodeName"] for n in nodes], min(count, len(nodes)))
            roles = ["Secondary" if headless or i else "Primary" for i in range(len(hosts))]
            replicas = [{"ReplicaId": next(ids), "Role": role, "NodeName": h} for role, h in zip(roles, hosts)]
            partitions.append({"ServiceName": service["ServiceName"], "PartitionId": f"{p}", "Replicas": replicas})
    services.append(
        {
            "ServiceName": "fabric:/A/F",
            "ServiceKind": "Stateless",
            "InstanceCount": 1,
            "Metrics": [{"Name": "Load", "Weight": "High", "DefaultLoad": rng.choice([5, 10])}],
        }
    )
    for p in range(2):
        node = rng.choice(nodes)["NodeName"]
        replicas = [{"ReplicaId": next(ids), "Role": "Instance", "NodeName": node}]
        partitions.append({"ServiceName": "fabric:/A/F", "PartitionId": f"f{p}", "Replicas": replicas})
    return {"SchemaVersion": 1, "Nodes": nodes, "Services": services, "Partitions": partitions}


def _settings(rng: random.Random) -> dict:
    s = {}
    if rng.random() < 0.3:
        s["GlobalMovementThrottleThreshold"] = rng.choice([0, 3, 10])
    if rng.random() < 0.3:
        s["MovementPerPartitionThrottleThreshold"] = rng.choice([1, 2])
    if rng.random() < 0.3:
        s["MaxPercentageToMove"] = rng.choice([0.05, 1.0])
    if rng.random() < 0.3:
        s["UseMoveCostReports"] = True
    for name in ("FaultDomainConstraintPriority", "UpgradeDomainConstraintPriority", "AffinityConstraintPriority"):
        if rng.random() < 0.15:
            s[name] = rng.choice([0, 1, -1])
    return s


def _node(rng: random.Random, i: int, types: list, metrics: list, cap: dict, fds: int, racks: int, uds: int) -> dict:
    node = {
        "NodeName": f"N{i:02d}",
        "NodeType": types[i % len(types)],
        "FaultDomain": f"fd:/dc{i % fds}" + (f"/r{(i // fds) % racks}" if racks > 1 else ""),
        "UpgradeDomain": f"UD{(i * 7 + 3) % uds}",
        "PlacementProperties": {"NodeColor": rng.choice(COLORS), "Disk": rng.choice([50, 100, 200, 400])},
    }
    r = rng.random()
    if r < 0.06:
        node["NodeStatus"] = "Down"
    elif r < 0.12:
        node["NodeStatus"] = "Disabled"
        intent = (None, "Pause", "Restart", "RemoveData", "RemoveNode")[i % 5]  # None: Pause, the default
        if intent:
            node["DeactivationIntent"] = intent
    if rng.random() < 0.2:
        node["Capacities"] = {metrics[0]: cap[metrics[0]] * rng.choice([1, 3])}
    if rng.random() < 0.1:
        node["Priority"] = rng.randint(0, 2)
    if rng.random() < 0.5:
        node["AvailableResources"] = {"CpuCores": rng.choice([1, 2, 4, 8]), "MemoryInMB": rng.choice([4096, 8192])}
    return node


def _service(shape: random.Random, rng: random.Random, k: int, metrics: list, types: list, fds: int, tight: bool):
    stateful = shape.random() < 0.7
    name = f"fabric:/App{k % 2}/S{k}"
    svc: dict = {
        "ServiceName": name,
        "ServiceTypeName": f"Type{k % 4}",
        "ServiceKind": "Stateful" if stateful else "Stateless",
    }
    if stateful:
        svc["TargetReplicaSetSize"] = shape.choice([1, 2, 3, 3, 4])
    else:
        svc["InstanceCount"] = shape.choice([-1, 1, 2, 3])
    expression, predicate = _constraint(rng, types)
    if expression:
        svc["PlacementConstraints"] = expression
    scale = rng.choice([1, 4, 10]) * (3 if tight else 1)
    if shape.random() < 0.85:
        svc["Metrics"] = []
        for m in shape.sample(metrics, shape.randint(1, len(metrics))):
            primary, secondary = rng.randint(1, scale), rng.randint(0, scale)
            entry = {"Name": m, "Weight": rng.choice(["Low", "Medium", "High"])}
            entry.update(
                {"PrimaryDefaultLoad": primary, "SecondaryDefaultLoad": secondary}
                if stateful
                else {"DefaultLoad": primary}
            )
            svc["Metrics"].append(entry)
    if rng.random() < 0.3:
        svc["DefaultMoveCost"] = rng.choice(["Zero", "Low", "Medium", "High"])
    if rng.random() < 0.2:
        svc["Priority"] = rng.randint(0, 2)
    if shape.random() < 0.15:
        svc["ResourceGovernance"] = {
            "CpuCores": rng.choice([0.5, 1]),
            "CodePackages": [{"Name": "Code", "MemoryInMB": rng.choice([256, 1024])}],
        }
    policies = []
    if rng.random() < 0.1:
        policies.append({"Type": "RequireDomainDistribution"})
    if rng.random() < 0.1:
        policies.append(
            {"Type": rng.choice(["RequiredDomain", "InvalidDomain"]), "DomainName": f"fd:/dc{rng.randrange(fds)}"}
        )
    if shape.random() < 0.1:
        policies.append({"Type": "PreferPrimaryDomain", "DomainName": f"fd:/dc{shape.randrange(fds)}"})
    if policies:
        svc["PlacementPolicies"] = policies
    return svc, predicate


def _correlate(shape: random.Random, services: list[dict]) -> None:
    """Some services follow another (affinity); no chains, one correlation each."""
    parents: set[str] = set()
    for svc in services[1:]:
        if shape.random() < 0.2 and svc["ServiceName"] not in parents:
            options = [
                p
                for p in services
                if p is not svc
                and "Correlations" not in p
                and p["ServiceName"] not in parents
                and p["ServiceName"] != svc["ServiceName"]
                and not any(c.get("Correlations", [{}])[0].get("ServiceName") == svc["ServiceName"] for c in services)
            ]
            if options:
                parent = shape.choice(options)
                svc["Correlations"] = [
                    {
                        "ServiceName": parent["ServiceName"],
                        "Scheme": shape.choice(["Affinity", "AlignedAffinity", "NonAlignedAffinity"]),
                    }
                ]
                parents.add(parent["ServiceName"])


def _partitions(shape: random.Random, rng: random.Random, doc: dict, predicates: dict) -> None:
    """Partitions placed at random on allowed nodes (some surplus, missing or on Down nodes)."""
    nodes = doc["Nodes"]
    ids = iter(range(1000, 10**6))
    parents = {c["ServiceName"] for s in doc["Services"] for c in s.get("Correlations", [])}
    for svc in doc["Services"]:
        target = svc.get("TargetReplicaSetSize", svc.get("InstanceCount"))
        allowed = [n["NodeName"] for n in nodes if predicates[svc["ServiceName"]](_node_view(doc, n))]
        for p in range(shape.randint(1, 5) if target != -1 and svc["ServiceName"] not in parents else 1):
            count = len(allowed) if target == -1 else target
            r = rng.random()
            if r < 0.15:
                count = 0
            elif r < 0.3:
                count = max(count - rng.randint(1, 2), 0)
            elif r < 0.4 and target != -1:
                count += 1
            if target == -1:
                count = min(count, rng.randint(0, len(allowed)))
            hosts = rng.sample([n["NodeName"] for n in nodes], min(count, len(nodes)))
            if rng.random() < 0.7 and len(allowed) >= count:
                hosts = rng.sample(allowed, count)
            replicas = []
            for i, host in enumerate(hosts):
                role = "Instance" if svc["ServiceKind"] == "Stateless" else ("Primary" if i == 0 else "Secondary")
                if role == "Primary" and rng.random() < 0.08:
                    role = "Secondary"
                rep = {"ReplicaId": next(ids), "Role": role, "NodeName": host if rng.random() > 0.05 else None}
                if rng.random() < 0.3 and svc.get("Metrics"):
                    rep["Loads"] = {m["Name"]: rng.randint(0, 30) for m in svc["Metrics"]}
                if rng.random() < 0.1:
                    rep["MoveCost"] = rng.choice(["Low", "High"])
                replicas.append(rep)
            doc["Partitions"].append(
                {
                    "ServiceName": svc["ServiceName"],
                    "PartitionId": f"{svc['ServiceName'][-2:]}-{p}",
                    "Replicas": replicas,
                }
            )


def _upgrade(rng: random.Random, doc: dict) -> None:
    uds = sorted({n["UpgradeDomain"] for n in doc["Nodes"]})
    placed = [r for p in doc["Partitions"] for r in p["Replicas"] if r["NodeName"] is not None]
    snapshot = {
        str(r["ReplicaId"]): rng.choice(doc["Nodes"])["NodeName"] for r in rng.sample(placed, min(3, len(placed)))
    }
    if rng.random() < 0.5:
        doc["Upgrade"] = {"InProgress": True, "Scope": "Cluster", "UpgradeDomainsDone": uds[:1], "Snapshot": snapshot}
    else:
        doc["Upgrade"] = {
            "InProgress": True,
            "Scope": "Application",
            "ApplicationName": "fabric:/App0",
            "UpgradeDomainsDone": uds[:1],
            "Snapshot": snapshot,
        }


def _node_view(doc: dict, node: dict) -> dict:
    return {
        "NodeType": node.get("NodeType"),
        "props": node.get("PlacementProperties", {}),
        "NodeName": node["NodeName"],
    }


# ----------------------------------------------------------------------------- the checker


class _Cluster:
    """The input document read by the checker's own rules."""

    def __init__(self, doc: dict, predicates: dict):
        self.doc = doc
        settings = doc.get("Settings", {})
        self.upgrading = bool((doc.get("Upgrade") or {}).get("InProgress"))
        types = {t["Name"]: t for t in doc.get("NodeTypes", [])}
        self.nodes = {n["NodeName"]: n for n in doc["Nodes"]}
        self.status = {name: n.get("NodeStatus", "Up") for name, n in self.nodes.items()}
        self.keeps = {  # its replicas run there: Up, or deactivated with Pause (the default) or Restart
            name: self.status[name] == "Up"
            or (self.status[name] == "Disabled" and n.get("DeactivationIntent", "Pause") in ("Pause", "Restart"))
            for name, n in self.nodes.items()
        }
        self.services = {s["ServiceName"]: s for s in doc["Services"]}
        governed = {name for name, s in self.services.items() if s.get("ResourceGovernance")}
        buffer = doc.get("NodeBufferPercentage", {})
        self.capacity: dict[str, dict[str, float]] = {}
        for name, n in self.nodes.items():
            caps = dict(types.get(n.get("NodeType"), {}).get("Capacities", {}))
            caps.update(n.get("Capacities", {}))
            for metric, p in buffer.items():
                if metric in caps and p and not self.upgrading:
                    caps[metric] = math.floor(caps[metric] * (1 - p))
            available = n.get("AvailableResources", {})
            if governed and "CpuCores" in available:
                cores = available["CpuCores"]
                caps[RG_CPU] = (
                    cores
                    if cores == 1
                    else math.floor(cores * float(settings.get("CpuPercentageNodeCapacity", 0.8)) + 1e-9)
                )
            if governed and "MemoryInMB" in available:
                caps[RG_MEMORY] = math.floor(available["MemoryInMB"] * 0.8 + 1e-9)
            self.capacity[name] = caps
        blocked = {(b["NodeName"], b["ServiceTypeName"]) for b in doc.get("BlockList", [])}
        self.allowed: dict[str, set[str]] = {}
        for name, svc in self.services.items():
            ok = set()
            for node_name, n in self.nodes.items():
                if not predicates[name](_node_view(doc, n)) or (node_name, svc.get("ServiceTypeName")) in blocked:
                    continue
                fd = n["FaultDomain"]
                policies = svc.get("PlacementPolicies", [])
                if any(p["Type"] == "RequiredDomain" and not _within(fd, p["DomainName"]) for p in policies):
                    continue
                if any(p["Type"] == "InvalidDomain" and _within(fd, p["DomainName"]) for p in policies):
                    continue
                ok.add(node_name)
            self.allowed[name] = ok
        self.reported = {
            str(r["ReplicaId"]): (r["Role"], r.get("Loads", {})) for p in doc["Partitions"] for r in p["Replicas"]
        }
        self.by_role = {  # each partition's reported replicas (id, loads, running), by their role
            (p["ServiceName"], str(p["PartitionId"])): {
                role: [
                    (str(r["ReplicaId"]), r.get("Loads", {}), self.keeps.get(r.get("NodeName"), False))
                    for r in p["Replicas"]
                    if r["Role"] == role
                ]
                for role in ("Primary", "Secondary", "Instance")
            }
            for p in doc["Partitions"]
        }
        # UseDefaultLoadForServiceOnEveryNode: a new instance of a service on every node keeps the default
        self.default_everywhere = str(settings.get("UseDefaultLoadForServiceOnEveryNode", False)).lower() == "true"

    def droppable(self, replica: dict) -> bool:
        """SF drops surplus secondaries and instances, never a running primary
        (Checker::DropExtraReplicas) nor a replica on a node deactivated with Pause (PlacementCreator)."""
        node = self.nodes[replica["NodeName"]]
        paused = self.status[node["NodeName"]] != "Up" and node.get("DeactivationIntent", "Pause") == "Pause"
        return replica["Role"] != "Primary" and not paused

    def target(self, service: str) -> int:
        svc = self.services[service]
        return svc.get("TargetReplicaSetSize", svc.get("InstanceCount"))

    def usable(self, service: str) -> list[str]:
        """Up nodes the service may use: where its domain spread is counted."""
        return [n for n in self.allowed[service] if self.status[n] == "Up"]

    def load(self, service: str, replica: dict, partition_id=None, present=frozenset()) -> dict[str, float]:
        """SF's load of a replica in its role; the load follows the role (SF's FailoverUnit): a
        primary carries its partition's reported primary load while that replica is still one of
        the partition's (`present` ids), a former primary that was running the average of the
        loads of the reported secondaries still present; else its own report in that role, else the service's default."""
        svc = self.services[service]
        role = replica["Role"]
        own_role, own = (
            self.reported.get(str(replica["ReplicaId"]), (None, {})) if replica["ReplicaId"] is not None else (None, {})
        )
        out = {}
        metrics = svc.get("Metrics") or []
        if not metrics:  # SF's default metrics, loads by role
            count = {"Primary": (1.0, 1.0, 1.0), "Secondary": (0.0, 1.0, 1.0), "Instance": (0.0, 0.0, 1.0)}[role]
            out.update(zip(("PrimaryCount", "ReplicaCount", "Count"), count))
        reported = self.by_role.get((service, str(partition_id)), {"Primary": [], "Secondary": []})
        primary = [loads for rid, loads, _ in reported["Primary"] if rid in present]
        secondaries = [(rid, loads, up) for rid, loads, up in reported["Secondary"] if rid in present]
        was_running = any(rid == str(replica["ReplicaId"]) and up for rid, _, up in reported["Primary"])
        for m in metrics:
            default = float(m.get("SecondaryDefaultLoad", m.get("DefaultLoad", 0)))
            if role == "Primary" and primary and m["Name"] in primary[0]:
                out[m["Name"]] = float(primary[0][m["Name"]])
            elif role == "Secondary" and own_role == "Primary" and was_running and secondaries:
                values = [float(loads.get(m["Name"], default)) for _, loads, _ in secondaries]
                out[m["Name"]] = sum(values) / len(values)
            elif m["Name"] in own and own_role == role:
                out[m["Name"]] = float(own[m["Name"]])
            elif (
                replica["ReplicaId"] is None and (average := self._average(svc, reported, role, m, present)) is not None
            ):
                out[m["Name"]] = average
            elif role == "Instance":
                out[m["Name"]] = float(m.get("DefaultLoad", 0))
            elif role == "Primary" or svc.get("TargetReplicaSetSize") == 1:
                out[m["Name"]] = float(m.get("PrimaryDefaultLoad", m.get("DefaultLoad", 0)))
            else:
                out[m["Name"]] = float(m.get("SecondaryDefaultLoad", m.get("DefaultLoad", 0)))
        rg = svc.get("ResourceGovernance")
        if rg:
            out[RG_CPU] = float(rg.get("CpuCores", 0))
            memory = [c.get("MemoryInMB", 0) for c in rg.get("CodePackages", [])]
            out[RG_MEMORY] = float(sum(memory)) if memory and all(memory) else 0.0
        return out

    def _average(self, svc: dict, reported: dict, role: str, metric: dict, present) -> float | None:
        """A new secondary's or instance's load: the average of its partition's replicas of its role
        still there (`present` ids; their reported or default loads) when one of them reported the
        metric (SF's FailoverUnit::GetSecondaryLoad), unless the service is on every node and
        UseDefaultLoadForServiceOnEveryNode holds; None otherwise."""
        listed = [loads for rid, loads, _ in reported.get(role, []) if rid in present]
        if role not in ("Secondary", "Instance") or not any(metric["Name"] in loads for loads in listed):
            return None
        if role == "Instance" and svc.get("InstanceCount") == -1 and self.default_everywhere:
            return None
        key = "SecondaryDefaultLoad" if role == "Secondary" else "PrimaryDefaultLoad"
        default = float(metric.get(key, metric.get("DefaultLoad", 0)))
        return sum(float(loads.get(metric["Name"], default)) for loads in listed) / len(listed)

    def node_loads(self, doc: dict) -> dict[str, Counter]:
        loads: dict[str, Counter] = defaultdict(Counter)
        for part in doc["Partitions"]:
            for rep in part["Replicas"]:
                node = rep.get("NodeName")
                if node is not None and self.keeps[node]:
                    present = frozenset(str(r["ReplicaId"]) for r in part["Replicas"])
                    loads[node].update(self.load(part["ServiceName"], rep, part["PartitionId"], present))
        return loads


def _within(fault_domain: str, domain: str) -> bool:
    path = [x for x in fault_domain.removeprefix("fd:").split("/") if x]
    prefix = [x for x in domain.removeprefix("fd:").split("/") if x]
    return path[: len(prefix)] == prefix


def apply(doc: dict, actions: list[dict]) -> dict:
    """The document after `actions`, by the Failover Manager's rules; ValueError where one does not fit."""
    out = {**doc, "Partitions": [{**p, "Replicas": [dict(r) for r in p["Replicas"]]} for p in doc["Partitions"]]}
    status = {n["NodeName"]: n.get("NodeStatus", "Up") for n in doc["Nodes"]}
    parts = {(p["ServiceName"], str(p["PartitionId"])): p for p in out["Partitions"]}
    for a in actions:
        part = parts.get((a["ServiceName"], str(a["PartitionId"])))
        if part is None:
            raise ValueError(f"{a}: unknown partition")
        reps, kind = part["Replicas"], a["Action"]
        running = [r for r in reps if r.get("NodeName") is not None and status[r["NodeName"]] != "Down"]
        if kind.startswith("Add") and a["ReplicaId"] is None:
            if a["SourceNode"] is not None:
                raise ValueError(f"{a}: a new replica has no source node")
            rep = {"ReplicaId": None, "Role": kind[3:], "NodeName": None}
            reps.append(rep)
        else:
            rep = next(
                (r for r in reps if r["ReplicaId"] is not None and str(r["ReplicaId"]) == str(a["ReplicaId"])), None
            )
            if rep is None:
                raise ValueError(f"{a}: no such replica")
            if rep.get("NodeName") != a["SourceNode"]:
                raise ValueError(f"{a}: the replica is on {rep.get('NodeName')}")
        if kind.startswith("Add"):
            if rep in running:
                raise ValueError(f"{a}: the replica is running already")
            if kind == "AddPrimary" and any(r["Role"] == "Primary" for r in running):
                raise ValueError(f"{a}: the partition has a running primary")
            rep["NodeName"], rep["Role"] = a["TargetNode"], kind[3:]
        elif kind.startswith("Move"):
            if rep["Role"] != kind[4:] or rep not in running:
                raise ValueError(f"{a}: the replica is a {rep['Role']} / not running")
            rep["NodeName"] = a["TargetNode"]
        elif kind.startswith("Drop"):
            if rep["Role"] != kind[4:]:
                raise ValueError(f"{a}: the replica is a {rep['Role']}")
            reps.remove(rep)
        elif kind == "SwapPrimarySecondary":
            other = next((r for r in running if r.get("NodeName") == a["TargetNode"]), None)
            if rep["Role"] != "Primary" or rep not in running or other is None or other["Role"] != "Secondary":
                raise ValueError(f"{a}: not a running primary and secondary")
            rep["Role"], other["Role"] = "Secondary", "Primary"
        elif kind == "PromoteSecondary":
            if rep["Role"] != "Secondary" or rep not in running or any(r["Role"] == "Primary" for r in running):
                raise ValueError(f"{a}: cannot promote (not a running secondary, or a running primary exists)")
            for r in reps:
                if r["Role"] == "Primary":
                    r["Role"] = "Secondary"
            rep["Role"] = "Primary"
        else:
            raise ValueError(f"{a}: unknown action")
        if kind[:3] in ("Add", "Mov") and sum(r.get("NodeName") == a["TargetNode"] for r in reps) > 1:
            raise ValueError(f"{a}: the target holds a replica of the partition")
    return out


def _domain_ok(paths: list[tuple[str, ...]], usable: list[tuple[str, ...]]) -> bool:
    """At every level, each child domain with usable nodes holds floor(n/d) or floor(n/d) + 1 of the
    replicas, n not counting those in children without usable nodes (SF's
    FaultDomainConstraint::HasDomainViolation: a replica out of place in a usable domain counts)."""
    depth = max([len(p) for p in usable + paths] + [0])
    paths = [tuple(p) + ("",) * (depth - len(p)) for p in paths]
    usable = [tuple(p) + ("",) * (depth - len(p)) for p in usable]
    for level in range(depth):
        for parent in {p[:level] for p in paths}:
            inside = [p for p in paths if p[:level] == parent]
            children = {u[: level + 1] for u in usable if u[:level] == parent}
            if len(inside) <= 1 or not children:
                continue
            counts = Counter(p[: level + 1] for p in inside)
            base = sum(counts[c] for c in children) // len(children)
            if any(not base <= counts.get(c, 0) <= base + 1 for c in children):
                return False
    return True


def _fd(cluster: _Cluster, node: str) -> tuple[str, ...]:
    return tuple(x for x in cluster.nodes[node]["FaultDomain"].removeprefix("fd:").split("/") if x)


def _partition_rules(cluster: _Cluster, doc: dict) -> dict[str, set]:
    """Per rule, the partitions (or child replicas) that break it in `doc`."""
    out: dict[str, set] = {"exclusion": set(), "fault_domain": set(), "upgrade_domain": set(), "affinity": set()}
    roles_at: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # service -> node -> roles
    for part in doc["Partitions"]:
        for r in part["Replicas"]:
            if r.get("NodeName") and cluster.keeps[r["NodeName"]]:
                roles_at[part["ServiceName"]][r["NodeName"]].add(_side(r["Role"]))
    settings = cluster.doc.get("Settings", {})
    for part in doc["Partitions"]:
        key = (part["ServiceName"], str(part["PartitionId"]))
        running = [r for r in part["Replicas"] if r.get("NodeName") and cluster.keeps[r["NodeName"]]]
        nodes = [r["NodeName"] for r in running]
        if len(set(nodes)) < len(nodes):
            out["exclusion"].add(key)
        usable = cluster.usable(part["ServiceName"])
        spread = cluster.target(part["ServiceName"]) >= 0  # one instance per node: no domain spread
        if (
            spread
            and int(settings.get("FaultDomainConstraintPriority", 0)) == 0
            and not _domain_ok([_fd(cluster, n) for n in nodes], [_fd(cluster, n) for n in usable])
        ):
            out["fault_domain"].add(key)
        if (
            spread
            and int(settings.get("UpgradeDomainConstraintPriority", 1)) == 0
            and not _domain_ok(
                [(cluster.nodes[n]["UpgradeDomain"],) for n in nodes],
                [(cluster.nodes[n]["UpgradeDomain"],) for n in usable],
            )
        ):
            out["upgrade_domain"].add(key)
        corr = cluster.services[part["ServiceName"]].get("Correlations")
        if corr and int(settings.get("AffinityConstraintPriority", 0)) == 0:
            out["affinity"] |= {
                key + (rid,) for rid in _affinity_breaks(cluster, part["ServiceName"], corr[0], running, roles_at)
            }
    return out


def _affinity_breaks(cluster: _Cluster, child: str, correlation: dict, running: list, roles_at: dict) -> set:
    """The child replicas of `part` that SF's AffinityConstraint::GetInvalidReplicas lists: a child
    must sit beside a replica of its parent (its primary beside the parent's primary when aligned and
    both have one); a child with a larger target than its parent is valid once every parent replica,
    or the parent's target of them, has a child replica beside it
    (AllowHigherChildTargetReplicaCountForAffinity, default true)."""
    parent = correlation["ServiceName"]
    parent_nodes = roles_at[parent]  # node -> roles of the parent's running replicas
    settings = cluster.doc.get("Settings", {})
    both_primaries = any("Primary" in roles for roles in parent_nodes.values()) and any(
        r["Role"] == "Primary" for r in running
    )
    colocate_primary = both_primaries and correlation["Scheme"] == "AlignedAffinity"

    def beside(node: str, role: str) -> bool:
        roles = parent_nodes.get(node, set())
        return (role in roles) if colocate_primary else bool(roles)

    child_target, parent_target = cluster.target(child), cluster.target(parent)
    if settings.get("AllowHigherChildTargetReplicaCountForAffinity", True) not in (False, "false") and (
        0 <= parent_target < child_target
    ):
        child_roles = defaultdict(set)
        for r in running:
            child_roles[r["NodeName"]].add(_side(r["Role"]))
        colocated = sum(
            1
            for node, roles in parent_nodes.items()
            for role in roles
            if ((role in child_roles[node]) if colocate_primary else bool(child_roles[node]))
        )
        if parent_target <= colocated or sum(len(roles) for roles in parent_nodes.values()) == colocated:
            return set()
    return {
        str(r["ReplicaId"]) if r["ReplicaId"] is not None else r["NodeName"]
        for r in running
        if not beside(r["NodeName"], _side(r["Role"]))
    }


def _side(role: str) -> str:
    return "Primary" if role == "Primary" else "Secondary"


def breaks(doc: dict, predicates: dict, plan: dict) -> list[str]:
    """Every hard rule `plan` newly breaks on `doc` (empty: the plan is valid)."""
    cluster = _Cluster(doc, predicates)
    try:
        after = apply(doc, plan["Actions"])
    except ValueError as exc:
        return [f"apply: {exc}"]
    out = []
    loads_before, loads_after = cluster.node_loads(doc), cluster.node_loads(after)
    for node in plan["Nodes"]:
        for metric, value in node["LoadsAfter"].items():
            if abs(value - loads_after[node["NodeName"]][metric]) > 1e-3 * max(1.0, abs(value)):
                out.append(
                    f"loads: {node['NodeName']} {metric} plan {value} vs {loads_after[node['NodeName']][metric]}"
                )
    for name, caps in cluster.capacity.items():
        for metric, cap in caps.items():
            if loads_before[name][metric] <= cap + 1e-6 < loads_after[name][metric] - 1e-6:
                out.append(
                    f"capacity: {name} {metric} {loads_before[name][metric]:g} -> {loads_after[name][metric]:g} > {cap:g}"
                )
    before_nodes = {str(r["ReplicaId"]): r.get("NodeName") for p in doc["Partitions"] for r in p["Replicas"]}
    for part in after["Partitions"]:
        for rep in part["Replicas"]:
            node = rep.get("NodeName")
            if node is None or (rep["ReplicaId"] is not None and before_nodes.get(str(rep["ReplicaId"])) == node):
                continue
            if cluster.status[node] != "Up":
                out.append(f"placement: {rep['ReplicaId']} onto {cluster.status[node]} node {node}")
            elif node not in cluster.allowed[part["ServiceName"]]:
                out.append(f"placement: {part['ServiceName']} {rep['ReplicaId']} onto disallowed node {node}")
    out += _in_transition(cluster, after)
    rules_before, rules_after = _partition_rules(cluster, doc), _partition_rules(cluster, after)
    for rule, bad in rules_after.items():
        for key in sorted(bad - rules_before[rule], key=str):
            out.append(f"{rule}: {key}")
    out += _accounting(cluster, after, plan)
    out += _unled(cluster, after, plan)
    return out


def unled(doc: dict, plan: dict) -> list[str]:
    """Each stateful partition the plan leaves with running replicas (on a node not Down) but no
    running primary and reports neither in `Unplaced` nor in `Health`: never one."""
    anywhere = {s["ServiceName"]: (lambda n: True) for s in doc["Services"]}
    return _unled(_Cluster(doc, anywhere), apply(doc, plan["Actions"]), plan)


def _unpromoted_entry(entry: dict) -> bool:
    """An `Unplaced` entry of a partition whose running secondaries none may become primary (a
    primary with a Reason): it reports the promotion, not a missing replica."""
    return entry["Role"] == "Primary" and "Reason" in entry


def _unled(cluster: _Cluster, after: dict, plan: dict) -> list[str]:
    reported = {(u["ServiceName"], str(u["PartitionId"])) for u in plan["Unplaced"]}
    entities = {h["Entity"] for h in plan["Health"]}
    out = []
    for part in after["Partitions"]:
        if cluster.services[part["ServiceName"]]["ServiceKind"] != "Stateful":
            continue
        running = [r for r in part["Replicas"] if r.get("NodeName") and cluster.status[r["NodeName"]] != "Down"]
        key = (part["ServiceName"], str(part["PartitionId"]))
        if not running or any(r["Role"] == "Primary" for r in running):
            continue
        if key not in reported and f"{key[0]}/{key[1]}" not in entities:
            nodes = ", ".join(f"{r['NodeName']} ({cluster.status[r['NodeName']]})" for r in running)
            out.append(f"primary: {key} runs secondaries on {nodes}, no primary, reported nowhere")
    return out


def _in_transition(cluster: _Cluster, after: dict) -> list[str]:
    """A replica running on a node that blocks its service type is in transition (SF's
    PlacementCreator): it stays there unless dropped."""
    blocked = {(b["NodeName"], b["ServiceTypeName"]) for b in cluster.doc.get("BlockList", [])}
    now = {str(r["ReplicaId"]): r.get("NodeName") for p in after["Partitions"] for r in p["Replicas"]}
    out = []
    for part in cluster.doc["Partitions"]:
        kind = cluster.services[part["ServiceName"]].get("ServiceTypeName")
        for rep in part["Replicas"]:
            node, rid = rep.get("NodeName"), str(rep["ReplicaId"])
            if node and cluster.status[node] == "Up" and (node, kind) in blocked and now.get(rid, node) != node:
                out.append(f"in transition: {rid} left {node}, which blocks its type")
    return out


def _accounting(cluster: _Cluster, after: dict, plan: dict) -> list[str]:
    """Every replica still missing is in Unplaced; no partition keeps a surplus it could drop; a service on every
    node keeps no running instance on a node it may not use (SF drops those)."""
    out = []
    unplaced = Counter((u["ServiceName"], str(u["PartitionId"])) for u in plan["Unplaced"] if not _unpromoted_entry(u))
    for part in after["Partitions"]:
        key = (part["ServiceName"], str(part["PartitionId"]))
        target = cluster.target(part["ServiceName"])
        running = [r for r in part["Replicas"] if r.get("NodeName") and cluster.keeps[r["NodeName"]]]
        if target < 0:
            out += [
                f"everywhere: {key} keeps {r['ReplicaId']} on {r['NodeName']}, which it may not use"
                for r in running
                if r["NodeName"] not in cluster.allowed[part["ServiceName"]]
            ]
            continue
        if len(running) > target and any(cluster.droppable(r) for r in running):
            out.append(f"surplus: {key} keeps {len(running)} replicas, target {target}")
        elif len(running) <= target and target - len(running) != unplaced[key]:
            out.append(f"unplaced: {key} misses {target - len(running)} replicas, Unplaced lists {unplaced[key]}")
    return out


# ----------------------------------------------------------------------------- application groups


def with_applications(doc: dict, predicates: dict, seed: int) -> dict:
    """`doc` with SF's application groups for its applications (a service's ApplicationName, else its
    name's parent), drawn around the placement as it stands: MaximumNodes the nodes each occupies (or
    one more), capacities per node and in all at or above its loads (some just at them), now and then
    a reservation; the two priority settings equal to those plbjax measures them with."""
    rng = random.Random(f"applications-{seed}")
    used, per_node, total = _app_loads(_Cluster(doc, predicates), doc)
    metrics = sorted({m["Name"] for s in doc["Services"] for m in s.get("Metrics") or []} & set(METRICS))
    groups = []
    for app in sorted({_application(s) for s in doc["Services"]}):
        maximum = max(len(used[app]) + rng.choice([0, 0, 1]), 1)
        entries = []
        for m in metrics:
            most = max((loads[m] for loads in per_node[app].values()), default=0.0)
            node = math.ceil(most * rng.choice([1.0, 1.0, 1.5])) + 1
            whole = max(math.ceil(total[app][m] * rng.choice([1.0, 1.2])) + 1, node * maximum)
            reserved = rng.choice([0, 0, min(5, node)])
            entries.append(
                {"Name": m, "MaximumCapacity": node, "ReservationCapacity": reserved, "TotalApplicationCapacity": whole}
            )
        groups.append({"ApplicationName": app, "MaximumNodes": maximum, "Metrics": entries})
    settings = dict(doc.get("Settings", {}))
    settings["ScaleoutCountConstraintPriority"] = settings.get("PlacementConstraintPriority", 0)
    settings["ApplicationCapacityConstraintPriority"] = settings.get("CapacityConstraintPriority", 0)
    return doc | {"Applications": groups, "Settings": settings}


def app_breaks(doc: dict, predicates: dict, plan: dict) -> list[str]:
    """Every application-group rule `plan` newly breaks on `doc` (SF's ScaleoutCountConstraint,
    ApplicationCapacityConstraint, and node capacity with the reservations of the applications on a
    node: ApplicationReservedLoads.cpp:121), by this module's own loads."""
    cluster = _Cluster(doc, predicates)
    before, after = _app_rules(cluster, doc), _app_rules(cluster, apply(doc, plan["Actions"]))
    return [f"{rule}: {key}" for rule, bad in after.items() for key in sorted(bad - before[rule], key=str)]


def _application(service: dict) -> str:
    return service.get("ApplicationName") or service["ServiceName"].rsplit("/", 1)[0]


def _app_loads(cluster: _Cluster, doc: dict) -> tuple[dict, dict, dict]:
    """(nodes each application occupies, its load per node and metric, its load per metric) of the
    replicas running (on a node that keeps them)."""
    app_of = {name: _application(s) for name, s in cluster.services.items()}
    used: dict[str, set] = defaultdict(set)
    per_node: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    total: dict[str, Counter] = defaultdict(Counter)
    for part in doc["Partitions"]:
        present = frozenset(str(r["ReplicaId"]) for r in part["Replicas"])
        for rep in part["Replicas"]:
            node = rep.get("NodeName")
            if node is None or not cluster.keeps[node]:
                continue
            app, load = (
                app_of[part["ServiceName"]],
                cluster.load(part["ServiceName"], rep, part["PartitionId"], present),
            )
            used[app].add(node)
            per_node[app][node].update(load)
            total[app].update(load)
    return used, per_node, total


def _app_rules(cluster: _Cluster, doc: dict) -> dict[str, set]:
    """The application-group rules `doc`'s placement breaks (a rule of priority other than 0 is not
    checked)."""
    settings = doc.get("Settings", {})
    used, per_node, total = _app_loads(cluster, doc)
    out: dict[str, set] = {"scaleout": set(), "app_capacity": set(), "reserved_capacity": set()}
    held: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for group in doc.get("Applications", []):
        app = group["ApplicationName"]
        if group.get("MaximumNodes") and len(used[app]) > group["MaximumNodes"]:
            out["scaleout"].add(app)
        for m in group.get("Metrics", []):
            name = m["Name"]
            for node, loads in per_node[app].items():
                if m.get("MaximumCapacity") and loads[name] > m["MaximumCapacity"] + 1e-6:
                    out["app_capacity"].add((app, node, name))
                held[node][name] += max(m.get("ReservationCapacity", 0) - loads[name], 0.0)
            if m.get("TotalApplicationCapacity") and total[app][name] > m["TotalApplicationCapacity"] + 1e-6:
                out["app_capacity"].add((app, name))
    loads = cluster.node_loads(doc)
    for node, caps in cluster.capacity.items():
        for metric, cap in caps.items():
            if held[node][metric] and loads[node][metric] + held[node][metric] > cap + 1e-6:
                out["reserved_capacity"].add((node, metric))
    if int(settings.get("PlacementConstraintPriority", 0)) != 0:
        out["scaleout"] = set()
    if int(settings.get("CapacityConstraintPriority", 0)) != 0:
        out["app_capacity"], out["reserved_capacity"] = set(), set()
    return out
