"""A `ClusterState` back to a state document (contract section 1), for what is written or read as
one: a replay's final state, and an event that edits the document (a node, a service, an upgrade).

Between PLB rounds a replay changes the typed state, not a document: reported loads and completed
actions give new `Partition` records, a round's plan a new History. The state's `document` stays
the input's for every other key (nodes, services, settings, ...), which only an edit of the
document changes; `state_document` takes the partitions and History from the typed records.
"""

from __future__ import annotations

from plbjax.sf._state.cluster import ClusterState, Partition, Replica


def state_document(state: ClusterState) -> dict:
    """`state` as a state document: its document's keys, Partitions and History (empty: none) from
    the records."""
    doc = {k: v for k, v in state.document.items() if k not in ("Partitions", "History")}
    doc["Partitions"] = [partition_document(p) for p in state.partitions]
    doc["History"] = {k: list(v) for k, v in state.history.items()}
    return doc


def partition_document(partition: Partition) -> dict:
    """One Partitions entry."""
    replicas = [replica_document(r) for r in partition.replicas]
    return {"ServiceName": partition.service, "PartitionId": partition.partition_id, "Replicas": replicas}


def replica_document(replica: Replica) -> dict:
    """One Replicas entry (Loads and MoveCost only when there are any)."""
    doc = {"ReplicaId": replica.replica_id, "Role": replica.role.value, "NodeName": replica.node}
    if replica.loads:
        doc["Loads"] = dict(replica.loads)
    if replica.move_cost is not None:
        doc["MoveCost"] = replica.move_cost
    return doc
