"""Best placement -> the minimal list of Failover Manager actions, and applying actions back.

Replicas keep their identity (their reported loads travel with them), so the diff holds one entry
per replica whose node changed, from its input node to its final node: a replica moved and moved
back does not appear, N1 -> N2 -> N3 appears once as N1 -> N3. Replicas the input lacks, or holds
on Down nodes, are added. A changed primary is one swap (a promotion when the old primary is gone).
Per partition the actions come in an executable order: swaps and promotions among replicas in
place, then adds and moves each onto a node that is free at that point, then the swap or promotion
of a primary that only now has its node. Moves that only rotate a partition's replicas among its
own nodes cannot be executed that way; `settle` undoes them first.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from plbjax.sf._encoding.problem import Index
from plbjax.sf._state import Action, ActionKind, NodeStatus, Partition, Replica, Role, completed, replica_document

SWAP, PROMOTE = ActionKind.SWAP_PRIMARY_SECONDARY, ActionKind.PROMOTE_SECONDARY


def _present(index: Index, r: int) -> int:
    """Replica r's node in the input if it is running there (Up or Disabled), else -1."""
    n = int(index.input_node[r])
    return n if n >= 0 and index.node_status[n] is not NodeStatus.DOWN else -1


def _moved(index: Index, node_of: np.ndarray, p: int) -> dict[int, tuple[int, int]]:
    """{replica: (input node, final node)} of partition p's running replicas whose node changed."""
    out = {}
    for r in index.partition_rows[p]:
        src = _present(index, r)
        if src >= 0 and node_of[r] >= 0 and node_of[r] != src:
            out[r] = (src, int(node_of[r]))
    return out


def _cycles(moved: dict[int, tuple[int, int]]) -> set[int]:
    """Replicas whose moves form a rotation among the partition's own nodes."""
    by_source = {src: r for r, (src, _) in moved.items()}
    cyclic: set[int] = set()
    for start in moved:
        path, r = [], start
        while r is not None and r not in path and r not in cyclic:
            path.append(r)
            r = by_source.get(moved[r][1])
        if r is not None and r in path:
            cyclic |= set(path[path.index(r) :])
    return cyclic


def touched(index: Index, node_of: np.ndarray, primary_of: np.ndarray) -> np.ndarray:
    """The partitions (in order) that have actions or rotations: a replica on another node than the
    one it runs on in the input (or on none there), a different primary, or a primary whose node is
    down. The others are left as they are, however many there are."""
    n = index.n_partitions
    flat, partition = index.row_partition
    down = np.array([status is NodeStatus.DOWN for status in index.node_status] + [True], bool)
    given = np.asarray(index.input_node)[flat]
    present = np.where(given >= 0, given, -1)
    present[down[present]] = -1
    final = np.asarray(node_of)[flat]
    moved = np.zeros(n, bool)
    moved[partition[(final >= 0) & (final != present)]] = True
    primary = np.asarray(index.initial_primary)[:n]
    running = np.full(np.asarray(node_of).shape[0], -1)
    running[flat] = present
    lost = (primary >= 0) & (running[np.maximum(primary, 0)] < 0)
    return np.flatnonzero(moved | (np.asarray(primary_of)[:n] != primary) | lost)


def settle(index: Index, node_of: np.ndarray, primary_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(node_of, primary_of) with every rotation of replicas among a partition's own nodes undone; a
    primary that rotated hands its role to the replica that stays on the node it rotated to, so each
    node keeps the role (and so the load) the search gave it."""
    node_of, primary_of = np.array(node_of, copy=True), np.array(primary_of, copy=True)
    for p in touched(index, node_of, primary_of).tolist():
        cyclic = _cycles(_moved(index, node_of, p))
        if int(primary_of[p]) in cyclic:
            primary_of[p] = next(r for r in cyclic if _present(index, r) == node_of[primary_of[p]])
        for r in cyclic:
            node_of[r] = _present(index, r)
    return node_of, primary_of


Why = Callable[[int, ActionKind, int, int], dict]  # (replica row, action, source node, target node) -> notes


def partition_actions(
    index: Index, p: int, node_of: np.ndarray, primary_of: np.ndarray, why: Why | None = None
) -> list[Action]:
    """Actions taking partition p from the input to (node_of, primary_of), in executable order.

    A running primary (Up or Disabled node) hands over by a swap; without one, a running secondary
    is promoted, and a replica the plan adds is added in the role it ends with. `why` gives each
    action's notes (its phase and reason)."""
    rows = index.partition_rows[p]
    if _cycles(_moved(index, node_of, p)):
        raise ValueError(f"partition {index.partitions[p]}: replicas rotate among its nodes; settle() first")
    service, partition_id = index.partitions[p]
    where = {r: _present(index, r) for r in rows}
    primary, final = int(index.initial_primary[p]), int(primary_of[p])
    if primary >= 0 and where[primary] < 0:
        primary = -1  # its node is down: nothing to hand over from
    if primary < 0 and final >= 0 and where[final] < 0:
        primary = final  # added as the primary it ends as
    actions = []

    def act(r: int, kind: ActionKind, target: int) -> None:
        source = int(index.input_node[r]) if where[r] < 0 else where[r]
        actions.append(
            Action(
                service=service,
                partition=partition_id,
                replica=index.replica_ids[r],
                kind=kind,
                source=index.nodes[source] if source >= 0 else None,
                target=index.nodes[target],
                notes=why(r, kind, source, target) if why else {},
            )
        )

    if final >= 0 and final != primary and where[final] >= 0:
        act(primary, SWAP, where[final]) if primary >= 0 else act(final, PROMOTE, where[final])
        primary = final
    pending = {r: int(node_of[r]) for r in rows if node_of[r] >= 0 and node_of[r] != where[r]}
    occupied = {n for n in where.values() if n >= 0}
    while pending:
        r = min(r for r, dst in pending.items() if dst not in occupied)
        dst = pending.pop(r)
        role = (Role.PRIMARY if r == primary else Role.SECONDARY) if index.stateful[p] else Role.INSTANCE
        act(r, ActionKind.move(role) if where[r] >= 0 else ActionKind.add(role), dst)
        occupied.discard(where[r])
        occupied.add(dst)
        where[r] = dst
    if final >= 0 and final != primary:  # the primary hands over to a replica added above
        act(primary, SWAP, where[final])
    return actions


def diff(index: Index, node_of: np.ndarray, primary_of: np.ndarray, why: Why | None = None) -> list[Action]:
    """Every partition's actions, partition by partition."""
    return [
        a
        for p in touched(index, node_of, primary_of).tolist()
        for a in partition_actions(index, p, node_of, primary_of, why)
    ]


ActionLike = Action | Mapping[str, Any]  # an Action, or a plan document's action


def _typed(action: ActionLike) -> Action:
    return action if isinstance(action, Action) else Action.from_document(action)


def apply_actions(document: dict, actions: Iterable[ActionLike]) -> dict:
    """The state document after `actions` (Actions, or a plan document's `Actions`), applied in
    order (a new dict; the input is not changed); a drop removes its replica.

    Raises ValueError for an action that does not fit the document at that point."""
    doc = copy.deepcopy(document)
    parts = {(p["ServiceName"], str(p["PartitionId"])): p for p in doc["Partitions"]}
    for act in map(_typed, actions):
        part = parts[(act.service, str(act.partition))]
        part["Replicas"] = _replicas_after(part["Replicas"], act)
    return doc


def apply_to_partition(partition: dict, action: ActionLike) -> dict:
    """`partition` (a state document's) after `action`, as `apply_actions` leaves it: a new dict
    with a new Replicas list; `partition` is not changed. Raises ValueError for an action that does
    not fit."""
    return {**partition, "Replicas": _replicas_after(partition["Replicas"], _typed(action))}


def _replicas_after(replicas: list[dict], act: Action) -> list[dict]:
    """A document's `replicas` after `act`, completed as the Failover Manager completes it (`completed`,
    on the partition's records)."""
    record = Partition(act.service, act.partition, tuple(map(_record, replicas)))
    return [replica_document(r) for r in completed(record, act).replicas]


def _record(replica: Mapping[str, Any]) -> Replica:
    try:
        role = Role(replica["Role"])
    except (KeyError, ValueError):
        raise ValueError(f"replica {replica.get('ReplicaId')!r}: no role {replica.get('Role')!r}") from None
    loads = {m: v for m, v in (replica.get("Loads") or {}).items() if v is not None}
    return Replica(replica["ReplicaId"], role, replica.get("NodeName"), loads, replica.get("MoveCost"))
