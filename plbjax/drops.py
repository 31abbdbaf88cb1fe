"""Surplus replicas: a partition holding more replicas than its target drops the extra ones first.

SF keeps a partition at its TargetReplicaSetSize / InstanceCount; when it holds more (the target was
lowered, or a replica thought lost came back), the PLB picks which ones go and the Failover Manager
drops them (`DropSecondary`, `DropInstance`, `DropPrimary`). The pick, in this order: replicas that
are not running (no node, or a node that is not Up), replicas whose going leaves the others' fault or
upgrade domain spread no worse, replicas that break an enabled constraint, replicas beside fewer
replicas of affinity children, secondaries before the primary, replicas sharing
their fault or upgrade domain with more of the partition's others (so the rest keeps its spread),
then the replica on the node most loaded relative to the cluster's mean in its service's metrics;
ties by ReplicaId. A running primary is dropped only when a running secondary has room for the
primary's load. Drops are picked one at a time. The phases then plan the state without the dropped
replicas (a partition left without a primary gets one by promotion, `phases.elect_primaries`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.encoding import Index
from plbjax.state import ClusterState, Partition


def _spread_ok(paths: list[tuple[str, ...]], usable: list[tuple[str, ...]]) -> bool:
    """SF's '+1' rule at every level of the domain tree: each child domain with usable nodes holds
    floor(n/d) or floor(n/d) + 1 of the replicas (on usable nodes)."""
    depth = max([len(p) for p in paths + usable] + [0])
    paths = [tuple(p) + ("",) * (depth - len(p)) for p in paths]
    usable = [tuple(u) + ("",) * (depth - len(u)) for u in usable]
    for level in range(depth):
        for parent in {p[:level] for p in paths}:
            inside = [p[: level + 1] for p in paths if p[:level] == parent]
            children = {u[: level + 1] for u in usable if u[:level] == parent}
            base = len(inside) // max(len(children), 1)
            if len(inside) > 1 and children and any(not base <= inside.count(c) <= base + 1 for c in children):
                return False
    return True


def drop_surplus(state: ClusterState, index: Index, loads: np.ndarray, capacity: np.ndarray,
                 violating: np.ndarray, usable: dict[str, list[str]],
                 spread: tuple[bool, bool]) -> tuple[ClusterState, list[dict]]:
    """The state without each partition's surplus replicas, and the actions that drop them.

    `loads` [N, M]: node loads of the input's running replicas; `capacity` [N, M]: capacity in force
    (inf where unlimited or not enforced); `violating` [R]: replicas (rows of `index`) that break an
    enabled constraint; `usable`: each service's Up allowed nodes; `spread`: whether the fault and the
    upgrade domain rules are enforced."""
    if not any(0 <= state.service(p.service).target < len(p.replicas) for p in state.partitions):
        return state, []
    status = dict(zip(index.nodes, index.node_status))
    node = {n.name: n for n in state.nodes}
    node_row = {name: n for n, name in enumerate(index.nodes)}
    row_of = {str(index.replica_ids[r]): r for r in range(index.n_replicas) if index.replica_ids[r] is not None}
    up = np.array([s == "Up" for s in index.node_status])
    loads = loads[: index.n_nodes]
    mean = loads[up].mean(axis=0) if up.any() else np.zeros(loads.shape[1])
    relative_all = np.where(mean > 0, loads / np.where(mean > 0, mean, 1.0), 0.0)
    metric = {m: k for k, m in enumerate(index.metrics)}

    def relative(service, name: str) -> float:
        """The node's load over the Up nodes' mean, summed over the service's metrics."""
        return float(sum(relative_all[node_row[name], metric[m.name]] for m in service.metrics if m.name in metric))

    def running(rep) -> bool:
        return rep.node is not None and status[rep.node] == "Up"

    def can_lead(service, rep) -> bool:
        """A running secondary whose node has room for the primary's load once promoted."""
        if not running(rep) or rep.role != "Secondary":
            return False
        grow = np.zeros(loads.shape[1])
        for m in service.metrics:
            if m.name in metric:
                grow[metric[m.name]] = m.primary_load - rep.loads.get(m.name, m.secondary_load)
        n = node_row[rep.node]
        return bool(np.all((grow <= 0) | (loads[n] + grow <= capacity[n])))

    children: dict[str, list[str]] = {}     # parent service -> nodes of its affinity children's replicas
    for child in state.services:
        for corr in child.correlations:
            children.setdefault(corr["ServiceName"], []).extend(
                r.node for p in state.partitions if p.service == child.name for r in p.replicas if running(r))

    partitions, actions = [], []
    for part in state.partitions:
        service = state.service(part.service)
        extra = len(part.replicas) - service.target
        if service.target < 0 or extra <= 0:
            partitions.append(part)
            continue

        def crowding(rep, others) -> int:
            """Other running replicas sharing its fault domain, plus those sharing its upgrade domain."""
            if not running(rep):
                return 0
            mine = node[rep.node]
            return sum((node[o.node].fault_domain == mine.fault_domain)
                       + (node[o.node].upgrade_domain == mine.upgrade_domain)
                       for o in others if o is not rep and running(o))

        def spread_broken(reps) -> int:
            """Enforced domain rules (fault, upgrade) the running `reps` break."""
            allowed = set(usable[part.service])
            nodes = [node[r.node] for r in reps if running(r) and r.node in allowed]     # as the search counts
            usable_nodes = [node[n] for n in allowed]
            return sum(on and not _spread_ok([key(n) for n in nodes], [key(n) for n in usable_nodes])
                       for on, key in zip(spread, (lambda n: n.fault_domain, lambda n: (n.upgrade_domain,))))

        def drop_first(rep, others) -> tuple:
            # a running primary goes only when a secondary can take over within capacity
            keeps_lead = rep.role == "Primary" and running(rep) and not any(can_lead(service, o) for o in others)
            followers = children.get(part.service, []).count(rep.node) if running(rep) else 0
            breaks = spread_broken([o for o in others if o is not rep]) > spread_broken(others)
            return (keeps_lead, running(rep), breaks, not violating[row_of[str(rep.replica_id)]], followers,
                    rep.role == "Primary",
                    -crowding(rep, others), -relative(service, rep.node) if rep.node is not None else 0.0,
                    str(rep.replica_id))

        kept, dropped = list(part.replicas), []
        for _ in range(extra):          # one at a time: each drop changes the others' crowding
            dropped.append(min(kept, key=lambda rep: drop_first(rep, kept)))
            kept = [rep for rep in kept if rep is not dropped[-1]]
        for rep in dropped:
            actions.append(_action(part, rep.replica_id, "Drop" + rep.role, rep.node, None))
        partitions.append(Partition(part.service, part.partition_id, tuple(kept)))
    return dataclasses.replace(state, partitions=tuple(partitions)), actions


def _action(part: Partition, replica_id, kind: str, source: str | None, target: str | None) -> dict:
    return {"ServiceName": part.service, "PartitionId": part.partition_id, "ReplicaId": replica_id,
            "Action": kind, "SourceNode": source, "TargetNode": target}
