"""The resident state during a replay (plbjax.sf.replay.state.resident): the probe asked once per
version and set of frozen partitions, History cleared on a new imbalance and kept clean of what is
gone."""

from __future__ import annotations

import dataclasses

from replay_fakes import SERVICE, OneMove, action, as_doc, cluster, planned, probe, ran

from plbjax.sf import parse_state
from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.state.resident import Resident
from plbjax.sf.replay.types import Needs, Stopwatch


def test_the_probe_is_asked_once_per_version_and_frozen_set():
    asked = []

    def counting(state_doc: dict, frozen: frozenset) -> Needs:
        state_doc = as_doc(state_doc)
        asked.append(frozen)
        return probe(state_doc, frozen)

    state = Resident(parse_state(cluster({"N0": 2, "N1": 0}, {})), counting, Stopwatch())
    frozen = frozenset({(SERVICE, "p0")})
    for asking in (frozenset(), frozenset(), frozen):
        state.needs(asking)
    assert asked == [frozenset(), frozen] and state.settings().refresh_gap == 1
    state.changed()
    state.needs(frozenset())
    assert asked == [frozenset(), frozen, frozenset()]
    assert state.existing() == 2 and state.places.census.ids == {"r0", "r1"}


def test_history_keeps_only_the_replicas_and_nodes_the_state_still_has():
    given = parse_state(cluster({"N0": 2, "N1": 0}, {}))
    state = Resident(given, probe, Stopwatch())
    state.replace_history({"r0": ("N1", "N9"), "r1": ("N9",), "gone": ("N0",)})
    assert state.state.history == {"r0": ("N1", "N9"), "r1": ("N9",), "gone": ("N0",)}
    state.clean_history()
    assert state.state.history == {"r0": ("N1",)} and not given.history
    assert dataclasses.replace(state.state, history={}) == given


def test_history_blocks_a_return_until_a_new_trigger():
    state = cluster({"N0": 1, "N1": 0}, {})

    class PingPong(OneMove):
        """Moves the one instance to the other node, unless History forbids it; always 'imbalanced'."""

        def __call__(self, state_doc, phase, node_type, seed, frozen, effort=None):
            state_doc = as_doc(state_doc)
            self.calls.append((phase, node_type, state_doc, frozen))
            r = state_doc["Partitions"][0]["Replicas"][0]
            history = {k: list(v) for k, v in state_doc.get("History", {}).items()}
            target = "N1" if r["NodeName"] == "N0" else "N0"
            if target in history.get("r0", []):
                return planned([], history)
            history.setdefault("r0", []).append(r["NodeName"])
            return planned([action(state_doc["Partitions"][0], "r0", "MoveInstance", r["NodeName"], target)], history)

    def always(state_doc, frozen):
        state_doc = as_doc(state_doc)
        return (
            probe(state_doc, frozen)
            if probe(state_doc, frozen).imbalanced
            else Needs(imbalanced=frozenset({("Count", None)}))
        )

    events = [{"Time": 17, "Kind": "LoadReport", "ServiceName": SERVICE, "ReplicaId": "r0", "Loads": {"CPU": 90}}]
    planner = PingPong()
    result = replay(parse_timeline({"State": state, "Events": events, "Duration": 21}), planner, always, 0)
    assert [(a["Time"], a["SourceNode"], a["TargetNode"]) for a in result.actions] == [
        (5, "N0", "N1"),
        (20, "N1", "N0"),
    ]
    assert [doc.get("History", {}) for _, _, doc, _ in planner.calls] == [{}, {"r0": ["N0"]}, {}]
    assert ran(result) == [(5, "Balancing", None), (10, "Balancing", None), (20, "Balancing", None)]  # 15: no change
