"""Best placement -> the minimal list of Failover Manager actions, and applying actions back.

Replicas keep their identity (their reported loads travel with them), so the diff holds one entry
per replica whose node changed, from its input node to its final node: a replica moved and moved
back does not appear, N1 -> N2 -> N3 appears once as N1 -> N3. A changed primary is one swap, on the
input's nodes. Swaps come first, then moves in an order in which every target is free, so applying
`Actions` in order to the input yields the proposed placement. Moves that only rotate a partition's
replicas among its own nodes cannot be executed that way; `settle` undoes them first.
"""

from __future__ import annotations

import copy

import numpy as np

from plbjax.encoding import Index

SWAP = "SwapPrimarySecondary"


def _moved(index: Index, node_of: np.ndarray, p: int) -> dict[int, tuple[int, int]]:
    """{replica: (input node, final node)} of partition p's replicas whose node changed."""
    return {r: (int(index.node_of[r]), int(node_of[r])) for r in index.partition_rows[p]
            if index.node_of[r] >= 0 and node_of[r] != index.node_of[r]}


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
            cyclic |= set(path[path.index(r):])
    return cyclic


def settle(index: Index, node_of: np.ndarray) -> np.ndarray:
    """`node_of` with every rotation of replicas among a partition's own nodes undone."""
    out = np.array(node_of, copy=True)
    for p in range(index.n_partitions):
        for r in _cycles(_moved(index, out, p)):
            out[r] = index.node_of[r]
    return out


def _action(index: Index, p: int, replica: int, kind: str, source: int, target: int) -> dict:
    service, partition_id = index.partitions[p]
    return {"ServiceName": service, "PartitionId": partition_id, "ReplicaId": index.replica_ids[replica],
            "Action": kind, "SourceNode": index.nodes[source], "TargetNode": index.nodes[target]}


def partition_actions(index: Index, p: int, node_of: np.ndarray, primary_of: np.ndarray
                      ) -> tuple[list[dict], list[dict]]:
    """(swaps, moves) taking partition p from the input placement to (node_of, primary_of)."""
    swaps = []
    old, new = int(index.primary_of[p]), int(primary_of[p])
    if old >= 0 and new >= 0 and old != new:
        swaps.append(_action(index, p, old, SWAP, int(index.node_of[old]), int(index.node_of[new])))
    pending = _moved(index, node_of, p)
    if _cycles(pending):
        raise ValueError(f"partition {index.partitions[p]}: replicas rotate among its nodes; settle() first")
    occupied = {int(index.node_of[r]) for r in index.partition_rows[p] if index.node_of[r] >= 0}
    moves = []
    while pending:
        r = next(r for r, (_, dst) in sorted(pending.items()) if dst not in occupied)
        src, dst = pending.pop(r)
        kind = ("MovePrimary" if r == new else "MoveSecondary") if index.stateful[p] else "MoveInstance"
        moves.append(_action(index, p, r, kind, src, dst))
        occupied = (occupied - {src}) | {dst}
    return swaps, moves


def diff(index: Index, node_of: np.ndarray, primary_of: np.ndarray) -> list[dict]:
    """Every partition's actions: all swaps first, then all moves (ordered by partition)."""
    swaps, moves = [], []
    for p in range(index.n_partitions):
        s, m = partition_actions(index, p, node_of, primary_of)
        swaps += s
        moves += m
    return swaps + moves


def placement(document: dict) -> dict[tuple[str, str], tuple[frozenset, object]]:
    """{(ServiceName, PartitionId): (nodes holding replicas, primary's node)} of a state document."""
    out = {}
    for part in document.get("Partitions", []):
        reps = [r for r in part["Replicas"] if r.get("NodeName") is not None]
        primary = next((r["NodeName"] for r in reps if r["Role"] == "Primary"), None)
        out[(part["ServiceName"], str(part["PartitionId"]))] = (frozenset(r["NodeName"] for r in reps), primary)
    return out


def apply_actions(document: dict, actions: list[dict]) -> dict:
    """The state document after `actions`, applied in order (a new dict; the input is not changed)."""
    doc = copy.deepcopy(document)
    parts = {(p["ServiceName"], str(p["PartitionId"])): p for p in doc["Partitions"]}
    for act in actions:
        replicas = parts[(act["ServiceName"], str(act["PartitionId"]))]["Replicas"]
        replica = next(r for r in replicas if str(r["ReplicaId"]) == str(act["ReplicaId"]))
        if replica.get("NodeName") != act["SourceNode"]:
            raise ValueError(f"action {act}: replica is on {replica.get('NodeName')}")
        if act["Action"] == SWAP:
            other = next(r for r in replicas if r.get("NodeName") == act["TargetNode"])
            if replica["Role"] != "Primary" or other["Role"] != "Secondary":
                raise ValueError(f"action {act}: not a primary/secondary pair")
            replica["Role"], other["Role"] = "Secondary", "Primary"
        else:
            if any(r.get("NodeName") == act["TargetNode"] for r in replicas):
                raise ValueError(f"action {act}: target already holds a replica of the partition")
            replica["NodeName"] = act["TargetNode"]
    return doc
