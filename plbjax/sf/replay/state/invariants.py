"""The replay's own state kept sound (issue 57): after every event batch and every completed action
the partitions that changed are checked (at most one Primary per partition, replicas on known
nodes, no replica or node twice in a partition, loads finite). A violation is the replay's defect,
not the user's input: `Corrupted` (an internal error, exit 1), naming what broke it.

Cost: only the partitions whose dicts changed (the document is copy-on-write: an unchanged
partition is the same object), all of them only when a node left the document."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from plbjax.sf import Role


class Corrupted(RuntimeError):
    """The replay's state broke an invariant: a defect of the replay, not bad input."""


def changed(old: dict, new: dict) -> list[int]:
    """Positions in `new`'s Partitions that are not `old`'s objects (all when a node left)."""
    before, after = old["Partitions"], new["Partitions"]
    if old["Nodes"] is not new["Nodes"] and {n["NodeName"] for n in old["Nodes"]} - {
        n["NodeName"] for n in new["Nodes"]
    }:
        return list(range(len(after)))
    if after is before:
        return []
    if len(after) == len(before):
        return [k for k, (p, q) in enumerate(zip(after, before)) if p is not q]
    kept = {id(p) for p in before}
    return [k for k, p in enumerate(after) if id(p) not in kept]


def problem(doc: dict, positions: Iterable[int]) -> str | None:
    """The first broken invariant among `doc`'s partitions at `positions`, in words (None: sound)."""
    parts: Sequence[dict] = doc["Partitions"]
    nodes: set | None = None
    for k in positions:
        part = parts[k]
        where = f"partition {part['ServiceName']}/{part['PartitionId']}"
        primaries, on, ids = 0, set(), set()
        for r in part["Replicas"]:
            rid, node = str(r["ReplicaId"]), r.get("NodeName")
            if r["Role"] == Role.PRIMARY:
                primaries += 1
                if primaries > 1:
                    return f"{where}: a second Primary ({rid})"
            if rid in ids and r["ReplicaId"] is not None:
                return f"{where}: replica {rid} twice"
            ids.add(rid)
            if node is not None:
                if nodes is None:
                    nodes = {n["NodeName"] for n in doc["Nodes"]}
                if node not in nodes:
                    return f"{where}: replica {rid} on {node!r}, not a node"
                if node in on:
                    return f"{where}: two replicas on {node}"
                on.add(node)
            for metric, value in (r.get("Loads") or {}).items():
                if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                    return f"{where}: replica {rid}'s {metric} load {value!r} is not finite"
    return None


def check(old: dict, new: dict, what: str) -> None:
    """Raise `Corrupted` naming `what` when `new` (after `old`) broke an invariant."""
    found = problem(new, changed(old, new))
    if found is not None:
        raise Corrupted(f"{what} broke the replay's state: {found}")
