"""A cluster held encoded between PLB rounds: each typed state it is handed updates what it holds.

A replay hands the probe and the planner a `ClusterState` per round, derived from the last one:
loads reported and actions completed (new `Partition` records for the partitions they touched),
History replaced, the throttles' allowance in the settings. Governing and encoding a state in full
costs more than a round's search at tens of thousands of replicas. A `Session` keeps the last
state and its governed encoding, and takes the next state as an update of them, by what changed
(states are frozen: the same object is the same content):

- the same state: nothing;
- only settings in the movement throttles (`PHASE_SETTINGS`): the held encoding with those
  settings (the planner's view of the probe's state); nothing is replaced;
- only partitions and History: the partitions that are other objects are governed again and only
  their replica rows derived again (`with_partitions`); the rest of the encoding stays;
- anything else (nodes, services, block list, upgrade, any other setting: a structural change):
  governed and encoded in full.

Every path gives what governing and encoding the state afresh gives: `resident=False` does just
that, the oracle the tests replay against. `encodings` and `updates` count the two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

from plbjax.sf._encoding import with_partitions, without_dropped
from plbjax.sf._phases import Encoded, Phase, SearchConfig, governed_encoding
from plbjax.sf._plan.planning import Plan, plan_encoded
from plbjax.sf._plan.probe import Findings, findings_encoded
from plbjax.sf._state import ClusterState, gc_paused, governed_again

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
# What a round changes; every other field of the state must be the held one's for an update (the
# document follows the fields: a structural change reads it again, which makes all of them new).
_ROUND = frozenset({"partitions", "history", "settings", "document"})
_KEPT = tuple(f.name for f in dataclasses.fields(ClusterState) if f.init and f.name not in _ROUND)


class Session:
    """The resident cluster of a run of PLB rounds (see the module): `findings` and `plan` of a
    state, as `plbjax.sf.findings` and `plan` give them."""

    def __init__(self, resident: bool = True):
        self.resident = resident
        self.encodings = 0  # states governed and encoded in full
        self.updates = 0  # states taken as an update of the held encoding
        self._state: ClusterState | None = None
        self._encoded: Encoded | None = None

    def findings(self, state: ClusterState, frozen: Collection[tuple[str, str]] = ()) -> Findings:
        """What a PLB round finds in `state` now (`plbjax.sf.findings`)."""
        encoded = self.encoded(state)
        with gc_paused():  # node loads make thousands of objects, none of them garbage
            return findings_encoded(encoded, frozen)

    def plan(
        self,
        state: ClusterState,
        search: SearchConfig | None = None,
        progress: Callable[[int, int, float, float], None] | None = None,
        *,
        phase: Phase | None = None,
        node_type: str | None = None,
        frozen: Collection[tuple[str, str]] = (),
        refresh: bool | str = False,
    ) -> Plan:
        """The plan of `state` (`plbjax.sf.plan`, with the same round arguments)."""
        encoded = self.encoded(state)
        return plan_encoded(encoded, search, progress, phase=phase, node_type=node_type, frozen=frozen, refresh=refresh)

    def encoded(self, state: ClusterState) -> Encoded:
        """`state` governed and encoded."""
        held, encoded = self._state, self._encoded
        if not self.resident or held is None or encoded is None:
            return self._hold(state, None)
        if state is held:
            return encoded
        if any(getattr(state, k) is not getattr(held, k) for k in _KEPT):
            return self._hold(state, None)
        beyond = _differ_beyond_phases(state.settings, held.settings)
        if not beyond and state.partitions is held.partitions and state.history is held.history:
            return _with_settings(encoded, state.settings)  # a view: the held stay
        if beyond or len(state.partitions) != len(held.partitions):
            return self._hold(state, None)
        with gc_paused():  # an update makes tens of thousands of objects, none of them garbage
            return self._hold(state, _updated(encoded, held, state))

    def _hold(self, state: ClusterState, encoded: Encoded | None) -> Encoded:
        if encoded is None:
            self.encodings += 1
            encoded = governed_encoding(state)
        else:
            self.updates += 1
        if self.resident:
            self._state, self._encoded = state, encoded
        return encoded


def _differ_beyond_phases(a: dict, b: dict) -> bool:
    return a is not b and any(a.get(k) != b.get(k) for k in a.keys() | b.keys() if k not in PHASE_SETTINGS)


def _with_settings(encoded: Encoded, settings: dict) -> Encoded:
    """The held encoding with other movement throttles (`PHASE_SETTINGS`)."""
    return encoded._replace(state=dataclasses.replace(encoded.state, settings=settings))


def _updated(encoded: Encoded, held: ClusterState, state: ClusterState) -> Encoded:
    """The encoding of `state`, which has `held`'s nodes, services and settings that count, from
    `held`'s: the partitions that are other objects governed and encoded again."""
    changed = [k for k, (now, then) in enumerate(zip(state.partitions, held.partitions)) if now is not then]
    governed = governed_again(state, held, encoded.state)
    updated = with_partitions(governed, encoded.problem, encoded.index, changed)
    return Encoded(governed, encoded.health, *(updated or without_dropped(governed, encoded.index)))
