"""The node events (NodeDown, NodeUp, NodeAdded, NodeRemoved, NodeDisabled, NodeEnabled) applied
to a state document, as the Failover Manager applies them. A replica that is lost (its node went
down or was removed, its node was deactivated with Intent RemoveData or RemoveNode, or it failed:
`lose`, which the cluster events share) is removed from its partition: the partition is then below
its target and the next placement round adds a replica. A lost primary hands its role to the first
secondary left on a running node, as the Failover Manager promotes one. Each handler takes a
shallow copy of the document and the event's fields, and returns the document changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from plbjax.errors import BadInput
from plbjax.sf import INTENTS, Intent, NodeStatus, Role

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


def node_down(doc: dict, f: Mapping) -> dict:
    return lose(
        _set_node(doc, f["NodeName"], NodeStatus=NodeStatus.DOWN.value, DeactivationIntent=None),
        _on_node(f["NodeName"]),
    )


def node_up(doc: dict, f: Mapping) -> dict:
    """A down node runs again (a deactivated node that never went down stays Disabled)."""
    if _status(doc, f["NodeName"]) == NodeStatus.DISABLED:
        return doc
    return _set_node(doc, f["NodeName"], NodeStatus=NodeStatus.UP.value)


def _status(doc: dict, name: object) -> str:
    return doc["Nodes"][node_index(doc, name)].get("NodeStatus", NodeStatus.UP)


def node_added(doc: dict, f: Mapping) -> dict:
    node = f["Node"]
    if not isinstance(node, Mapping) or "NodeName" not in node:
        raise BadInput("Node: a node object with a NodeName is required")
    if any(n["NodeName"] == node["NodeName"] for n in doc["Nodes"]):
        raise BadInput(f"Node.NodeName: {node['NodeName']!r} is already a node")
    doc["Nodes"] = [*doc["Nodes"], dict(node)]
    return doc


def node_removed(doc: dict, f: Mapping) -> dict:
    name = f["NodeName"]
    doc = node_down(doc, f)
    doc["Nodes"] = [n for n in doc["Nodes"] if n["NodeName"] != name]
    if "BlockList" in doc:
        doc["BlockList"] = [b for b in doc["BlockList"] if b["NodeName"] != name]
    if "History" in doc:
        doc["History"] = {k: [n for n in v if n != name] for k, v in doc["History"].items()}
    if doc.get("Upgrade") and "Snapshot" in doc["Upgrade"]:
        snapshot = {k: v for k, v in doc["Upgrade"]["Snapshot"].items() if v != name}
        doc["Upgrade"] = dict(doc["Upgrade"], Snapshot=snapshot)
    return doc


def node_disabled(doc: dict, f: Mapping) -> dict:
    """SF's deactivation: no new replicas (Disabled, with the event's DeactivationIntent); Restart
    also swaps its primaries out (a secondary elsewhere is promoted); RemoveData and RemoveNode
    also lose its replicas, to be built elsewhere. A Down node stays Down (it holds no replica; the
    state has one status per node)."""
    name, intent = f["NodeName"], f.get("Intent", Intent.PAUSE.value)
    if intent not in INTENTS:
        raise BadInput(f"Intent: {intent!r} is not one of {', '.join(INTENTS)}")
    if _status(doc, name) == NodeStatus.DOWN:
        return doc
    doc = _set_node(doc, name, NodeStatus=NodeStatus.DISABLED.value, DeactivationIntent=intent)
    if not Intent(intent).keeps_replicas:
        return lose(doc, _on_node(name))
    if intent == Intent.RESTART:
        return _swap_out(doc, name)
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


def node_enabled(doc: dict, f: Mapping) -> dict:
    """SF's activation: a Disabled node takes replicas again (its intent cleared); a Down node
    stays down."""
    if f.get("Intent") is not None and f["Intent"] not in INTENTS:
        raise BadInput(f"Intent: {f['Intent']!r} is not one of {', '.join(INTENTS)}")
    if _status(doc, f["NodeName"]) == NodeStatus.DOWN:
        return doc
    return _set_node(doc, f["NodeName"], NodeStatus=NodeStatus.UP.value, DeactivationIntent=None)
