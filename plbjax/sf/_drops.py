"""Surplus replicas: a partition holding more replicas than its target drops the extra ones first.

SF keeps a partition at its TargetReplicaSetSize / InstanceCount; when it holds more (the target was
lowered, or a replica thought lost came back), the PLB picks which ones go and the Failover Manager
drops them (`DropSecondary`, `DropInstance`, `DropPrimary`). The pick, in this order: replicas not
on a node deactivated with Pause (SF's PlacementCreator: those are not droppable), replicas that
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

from plbjax.sf._encoding import Index
from plbjax.sf._state import ClusterState, Partition


def _spread_ok(paths: list[tuple[str, ...]], usable: list[tuple[str, ...]]) -> bool:
    """SF's '+1' rule at every level of the domain tree (FaultDomainConstraint::HasDomainViolation):
    each child domain with usable nodes holds floor(n/d) or floor(n/d) + 1 of the replicas, n not
    counting those in child domains without usable nodes."""
    depth = max([len(p) for p in paths + usable] + [0])
    paths = [tuple(p) + ("",) * (depth - len(p)) for p in paths]
    usable = [tuple(u) + ("",) * (depth - len(u)) for u in usable]
    for level in range(depth):
        for parent in {p[:level] for p in paths}:
            inside = [p[: level + 1] for p in paths if p[:level] == parent]
            children = {u[: level + 1] for u in usable if u[:level] == parent}
            base = sum(inside.count(c) for c in children) // max(len(children), 1)
            if len(inside) > 1 and children and any(not base <= inside.count(c) <= base + 1 for c in children):
                return False
    return True


def drop_surplus(
    state: ClusterState,
    index: Index,
    loads: np.ndarray,
    capacity: np.ndarray,
    violating: np.ndarray,
    usable: dict[str, list[str]],
    spread: tuple[bool, bool],
) -> tuple[ClusterState, list[dict]]:
    """The state without each partition's surplus replicas, and the actions that drop them.

    `loads` [N, M]: node loads of the input's running replicas; `capacity` [N, M]: capacity in force
    (inf where unlimited or not enforced); `violating` [R]: replicas (rows of `index`) that break an
    enabled constraint; `usable`: each service's Up allowed nodes; `spread`: whether the fault and the
    upgrade domain rules are enforced."""
    if not any(0 <= state.service(p.service).target < len(p.replicas) for p in state.partitions):
        return state, []
    view = _DropView(state, index, loads, capacity, violating, usable, spread)
    partitions, actions = [], []
    for part in state.partitions:
        service = state.service(part.service)
        extra = len(part.replicas) - service.target
        if service.target < 0 or extra <= 0:
            partitions.append(part)
            continue
        kept, dropped = view.pick(part, service, extra)
        actions += [_action(part, rep.replica_id, "Drop" + rep.role, rep.node, None) for rep in dropped]
        partitions.append(Partition(part.service, part.partition_id, tuple(kept)))
    return dataclasses.replace(state, partitions=tuple(partitions)), actions


class _DropView:
    """What the drop order reads: node status and domains, node loads relative to the Up nodes' mean,
    room to promote a secondary, constraint violations and where affinity children run."""

    def __init__(
        self,
        state: ClusterState,
        index: Index,
        loads: np.ndarray,
        capacity: np.ndarray,
        violating: np.ndarray,
        usable: dict[str, list[str]],
        spread: tuple[bool, bool],
    ):
        self.status = dict(zip(index.nodes, index.node_status))
        self.node = {n.name: n for n in state.nodes}
        self.node_row = {name: n for n, name in enumerate(index.nodes)}
        self.row_of = {
            str(index.replica_ids[r]): r for r in range(index.n_replicas) if index.replica_ids[r] is not None
        }
        up = np.array([s == "Up" for s in index.node_status])
        self.loads = loads[: index.n_nodes]
        mean = self.loads[up].mean(axis=0) if up.any() else np.zeros(self.loads.shape[1])
        self.relative_loads = np.where(mean > 0, self.loads / np.where(mean > 0, mean, 1.0), 0.0)
        self.metric = {m: k for k, m in enumerate(index.metrics)}
        self.capacity, self.violating, self.usable, self.spread = capacity, violating, usable, spread
        self.children: dict[str, list[str | None]] = {}  # parent service -> nodes of its affinity children's replicas
        for child in state.services:
            for corr in child.correlations:
                self.children.setdefault(corr["ServiceName"], []).extend(
                    r.node for p in state.partitions if p.service == child.name for r in p.replicas if self.running(r)
                )

    def pick(self, part: Partition, service, extra: int) -> tuple[list, list]:
        """(kept, dropped): `extra` drops picked one at a time, as each changes the others' crowding."""
        kept, dropped = list(part.replicas), []
        for _ in range(extra):
            dropped.append(min(kept, key=lambda rep: self.drop_order(part, service, rep, kept)))
            kept = [rep for rep in kept if rep is not dropped[-1]]
        return kept, dropped

    def drop_order(self, part: Partition, service, rep, others) -> tuple:
        """The key that sorts the replica to drop first (the module's order). A running primary goes
        only when a secondary can take over within capacity."""
        keeps_lead = rep.role == "Primary" and self.running(rep) and not any(self.can_lead(service, o) for o in others)
        followers = self.children.get(part.service, []).count(rep.node) if self.running(rep) else 0
        breaks = self.spread_broken(part.service, [o for o in others if o is not rep]) > self.spread_broken(
            part.service, others
        )
        return (
            rep.node is not None and self.node[rep.node].deactivation_intent == "Pause",
            keeps_lead,
            self.running(rep),
            breaks,
            not self.violating[self.row_of[str(rep.replica_id)]],
            followers,
            rep.role == "Primary",
            -self.crowding(rep, others),
            -self.relative(service, rep.node) if rep.node is not None else 0.0,
            str(rep.replica_id),
        )

    def running(self, rep) -> bool:
        return rep.node is not None and self.status[rep.node] == "Up"

    def relative(self, service, name: str) -> float:
        """The node's load over the Up nodes' mean, summed over the service's metrics."""
        row = self.node_row[name]
        return float(
            sum(self.relative_loads[row, self.metric[m.name]] for m in service.metrics if m.name in self.metric)
        )

    def can_lead(self, service, rep) -> bool:
        """A running secondary whose node has room for the primary's load once promoted."""
        if not self.running(rep) or rep.role != "Secondary":
            return False
        grow = np.zeros(self.loads.shape[1])
        for m in service.metrics:
            if m.name in self.metric:
                grow[self.metric[m.name]] = m.primary_load - rep.loads.get(m.name, m.secondary_load)
        n = self.node_row[rep.node]
        return bool(np.all((grow <= 0) | (self.loads[n] + grow <= self.capacity[n])))

    def crowding(self, rep, others) -> int:
        """Other running replicas sharing its fault domain, plus those sharing its upgrade domain."""
        if not self.running(rep):
            return 0
        mine = self.node[rep.node]
        return sum(
            (self.node[o.node].fault_domain == mine.fault_domain)
            + (self.node[o.node].upgrade_domain == mine.upgrade_domain)
            for o in others
            if o is not rep and self.running(o)
        )

    def spread_broken(self, service_name: str, reps) -> int:
        """Enforced domain rules (fault, upgrade) the running `reps` break."""
        allowed = set(self.usable[service_name])
        nodes = [self.node[r.node] for r in reps if self.running(r)]  # as the search counts
        usable_nodes = [self.node[n] for n in allowed]
        return sum(
            on and not _spread_ok([key(n) for n in nodes], [key(n) for n in usable_nodes])
            for on, key in zip(self.spread, (lambda n: n.fault_domain, lambda n: (n.upgrade_domain,)))
        )


def _action(part: Partition, replica_id, kind: str, source: str | None, target: str | None) -> dict:
    return {
        "ServiceName": part.service,
        "PartitionId": part.partition_id,
        "ReplicaId": replica_id,
        "Action": kind,
        "SourceNode": source,
        "TargetNode": target,
    }
