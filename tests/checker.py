"""An independent, plain-Python check of a placement against a state document (for tests only).

Written from SF's rules directly, sharing no code with the engine, so the engine's constraint logic
is checked against a second implementation.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import pytest

from plbjax.sf import ClusterState, parse_state
from plbjax.sf._encoding.decoding import apply_actions
from plbjax.sf._plan.planning import plan
from plbjax.sf._state import expressions as expressions

PLAN_SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "plbjax" / "schemas" / "plan.schema.json").read_text())
HAND_OVERS = ("SwapPrimarySecondary", "PromoteSecondary")


def placement_of(document: dict) -> dict:
    """{(service, partition id str): [(replica id str, role, node)]} of a state document."""
    return {
        (p["ServiceName"], str(p["PartitionId"])): [
            (str(r["ReplicaId"]), r["Role"], r.get("NodeName")) for r in p["Replicas"]
        ]
        for p in document["Partitions"]
    }


def document_with(state: ClusterState, index, node_of, primary_of) -> dict:
    """The state document with every replica on its node and in its role in (node_of, primary_of)."""
    doc = json.loads(json.dumps(state.document))
    where = {str(index.replica_ids[r]): r for r in range(index.n_replicas)}
    parts = {(service, str(pid)): p for p, (service, pid) in enumerate(index.partitions)}
    for part in doc["Partitions"]:
        p = parts[(part["ServiceName"], str(part["PartitionId"]))]
        for rep in part["Replicas"]:
            r = where[str(rep["ReplicaId"])]
            rep["NodeName"] = index.nodes[int(node_of[r])]
            if rep["Role"] != "Instance":
                rep["Role"] = "Primary" if int(primary_of[p]) == r else "Secondary"
    return doc


def _allowed(state: ClusterState, service, up_only: bool = True) -> set[str]:
    """The nodes `service`'s placement constraints allow: Up ones, or (`up_only=False`) of any status."""
    up = [n for n in state.nodes if n.status == "Up" or not up_only]
    mask = expressions.node_mask(service.placement_constraints, [n.properties for n in up])
    return {n.name for n, ok in zip(up, mask) if ok}


def _domain_ok(paths: list[tuple[str, ...]], usable: list[tuple[str, ...]]) -> bool:
    """SF's '+1' rule at every level (FaultDomainConstraint::HasDomainViolation): each usable child
    holds floor(n/d) or floor(n/d)+1 replicas, n not counting those in children without usable nodes."""
    depth = max([len(p) for p in usable + paths] + [0])
    pad = lambda p: tuple(p) + ("",) * (depth - len(p))
    paths, usable = [pad(p) for p in paths], [pad(p) for p in usable]
    for level in range(depth):
        parents = {p[:level] for p in paths}
        for parent in parents:
            inside = [p for p in paths if p[:level] == parent]
            children = {u[: level + 1] for u in usable if u[:level] == parent}
            if len(inside) <= 1 or not children:
                continue
            counts = Counter(p[: level + 1] for p in inside)
            base = math.floor(sum(counts[c] for c in children) / len(children))
            if any(not (base <= counts.get(c, 0) <= base + 1) for c in children):
                return False
    return True


def _branches(usable: list[tuple[str, ...]]) -> tuple[int, int]:
    """(level, domains): the first domain-tree level where the usable nodes lie in 2+ domains."""
    depth = max([len(u) for u in usable] + [0])
    for level in range(1, depth + 1):
        domains = {tuple(u)[:level] for u in usable}
        if len(domains) > 1:
            return level, len(domains)
    return 0, 0


def _quorum_ok(paths: list[tuple[str, ...]], usable: list[tuple[str, ...]], target: int) -> bool:
    """SF's quorum rule (FaultDomainConstraint::HasQuorumDomainViolation): at the first level where the
    usable domains branch, none holds more than max(T - (T // 2 + 1), 1) replicas, one more when
    the domains could not take T so."""
    level, domains = _branches(usable)
    if not domains:
        return True
    limit = max(target - (target // 2 + 1), 1)
    limit += domains * limit < target
    inside = {tuple(u)[:level] for u in usable}
    counts = Counter(tuple(p)[:level] for p in paths if tuple(p)[:level] in inside)
    return all(c <= limit for c in counts.values())


def _quorum_rule(state: ClusterState, svc) -> tuple[bool, bool]:
    """Whether SF's quorum rule holds for the fault and the upgrade domains of `svc` (the settings, or
    QuorumBasedLogicAutoSwitch: the target divisible by both domain counts, no more nodes than their
    product, counted over the allowed nodes of any status, so a node going down flips nothing);
    RequireDomainDistribution keeps the fault-domain spread."""
    settings, target = state.settings, svc.target
    nodes = {n.name: n for n in state.nodes}
    usable = [nodes[n] for n in _allowed(state, svc, up_only=False)]
    fds = _branches([n.fault_domain for n in usable])[1]
    uds = _branches([(n.upgrade_domain,) for n in usable])[1]
    auto = settings["QuorumBasedLogicAutoSwitch"] and target > 0 and fds and uds
    auto = bool(auto and target % fds == 0 and target % uds == 0 and len(usable) <= fds * uds)
    nonpacking = any(p.kind == "RequireDomainDistribution" for p in svc.placement_policies)
    fault = (auto or settings["QuorumBasedReplicaDistributionPerFaultDomains"]) and not nonpacking
    upgrade = auto or settings["QuorumBasedReplicaDistributionPerUpgradeDomains"]
    return bool(fault and target > 0), bool(upgrade and target > 0)


def violations(state: ClusterState, placement: dict, tol: float = 1e-3) -> dict[str, set]:
    """Violated constraints of `placement` (as from `placement_of`), keyed by constraint name."""
    nodes = {n.name: n for n in state.nodes}
    services = {s.name: s for s in state.services}
    loads: dict[str, Counter] = defaultdict(Counter)
    out: dict[str, set] = {
        "capacity": set(),
        "exclusion": set(),
        "placement": set(),
        "fault_domain": set(),
        "upgrade_domain": set(),
    }
    partitions = {(p.service, str(p.partition_id)): p for p in state.partitions}
    for (service, pid), reps in placement.items():
        svc = services[service]
        placed = [(rid, role, node) for rid, role, node in reps if node is not None]
        allowed = _allowed(state, svc)
        if len({node for _, _, node in placed}) < len(placed):
            out["exclusion"].add((service, pid))
        for rid, role, node in placed:
            if node not in allowed:
                out["placement"].add((service, pid, rid))
            for metric in svc.metrics:
                given = partitions.get((service, str(pid)))
                loads[node][metric.name] += role_load(state, svc, metric, given, rid, role, {r for r, _, _ in reps})
        usable = [nodes[n] for n in allowed]
        quorum = _quorum_rule(state, svc)
        fault = [nodes[n].fault_domain for _, _, n in placed], [n.fault_domain for n in usable]
        upgrade = [(nodes[n].upgrade_domain,) for _, _, n in placed], [(n.upgrade_domain,) for n in usable]
        for kind, rule, (paths, domains) in (
            ("fault_domain", quorum[0], fault),
            ("upgrade_domain", quorum[1], upgrade),
        ):
            if not (_quorum_ok(paths, domains, svc.target) if rule else _domain_ok(paths, domains)):
                out[kind].add((service, pid))
    for name, node in nodes.items():
        for metric, cap in node.capacities.items():
            buffered = (
                math.floor(cap * (1 - state.node_buffer_percentage.get(metric, 0.0)))
                if state.node_buffer_percentage.get(metric)
                else cap
            )
            if loads[name][metric] > buffered + tol:
                out["capacity"].add((name, metric))
    return out


def no_new_violations(before: dict, after: dict) -> list[str]:
    """Violations present after but not before (SF: a plan never breaks what held)."""
    return [f"{k}: {sorted(after[k] - before[k])}" for k in after if after[k] - before[k]]


def role_load(state: ClusterState, svc, metric, given, replica_id, role: str, present: set[str]) -> float:
    """A replica's load of `metric` in `role`, by SF's rules: the load follows the role (SF's
    FailoverUnit): a primary carries the load its partition's primary reported while that replica is
    still one of the partition's (`present` ids), a secondary its own reported secondary load, a
    former primary that was running the average of the partition's reported secondaries still
    present (their reported or default loads); a new secondary or instance the average of its role's
    replicas still present when one of them reported the metric (FailoverUnit::GetSecondaryLoad),
    unless its service is on every node and UseDefaultLoadForServiceOnEveryNode holds; what nobody
    reported is the service's default load for the role. `given`: the partition as the state gives it
    (None: a partition new to it)."""
    up = {n.name for n in state.nodes if n.status == "Up"}
    reported = {str(r.replica_id): r for r in given.replicas} if given is not None else {}
    own = reported.get(str(replica_id)) if replica_id is not None else None
    primary = [r for rid, r in reported.items() if r.role == "Primary" and rid in present]
    secondaries = [r for rid, r in reported.items() if r.role == "Secondary" and rid in present]
    default = metric.secondary_load if role == "Secondary" else metric.primary_load
    if role == "Primary" and primary:
        value = primary[0].loads.get(metric.name)
    elif own is not None and own.role == role:
        value = own.loads.get(metric.name)
    elif role == "Secondary" and own is not None and own.role == "Primary" and own.node in up and secondaries:
        values = [r.loads.get(metric.name, metric.secondary_load) for r in secondaries]
        value = sum(values) / len(values)
    elif replica_id is None:
        value = _new_replica_load(state, svc, metric, role, [r for rid, r in reported.items() if rid in present])
    else:
        value = None
    return default if value is None else value


def _new_replica_load(state: ClusterState, svc, metric, role: str, present: list) -> float | None:
    """A new secondary's or instance's load: its role's average over `present` replicas when one of
    them reported `metric` (their reported or default loads); None where the default applies."""
    listed = [r for r in present if r.role == role]
    if role not in ("Secondary", "Instance") or not any(metric.name in r.loads for r in listed):
        return None
    if role == "Instance" and svc.target == -1 and state.settings["UseDefaultLoadForServiceOnEveryNode"]:
        return None
    default = metric.secondary_load if role == "Secondary" else metric.primary_load
    return sum(r.loads.get(metric.name, default) for r in listed) / len(listed)


def node_loads(state: ClusterState, document: dict) -> dict[str, Counter]:
    """{node: {metric: load}} of a document's placement (`role_load`). Replicas on Down nodes are
    not running and carry no load."""
    services = {s.name: s for s in state.services}
    down = {n.name for n in state.nodes if n.status == "Down"}
    partitions = {(p.service, str(p.partition_id)): p for p in state.partitions}
    loads: dict[str, Counter] = defaultdict(Counter)
    for part in document["Partitions"]:
        given = partitions.get((part["ServiceName"], str(part["PartitionId"])))
        present = {str(r["ReplicaId"]) for r in part["Replicas"]}
        for rep in part["Replicas"]:
            if rep.get("NodeName") is None or rep["NodeName"] in down:
                continue
            for metric in services[part["ServiceName"]].metrics:
                svc = services[part["ServiceName"]]
                load = role_load(state, svc, metric, given, rep["ReplicaId"], rep["Role"], present)
                loads[rep["NodeName"]][metric.name] += load
    return loads


def app_group_violations(state: ClusterState, placement: dict) -> dict[str, float]:
    """How far `placement` (as from `placement_of`) breaks SF's application groups, in plain Python:
    nodes beyond each application's MaximumNodes (`scaleout`), load over its MaximumCapacity on a
    node (`node`) and over its TotalApplicationCapacity (`total`), and node load over capacity once
    each application on a node holds what its load there lacks of ReservationCapacity (`reserved`,
    ApplicationReservedLoads.cpp:121). Replicas on Down nodes carry no load."""
    services = {s.name: s for s in state.services}
    apps = {a.name: a for a in state.applications}
    partitions = {(p.service, str(p.partition_id)): p for p in state.partitions}
    down = {n.name for n in state.nodes if n.status == "Down"}
    app_load: dict[tuple[str, str], Counter] = defaultdict(Counter)  # (application, node) -> metric loads
    node_load: dict[str, Counter] = defaultdict(Counter)
    for (service, pid), reps in placement.items():
        svc = services[service]
        present = {rid for rid, _, _ in reps}
        for rid, role, node in reps:
            if node is None or node in down:
                continue
            for metric in svc.metrics:
                load = role_load(state, svc, metric, partitions.get((service, pid)), rid, role, present)
                node_load[node][metric.name] += load
                if svc.application in apps:
                    app_load[(svc.application, node)][metric.name] += load
            if svc.application in apps:
                app_load[(svc.application, node)]["__replicas__"] += 1
    out = dict(scaleout=0.0, node=0.0, total=0.0, reserved=0.0)
    totals: dict[str, Counter] = defaultdict(Counter)
    held: dict[str, Counter] = defaultdict(Counter)
    for (name, node), loads in app_load.items():
        totals[name].update({k: v for k, v in loads.items() if k != "__replicas__"})
        for m in apps[name].metrics:
            out["node"] += max(loads[m.name] - (m.node_capacity or math.inf), 0.0)
            held[node][m.name] += max(m.reservation - loads[m.name], 0.0)
    for app in apps.values():
        used = sum(1 for (name, _) in app_load if name == app.name)
        out["scaleout"] += max(used - (app.maximum_nodes or used), 0)
        out["total"] += sum(max(totals[app.name][m.name] - (m.total_capacity or math.inf), 0.0) for m in app.metrics)
    for n in state.nodes:
        for metric, cap in n.capacities.items():
            load = node_load[n.name][metric]
            out["reserved"] += max(load + held[n.name][metric] - max(cap, load), 0.0)
    return out


def checked_plan(doc: dict, config, **options) -> tuple[dict, dict, ClusterState]:
    """plan(doc, config, **options), checked against the schema and against its own Actions: they apply to the input,
    reproduce LoadsBefore/LoadsAfter, form a net diff, and leave the input unchanged. Returns
    (plan, the document after the Actions, the parsed state)."""
    state = parse_state(doc)
    result = plan(state, config, **options).document()
    jsonschema.Draft202012Validator(PLAN_SCHEMA).validate(result)
    after = apply_actions(doc, result["Actions"])
    for name, loads in (("LoadsBefore", node_loads(state, doc)), ("LoadsAfter", node_loads(state, after))):
        for node in result["Nodes"]:
            for metric, value in node[name].items():
                assert value == pytest.approx(loads[node["NodeName"]][metric], abs=1e-3), (
                    f"{node['NodeName']} {name}[{metric}]"
                )
    moved = [a["ReplicaId"] for a in result["Actions"] if a["ReplicaId"] is not None and a["Action"] not in HAND_OVERS]
    assert len(moved) == len(set(moved)), result["Actions"]
    handed = [(a["ServiceName"], a["PartitionId"]) for a in result["Actions"] if a["Action"] in HAND_OVERS]
    assert len(handed) == len(set(handed)), result["Actions"]
    assert doc == state.document
    assert stayed_put(doc, after) == [], result["Actions"]
    assert contradictions(result) == [], result["Phases"]
    return result, after, state


def contradictions(result: dict) -> list[str]:
    """A plan that contradicts itself: an action of a phase its `Phases` say did not run."""
    ran = {entry["Phase"]: entry["Ran"] for entry in result["Phases"]}
    return [f"{a['Action']} {a['ReplicaId']}: {a['Phase']}" for a in result["Actions"] if not ran.get(a["Phase"], True)]


def stayed_put(before: dict, after: dict) -> list[str]:
    """SF's rule for a node that blocks a service type (PlacementCreator::CreatePlacement): a replica
    running there is in transition and stays (or is dropped; a service on every node drops it), and
    no replica moves or is added there."""
    types = {s["ServiceName"]: s.get("ServiceTypeName") for s in before["Services"]}
    blocked = {(b["NodeName"], b["ServiceTypeName"]) for b in before.get("BlockList", [])}
    up = {n["NodeName"] for n in before["Nodes"] if n.get("NodeStatus", "Up") == "Up"}
    was = {str(r["ReplicaId"]): r.get("NodeName") for p in before["Partitions"] for r in p["Replicas"]}
    now = {
        str(r["ReplicaId"]): r.get("NodeName")
        for p in after["Partitions"]
        for r in p["Replicas"]
        if r["ReplicaId"] is not None
    }
    out = []
    for part in after["Partitions"]:
        for rep in part["Replicas"]:
            node, rid = rep.get("NodeName"), rep["ReplicaId"]
            if (node, types[part["ServiceName"]]) in blocked and (rid is None or was.get(str(rid)) != node):
                out.append(f"{rid} moved or added onto {node}, which blocks its type")
    for part in before["Partitions"]:
        for rep in part["Replicas"]:
            rid, node = str(rep["ReplicaId"]), rep.get("NodeName")
            if node in up and (node, types[part["ServiceName"]]) in blocked and now.get(rid, node) != node:
                out.append(f"{rid} left {node}, which blocks its type: it is in transition")
    return out
