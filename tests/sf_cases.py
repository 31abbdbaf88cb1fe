"""Small Service Fabric clusters written as state documents (8 nodes N0..N7 by default), a checked
plan of them, and readers of what the plan did: the shared frame of the hand-checked SF tests."""

from __future__ import annotations

from checker import checked_plan

from plbjax.sf import SearchConfig

CONFIG = SearchConfig(chains=8, steps=3000, seconds=None, block_steps=500, tries=1, parallel=False)
NODES = [f"N{i}" for i in range(8)]
QUIET = {"Load": 10**6}  # MetricActivityThresholds: no node load above it, so never imbalanced
MOVES = ("MovePrimary", "MoveSecondary", "MoveInstance")
SWAPS = ("SwapPrimarySecondary",)


# ------------------------------------------------------------------------------ documents


def nodes(
    n: int = 8,
    types: dict[str, str] | None = None,
    capacity: float | None = None,
    priorities: dict[str, int] | None = None,
    metric: str = "Load",
) -> list[dict]:
    out = []
    for i in range(n):
        name = f"N{i}"
        node = {"NodeName": name, "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i}"}
        if types:
            node["NodeType"] = types[name]
        if capacity is not None:
            node["Capacities"] = {metric: capacity}
        if priorities and name in priorities:
            node["Priority"] = priorities[name]
        out.append(node)
    return out


def service(name: str, count: int = 1, load: float = 0, metric: str = "Load", **extra) -> dict:
    """A stateless service with one metric (InstanceCount -1: one instance on every node)."""
    return {
        "ServiceName": name,
        "ServiceKind": "Stateless",
        "InstanceCount": count,
        "Metrics": [{"Name": metric, "Weight": "High", "DefaultLoad": load}],
    } | extra


def part(svc: str, pid: str, *placed, metric: str = "Load") -> dict:
    """A stateless partition; each of `placed` is a node, (node, load) or (node, load, replica extras).
    ReplicaIds are <pid>.0, <pid>.1, ..."""
    replicas = []
    for k, entry in enumerate(placed):
        entry = entry if isinstance(entry, tuple) else (entry,)
        rep = {"ReplicaId": f"{pid}.{k}", "Role": "Instance", "NodeName": entry[0]}
        if len(entry) > 1 and entry[1] is not None:
            rep["Loads"] = {metric: entry[1]}
        if len(entry) > 2:
            rep |= entry[2]
        replicas.append(rep)
    return {"ServiceName": svc, "PartitionId": pid, "Replicas": replicas}


def background(svc: str, loads: dict[str, float] | list[float]) -> dict:
    """The one partition of an InstanceCount -1 service: an instance on every node with these loads."""
    if isinstance(loads, list):
        loads = dict(zip(NODES, loads))
    return part(svc, "f", *[(n, float(loads[n])) for n in NODES])


def document(
    services: list[dict],
    partitions: list[dict],
    node_list: list[dict] | None = None,
    activity: dict | None = QUIET,
    frame: bool = True,
    **extra,
) -> dict:
    doc = {"SchemaVersion": 1, "Nodes": node_list or nodes(), "Services": services, "Partitions": partitions}
    if activity:
        doc["MetricActivityThresholds"] = activity
    doc.update(extra)
    if frame:
        check_frame(doc)
    return doc


def check_frame(doc: dict) -> None:
    """The FRAME shape (module docstring), so that these documents share one compiled search."""
    targets = {s["ServiceName"]: s.get("TargetReplicaSetSize", s.get("InstanceCount")) for s in doc["Services"]}
    replicas, largest = 0, 0
    for p in doc["Partitions"]:
        t = targets[p["ServiceName"]]
        n = len(NODES) if t < 0 else max(len(p["Replicas"]), t)
        replicas += n
        if t >= 0:
            largest = max(largest, n)
    metrics = {m["Name"] for s in doc["Services"] for m in s["Metrics"]}
    assert len(doc["Nodes"]) == 8 and 3 <= len(doc["Services"]) <= 4 and len(doc["Partitions"]) <= 8
    assert 15 <= replicas <= 16 and 3 <= largest <= 4 and len(metrics) == 1, "keep the FRAME shape"


# ---------------------------------------------------------------------------- plan checks


def run(doc: dict, config: SearchConfig | None = None) -> tuple[dict, dict]:
    """plan(doc), with checker.checked_plan's checks; returns (plan, the document after the Actions)."""
    result, after, _ = checked_plan(doc, config or CONFIG)
    return result, after


def phase(result: dict, name: str) -> dict:
    return next(p for p in result["Phases"] if p["Phase"] == name)


def bare(action: dict) -> dict:
    """An action's contract fields, without its explanation (Phase, Reason, ...: tests/sf/plan/test_explain.py)."""
    keys = ("ServiceName", "PartitionId", "ReplicaId", "Action", "SourceNode", "TargetNode")
    return {k: action[k] for k in keys}


def movements(result: dict) -> list[dict]:
    return [a for a in result["Actions"] if a["Action"] in MOVES + SWAPS]


def loads(result: dict, key: str = "LoadsAfter", metric: str = "Load") -> dict[str, float]:
    return {n["NodeName"]: n[key][metric] for n in result["Nodes"]}


def balance(result: dict, metric: str = "Load", node_type: str | None = None) -> dict:
    return next(b for b in result["Balance"] if b["Metric"] == metric and b["NodeType"] == node_type)


def node_of(document: dict) -> dict[str, str | None]:
    """{ReplicaId: node} of a document."""
    return {str(r["ReplicaId"]): r["NodeName"] for p in document["Partitions"] for r in p["Replicas"]}


def health(result: dict, prop: str) -> list[dict]:
    return [h for h in result["Health"] if h["Property"] == prop]


def stacked(**settings) -> dict:
    """Everything on N0-N2 (N0 70, N1 50, N2 40), N3-N7 empty: very imbalanced."""
    return document(
        [service("fabric:/App/X", 3, 10), service("fabric:/App/Y", 1, 10), service("fabric:/App/Z", 1, 10)],
        [
            *[part("fabric:/App/X", f"x{i}", "N0", "N1", "N2") for i in range(4)],
            *[part("fabric:/App/Y", f"y{i}", "N0") for i in range(3)],
            part("fabric:/App/Z", "z0", "N1"),
        ],
        activity=None,
        Settings=settings,
    )


DEFAULT = SearchConfig(seconds=None)  # the default search (`auto` for this backend and size)


def sf_nodes(n: int, domains: list[int] | None = None) -> list[dict]:
    """SF's CreateNodeDescription(i): node i alone in its fault and upgrade domain (or `domains`[i])."""
    return [
        {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc{i if domains is None else domains[i]}", "UpgradeDomain": f"UD{i}"}
        for i in range(n)
    ]


def fu(svc: str, pid: str, replicas: str) -> dict:
    """SF's CreateReplicas("P/0, S/3"): role/node pairs."""
    roles = {"P": "Primary", "S": "Secondary", "I": "Instance"}
    placed = [spec.strip().split("/") for spec in replicas.split(",")]
    return {
        "ServiceName": svc,
        "PartitionId": pid,
        "Replicas": [
            {"ReplicaId": f"{pid}.{k}", "Role": roles[role], "NodeName": f"N{node}"}
            for k, (role, node) in enumerate(placed)
        ],
    }
