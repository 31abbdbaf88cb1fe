"""Timeline events applied to a state document, as the Failover Manager and SF apply them.

`apply_event` is pure: it returns a new document and shares the parts it did not change with the
input, which it never mutates. It hands each kind to its handler: `node_events` (nodes down, up,
added, removed, deactivated, activated; the replicas they lose), `load_reports` (LoadReport) and
`cluster_events` (services, a failed replica, upgrades, settings, the block list). References that
a timeline cannot get wrong at load time but that the loop may have changed (a replica the planner
dropped) raise `Gone`; every other bad reference raises `BadInput` with the offending key first
(`NodeName: 'N9' is not a node`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from plbjax.errors import BadInput
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
from plbjax.sf.replay.timeline.loads import LoadReports, load_report
from plbjax.sf.replay.timeline.nodes import node_added, node_disabled, node_down, node_enabled, node_removed, node_up
from plbjax.sf.replay.types import Gone

# Kind -> (required fields, optional fields), besides Time and Kind.
KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "NodeDown": (frozenset({"NodeName"}), frozenset()),
    "NodeUp": (frozenset({"NodeName"}), frozenset()),
    "NodeAdded": (frozenset({"Node"}), frozenset()),
    "NodeRemoved": (frozenset({"NodeName"}), frozenset()),
    "NodeDisabled": (frozenset({"NodeName"}), frozenset({"Intent"})),
    "NodeEnabled": (frozenset({"NodeName"}), frozenset({"Intent"})),
    "LoadReport": (frozenset({"ServiceName", "Loads"}), frozenset({"PartitionId", "ReplicaId", "Role"})),
    "ServiceCreated": (frozenset({"Service"}), frozenset({"Partitions"})),
    "ServiceDeleted": (frozenset({"ServiceName"}), frozenset()),
    "ServiceUpdated": (frozenset({"ServiceName", "Changes"}), frozenset()),
    "ReplicaFailed": (frozenset({"ReplicaId"}), frozenset()),
    "UpgradeStarted": (frozenset({"Scope", "UpgradeDomains"}), frozenset({"ApplicationName"})),
    "UpgradeDomainCompleted": (frozenset({"UpgradeDomain"}), frozenset()),
    "UpgradeCompleted": (frozenset(), frozenset()),
    "SettingsChanged": (
        frozenset(),
        frozenset(
            {
                "Settings",
                "MetricBalancingThresholds",
                "MetricActivityThresholds",
                "DefragmentationMetrics",
                "NodeBufferPercentage",
                "GlobalMetricWeights",
                "ResourceThresholds",
            }
        ),
    ),
    "BlockListAdded": (frozenset({"NodeName", "ServiceTypeName"}), frozenset({"Until"})),
}
# Not a timeline kind: the loop applies it at a BlockListAdded event's Until.
BLOCK_LIST_EXPIRED = "BlockListExpired"


@dataclass(frozen=True)
class Event:
    """One timeline event: `fields` holds every key but Time and Kind; `index` is its place in Events."""

    time: float
    kind: str
    fields: Mapping = field(default_factory=dict)
    index: int = -1


def apply_event(state_doc: dict, event: Event, now: float) -> dict:
    """The state document after `event`, applied at simulated time `now` (no kind depends on the
    clock yet: a BlockListAdded's Until is the loop's to keep); `state_doc` is not changed."""
    handler = _HANDLERS.get(event.kind)
    if handler is None:
        raise BadInput(f"Kind: unknown event kind {event.kind!r}")
    return handler(dict(state_doc), event.fields)


def apply_events(
    state_doc: dict, events: Sequence[Event], now: float, skip_gone: bool = False
) -> tuple[dict, list[Event]]:
    """The state document after `events`, in order (as `apply_event` one after the other), and the
    events applied: with `skip_gone`, an event that raises `Gone` is skipped, else it is bad input.
    A bad event raises `BadInput` naming it (`Events[3].NodeName: ...`). Runs of partition and
    replica LoadReports are applied as one batch (`LoadReports`: each replica they touch written once),
    so a run of them costs what they touch, not the cluster's size."""
    doc, applied, i = state_doc, [], 0
    while i < len(events):
        j = i
        while j < len(events) and _batched(events[j]):
            j += 1
        if j > i:
            doc = _load_reports(doc, events[i:j], skip_gone, applied)
            i = j
            continue
        event = events[i]
        i += 1
        try:
            doc = apply_event(doc, event, now)
        except Gone as exc:
            if skip_gone:
                continue
            raise BadInput(f"Events[{event.index}].{exc}") from None
        except BadInput as exc:
            raise BadInput(f"Events[{event.index}].{exc}") from None
        applied.append(event)
    return doc, applied


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
        if len(seen) <= NAMED and (subject := _subject(event)):
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


def _subject(event: Event) -> str:
    """What an event is about: its node, service, replica, upgrade domain or block-list entry."""
    f = event.fields
    if event.kind in ("BlockListAdded", BLOCK_LIST_EXPIRED):
        return f"{f['NodeName']}/{f['ServiceTypeName']}"
    if event.kind == "UpgradeStarted":
        return " ".join(str(x) for x in (f.get("Scope"), f.get("ApplicationName")) if x)
    if event.kind == "SettingsChanged":
        return "+".join(sorted(f))
    for key in ("NodeName", "ServiceName", "ReplicaId", "UpgradeDomain"):
        if key in f:
            return str(f[key])
    nested = f.get("Node") or f.get("Service") or {}
    return str(nested.get("NodeName") or nested.get("ServiceName") or "") if isinstance(nested, Mapping) else ""


def _batched(event: Event) -> bool:
    return event.kind == "LoadReport" and ("PartitionId" in event.fields or "ReplicaId" in event.fields)


def _load_reports(state_doc: dict, events: Sequence[Event], skip_gone: bool, applied: list[Event]) -> dict:
    """Partition and replica LoadReports (`load_report` one after the other) as one `LoadReports` batch."""
    batch = LoadReports(state_doc)
    for event in events:
        try:
            batch.add(event.fields)
        except Gone as exc:
            if skip_gone:
                continue
            raise BadInput(f"Events[{event.index}].{exc}") from None
        except BadInput as exc:
            raise BadInput(f"Events[{event.index}].{exc}") from None
        applied.append(event)
    return batch.document()


_HANDLERS: dict[str, Callable[[dict, Mapping], dict]] = {
    "NodeDown": node_down,
    "NodeUp": node_up,
    "NodeAdded": node_added,
    "NodeRemoved": node_removed,
    "NodeDisabled": node_disabled,
    "NodeEnabled": node_enabled,
    "LoadReport": load_report,
    "ServiceCreated": service_created,
    "ServiceDeleted": service_deleted,
    "ServiceUpdated": service_updated,
    "ReplicaFailed": replica_failed,
    "UpgradeStarted": upgrade_started,
    "UpgradeDomainCompleted": upgrade_domain_completed,
    "UpgradeCompleted": upgrade_completed,
    "SettingsChanged": settings_changed,
    "BlockListAdded": block_list_added,
    BLOCK_LIST_EXPIRED: block_list_expired,
}
