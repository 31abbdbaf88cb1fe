"""Timelines to play, generated from a state document and a seed.

Each generator returns a timeline document (timeline.md §1) whose State is `state` itself, or
`state_ref` (a path, relative to where the timeline will be written) when given. Same state and
seed, same timeline.
"""

from __future__ import annotations

import math
import random

from plbjax.errors import BadInput
from plbjax.sf import NodeStatus, Role

DAY = 86400.0


def _timeline(state: dict, state_ref: str | None, events: list[dict], duration: float | None = None) -> dict:
    doc = {"SchemaVersion": 1, "State": state_ref if state_ref is not None else state, "Events": events}
    return doc | ({"Duration": duration} if duration is not None else {})


def _custom_metrics(service: dict) -> list[dict]:
    """The service's metrics that take load reports (SF's built-in counts do not)."""
    return [m for m in service.get("Metrics", []) if not m["Name"].startswith("servicefabric:/_")]


def _role_loads(service: dict, role: str, factor: float) -> dict[str, float]:
    key = {Role.PRIMARY: "PrimaryDefaultLoad", Role.SECONDARY: "SecondaryDefaultLoad"}.get(Role(role), "DefaultLoad")
    return {m["Name"]: round(m.get(key, m.get("DefaultLoad", 0.0)) * factor, 3) for m in _custom_metrics(service)}


def diurnal(
    state: dict,
    seed: int = 0,
    days: float = 1.0,
    every_minutes: float = 15.0,
    amplitude: float = 0.5,
    state_ref: str | None = None,
) -> dict:
    """Every `every_minutes`, each partition's replicas report loads following a daily sine (peak
    load 1 + `amplitude` times the default at a per-service phase) with ±10% noise."""
    rng = random.Random(seed)
    services = {s["ServiceName"]: s for s in state["Services"] if _custom_metrics(s)}
    phase = {name: rng.uniform(0, 2 * math.pi) for name in sorted(services)}
    events, step = [], every_minutes * 60.0
    for k in range(int(days * DAY / step)):
        t = k * step
        for part in state["Partitions"]:
            service = services.get(part["ServiceName"])
            if service is None:
                continue
            wave = 1 + amplitude * math.sin(2 * math.pi * t / DAY + phase[service["ServiceName"]])
            roles = sorted({r["Role"] for r in part["Replicas"]})
            for role in roles:
                factor = max(wave * rng.uniform(0.9, 1.1), 0.0)
                events.append(
                    {
                        "Time": t,
                        "Kind": "LoadReport",
                        "ServiceName": part["ServiceName"],
                        "PartitionId": part["PartitionId"],
                        "Role": role,
                        "Loads": _role_loads(service, role, factor),
                    }
                )
    return _timeline(state, state_ref, [e for e in events if e["Loads"]], days * DAY)


def fault_domain_failure(
    state: dict, seed: int = 0, at: float = 60.0, down_for: float = 600.0, state_ref: str | None = None
) -> dict:
    """Every node of one fault domain (picked by `seed`) goes down at `at` and comes back
    `down_for` seconds later."""
    domain = random.Random(seed).choice(sorted({n["FaultDomain"] for n in state["Nodes"]}))
    names = [n["NodeName"] for n in state["Nodes"] if n["FaultDomain"] == domain]
    events = [{"Time": at, "Kind": "NodeDown", "NodeName": n} for n in names]
    events += [{"Time": at + down_for, "Kind": "NodeUp", "NodeName": n} for n in names]
    return _timeline(state, state_ref, events, at + down_for + 300.0)


def rolling_upgrade(
    state: dict,
    seed: int = 0,
    at: float = 60.0,
    per_domain: float = 300.0,
    restart: bool = True,
    state_ref: str | None = None,
) -> dict:
    """A cluster upgrade walking the upgrade domains in sorted order, `per_domain` seconds each.
    With `restart`, as SF upgrades a domain: its running nodes are deactivated with Intent Restart
    when the domain starts (their primaries are swapped out, nothing new is placed there) and
    activated again just before the domain completes (its replicas return to the snapshot)."""
    domains = sorted({str(n["UpgradeDomain"]) for n in state["Nodes"]})
    running = [n for n in state["Nodes"] if n.get("NodeStatus", NodeStatus.UP) == NodeStatus.UP]
    events: list[dict] = [{"Time": at, "Kind": "UpgradeStarted", "Scope": "Cluster", "UpgradeDomains": domains}]
    for i, ud in enumerate(domains):
        start, done = at + i * per_domain, at + (i + 1) * per_domain
        names = [n["NodeName"] for n in running if str(n["UpgradeDomain"]) == ud] if restart else []
        events += [{"Time": start, "Kind": "NodeDisabled", "NodeName": n, "Intent": "Restart"} for n in names]
        events += [{"Time": done, "Kind": "NodeEnabled", "NodeName": n} for n in names]
        events.append({"Time": done, "Kind": "UpgradeDomainCompleted", "UpgradeDomain": ud})
    end = at + len(domains) * per_domain
    events.append({"Time": end, "Kind": "UpgradeCompleted"})
    return _timeline(state, state_ref, events, end + 300.0)


def scale_out(
    state: dict,
    seed: int = 0,
    node_type: str | None = None,
    count: int = 3,
    at: float = 60.0,
    every: float = 30.0,
    state_ref: str | None = None,
) -> dict:
    """`count` new nodes of `node_type` (default: one picked by `seed`), one every `every` seconds,
    spread round-robin over the existing fault and upgrade domains."""
    rng = random.Random(seed)
    types = sorted({n.get("NodeType") for n in state["Nodes"] if n.get("NodeType")})
    types = sorted(set(types) | {t["Name"] for t in state.get("NodeTypes", [])})
    if node_type is not None and node_type not in types:
        raise BadInput(f"node_type: {node_type!r} is not a node type (node types: {', '.join(types)})")
    node_type = node_type or (rng.choice(types) if types else None)
    fds = sorted({n["FaultDomain"] for n in state["Nodes"]})
    uds = sorted({str(n["UpgradeDomain"]) for n in state["Nodes"]})
    taken = {n["NodeName"] for n in state["Nodes"]}
    events = []
    for i in range(count):
        name = next(
            f"{node_type or 'Node'}-new{k}"
            for k in range(i, i + len(taken) + count)
            if f"{node_type or 'Node'}-new{k}" not in taken
        )
        taken.add(name)
        node = {"NodeName": name, "FaultDomain": fds[i % len(fds)], "UpgradeDomain": uds[i % len(uds)]}
        events.append(
            {"Time": at + i * every, "Kind": "NodeAdded", "Node": node | ({"NodeType": node_type} if node_type else {})}
        )
    return _timeline(state, state_ref, events, at + count * every + 600.0)


def hot_service(
    state: dict,
    seed: int = 0,
    service: str | None = None,
    factor: float = 3.0,
    at: float = 60.0,
    lasts: float = 1800.0,
    state_ref: str | None = None,
) -> dict:
    """One service (default: picked by `seed` among those with load metrics) reports `factor` times
    its default loads at `at`, and its defaults again `lasts` seconds later."""
    candidates = sorted(s["ServiceName"] for s in state["Services"] if _custom_metrics(s))
    if not candidates or (service is not None and service not in candidates):
        raise BadInput(f"service: {service!r} is not a service with load metrics (candidates: {', '.join(candidates)})")
    name = service or random.Random(seed).choice(candidates)
    svc = next(s for s in state["Services"] if s["ServiceName"] == name)
    events = []
    for t, f in ((at, factor), (at + lasts, 1.0)):
        for part in (p for p in state["Partitions"] if p["ServiceName"] == name):
            for role in sorted({r["Role"] for r in part["Replicas"]}):
                events.append(
                    {
                        "Time": t,
                        "Kind": "LoadReport",
                        "ServiceName": name,
                        "PartitionId": part["PartitionId"],
                        "Role": role,
                        "Loads": _role_loads(svc, role, f),
                    }
                )
    return _timeline(state, state_ref, events, at + lasts + 600.0)


GENERATORS = {
    "diurnal": diurnal,
    "fault-domain-failure": fault_domain_failure,
    "rolling-upgrade": rolling_upgrade,
    "scale-out": scale_out,
    "hot-service": hot_service,
}
