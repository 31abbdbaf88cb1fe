"""An action completed on a typed partition, as the Failover Manager completes it: a move or an add
puts its replica on the target, a drop removes it, a swap or a promotion hands the primary role
over (and the load follows the role). The replay's clock completes a round's actions this way."""

from __future__ import annotations

import dataclasses

from plbjax.sf._state.cluster import Partition, Replica
from plbjax.sf._state.vocabulary import Action, ActionKind, Role

SWAP, PROMOTE = ActionKind.SWAP_PRIMARY_SECONDARY, ActionKind.PROMOTE_SECONDARY


def completed(partition: Partition, action: Action) -> Partition:
    """`partition` after `action` (a new record; an added replica has no ReplicaId yet). Raises
    ValueError for an action that does not fit it (its replica elsewhere or gone, a target that
    holds a replica of the partition, roles that do not allow a swap or a promotion)."""
    replicas, kind, target = list(partition.replicas), action.kind, action.target
    if action.replica is None:
        replicas.append(Replica(None, kind.role, None, {}, None))  # type: ignore[arg-type]
        i = len(replicas) - 1
    else:
        text = str(action.replica)
        i = next((k for k, r in enumerate(replicas) if str(r.replica_id) == text), -1)
        if i < 0:
            raise ValueError(f"action {action.document()}: no replica {text}")
    replica = replicas[i]
    if replica.node != action.source:
        raise ValueError(f"action {action.document()}: replica is on {replica.node}")
    if kind.is_drop:
        if replica.role is not kind.role:
            raise ValueError(f"action {action.document()}: the replica is a {replica.role}")
        del replicas[i]
    elif kind is SWAP:
        j = next((k for k, r in enumerate(replicas) if r.node == target), -1)
        if j < 0 or replica.role is not Role.PRIMARY or replicas[j].role is not Role.SECONDARY:
            raise ValueError(f"action {action.document()}: not a primary/secondary pair")
        _hand_over(replicas, i, j)
    elif kind is PROMOTE:
        if replica.role is not Role.SECONDARY or any(
            r.role is Role.PRIMARY and k != i and r.node == target for k, r in enumerate(replicas)
        ):
            raise ValueError(f"action {action.document()}: cannot promote")
        old = next((k for k, r in enumerate(replicas) if r.role is Role.PRIMARY), None)
        if old is not None:
            _hand_over(replicas, old, i)
        replicas[i] = dataclasses.replace(replicas[i], role=Role.PRIMARY)
    else:
        if any(r.node == target for k, r in enumerate(replicas) if k != i):
            raise ValueError(f"action {action.document()}: target already holds a replica of the partition")
        replicas[i] = dataclasses.replace(replica, node=target, role=kind.role if kind.is_add else replica.role)
    return Partition(partition.service, partition.partition_id, tuple(replicas))


def _hand_over(replicas: list[Replica], primary: int, secondary: int) -> None:
    """`secondary` becomes the primary, `primary` a secondary, and the load follows the role (SF's
    FailoverUnit: one primary load per partition, whichever replica is primary; a replica new to
    the secondary role gets the average of the other secondaries' loads, or the partition's
    secondary load when there is no other, UpdateSecondaryLoadMap): the new primary takes the old
    primary's reported loads, the old primary the other secondaries' average (the new primary's
    own loads when it was the only secondary)."""
    others = [r.loads for k, r in enumerate(replicas) if r.role is Role.SECONDARY and k != secondary]
    reported = others or [replicas[secondary].loads]
    metrics = sorted({m for loads in reported for m in loads})
    average = {
        m: sum(loads[m] for loads in reported if m in loads) / sum(m in loads for loads in reported) for m in metrics
    }
    old = replicas[primary].loads
    replicas[primary] = dataclasses.replace(replicas[primary], role=Role.SECONDARY, loads=average)
    replicas[secondary] = dataclasses.replace(replicas[secondary], role=Role.PRIMARY, loads=dict(old))
