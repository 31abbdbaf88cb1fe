"""A cluster held encoded between PLB rounds: each state document it is handed updates what it holds.

A replay hands the probe and the planner a document per round, derived from the last one: loads
reported, actions completed, History replaced, the throttles' allowance in Settings. Parsing,
governing and encoding each in full costs more than a round's search at tens of thousands of
replicas. A `Session` keeps the last document, its state and its governed encoding, and takes the
next document as an update of them, by what changed (documents are never changed in place, so the
same object is the same content):

- the same document: nothing;
- only Settings in the movement throttles (`PHASE_SETTINGS`): the held encoding with those
  settings (the planner's view of the probe's document); nothing is replaced;
- only Partitions, History and Settings (loads, completions): the partitions that are other
  objects are read again (`reparse`) and only their replica rows derived again
  (`with_partitions`); the rest of the encoding stays;
- anything else (nodes, services, block list, upgrade, any other setting: a structural change):
  parsed, governed and encoded in full.

Every path gives what parsing, governing and encoding the document afresh gives: `resident=False`
does just that, the oracle the tests replay against. `encodings` and `updates` count the two.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection

from plbjax.sf._encoding import with_partitions, without_dropped
from plbjax.sf._phases import Encoded, Phase, SearchConfig, governed_encoding
from plbjax.sf._plan.planning import Plan, plan_encoded
from plbjax.sf._plan.probe import Findings, findings_encoded
from plbjax.sf._state import REREAD, ClusterState, gc_paused, governed_again, parse_state, reparse, resolve_settings

# Settings only the phases read (movement throttles, placement's moves): no stage of the encoding
# or of resource governance does, so a change in them keeps the encoding.
PHASE_SETTINGS = frozenset(
    {
        "GlobalMovementThrottleThreshold",
        "GlobalMovementThrottleThresholdPercentage",
        "GlobalMovementThrottleThresholdForBalancing",
        "GlobalMovementThrottleThresholdPercentageForBalancing",
        "GlobalMovementThrottleThresholdForPlacement",
        "GlobalMovementThrottleThresholdPercentageForPlacement",
        "MaxPercentageToMoveForPlacement",
        "MoveExistingReplicaForPlacement",
    }
)


class Session:
    """The resident cluster of a run of PLB rounds (see the module): `findings` and `plan` of a
    document, as `plbjax.sf.findings` and `plan` of its parsed state give them. A document it has
    seen must not be changed in place: a new round hands it new objects for what changed."""

    def __init__(self, resident: bool = True):
        self.resident = resident
        self.encodings = 0  # documents parsed, governed and encoded in full
        self.updates = 0  # documents taken as an update of the held encoding
        self._doc: dict | None = None
        self._state: ClusterState | None = None
        self._encoded: Encoded | None = None

    def findings(self, doc: dict, frozen: Collection[tuple[str, str]] = ()) -> Findings:
        """What a PLB round finds in `doc` now (`plbjax.sf.findings`)."""
        encoded = self.encoded(doc)
        with gc_paused():  # node loads make thousands of objects, none of them garbage
            return findings_encoded(encoded, frozen)

    def plan(
        self,
        doc: dict,
        search: SearchConfig | None = None,
        progress: Callable[[int, int, float, float], None] | None = None,
        *,
        phase: Phase | None = None,
        node_type: str | None = None,
        frozen: Collection[tuple[str, str]] = (),
        refresh: bool | str = False,
    ) -> Plan:
        """The plan of `doc` (`plbjax.sf.plan`, with the same round arguments)."""
        encoded = self.encoded(doc)
        return plan_encoded(encoded, search, progress, phase=phase, node_type=node_type, frozen=frozen, refresh=refresh)

    def encoded(self, doc: dict) -> Encoded:
        """`doc` parsed, governed and encoded."""
        if not self.resident:
            self.encodings += 1
            return governed_encoding(parse_state(doc, "state"))
        with gc_paused():  # an update makes tens of thousands of objects, none of them garbage
            return self._taken(doc)[1]

    def _taken(self, doc: dict) -> tuple[ClusterState, Encoded]:
        last, state, encoded = self._doc, self._state, self._encoded
        if last is None or state is None or encoded is None:
            return self._hold(doc, parse_state(doc, "state"))
        if doc is last:
            return state, encoded
        if _same_except(doc, last, ("Settings",)):
            settings = doc.get("Settings")
            if settings is last.get("Settings") or settings == last.get("Settings"):
                return state, encoded
            resolved = resolve_settings(settings)
            if not _differ_beyond_phases(resolved, state.settings):
                return _with_settings(state, encoded, resolved, settings)  # a view: the held stay
            return self._hold(doc, dataclasses.replace(state, settings=resolved, document=_settled(state, settings)))
        if _same_except(doc, last, REREAD):
            return self._hold(doc, reparse(state, doc, last), update=True)
        return self._hold(doc, parse_state(doc, "state"))

    def _hold(self, doc: dict, state: ClusterState, update: bool = False) -> tuple[ClusterState, Encoded]:
        held, encoded = self._state, self._encoded
        if (
            update
            and held is not None
            and encoded is not None
            and len(state.partitions) == len(held.partitions)
            and not _differ_beyond_phases(state.settings, held.settings)
        ):
            self.updates += 1
            encoded = _updated(encoded, held, state)
        else:
            self.encodings += 1
            encoded = governed_encoding(state)
        self._doc, self._state, self._encoded = doc, state, encoded
        return state, encoded


def _same_except(doc: dict, last: dict, keys: tuple[str, ...]) -> bool:
    """Whether `doc` and `last` have the same top-level values (the same objects) but for `keys`."""
    return doc.keys() - set(keys) == last.keys() - set(keys) and all(doc[k] is last[k] for k in doc if k not in keys)


def _differ_beyond_phases(a: dict, b: dict) -> bool:
    return any(a.get(k) != b.get(k) for k in a.keys() | b.keys() if k not in PHASE_SETTINGS)


def _settled(state: ClusterState, settings: dict | None) -> dict:
    """`state`'s document with `settings` (none: without Settings)."""
    document = {k: v for k, v in state.document.items() if k != "Settings"}
    return document if settings is None else {**document, "Settings": copy.deepcopy(settings)}


def _with_settings(
    state: ClusterState, encoded: Encoded, resolved: dict, settings: dict | None
) -> tuple[ClusterState, Encoded]:
    """`state` and its encoding with other movement throttles (`PHASE_SETTINGS`)."""
    document = _settled(state, settings)
    state = dataclasses.replace(state, settings=resolved, document=document)
    governed = dataclasses.replace(encoded.state, settings=resolved, document=document)
    return state, encoded._replace(state=governed)


def _updated(encoded: Encoded, held: ClusterState, state: ClusterState) -> Encoded:
    """The encoding of `state`, which has `held`'s nodes, services and settings that count, from
    `held`'s: the partitions that are other objects governed and encoded again."""
    changed = [k for k, (now, then) in enumerate(zip(state.partitions, held.partitions)) if now is not then]
    governed = governed_again(state, held, encoded.state)
    updated = with_partitions(governed, encoded.problem, encoded.index, changed)
    return Encoded(governed, encoded.health, *(updated or without_dropped(governed, encoded.index)))
