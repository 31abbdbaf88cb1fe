"""Fakes for the replay loop's tests: a small cluster, a probe, a one-move planner, and readers of
what a replay ran."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from plbjax import parse_state
from plbjax.sf import ClusterState, state_document
from plbjax.sf.replay.rounds.loop import replay
from plbjax.sf.replay.timeline.reading import parse_timeline, settings_of
from plbjax.sf.replay.types import Needs, PlannedRound

SERVICE = "fabric:/App/Svc"


def cluster(
    layout: dict[str, int],
    settings: dict,
    node_types: dict[str, str] | None = None,
    intervals: dict[str, float] | None = None,
) -> dict:
    """Nodes named in `layout` (in fault/upgrade domains of their own), one stateless service with
    single-instance partitions p0, p1, ... placed `layout[node]` per node."""
    node_types = node_types or {}
    nodes = [
        {"NodeName": n, "FaultDomain": f"fd:/dc0/r{i}", "UpgradeDomain": f"UD{i}"}
        | ({"NodeType": node_types[n]} if n in node_types else {})
        for i, n in enumerate(layout)
    ]
    types = [
        {"Name": t, "PlacementAndLoadBalancingOverrides": {"MinLoadBalancingIntervalPerNodeType": iv}}
        for t, iv in (intervals or {}).items()
    ]
    partitions, k = [], 0
    for name, count in layout.items():
        for _ in range(count):
            partitions.append(
                {
                    "ServiceName": SERVICE,
                    "PartitionId": f"p{k}",
                    "Replicas": [{"ReplicaId": f"r{k}", "Role": "Instance", "NodeName": name}],
                }
            )
            k += 1
    service = {
        "ServiceName": SERVICE,
        "ServiceTypeName": "SvcType",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "Metrics": [{"Name": "CPU", "Weight": "High", "DefaultLoad": 1}],
    }
    doc = {
        "SchemaVersion": 1,
        "Settings": {
            "PLBRefreshGap": 1,
            "MinPlacementInterval": 1,
            "MinConstraintCheckInterval": 1,
            "MinLoadBalancingInterval": 5,
        }
        | settings,
        "NodeTypes": types,
        "Nodes": nodes,
        "Services": [service],
        "Partitions": partitions,
    }
    parse_state(doc)
    return doc


def counts(doc: dict) -> dict[str, int]:
    up = {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus", "Up") == "Up"}
    out = dict.fromkeys(sorted(up), 0)
    for p in doc["Partitions"]:
        for r in p["Replicas"]:
            if r["NodeName"] in out:
                out[r["NodeName"]] += 1
    return out


def groups(doc: dict) -> dict[str | None, list[str]]:
    """Node names per node type when balancing is separate per node type, else all under None."""
    up = counts(doc)
    if not settings_of(doc)["SeparateBalancingStrategyPerNodeType"]:
        return {None: list(up)}
    out: dict[str | None, list[str]] = {}
    for n in doc["Nodes"]:
        if n["NodeName"] in up:
            out.setdefault(n.get("NodeType"), []).append(n["NodeName"])
    return out


def as_doc(state: ClusterState | dict) -> dict:
    """The state a fake is handed, as a document (the fakes read documents)."""
    return state_document(state) if isinstance(state, ClusterState) else state


def probe(state_doc: dict, frozen: frozenset) -> Needs:
    """Count per node; imbalanced when max - min > 1 (per node type when separate); CPU is
    imbalanced while some replica reports more than 50."""
    state_doc = as_doc(state_doc)
    load = counts(state_doc)
    unplaced = sum(
        1 - len(p["Replicas"]) for p in state_doc["Partitions"] if (SERVICE, str(p["PartitionId"])) not in frozen
    )
    imbalanced = {
        ("Count", t)
        for t, names in groups(state_doc).items()
        if max(load[n] for n in names) - min(load[n] for n in names) > 1
    }
    if any(r.get("Loads", {}).get("CPU", 0) > 50 for p in state_doc["Partitions"] for r in p["Replicas"]):
        imbalanced.add(("CPU", None))
    values = list(load.values())
    return Needs(
        unplaced,
        0,
        frozenset(imbalanced),
        statistics.pstdev(values),
        {"Count": max(values) / min(values) if min(values) else float("inf")},
        {n: {"Count": float(c)} for n, c in load.items()},
    )


@dataclass
class OneMove:
    """Placement adds every missing instance on the least loaded node; Balancing moves one instance
    from the most to the least loaded node (of `node_type`), never back to a History node."""

    calls: list[tuple[str, str | None, dict, frozenset]] = field(default_factory=list)
    pick: random.Random | None = None

    def __call__(self, state_doc, phase, node_type, seed, frozen, effort=None):
        state_doc = as_doc(state_doc)
        self.calls.append((phase, node_type, state_doc, frozen))
        load, history = counts(state_doc), {k: list(v) for k, v in state_doc.get("History", {}).items()}
        if phase == "Placement":
            actions = []
            for p in state_doc["Partitions"]:
                if not p["Replicas"] and (SERVICE, str(p["PartitionId"])) not in frozen:
                    target = min(load, key=lambda n: (load[n], n))
                    load[target] += 1
                    actions.append(action(p, None, "AddInstance", None, target))
            return planned(actions, history)
        names = groups(state_doc)[node_type]
        order = sorted(names, key=lambda n: (load[n], n))
        if self.pick is not None:
            self.pick.seed(seed)
            self.pick.shuffle(order[:-1])
        source = order[-1]
        for p in state_doc["Partitions"]:
            r = p["Replicas"][0] if p["Replicas"] else None
            if r and r["NodeName"] == source and (SERVICE, str(p["PartitionId"])) not in frozen:
                target = next((n for n in order if n not in history.get(r["ReplicaId"], []) and n != source), None)
                if target is not None and load[target] + 1 < load[source]:
                    history.setdefault(r["ReplicaId"], []).append(source)
                    return planned([action(p, r["ReplicaId"], "MoveInstance", source, target)], history)
        return planned([], history)


def planned(actions: list[dict], history: dict[str, list[str]]) -> PlannedRound:
    """A fake planner's round: its actions and History."""
    return PlannedRound(tuple(actions), {k: tuple(v) for k, v in history.items()})


def action(partition: dict, rid, kind: str, source, target) -> dict:
    return {
        "ServiceName": SERVICE,
        "PartitionId": partition["PartitionId"],
        "ReplicaId": rid,
        "Action": kind,
        "SourceNode": source,
        "TargetNode": target,
    }


def ran(result, phase: str | None = None) -> list[tuple[float, str, str | None]]:
    return [
        (r.time, r.phase, r.node_type)
        for r in result.rows
        if r.trigger != "Event" and (phase is None or r.phase == phase)
    ]


def play(state: dict, events=(), planner=None, duration=None, seed=0, **extra):
    doc = {"State": state, "Events": list(events)} | ({"Duration": duration} if duration is not None else {}) | extra
    return replay(parse_timeline(doc), planner or OneMove(), probe, seed)


def random_timeline(state: dict, rng: random.Random, duration: float = 60.0) -> dict:
    """Node downs and returns, services created (one partition listing an unplaced Primary) and
    deleted, and load reports by ReplicaId and by Role, in time order."""
    nodes = [n["NodeName"] for n in state["Nodes"]]
    down: set[str] = set()
    created: list[str] = []
    made = 0
    events, t = [], 0.0
    metric = state["Services"][0]["Metrics"][0]["Name"]
    while True:
        t += rng.choice([1, 2, 3, 5])
        if t >= duration - 5:
            break
        kind = rng.choice(["NodeDown", "NodeUp", "ServiceCreated", "ServiceDeleted", "LoadReport"])
        if kind == "NodeDown" and len(down) < 2:
            down.add(node := rng.choice([n for n in nodes if n not in down]))
            events.append({"Time": t, "Kind": "NodeDown", "NodeName": node})
        elif kind == "NodeUp" and down:
            down.discard(node := rng.choice(sorted(down)))
            events.append({"Time": t, "Kind": "NodeUp", "NodeName": node})
        elif kind == "ServiceCreated":
            name = f"fabric:/New/S{made}"
            created.append(name)
            made += 1
            service = {
                "ServiceName": name,
                "ServiceTypeName": "NewType",
                "ServiceKind": "Stateful",
                "TargetReplicaSetSize": 5,
                "Metrics": [{"Name": metric, "Weight": "High", "PrimaryDefaultLoad": 3, "SecondaryDefaultLoad": 1}],
            }
            partitions = [
                {"PartitionId": "P0", "Replicas": []},
                {"PartitionId": "P1", "Replicas": [{"ReplicaId": f"{name}/u", "Role": "Primary", "NodeName": None}]},
            ]
            events.append({"Time": t, "Kind": "ServiceCreated", "Service": service, "Partitions": partitions})
        elif kind == "ServiceDeleted" and created and rng.random() < 0.4:
            events.append({"Time": t, "Kind": "ServiceDeleted", "ServiceName": created.pop(0)})
        elif kind == "LoadReport" and created:
            name = created[-1]
            load = {metric: rng.randint(1, 9)}
            events.append(
                {
                    "Time": t,
                    "Kind": "LoadReport",
                    "ServiceName": name,
                    "PartitionId": "P1",
                    "Role": "Primary",
                    "Loads": load,
                }
            )
            events.append(
                {"Time": t, "Kind": "LoadReport", "ServiceName": name, "ReplicaId": f"{name}/u", "Loads": load}
            )
    return {"State": state, "Events": events, "Duration": duration, "ActionSeconds": {"Add": 4, "Move": 4}}
