"""The node events (NodeDown, NodeUp, NodeAdded, NodeRemoved, NodeDisabled, NodeEnabled) applied
to a state document, as the Failover Manager applies them. A replica that is lost (its node went
down or was removed, its node was deactivated with Intent RemoveData or RemoveNode, or it failed:
`lose`, which the cluster events share) is removed from its partition: the partition is then below
its target and the next placement round adds a replica. A lost primary hands its role to the first
secondary left on a running node, as the Failover Manager promotes one. Each handler takes a
shallow copy of the document and the event's typed change, and returns the document changed.
"""

from __future__ import annotations

from collections.abc import Callable

from plbjax.errors import BadInput
from plbjax.sf import Intent, NodeStatus, Role
from plbjax.sf.replay.timeline.changes import NodeAdded, NodeDisabled, NodeDown, NodeEnabled, NodeRemoved, NodeUp

# ------------------------------------------------------------------------------ helpers


def node_index(doc: dict, name: object) -> int:
    """Where node `name` is in the document's Nodes."""
    for i, node in enumerate(doc["Nodes"]):
        if node["NodeName"] == name:
            return i
    raise BadInput(f"NodeName: {name!r} is not a node")


def _set_node(doc: dict, name: str, **changes) -> dict:
    """`doc` with node `name`'s keys changed (a None removes the key)."""
    i = node_index(doc, name)
    node = {k: v for k, v in {**doc["Nodes"][i], **changes}.items() if v is not None}
    doc["Nodes"] = [*doc["Nodes"][:i], node, *doc["Nodes"][i + 1 :]]
    return doc


def _promote(replicas: list[dict], down: set[str | None]) -> list[dict]:
    """`replicas` with the first secondary on a running node made primary if none is primary."""
    if any(r["Role"] == Role.PRIMARY for r in replicas) or not any(r["Role"] == Role.SECONDARY for r in replicas):
        return replicas
    chosen = next((r for r in replicas if r["Role"] == Role.SECONDARY and r.get("NodeName") not in down), None)
    return [dict(r, Role=Role.PRIMARY.value) if r is chosen else r for r in replicas]


def _down_nodes(doc: dict) -> set[str | None]:
    return {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus") == NodeStatus.DOWN} | {None}


def lose(doc: dict, lost: Callable[[dict, dict], bool]) -> dict:
    """`doc` without the replicas for which lost(partition, replica) holds (primaries handed over);
    History and Upgrade.Snapshot forget them."""
    down, gone, partitions = _down_nodes(doc), set(), []
    for part in doc["Partitions"]:
        keep = [r for r in part["Replicas"] if not lost(part, r)]
        if len(keep) == len(part["Replicas"]):
            partitions.append(part)
            continue
        gone |= {str(r["ReplicaId"]) for r in part["Replicas"] if not any(r is k for k in keep)}
        partitions.append(dict(part, Replicas=_promote(keep, down)))
    doc["Partitions"] = partitions
    return _forget_replicas(doc, gone) if gone else doc


def _forget_replicas(doc: dict, gone: set[str]) -> dict:
    if "History" in doc:
        doc["History"] = {k: v for k, v in doc["History"].items() if k not in gone}
    if doc.get("Upgrade") and "Snapshot" in doc["Upgrade"]:
        snapshot = {k: v for k, v in doc["Upgrade"]["Snapshot"].items() if k not in gone}
        doc["Upgrade"] = dict(doc["Upgrade"], Snapshot=snapshot)
    return doc


def _on_node(name: str) -> Callable[[dict, dict], bool]:
    return lambda _, replica: replica.get("NodeName") == name


# ------------------------------------------------------------------------------ nodes


def node_down(doc: dict, c: NodeDown | NodeRemoved) -> dict:
    doc = _set_node(doc, c.node, NodeStatus=NodeStatus.DOWN.value, DeactivationIntent=None)
    return lose(doc, _on_node(c.node))


def node_up(doc: dict, c: NodeUp) -> dict:
    """A down node runs again (a deactivated node that never went down stays Disabled)."""
    if _status(doc, c.node) == NodeStatus.DISABLED:
        return doc
    return _set_node(doc, c.node, NodeStatus=NodeStatus.UP.value)


def _status(doc: dict, name: object) -> str:
    return doc["Nodes"][node_index(doc, name)].get("NodeStatus", NodeStatus.UP)


def node_added(doc: dict, c: NodeAdded) -> dict:
    if any(n["NodeName"] == c.name for n in doc["Nodes"]):
        raise BadInput(f"Node.NodeName: {c.name!r} is already a node")
    doc["Nodes"] = [*doc["Nodes"], dict(c.node)]
    return doc


def node_removed(doc: dict, c: NodeRemoved) -> dict:
    name = c.node
    doc = node_down(doc, c)
    doc["Nodes"] = [n for n in doc["Nodes"] if n["NodeName"] != name]
    if "BlockList" in doc:
        doc["BlockList"] = [b for b in doc["BlockList"] if b["NodeName"] != name]
    if "History" in doc:
        doc["History"] = {k: [n for n in v if n != name] for k, v in doc["History"].items()}
    if doc.get("Upgrade") and "Snapshot" in doc["Upgrade"]:
        snapshot = {k: v for k, v in doc["Upgrade"]["Snapshot"].items() if v != name}
        doc["Upgrade"] = dict(doc["Upgrade"], Snapshot=snapshot)
    return doc


def node_disabled(doc: dict, c: NodeDisabled) -> dict:
    """SF's deactivation: no new replicas (Disabled, with the event's DeactivationIntent); Restart
    also swaps its primaries out (a secondary elsewhere is promoted); RemoveData and RemoveNode
    also lose its replicas, to be built elsewhere. A Down node stays Down (it holds no replica; the
    state has one status per node)."""
    if _status(doc, c.node) == NodeStatus.DOWN:
        return doc
    doc = _set_node(doc, c.node, NodeStatus=NodeStatus.DISABLED.value, DeactivationIntent=c.intent.value)
    if not c.intent.keeps_replicas:
        return lose(doc, _on_node(c.node))
    if c.intent is Intent.RESTART:
        return _swap_out(doc, c.node)
    return doc


def _swap_out(doc: dict, name: str) -> dict:
    down, partitions = _down_nodes(doc) | {name}, []
    for part in doc["Partitions"]:
        replicas = part["Replicas"]
        if any(r["Role"] == Role.PRIMARY and r.get("NodeName") == name for r in replicas) and any(
            r["Role"] == Role.SECONDARY and r.get("NodeName") not in down for r in replicas
        ):
            demoted = [dict(r, Role=Role.SECONDARY.value) if r["Role"] == Role.PRIMARY else r for r in replicas]
            part = dict(part, Replicas=_promote(demoted, down))
        partitions.append(part)
    doc["Partitions"] = partitions
    return doc


def node_enabled(doc: dict, c: NodeEnabled) -> dict:
    """SF's activation: a Disabled node takes replicas again (its intent cleared); a Down node
    stays down."""
    if _status(doc, c.node) == NodeStatus.DOWN:
        return doc
    return _set_node(doc, c.node, NodeStatus=NodeStatus.UP.value, DeactivationIntent=None)
