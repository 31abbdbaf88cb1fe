"""The replay's own state kept sound (issue 57): after every event batch and every completed action
the partitions that changed are checked (at most one Primary per partition, replicas on known
nodes, no replica or node twice in a partition, loads finite). A violation is the replay's defect,
not the user's input: `Corrupted` (an internal error, exit 1), naming what broke it.

Cost: only the partitions that are new records (an unchanged partition is the same object), all of
them only when a node left the cluster."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

from plbjax.sf import ClusterState, Partition, Role


class Corrupted(RuntimeError):
    """The replay's state broke an invariant: a defect of the replay, not bad input."""


def changed(old: ClusterState, new: ClusterState) -> list[int]:
    """Positions in `new`'s partitions that are not `old`'s objects (all when a node left)."""
    before, after = old.partitions, new.partitions
    if old.nodes is not new.nodes and {n.name for n in old.nodes} - {n.name for n in new.nodes}:
        return list(range(len(after)))
    if after is before:
        return []
    if len(after) == len(before):
        return [k for k, (p, q) in enumerate(zip(after, before)) if p is not q]
    kept = {id(p) for p in before}
    return [k for k, p in enumerate(after) if id(p) not in kept]


def problem(partitions: Sequence[Partition], positions: Iterable[int], nodes: Collection[str]) -> str | None:
    """The first broken invariant among `partitions` at `positions`, in words (None: sound);
    `nodes`: the cluster's node names."""
    for k in positions:
        part = partitions[k]
        where = f"partition {part.service}/{part.partition_id}"
        primaries, on, ids = 0, set(), set()
        for r in part.replicas:
            rid, node = str(r.replica_id), r.node
            if r.role is Role.PRIMARY:
                primaries += 1
                if primaries > 1:
                    return f"{where}: a second Primary ({rid})"
            if rid in ids and r.replica_id is not None:
                return f"{where}: replica {rid} twice"
            ids.add(rid)
            if node is not None:
                if node not in nodes:
                    return f"{where}: replica {rid} on {node!r}, not a node"
                if node in on:
                    return f"{where}: two replicas on {node}"
                on.add(node)
            for metric, value in r.loads.items():
                if not math.isfinite(value):
                    return f"{where}: replica {rid}'s {metric} load {value!r} is not finite"
    return None


def check(old: ClusterState, new: ClusterState, what: str) -> None:
    """Raise `Corrupted` naming `what` when `new` (after `old`) broke an invariant."""
    found = problem(new.partitions, changed(old, new), {n.name for n in new.nodes})
    if found is not None:
        raise Corrupted(f"{what} broke the replay's state: {found}")
