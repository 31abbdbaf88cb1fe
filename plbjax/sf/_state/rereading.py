"""A state read again between PLB rounds: `reparse` re-reads only what a round changes.

The replay's documents differ from round to round only in Partitions (loads reported, actions
completed), History and Settings (throttles); `reparse` takes everything else from the state it is
given and reads the changed partitions by column (`columns`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from plbjax.errors import BadInput
from plbjax.sf._state.building import read_block_list, read_history, read_upgrade
from plbjax.sf._state.cluster import ClusterState
from plbjax.sf._state.columns import Columns
from plbjax.sf._state.reading import gc_paused, parse_document
from plbjax.sf._state.schema_check import plain_copy
from plbjax.sf._state.settings import resolve_settings

# The top-level keys `reparse` reads again; every other one it takes from the state it is given.
REREAD = ("Partitions", "History", "Settings")


def reparse(state: ClusterState, doc: dict, before: Mapping | None = None) -> ClusterState:
    """The state of `doc`, a document whose top-level values other than `REREAD` are those `state`
    was parsed from (the same objects, unchanged): only Partitions, History and Settings are read
    and checked again (the replay between rounds: loads reported, actions completed, throttles).
    `before`: the document `state` was parsed from; then only the partitions of `doc` that are not
    the same objects are read (a round's completed actions touch a few), and a History that is the
    same object is only checked against the replicas. Whatever the column check cannot take is
    parsed in full, which names any problem."""
    before = before or {}
    with gc_paused():
        try:
            partitions, replica_ids, copies = _reread_partitions(state, doc.get("Partitions"), before.get("Partitions"))
            node_names = {n.name for n in state.nodes}
            history = state.document.get("History", {})
            if "History" not in doc or doc["History"] is not before.get("History"):
                history = _history_copy(doc.get("History", {}))
            fresh = {"Partitions": copies, "History": history, "Settings": plain_copy(doc.get("Settings"), "")}
            return dataclasses.replace(
                state,
                settings=resolve_settings(doc.get("Settings")),
                partitions=tuple(partitions),
                upgrade=read_upgrade(
                    state.document.get("Upgrade"), list(state.services), list(state.nodes), replica_ids
                ),
                block_list=read_block_list(state.document.get("BlockList", []), list(state.services), node_names),
                history=read_history(history, replica_ids, node_names),
                document={k: fresh[k] if k in fresh else state.document[k] for k in doc},
            )
        except (BadInput, TypeError, ValueError, KeyError):
            return parse_document(doc, "state", owned=False)


def _history_copy(history: object) -> dict:
    """A copy of a History that is plainly valid ({ReplicaId text: [node name, ...]}); BadInput
    when it is anything else (the general path names the problem)."""
    if type(history) is dict and all(
        type(k) is str and type(v) is list and all(type(n) is str and n for n in v) for k, v in history.items()
    ):
        return {k: list(v) for k, v in history.items()}
    raise BadInput("the general path names it")


def _reread_partitions(state: ClusterState, parts: object, before: list | None) -> tuple[list, set[str], list]:
    """(Partition objects, every str(ReplicaId), copies for the state's document) of `parts`, read
    by column: all of them, or with `before` only those changed since (a few, keeping their service
    and id). BadInput when the general path must decide."""
    wrong = BadInput("the general path names it")
    if type(parts) is not list:
        raise wrong
    changed = None
    if before is not None and len(before) == len(parts) == len(state.partitions):
        changed = [k for k, (now, then) in enumerate(zip(parts, before)) if now is not then]
        if len(changed) * 4 > len(parts) or any(
            type(parts[k]) is not dict
            or parts[k].get("ServiceName") != before[k]["ServiceName"]
            or parts[k].get("PartitionId") != before[k]["PartitionId"]
            for k in changed
        ):
            changed = None
    columns = Columns.read(parts if changed is None else [parts[k] for k in changed])
    if columns is None:
        raise wrong
    read, replica_ids = columns.partitions(state._by_name, list(state.nodes))
    if changed is None:
        return read, replica_ids, columns.copy()
    partitions, copies = list(state.partitions), list(state.document["Partitions"])
    for k, partition, copied in zip(changed, read, columns.copy()):
        partitions[k], copies[k] = partition, copied
    ids = [str(r.replica_id) for p in partitions for r in p.replicas]
    replica_ids = set(ids)
    if len(replica_ids) != len(ids):
        raise wrong
    return partitions, replica_ids, copies
