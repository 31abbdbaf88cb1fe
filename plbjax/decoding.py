"""Best placement -> the minimal set of Failover Manager actions, and applying actions back.

The diff is computed per partition from the nodes it occupies before and after, not from replica
identities: a replica moved and moved back does not appear, N1 -> N2 -> N3 appears once as N1 -> N3,
and two secondaries that traded nodes are no change at all. Swaps come first (on the input's nodes),
then moves, so applying `Actions` in order to the input yields the proposed placement.
"""

from __future__ import annotations

import numpy as np

from plbjax.encoding import Index

SWAP = "SwapPrimarySecondary"


def _action(index: Index, p: int, replica: int, kind: str, source: str, target: str) -> dict:
    service, partition_id = index.partitions[p]
    return {"ServiceName": service, "PartitionId": partition_id, "ReplicaId": index.replica_ids[replica],
            "Action": kind, "SourceNode": source, "TargetNode": target}


def partition_actions(index: Index, p: int, node_of: np.ndarray, primary_of: np.ndarray
                      ) -> tuple[list[dict], list[dict]]:
    """(swaps, moves) that take partition `p` from the initial placement to (node_of, primary_of)."""
    rows = index.partition_rows[p]
    before = {int(index.node_of[r]): r for r in rows if index.node_of[r] >= 0}
    after = {int(node_of[r]) for r in rows if node_of[r] >= 0}
    if set(before) == after and index.primary_of[p] == primary_of[p]:
        return [], []
    names = index.nodes
    departing = sorted(set(before) - after)
    arriving = sorted(after - set(before))
    swaps, moves = [], []
    old = int(index.node_of[index.primary_of[p]]) if index.primary_of[p] >= 0 else -1
    new = int(node_of[primary_of[p]]) if primary_of[p] >= 0 else -1
    if old >= 0 and new >= 0 and old != new:
        if new in before:                         # an existing secondary's node takes the primary
            swaps.append(_action(index, p, before[old], SWAP, names[old], names[new]))
        elif old not in after:                    # the primary itself goes to a new node
            moves.append(_action(index, p, before[old], "MovePrimary", names[old], names[new]))
            departing.remove(old)
            arriving.remove(new)
        else:                                     # a departing secondary becomes primary and moves
            via = departing.pop(0)
            swaps.append(_action(index, p, before[old], SWAP, names[old], names[via]))
            moves.append(_action(index, p, before[via], "MovePrimary", names[via], names[new]))
            arriving.remove(new)
    kind = "MoveSecondary" if index.stateful[p] else "MoveInstance"
    for src, dst in zip(departing, arriving):
        moves.append(_action(index, p, before[src], kind, names[src], names[dst]))
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
    import copy

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
