"""The timeline document (timeline.md §1): read, validate, and hold it.

Validation plays the events on the initial state in order, so a reference is checked against the
cluster as it is at that event (a node added by an earlier event exists, a node removed does not).
Bad input raises `BadInput` with one message naming the event index and key
(`Events[3].NodeName: 'N9' is not a node`); the input is never changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from plbjax.errors import BadInput
from plbjax.sf import ActionKind, ClusterState, load_state, parse_state
from plbjax.sf._state import PLB_SETTINGS, resolve_settings
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.timeline.changes import KINDS, Change, SettingsChanged
from plbjax.sf.replay.timeline.events import Event, apply_events
from plbjax.sf.replay.types import VERBS, verb

TOP_KEYS = frozenset({"SchemaVersion", "State", "Duration", "ActionSeconds", "Events"})
# Events whose new objects only the state's own validation can check.
_REVALIDATE = {
    "NodeAdded": "Node",
    "ServiceCreated": "Service",
    "ServiceUpdated": "Changes",
    "UpgradeStarted": "ApplicationName",
    "SettingsChanged": None,
}


def settings_of(state_doc: Mapping) -> dict:
    """Every PLB setting of the state document: SF's defaults overridden by its Settings, the
    intervals as SF's scheduler reads them (`scheduled`)."""
    return scheduled(resolve_settings(state_doc.get("Settings")))


def scheduled(settings: Mapping) -> dict:
    """Every PLB setting (`resolve_settings`'s), the placement and constraint-check intervals as SF's
    scheduler reads them: the deprecated PLBRefreshInterval where it is changed and they are not
    (PLBScheduler.cpp, GetMinPlacementInterval and GetMinConstraintCheckInterval)."""
    settings = dict(settings)
    refresh = settings["PLBRefreshInterval"]
    if refresh != PLB_SETTINGS["PLBRefreshInterval"]:
        for name in ("MinPlacementInterval", "MinConstraintCheckInterval"):
            settings[name] = refresh if settings[name] == PLB_SETTINGS[name] else settings[name]
    return settings


@dataclass(frozen=True)
class ActionSeconds:
    """Seconds an action of each kind takes before it completes (0: completes when issued)."""

    Move: float = 0.0
    Add: float = 0.0
    Swap: float = 0.0
    Drop: float = 0.0
    Promote: float = 0.0

    def of(self, kind: ActionKind | str) -> float:
        """Seconds for an action of `kind` (MoveSecondary, SwapPrimarySecondary, PromoteSecondary...)."""
        return getattr(self, verb(ActionKind(kind)))


@dataclass(frozen=True)
class Timeline:
    """A validated timeline: the initial state, events in time order, and their horizon."""

    state: ClusterState
    duration: float
    action_seconds: ActionSeconds
    events: tuple[Event, ...]
    source: str = "<timeline>"


def load_timeline(path: str | Path) -> Timeline:
    """Read and validate the timeline at `path` (JSON or YAML); a State path is relative to it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None
    try:
        doc = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise BadInput(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}") from None
    return parse_timeline(doc, path.parent, str(path))


def parse_timeline(doc: object, base: str | Path = ".", source: str = "<timeline>") -> Timeline:
    """Validate a parsed timeline document; `base`: the folder a State path is relative to."""
    if not isinstance(doc, Mapping):
        raise BadInput(f"{source}: the timeline must be a mapping at the top level")
    for key in doc:
        if key not in TOP_KEYS:
            raise BadInput(f"{key}: unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    version = doc.get("SchemaVersion", 1)
    if isinstance(version, bool) or version != 1:
        raise BadInput(f"SchemaVersion: {doc['SchemaVersion']!r} is not 1")
    if "State" not in doc or "Events" not in doc:
        raise BadInput(f"{'State' if 'State' not in doc else 'Events'}: required")
    state = _state(doc["State"], Path(base))
    events = _events(doc["Events"])
    duration = _duration(doc.get("Duration"), events)
    final = _play(state, events)
    if duration is None:  # the MinLoadBalancingInterval in effect after the last event
        last = events[-1].time if events else 0.0
        duration = last + float(scheduled(final.settings)["MinLoadBalancingInterval"])
    return Timeline(state, duration, _action_seconds(doc.get("ActionSeconds")), events, source)


def _state(value: object, base: Path) -> ClusterState:
    if isinstance(value, str):
        return load_state(base / value)
    if not isinstance(value, Mapping):
        raise BadInput("State: a state document or a path to one is required")
    return parse_state(value, "State")


def _number(value: object, key: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise BadInput(f"{key}: {value!r} is not a number >= {minimum:g}")
    return float(value)


def _action_seconds(value: object) -> ActionSeconds:
    if value is None:
        return ActionSeconds()
    if not isinstance(value, Mapping):
        raise BadInput("ActionSeconds: a mapping {Move, Add, Swap, Drop, Promote: seconds} is required")
    for key in value:
        if key not in VERBS:
            raise BadInput(f"ActionSeconds.{key}: unknown action kind (known: {', '.join(VERBS)})")
    return ActionSeconds(**{k: _number(v, f"ActionSeconds.{k}") for k, v in value.items()})


def _events(value: object) -> tuple[Event, ...]:
    if not isinstance(value, list):
        raise BadInput("Events: a list is required")
    events, last = [], 0.0
    for i, entry in enumerate(value):
        where = f"Events[{i}]"
        if not isinstance(entry, Mapping):
            raise BadInput(f"{where}: an event mapping {{Time, Kind, ...}} is required")
        for key in ("Time", "Kind"):
            if key not in entry:
                raise BadInput(f"{where}.{key}: required")
        time = _number(entry["Time"], f"{where}.Time")
        if time < last:
            raise BadInput(f"{where}.Time: {time:g} is before the previous event's {last:g} (Time must not decrease)")
        kind = entry["Kind"]
        if kind not in KINDS:
            raise BadInput(f"{where}.Kind: unknown event kind {kind!r} (known: {', '.join(KINDS)})")
        required, optional = KINDS[kind]
        fields = {k: v for k, v in entry.items() if k not in ("Time", "Kind")}
        for key in fields:
            if key not in required | optional:
                raise BadInput(
                    f"{where}.{key}: not a field of {kind} (fields: {', '.join(sorted(required | optional))})"
                )
        for key in sorted(required - set(fields)):
            raise BadInput(f"{where}.{key}: required for {kind}")
        if "Until" in fields and _number(fields["Until"], f"{where}.Until") <= time:
            raise BadInput(f"{where}.Until: {fields['Until']!r} is not after the event's Time {time:g}")
        try:
            events.append(Event.read(time, kind, fields, i))
        except BadInput as exc:
            raise BadInput(f"{where}.{exc}") from None
        last = time
    return tuple(events)


def _duration(value: object, events: tuple[Event, ...]) -> float | None:
    """The Duration given (no event after it), or None for the default."""
    if value is None:
        return None
    duration = _number(value, "Duration")
    late = next((e for e in events if e.time > duration), None)
    if late is not None:
        raise BadInput(f"Events[{late.index}].Time: {late.time:g} is after the Duration {duration:g}")
    return duration


def _revalidated(change: Change) -> str:
    """The key an event's new objects are under, for the state's own validation's message."""
    if isinstance(change, SettingsChanged):
        return next(iter(change.changes), "Settings")
    return _REVALIDATE[change.KIND] or ""


def _play(state: ClusterState, events: tuple[Event, ...]) -> ClusterState:
    """Apply every event in order to check its references; revalidate the state where an event
    brings new objects (a node, a service, changes, an application, settings). The state after
    the last event."""
    places, i = Places.of(state.partitions), 0
    while i < len(events):
        j = i + 1  # a run of events up to one that needs revalidating, applied as one batch
        while j < len(events) and events[j - 1].kind not in _REVALIDATE:
            j += 1
        last = events[j - 1]
        source = f"Events[{last.index}].{_revalidated(last.change)}" if last.kind in _REVALIDATE else "state"
        applied = apply_events(state, places, events[i:j], events[i].time, source=source)
        if applied.reread:
            places = Places.of(applied.state.partitions)
        state, i = applied.state, j
    return state
