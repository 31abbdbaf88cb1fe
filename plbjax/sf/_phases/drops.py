"""Surplus replicas: a partition holding more replicas than its target drops the extra ones first.

SF keeps a partition at its TargetReplicaSetSize / InstanceCount; when it holds more (the target was
lowered, or a replica thought lost came back), the PLB picks which ones go and the Failover Manager
drops them (`DropSecondary`, `DropInstance`, `DropPrimary`). Some are never dropped, so a partition
may stay above its target: a replica on a node deactivated with Pause (SF's PlacementCreator:
`isDroppable = nodeResult != IsPaused`) and a primary on a node that is not Down (SF's
Checker::DropExtraReplicas skips primaries; SF's test DroppingWithDeactivatingNodesTest). A primary
without a node, or on a Down node, goes only when a running secondary has room for the primary's
load, so that one can be promoted; else it stays a primary to place (listed in `Unplaced` where it
fits nowhere). Of the rest, in this order: replicas that are not running (no node, or a node that
is not Up), replicas whose going breaks no constraint that held, then none of a higher priority
(SF's Searcher::SearchForExtraReplicas relaxes constraints from the lowest priority up; the
constraints a drop can break are the fault and upgrade domain spread of the others, the affinity
of a child replica beside it, and a child's own replica beside its parent while another of the
child's runs beside none, Checker::DropExtraReplicas), replicas that break an enabled
constraint, replicas beside fewer replicas of affinity children, replicas sharing their fault or
upgrade domain with more of the partition's others (so the rest keeps its spread), then the replica
on the node most loaded relative to the cluster's mean in its service's metrics; ties by ReplicaId.
Drops are picked one at a time. A service with one instance per node (InstanceCount -1) drops its
running instances on nodes it may not use; in one refresh only once every node it may use holds
one (SF's PlacementCreator: a -1 partition's replica difference is the nodes it lacks, and only at
0 the count of its replicas on blocked nodes, negated). The phases then plan the state without the
dropped replicas (a partition left without a primary gets one by promotion,
`phases.elect_primaries`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from plbjax.sf._encoding import Index
from plbjax.sf._state import Action, ActionKind, ClusterState, Intent, NodeStatus, Partition, Role


class Drop(NamedTuple):
    """A surplus replica the plan drops, where it is (None: no node)."""

    service: str
    partition_id: str | int
    replica_id: str | int
    role: Role
    node: str | None

    def action(self, notes: Mapping[str, object]) -> Action:
        """The plan's action (`DropPrimary`, `DropSecondary` or `DropInstance`) with its `notes`."""
        return Action(
            self.service, self.partition_id, self.replica_id, ActionKind.drop(self.role), self.node, None, notes
        )


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
    priorities: tuple[int, int, int],
    one_refresh: bool = False,
) -> tuple[ClusterState, list[Drop]]:
    """The state without each partition's surplus replicas, and the drops (`one_refresh`: as one SF
    refresh drops them, a one-per-node partition's only when it lacks no instance).

    `loads` [N, M]: node loads of the input's running replicas; `capacity` [N, M]: capacity in force
    (inf where unlimited or not enforced); `violating` [R]: replicas (rows of `index`) that break an
    enabled constraint; `usable`: each service's Up allowed nodes; `priorities`: SF's priorities of
    the fault-domain, upgrade-domain and affinity constraints (-1: off)."""
    everywhere = {s.name for s in state.services if s.target < 0}
    surplus = lambda p: p.service in everywhere or len(p.replicas) > state.service(p.service).target
    if not any(map(surplus, state.partitions)):
        return state, []
    view = _DropView(state, index, loads, capacity, violating, usable, priorities)
    partitions, drops = [], []
    for part in state.partitions:
        service = state.service(part.service)
        if part.service in everywhere:
            kept, dropped = view.pick_blocked(part, one_refresh)
        elif len(part.replicas) > service.target:
            kept, dropped = view.pick(part, service, len(part.replicas) - service.target)
        else:
            partitions.append(part)
            continue
        drops += [Drop(part.service, part.partition_id, rep.replica_id, rep.role, rep.node) for rep in dropped]
        partitions.append(Partition(part.service, part.partition_id, tuple(kept)))
    return dataclasses.replace(state, partitions=tuple(partitions)), drops


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
        priorities: tuple[int, int, int],
    ):
        self.status = dict(zip(index.nodes, index.node_status))
        self.node = {n.name: n for n in state.nodes}
        self.node_row = {name: n for n, name in enumerate(index.nodes)}
        self.row_of = {
            str(index.replica_ids[r]): r for r in range(index.n_replicas) if index.replica_ids[r] is not None
        }
        up = np.array([s is NodeStatus.UP for s in index.node_status])
        self.loads = loads[: index.n_nodes]
        mean = self.loads[up].mean(axis=0) if up.any() else np.zeros(self.loads.shape[1])
        self.relative_loads = np.where(mean > 0, self.loads / np.where(mean > 0, mean, 1.0), 0.0)
        self.metric = {m: k for k, m in enumerate(index.metrics)}
        self.capacity, self.violating, self.usable, self.priorities = capacity, violating, usable, priorities
        self.children: dict[str, list[str | None]] = {}  # parent service -> nodes of its affinity children's replicas
        for child in state.services:
            for corr in child.correlations:
                self.children.setdefault(corr.service, []).extend(
                    r.node for p in state.partitions if p.service == child.name for r in p.replicas if self.running(r)
                )
        self.parents: dict[str, set[str | None]] = {}  # child service -> nodes of its affinity parents' replicas
        for child in state.services:
            parents = {corr.service for corr in child.correlations}
            self.parents[child.name] = {
                r.node for p in state.partitions if p.service in parents for r in p.replicas if self.running(r)
            }

    def pick(self, part: Partition, service, extra: int) -> tuple[list, list]:
        """(kept, dropped): up to `extra` drops picked one at a time, as each changes the others'
        crowding, among the droppable replicas."""
        kept, dropped = list(part.replicas), []
        for _ in range(extra):
            droppable = [rep for rep in kept if self.droppable(service, rep, kept)]
            if not droppable:
                break
            dropped.append(min(droppable, key=lambda rep: self.drop_order(part, service, rep, kept)))
            kept = [rep for rep in kept if rep is not dropped[-1]]
        return kept, dropped

    def droppable(self, service, rep, others) -> bool:
        """Not on a node deactivated with Pause (SF's PlacementCreator), not a primary on a node that
        is not Down (SF's Checker::DropExtraReplicas), a lost primary only when a running secondary
        can take over within capacity, and not the last secondary that can while none leads."""
        if rep.node is not None and self.node[rep.node].deactivation_intent is Intent.PAUSE:
            return False
        successors = [o for o in others if o is not rep and self.can_lead(service, o)]
        if rep.role is not Role.PRIMARY:
            led = any(
                o.role is Role.PRIMARY and o.node is not None and self.status[o.node] is not NodeStatus.DOWN
                for o in others
            )
            return led or bool(successors) or not self.can_lead(service, rep)
        return (rep.node is None or self.status[rep.node] is NodeStatus.DOWN) and bool(successors)

    def pick_blocked(self, part: Partition, one_refresh: bool) -> tuple[list, list]:
        """(kept, dropped) of a partition with one instance per node: its running instances on nodes
        its service may not use go (SF's PlacementCreator drops a -1 partition's replicas on its
        blocked nodes, placement constraints, domains and block list, once every node it may use
        holds one: a plan places those it lacks, one refresh only adds them and drops nothing)."""
        allowed = set(self.usable[part.service])
        if one_refresh and allowed - {rep.node for rep in part.replicas if rep.node is not None}:
            return list(part.replicas), []
        dropped = [rep for rep in part.replicas if self.running(rep) and rep.node not in allowed]
        return [rep for rep in part.replicas if all(rep is not d for d in dropped)], dropped

    def drop_order(self, part: Partition, service, rep, others) -> tuple:
        """The key that sorts the droppable replica to drop first (the module's order)."""
        followers = self.children.get(part.service, []).count(rep.node) if self.running(rep) else 0
        rest = [o for o in others if o is not rep]
        fault, upgrade, affinity = self.priorities
        broken = [
            (fault, self.spread_broken(part.service, rest, 0) > self.spread_broken(part.service, others, 0)),
            (upgrade, self.spread_broken(part.service, rest, 1) > self.spread_broken(part.service, others, 1)),
            (affinity, followers > 0 or self.leaves_strays(part.service, rep, rest)),
        ]
        return (
            self.running(rep),
            tuple(sum(p == level for p, b in broken if b) for level in (0, 1, 2)),
            not self.violating[self.row_of[str(rep.replica_id)]],
            followers,
            rep.role is Role.PRIMARY,
            -self.crowding(rep, others),
            -self.relative(service, rep.node) if rep.node is not None else 0.0,
            str(rep.replica_id),
        )

    def leaves_strays(self, service: str, rep, rest) -> bool:
        """An affinity child's replica beside a parent replica, while another of its partition runs
        beside none: dropping it leaves the stray (SF drops a child's replica that is not beside its
        parent first: its AffinityConstraint's drop subspace; PlacementWithAffinityChildTargetLarger-
        DropChildReplicas)."""
        parents = self.parents.get(service)
        if not parents or not self.running(rep) or rep.node not in parents:
            return False
        return any(self.running(o) and o.node not in parents for o in rest)

    def running(self, rep) -> bool:
        return rep.node is not None and self.status[rep.node] is NodeStatus.UP

    def relative(self, service, name: str) -> float:
        """The node's load over the Up nodes' mean, summed over the service's metrics."""
        row = self.node_row[name]
        return float(
            sum(self.relative_loads[row, self.metric[m.name]] for m in service.metrics if m.name in self.metric)
        )

    def can_lead(self, service, rep) -> bool:
        """A running secondary whose node has room for the primary's load once promoted."""
        if not self.running(rep) or rep.role is not Role.SECONDARY:
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

    def spread_broken(self, service_name: str, reps, rule: int) -> bool:
        """Whether the running `reps` break the fault-domain (`rule` 0) or upgrade-domain (1) spread."""
        allowed = set(self.usable[service_name])
        key = (lambda n: n.fault_domain) if rule == 0 else (lambda n: (n.upgrade_domain,))
        nodes = [self.node[r.node] for r in reps if self.running(r)]  # as the search counts
        return not _spread_ok([key(n) for n in nodes], [key(self.node[n]) for n in allowed])
