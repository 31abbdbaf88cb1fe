"""Surplus replicas: a partition holding more replicas than its target drops the extra ones first.

SF keeps a partition at its TargetReplicaSetSize / InstanceCount; when it holds more (the target was
lowered, or a replica thought lost came back), the PLB picks which ones go and the Failover Manager
drops them (`DropSecondary`, `DropInstance`, `DropPrimary`). The pick, in this order: replicas that
are not running (no node, or a node that is not Up), replicas that break an enabled constraint,
replicas sharing their fault or upgrade domain with more of the partition's others (so the rest keeps
its spread), secondaries before the primary, then the replica on the node most loaded relative to
the cluster's mean in its service's metrics; ties by ReplicaId. Drops are picked one at a time. A
dropped primary hands over to the remaining running secondary on the least loaded node
(`PromoteSecondary`). The phases then plan the state without the dropped replicas.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.decoding import PROMOTE, SWAP
from plbjax.encoding import Index
from plbjax.state import ClusterState, Partition


def drop_surplus(state: ClusterState, index: Index, loads: np.ndarray,
                 violating: np.ndarray) -> tuple[ClusterState, list[dict]]:
    """The state without each partition's surplus replicas, and the actions that drop them.

    `loads` [N, M]: node loads of the input's running replicas; `violating` [R]: replicas (rows of
    `index`) that break an enabled constraint."""
    if not any(0 <= state.service(p.service).target < len(p.replicas) for p in state.partitions):
        return state, []
    status = dict(zip(index.nodes, index.node_status))
    node = {n.name: n for n in state.nodes}
    node_row = {name: n for n, name in enumerate(index.nodes)}
    row_of = {str(index.replica_ids[r]): r for r in range(index.n_replicas) if index.replica_ids[r] is not None}
    up = np.array([s == "Up" for s in index.node_status])
    mean = loads[: index.n_nodes][up].mean(axis=0) if up.any() else np.zeros(loads.shape[1])
    relative_all = np.where(mean > 0, loads[: index.n_nodes] / np.where(mean > 0, mean, 1.0), 0.0)
    metric = {m: k for k, m in enumerate(index.metrics)}

    def relative(service, name: str) -> float:
        """The node's load over the Up nodes' mean, summed over the service's metrics."""
        return float(sum(relative_all[node_row[name], metric[m.name]] for m in service.metrics if m.name in metric))

    def running(rep) -> bool:
        return rep.node is not None and status[rep.node] == "Up"

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

        def drop_first(rep, others) -> tuple:
            return (running(rep), not violating[row_of[str(rep.replica_id)]], -crowding(rep, others),
                    rep.role == "Primary",
                    -relative(service, rep.node) if rep.node is not None else 0.0, str(rep.replica_id))

        kept, dropped = list(part.replicas), []
        for _ in range(extra):          # one at a time: each drop changes the others' crowding
            dropped.append(min(kept, key=lambda rep: drop_first(rep, kept)))
            kept = [rep for rep in kept if rep is not dropped[-1]]
        for rep in dropped:
            actions.append(_action(part, rep.replica_id, "Drop" + rep.role, rep.node, None))
        heir = min((rep for rep in kept if running(rep)), default=None,
                   key=lambda rep: (relative(service, rep.node), str(rep.replica_id)))
        if heir is not None and any(rep.role == "Primary" for rep in dropped):
            actions.append(_action(part, heir.replica_id, PROMOTE, heir.node, heir.node))
            # its reported loads were a secondary's: the service's primary defaults apply now
            promoted = dataclasses.replace(heir, role="Primary", loads={})
            kept = [promoted if rep is heir else rep for rep in kept]
        partitions.append(Partition(part.service, part.partition_id, tuple(kept)))
    return dataclasses.replace(state, partitions=tuple(partitions)), actions


def _action(part: Partition, replica_id, kind: str, source: str | None, target: str | None) -> dict:
    return {"ServiceName": part.service, "PartitionId": part.partition_id, "ReplicaId": replica_id,
            "Action": kind, "SourceNode": source, "TargetNode": target}


def merge_hand_overs(drops: list[dict], actions: list[dict], primaries: dict[tuple[str, str], object]) -> list[dict]:
    """The drops, then the phases' actions, with one hand-over per partition: where the phases also
    swapped the primary of a partition whose dropped primary was replaced by a promotion, the replica
    they made primary (`primaries`: (service, str(PartitionId)) -> ReplicaId) is promoted instead."""
    promoted = {(a["ServiceName"], str(a["PartitionId"])): i for i, a in enumerate(drops) if a["Action"] == PROMOTE}
    drops = list(drops)
    out = []
    for a in actions:
        key = (a["ServiceName"], str(a["PartitionId"]))
        if a["Action"] == SWAP and key in promoted:
            drops[promoted.pop(key)] = None
            a = dict(a, ReplicaId=primaries[key], Action=PROMOTE, SourceNode=a["TargetNode"])
        out.append(a)
    return [a for a in drops if a is not None] + out
