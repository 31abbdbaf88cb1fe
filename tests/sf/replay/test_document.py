"""The state document during a replay (plbjax.sf.replay.state.document): the probe asked once per version
and set of frozen partitions, History cleared on a new imbalance and kept clean of what is gone."""

from __future__ import annotations

from replay_fakes import SERVICE, OneMove, action, cluster, planned, probe, ran

from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.state.document import StateDocument
from plbjax.sf.replay.types import Needs, Stopwatch


def test_the_probe_is_asked_once_per_version_and_frozen_set():
    asked = []

    def counting(state_doc: dict, frozen: frozenset) -> Needs:
        asked.append(frozen)
        return probe(state_doc, frozen)

    state = StateDocument(cluster({"N0": 2, "N1": 0}, {}), counting, Stopwatch())
    frozen = frozenset({(SERVICE, "p0")})
    for asking in (frozenset(), frozenset(), frozen):
        state.needs(asking)
    assert asked == [frozenset(), frozen] and state.settings().refresh_gap == 1
    state.changed()
    state.needs(frozenset())
    assert asked == [frozenset(), frozen, frozenset()]
    assert state.existing() == 2 and state.replicas().ids == {"r0", "r1"}


def test_history_keeps_only_the_replicas_and_nodes_the_document_still_has():
    doc = cluster({"N0": 2, "N1": 0}, {})
    state = StateDocument(doc, probe, Stopwatch())
    state.replace_history({"r0": ("N1", "N9"), "r1": ("N9",), "gone": ("N0",)})
    assert state.doc["History"] == {"r0": ["N1", "N9"], "r1": ["N9"], "gone": ["N0"]}
    state.clean_history()
    assert state.doc["History"] == {"r0": ["N1"]} and "History" not in doc


def test_history_blocks_a_return_until_a_new_trigger():
    state = cluster({"N0": 1, "N1": 0}, {})

    class PingPong(OneMove):
        """Moves the one instance to the other node, unless History forbids it; always 'imbalanced'."""

        def __call__(self, state_doc, phase, node_type, seed, frozen, effort=None):
            self.calls.append((phase, node_type, state_doc, frozen))
            r = state_doc["Partitions"][0]["Replicas"][0]
            history = {k: list(v) for k, v in state_doc.get("History", {}).items()}
            target = "N1" if r["NodeName"] == "N0" else "N0"
            if target in history.get("r0", []):
                return planned([], history)
            history.setdefault("r0", []).append(r["NodeName"])
            return planned([action(state_doc["Partitions"][0], "r0", "MoveInstance", r["NodeName"], target)], history)

    def always(state_doc, frozen):
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
