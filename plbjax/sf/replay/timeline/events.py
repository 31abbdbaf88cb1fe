"""Timeline events applied to the replay's state, as the Failover Manager and SF apply them.

`apply_events` gives the typed state after a batch: load reports change its records (`loads`);
every other kind edits its document (`apply_event`, pure: a new document that shares the parts it
did not change with the input, which it never mutates), read again once per run of them (a new
node, service or upgrade re-encodes the cluster). An event holds its typed change (`changes`, read once from the
timeline); `apply_event` hands it to its handler: `nodes` (nodes down, up, added, removed,
deactivated, activated; the replicas they lose), `loads` (LoadReport) and `cluster` (services, a
failed replica, upgrades, settings, the block list). References that
a timeline cannot get wrong at load time but that the loop may have changed (a replica the planner
dropped) raise `Gone`; every other bad reference raises `BadInput` with the offending key first
(`NodeName: 'N9' is not a node`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plbjax.errors import BadInput
from plbjax.sf import ClusterState, parse_state, state_document
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.timeline import changes
from plbjax.sf.replay.timeline.changes import Change, LoadReport, read_change
from plbjax.sf.replay.timeline.cluster import (
    block_list_added,
    block_list_expired,
    replica_failed,
    service_created,
    service_deleted,
    service_updated,
    settings_changed,
    upgrade_completed,
    upgrade_domain_completed,
    upgrade_started,
)
from plbjax.sf.replay.timeline.decay import LoadDecay
from plbjax.sf.replay.timeline.loads import LoadReports, load_report
from plbjax.sf.replay.timeline.nodes import node_added, node_disabled, node_down, node_enabled, node_removed, node_up
from plbjax.sf.replay.types import Gone


@dataclass(frozen=True)
class Event:
    """One timeline event: its time, what it changes (typed, per kind) and its place in Events."""

    time: float
    change: Change
    index: int = -1

    @classmethod
    def read(cls, time: float, kind: str, fields: Mapping | None = None, index: int = -1) -> Event:
        """The event of `kind` with these fields (every key but Time and Kind), read once."""
        return cls(time, read_change(kind, fields or {}), index)

    @property
    def kind(self) -> str:
        """The timeline's word for its kind (NodeDown, LoadReport, ...)."""
        return self.change.KIND


def apply_event(state_doc: dict, event: Event, now: float) -> dict:
    """The state document after `event`, applied at simulated time `now` (no kind depends on the
    clock yet: a BlockListAdded's Until is the loop's to keep); `state_doc` is not changed."""
    return _HANDLERS[type(event.change)](dict(state_doc), event.change)


@dataclass(frozen=True)
class Applied:
    """What a batch of events did: the state after them, the events applied, and whether one edited
    the state's document (the cluster was read again: its partitions may be others)."""

    state: ClusterState
    events: list[Event]
    reread: bool


def apply_events(
    state: ClusterState,
    places: Places,
    events: Sequence[Event],
    now: float,
    skip_gone: bool = False,
    source: str = "state",
    decay: LoadDecay | None = None,
) -> Applied:
    """`state` (whose partitions `places` places) after `events`, in order, and the events applied:
    with `skip_gone`, an event that raises `Gone` is skipped, else it is bad input. A bad event
    raises `BadInput` naming it (`Events[3].NodeName: ...`). Runs of partition and replica
    LoadReports change the state's records as one batch (`LoadReports`: each replica they touch
    gets one new record); the other events edit the state's document (`apply_event`), which is read
    again (`source` names it) before the next run of reports and at the end. `decay`: SF's load
    decay, whose past reports the reports are averaged with (and which they change)."""
    applied: list[Event] = []
    doc, reread, i = None, False, 0
    while i < len(events):
        j = i
        while j < len(events) and _batched(events[j]):
            j += 1
        if j > i:
            if doc is not None:
                state, doc = _read(doc, source), None
                places = Places.of(state.partitions)
            state = _load_reports(LoadReports(state, places, decay, now), events[i:j], skip_gone, applied)
            i = j
            continue
        event = events[i]
        i += 1
        try:
            edited = apply_event(doc if doc is not None else state_document(state), event, now)
        except Gone as exc:
            if skip_gone:
                continue
            raise BadInput(f"Events[{event.index}].{exc}") from None
        except BadInput as exc:
            raise BadInput(f"Events[{event.index}].{exc}") from None
        doc, reread = edited, True
        applied.append(event)
    return Applied(state if doc is None else _read(doc, source), applied, reread)


class Unread(BadInput):
    """The document events left could not be read as a state: at a timeline's door, bad input; in
    the loop, a defect of the replay (its state broke)."""


def _read(doc: dict, source: str) -> ClusterState:
    """The state of an edited document, its History without the replicas and nodes it lost (the
    Failover Manager forgets them with them); `Unread` when it is not a state."""
    history = doc.get("History")
    if history:
        replicas = {str(r["ReplicaId"]) for p in doc["Partitions"] for r in p["Replicas"]}
        nodes = {n["NodeName"] for n in doc["Nodes"]}
        kept = {k: [n for n in v if n in nodes] for k, v in history.items() if k in replicas}
        doc["History"] = {k: v for k, v in kept.items() if v}
    try:
        return parse_state(doc, source)
    except BadInput as exc:
        raise Unread(str(exc)) from None


NAMED = 3  # more events of a kind at one time are counted, not named


def describe(events: Sequence[Event]) -> tuple[tuple[str, str], ...]:
    """(kind, what happened) per kind of `events`, in order of first appearance, for the record:
    `NodeDown N0, N3` (each event's subject, up to `NAMED`), else counted, with their subjects while
    they are few: `12 LoadReport events (fabric:/Shop/Orders, fabric:/Shop/Web)`, `18000 LoadReport events`."""
    counts: dict[str, int] = {}
    subjects: dict[str, dict[str, None]] = {}  # distinct subjects per kind, up to one more than `NAMED`
    for event in events:
        kind = event.kind
        counts[kind] = counts.get(kind, 0) + 1
        seen = subjects.setdefault(kind, {})
        if len(seen) <= NAMED and (subject := event.change.subject):
            seen[subject] = None
    out = []
    for kind, count in counts.items():
        distinct = list(subjects[kind])
        if count == 1 or (count <= NAMED and len(distinct) == count):
            out.append((kind, " ".join([kind, ", ".join(distinct)]).rstrip()))
        else:
            listed = f" ({', '.join(distinct)})" if distinct and len(distinct) <= NAMED else ""
            out.append((kind, f"{count} {kind} events{listed}"))
    return tuple(out)


def _batched(event: Event) -> bool:
    return isinstance(event.change, LoadReport) and event.change.of_replicas


def _load_reports(batch: LoadReports, events: Sequence[Event], skip_gone: bool, applied: list[Event]) -> ClusterState:
    """Partition and replica LoadReports, one after the other, as one `LoadReports` batch."""
    for event in events:
        report = event.change
        assert isinstance(report, LoadReport)  # a run `_batched` found
        try:
            batch.add(report)
        except Gone as exc:
            if skip_gone:
                continue
            raise BadInput(f"Events[{event.index}].{exc}") from None
        except BadInput as exc:
            raise BadInput(f"Events[{event.index}].{exc}") from None
        applied.append(event)
    return batch.state()


_HANDLERS: dict[type, Callable[[dict, Any], dict]] = {
    changes.NodeDown: node_down,
    changes.NodeUp: node_up,
    changes.NodeAdded: node_added,
    changes.NodeRemoved: node_removed,
    changes.NodeDisabled: node_disabled,
    changes.NodeEnabled: node_enabled,
    changes.LoadReport: load_report,
    changes.ServiceCreated: service_created,
    changes.ServiceDeleted: service_deleted,
    changes.ServiceUpdated: service_updated,
    changes.ReplicaFailed: replica_failed,
    changes.UpgradeStarted: upgrade_started,
    changes.UpgradeDomainCompleted: upgrade_domain_completed,
    changes.UpgradeCompleted: upgrade_completed,
    changes.SettingsChanged: settings_changed,
    changes.BlockListAdded: block_list_added,
    changes.BlockListExpired: block_list_expired,
}
