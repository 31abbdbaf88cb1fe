"""The events still to apply (plbjax.sf.replay.timeline.pending): the timeline's in order, and the block-list
expiries the entries added schedule, among them in time order."""

from __future__ import annotations

from replay_fakes import as_doc, cluster, planned, play

from plbjax.sf.replay.timeline.changes import BlockListExpired
from plbjax.sf.replay.timeline.events import Event
from plbjax.sf.replay.timeline.pending import Pending


def test_an_expiry_follows_the_events_of_its_time_and_only_the_latest_until_expires():
    entry = {"NodeName": "N1", "ServiceTypeName": "T"}
    events = [
        Event.read(1, "BlockListAdded", entry | {"Until": 4}, 0),
        Event.read(2, "BlockListAdded", entry | {"Until": 5}, 1),
    ]
    events += [Event.read(4, "NodeDown", {"NodeName": "N0"}, 2), Event.read(5, "NodeUp", {"NodeName": "N0"}, 3)]
    pending = Pending(events)
    first = pending.due(2)
    assert first == events[:2] and pending.next_time() == 4
    for event in first:
        pending.applied(event)
    assert pending.due(4) == events[2:3]  # the expiry at 4 was extended to 5
    assert [(e.time, e.kind) for e in pending.due(5)] == [(5, "NodeUp"), (5, BlockListExpired.KIND)]
    assert pending.next_time() == float("inf")


def test_block_list_expiry_is_applied_in_time_order_among_the_events():
    state = cluster({"N0": 2, "N1": 2}, {})
    state["Services"][0]["ServiceTypeName"] = "SvcType"
    seen = []

    def planner(state_doc, phase, node_type, seed, frozen, effort=None):
        state_doc = as_doc(state_doc)
        seen.append((phase, [b["NodeName"] for b in state_doc.get("BlockList", [])]))
        return planned([], {})

    events = [
        {"Time": 1, "Kind": "BlockListAdded", "NodeName": "N1", "ServiceTypeName": "SvcType", "Until": 4},
        {"Time": 2, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
        {"Time": 4, "Kind": "ReplicaFailed", "ReplicaId": "r1"},
        {"Time": 6, "Kind": "ReplicaFailed", "ReplicaId": "r2"},
    ]
    result = play(state, events, planner=planner, duration=7)
    assert [s for s in seen if s[0] == "Placement"] == [("Placement", ["N1"]), ("Placement", []), ("Placement", [])]
    assert [r.time for r in result.rows if r.trigger == "Event"] == [1, 2, 4, 6]
    assert "BlockList" not in result.final_state or result.final_state["BlockList"] == []


def test_a_block_list_entry_added_again_lasts_until_the_later_until():
    state = cluster({"N0": 2, "N1": 2}, {})
    seen = []

    def planner(state_doc, phase, node_type, seed, frozen, effort=None):
        state_doc = as_doc(state_doc)
        seen.append((phase, [b["NodeName"] for b in state_doc.get("BlockList", [])]))
        return planned([], {})

    entry = {"Kind": "BlockListAdded", "NodeName": "N1", "ServiceTypeName": "SvcType"}
    events = [
        {"Time": 1, **entry, "Until": 5},
        {"Time": 3, **entry, "Until": 10},
        {"Time": 7, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
    ]
    play(state, events, planner=planner, duration=9)
    assert seen == [("Placement", ["N1"])]  # at 7 the entry added again at 3 still holds (until 10)
