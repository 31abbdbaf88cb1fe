"""Move Primary Replica, Move Secondary Replica and Move Instance, checked as SF checks them.

The order of the checks and the error each gives follow SF's own code (microsoft/service-fabric,
src/prod/src/Reliability/Failover/fm/QueryHelper.cpp, MovePrimaryAsyncOperation /
MoveSecondaryAsyncOperation and FMQueryHelper::GetServiceNameAndCurrentPrimaryNode /
VerifyNodeExistsAndIsUp; src/prod/src/Reliability/LoadBalancing/PlacementAndLoadBalancing.cpp,
TriggerSwapPrimary(Helper) / TriggerMoveSecondary(Helper)); names from src/prod/src/Common/ErrorCodeValue.h.
"""

from __future__ import annotations

from plbjax.sf import ActionKind, NodeStatus, ReplicaStatus
from plbjax.sf.live.simulator.cluster import IDLE, PRIMARY, SECONDARY, Cluster, Move, Partition, Refused, Replica

MESSAGES = {  # SF's texts: src/prod/src/data/statuscodes/SfStatus.mc
    "FABRIC_E_PARTITION_NOT_FOUND": "The operation failed because the requested partition does not exist.",
    "FABRIC_E_SERVICE_DOES_NOT_EXIST": "Service does not exist.",
    "FABRIC_E_NODE_NOT_FOUND": "Node not found.",
    "FABRIC_E_REPLICA_DOES_NOT_EXIST": "The specified replica does not exist.",
    "FABRIC_E_INVALID_REPLICA_STATE": "This operation cannot be performed in the current replica state.",
    "FABRIC_E_INVALID_PARTITION_OPERATION": "MovePrimary or MoveSecondary operation can be only be performed on "
    "stateful Service Type.",
    "FABRIC_E_PRIMARY_ALREADY_EXISTS": "Replica is already primary role.",
    "FABRIC_E_SECONDARY_ALREADY_EXISTS": "Replica is already secondary role.",
    "FABRIC_E_TIMEOUT": "Operation timed out.",
    "FABRIC_E_SERVICE_TOO_BUSY": "The service cannot process the request because it is too busy. Please retry.",
    "FABRIC_E_APPLICATION_NOT_FOUND": "Application not found.",
    "FABRIC_E_NODE_IS_DOWN": "The node is down (not stopped).",
    "FABRIC_E_CONSTRAINT_NOT_SATISFIED": "The operation failed because a constraint was not satisfied.",
}


class Unstable(Refused):
    """The partition is reconfiguring: SF's FM retries (PLBNotReady) until the request's timeout."""

    def __init__(self) -> None:
        super().__init__("FABRIC_E_TIMEOUT", MESSAGES["FABRIC_E_TIMEOUT"])


def refuse(code: str) -> Refused:
    return Refused(code, MESSAGES[code])


def partition(c: Cluster, pid: str, stateful: bool) -> Partition:
    """The partition (FABRIC_E_PARTITION_NOT_FOUND) of the kind the call needs (INVALID_PARTITION_OPERATION)."""
    part = c.partitions.get(pid.lower())
    if part is None:
        raise refuse("FABRIC_E_PARTITION_NOT_FOUND")
    if part.stateful != stateful:
        raise refuse("FABRIC_E_INVALID_PARTITION_OPERATION")
    return part


def _node_up(c: Cluster, name: str) -> None:
    """FMQueryHelper::VerifyNodeExistsAndIsUp: an unknown or Down node is NodeNotFound."""
    if c.nodes.get(name) != NodeStatus.UP:
        raise refuse("FABRIC_E_NODE_NOT_FOUND")


def _stable(c: Cluster, part: Partition) -> None:
    """PLB refuses (PLBNotReady, retried by the FM) a partition in transition or with a replica to place."""
    live = [r for r in part.replicas if r.status in (ReplicaStatus.READY, ReplicaStatus.IN_BUILD)]
    if c.busy(part.pid) or c.short(part) or any(r.status == ReplicaStatus.IN_BUILD for r in live):
        raise Unstable()


def _current(part: Partition) -> list[Replica]:
    """The replicas of the partition's current configuration, in listing order."""
    return [r for r in part.replicas if r.status in (ReplicaStatus.READY, ReplicaStatus.IN_BUILD, ReplicaStatus.DOWN)]


def move_primary(c: Cluster, pid: str, node: str | None) -> Move:
    """Move Primary Replica: a swap onto a secondary's node, or a new primary built on a node without one."""
    part = partition(c, pid, stateful=True)
    if node:
        _node_up(c, node)
    _stable(c, part)
    primary = next(r for r in _current(part) if r.role == PRIMARY)
    if not node:  # chooseRandom: the PLB picks a secondary
        secondaries = [r.node for r in _current(part) if r.role == SECONDARY]
        if not secondaries:
            raise refuse("FABRIC_E_REPLICA_DOES_NOT_EXIST")
        node = sorted(secondaries)[0]
    there = next((r for r in _current(part) if r.node == node), None)
    if there is not None and there.role == PRIMARY:
        raise refuse("FABRIC_E_PRIMARY_ALREADY_EXISTS")
    if there is not None and there.role != SECONDARY:
        raise refuse("FABRIC_E_REPLICA_DOES_NOT_EXIST")
    if there is not None:
        return _swap(c, part, primary, there)
    return _rebuild(c, part, primary, node, ActionKind.MOVE_PRIMARY, PRIMARY)


def move_secondary(c: Cluster, pid: str, current: str, new: str | None, service_id: str | None = None) -> Move:
    """Move Secondary Replica (service_id None) or Move Instance (service_id: the path's service)."""
    if service_id is not None and service_id not in {p.service_id for p in c.partitions.values()}:
        raise refuse("FABRIC_E_SERVICE_DOES_NOT_EXIST")
    part = partition(c, pid, stateful=service_id is None)
    if service_id is not None and part.service_id != service_id:
        raise refuse("FABRIC_E_PARTITION_NOT_FOUND")
    kind = ActionKind.MOVE_SECONDARY if part.stateful else ActionKind.MOVE_INSTANCE
    if new:
        _node_up(c, new)
    _stable(c, part)
    new = new or _pick_new(c, part)
    source = None
    for replica in _current(part):  # TriggerMoveSecondaryHelper's loop, in its order
        if replica.node == new:
            primary = replica.role == PRIMARY
            raise refuse("FABRIC_E_PRIMARY_ALREADY_EXISTS" if primary else "FABRIC_E_SECONDARY_ALREADY_EXISTS")
        if replica.node == current:
            if replica.role not in (SECONDARY, None):
                raise refuse("FABRIC_E_INVALID_REPLICA_STATE")
            source = replica
    if source is None:
        raise refuse("FABRIC_E_REPLICA_DOES_NOT_EXIST")
    return _rebuild(c, part, source, new, kind, SECONDARY if part.stateful else None)


def _pick_new(c: Cluster, part: Partition) -> str:
    """NewNodeName omitted: the PLB picks an Up node without a replica of the partition."""
    held = {r.node for r in _current(part)}
    free = sorted(n for n, s in c.nodes.items() if s == NodeStatus.UP and n not in held)
    if not free:
        raise refuse("FABRIC_E_CONSTRAINT_NOT_SATISFIED")
    return free[0]


def _swap(c: Cluster, part: Partition, primary: Replica, secondary: Replica) -> Move:
    """The primary and a secondary exchange roles after swap_seconds."""
    move = Move(ActionKind.SWAP_PRIMARY_SECONDARY, part.pid, primary.node, secondary.node, c.clock)

    def finish() -> None:  # the roles' loads go with the roles
        primary.role, secondary.role = SECONDARY, PRIMARY
        primary.loads, secondary.loads = secondary.loads, primary.loads

    c.start(move, c.swap_seconds, finish, lambda: None)
    return move


def _rebuild(c: Cluster, part: Partition, source: Replica, node: str, kind: str, role: str | None) -> Move:
    """A new replica (new ReplicaId, the source's loads) is built on `node` (InBuild/IdleSecondary), then
    takes `role`; the source replica goes."""
    fresh = Replica(
        c.new_id(),
        node,
        IDLE if part.stateful else None,
        ReplicaStatus.IN_BUILD,
        source.sid,
        dict(source.raw),
        dict(source.loads),
    )
    part.replicas.append(fresh)
    move = Move(kind, part.pid, source.node, node, c.clock)

    def finish() -> None:
        fresh.status, fresh.role = ReplicaStatus.READY, role
        if source in part.replicas:
            part.replicas.remove(source)

    c.start(move, c.build_seconds, finish, lambda: part.replicas.remove(fresh))
    return move
