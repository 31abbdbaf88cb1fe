"""plbjax-apply's preflight, pure: the cluster as read before the first step, against the plan's input.

For each partition the plan touches, the plan says what its nodes hold before its first action and
after each one (`expectations.before` / `after`, or the state's replicas with --state), on the nodes
its actions name. The cluster is where the plan expects it when the partition's replicas on those
nodes are as after some prefix of its actions (none: the plan's input; all: its target; some: an
earlier run got that far), a replica being built where the next action puts one counting as that
action under way. A partition matching no prefix has drifted (moved by hand, by SF's balancer, by the
Failover Manager); so has one whose remaining moves use a node that is not Up. A plan none of whose
partitions the cluster has is another cluster's.

`verdict(actions, read, bases)` gives the `Verdict`; `read(cluster, actions)` reads the cluster for it.
No clock, no thread in `verdict`: its tests give a `Read`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from urllib.parse import quote

from plbjax.sf import Action, NodeStatus
from plbjax.sf.live.apply.expectations import AUXILIARY, BUILDING, NONE, Holding, after, before, said
from plbjax.sf.live.rest import Cluster, HttpError

NOT_FOUND = 404  # SF's status for FABRIC_E_PARTITION_NOT_FOUND
BAD_ID = 400  # a partition id the cluster cannot even parse (not a GUID): not this cluster's


class Standing(StrEnum):
    """Where one partition of the plan stands."""

    TARGET = "at the plan's target"
    READY = "as the plan expects"
    DRIFTED = "drifted"
    MISSING = "not in the cluster"


@dataclasses.dataclass(frozen=True)
class Read:
    """The cluster as read: per partition of the plan, node -> what it holds (None: no such partition
    in the cluster); per node, its status (None: a word that is not a running state; absent: no such
    node)."""

    replicas: Mapping[str, Mapping[str, Holding] | None]
    nodes: Mapping[str, NodeStatus | None]


@dataclasses.dataclass(frozen=True)
class PartitionVerdict:
    """One partition: where it stands, how many of its actions the cluster is past, what differs."""

    partition: str
    service: str
    standing: Standing
    past: int
    actions: int
    differences: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Every partition's standing; the plan's actions (by index in Actions) the cluster is past, and
    those of drifted partitions (with why)."""

    partitions: tuple[PartitionVerdict, ...]
    done: Mapping[int, str]
    drifted: Mapping[int, str]

    @property
    def foreign(self) -> bool:
        """None of the plan's partitions is in the cluster: another cluster's plan."""
        return bool(self.partitions) and all(p.standing is Standing.MISSING for p in self.partitions)

    @property
    def nothing_to_do(self) -> bool:
        return all(p.standing is Standing.TARGET for p in self.partitions)

    @property
    def drift(self) -> list[PartitionVerdict]:
        return [p for p in self.partitions if p.standing in (Standing.DRIFTED, Standing.MISSING)]

    def lines(self) -> list[str]:
        """Each difference, one line: 'SERVICE partition P: ...'."""
        return [f"{p.service} partition {p.partition}: {d}" for p in self.drift for d in p.differences]


def verdict(actions: Sequence[Action], read: Read, bases: Mapping[str, Mapping[str, str]] | None = None) -> Verdict:
    """The cluster as read against the plan's actions (`bases`: partition -> node -> role as the state
    the plan was made from has it; None: the plan's input as its actions say it)."""
    grouped: dict[str, list[tuple[int, Action]]] = {}
    for i, action in enumerate(actions):
        grouped.setdefault(str(action.partition), []).append((i, action))
    out, done, drifted = [], {}, {}
    for pid, mine in grouped.items():
        held = read.replicas.get(pid)
        service = mine[0][1].service
        if held is None:
            out.append(PartitionVerdict(pid, service, Standing.MISSING, 0, len(mine), ("not in the cluster",)))
            drifted.update({i: "its partition is not in the cluster" for i, _ in mine})
            continue
        points = _points([a for _, a in mine], bases.get(pid) if bases is not None else None)
        loose = _whenever([a for _, a in mine], points)
        found = [_differences(held, now, following, loose) for now, following in zip(points, [*points[1:], {}])]
        past = next((k for k in range(len(points)) if not found[k]), None)  # the least progress seen
        if past is None:
            nearest = min(range(len(points)), key=lambda k: len(found[k]))
            lines = tuple(found[nearest]) + (f"(as after {nearest} of its {len(mine)} action(s))",) * (nearest > 0)
            out.append(PartitionVerdict(pid, service, Standing.DRIFTED, 0, len(mine), lines))
            drifted.update({i: f"its partition drifted: {found[nearest][0]}" for i, _ in mine})
            continue
        nodes = _nodes_not_up([a for _, a in mine[past:]], read.nodes)
        if nodes:
            out.append(PartitionVerdict(pid, service, Standing.DRIFTED, past, len(mine), tuple(nodes)))
            drifted.update({i: f"its partition drifted: {nodes[0]}" for i, _ in mine[past:]})
        else:
            at_target = not _differences(held, points[-1], {}, {})  # the Failover Manager's actions made too
            standing = Standing.TARGET if at_target else Standing.READY  # a round trip: both
            out.append(PartitionVerdict(pid, service, standing, past, len(mine)))
        done.update({i: "the cluster is past it" for i, a in mine[:past] if a.kind.is_movement})
    return Verdict(tuple(out), done, drifted)


def _points(actions: list[Action], base: Mapping[str, str] | None) -> list[dict[str, str]]:
    """What the partition's nodes hold before its first action and after each (node -> role, NONE: no
    replica), on the nodes its actions name: from `base` (the state's), else as the actions say."""
    named = [n for a in actions for n in (a.source, a.target) if n]
    start: dict[str, str] = {}
    if base is not None:
        start = {n: base.get(n, NONE) for n in named}
    else:
        known: set[str] = set()
        for a in actions:
            for node, role in before(a.kind, a.source, a.target).items():
                if node and node not in known:
                    start[node] = role
            known.update(n for n in (a.source, a.target) if n)
    points = [start]
    for a in actions:
        point = dict(points[-1])
        if a.kind.is_add and a.source:  # an add replacing a replica on another node
            point[a.source] = NONE
        point.update({n: r for n, r in after(a.kind, a.source, a.target).items() if n})
        points.append(point)
    return points


def _whenever(actions: list[Action], points: list[dict[str, str]]) -> dict[str, set[str]]:
    """Node -> what it may hold at any point, for the nodes the Failover Manager's actions name (it
    makes them whenever it does, before or after the moves around them)."""
    named = {n for a in actions if not a.kind.is_movement for n in (a.source, a.target) if n}
    return {n: {point[n] for point in points if n in point} | {NONE} for n in named}


def _differences(
    held: Mapping[str, Holding],
    expected: Mapping[str, str],
    following: Mapping[str, str],
    loose: Mapping[str, set[str]],
) -> list[str]:
    """Each node whose holding is not the expected one ([] when all match); a replica being built where
    the next action puts one is that action under way, and one being built where a replica is expected,
    that replica coming back; a node in `loose` may hold any of its roles."""
    out = []
    for node, role in expected.items():
        holding = held.get(node)
        got = NONE if holding is None or holding.role == AUXILIARY else holding.role
        if got == role or (got == BUILDING and (role != NONE or following.get(node, NONE) != NONE)):
            continue
        if got in loose.get(node, ()) or (got == BUILDING and node in loose):
            continue
        wanted = "no replica" if role == NONE else f"a Ready {said(role)}"
        out.append(f"{node} holds {holding or 'no replica'}, the plan expects {wanted}")
    return out


def _nodes_not_up(actions: list[Action], nodes: Mapping[str, NodeStatus | None]) -> list[str]:
    """The nodes the remaining moves use that are not Up, one line each."""
    out: list[str] = []
    for a in actions:
        for node in (a.source, a.target) if a.kind.is_movement else ():
            if not node:
                continue
            line = (
                f"node {node} is not in the cluster"
                if node not in nodes
                else f"node {node} is {nodes[node] or 'in no running state'}, not Up"
                if nodes[node] is not NodeStatus.UP
                else ""
            )
            if line and line not in out:
                out.append(line)
    return out


def read(cluster: Cluster, actions: Sequence[Action]) -> Read:
    """The replicas of each partition of the plan and every node's status, from the cluster (a partition
    the cluster does not have: None); BadInput (HttpError, Unanswered) on any other failure."""
    pids = list(dict.fromkeys(str(a.partition) for a in actions))
    with ThreadPoolExecutor(8) as pool:
        replicas = dict(zip(pids, pool.map(lambda pid: _replicas(cluster, pid), pids)))
    nodes = {name: NodeStatus.from_sf(word) for name, word in cluster.nodes().items()}
    return Read(replicas, nodes)


def _replicas(cluster: Cluster, pid: str) -> dict[str, Holding] | None:
    """The partition's replicas; None where the cluster has no such partition (SF's
    FABRIC_E_PARTITION_NOT_FOUND, an id it cannot parse, or no replica and Get Partition Info empty)."""
    try:
        held = cluster.replicas(pid)
        if not held and not cluster.client.get(f"/Partitions/{quote(pid)}", "6.0"):  # SF: 204 if none
            return None
        return held
    except HttpError as exc:
        if exc.status in (NOT_FOUND, BAD_ID) or exc.code == "FABRIC_E_PARTITION_NOT_FOUND":
            return None
        raise
