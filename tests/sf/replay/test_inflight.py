"""Actions in flight (plbjax.sf.replay.scheduler.inflight): completed when their ActionSeconds have passed, one
after the other per partition, their partitions frozen until then; one that no longer fits is
cancelled; a replica an Add creates gets an unused `replay-N`."""

from __future__ import annotations

from replay_fakes import SERVICE, OneMove, as_doc, cluster, counts, play

from plbjax import parse_state
from plbjax.sf import Action
from plbjax.sf.replay.scheduler.inflight import InFlight
from plbjax.sf.replay.state.places import Places


def _move(pid: str, rid: str, source: str, target: str) -> dict:
    return {
        "ServiceName": SERVICE,
        "PartitionId": pid,
        "ReplicaId": rid,
        "Action": "MoveInstance",
        "SourceNode": source,
        "TargetNode": target,
    }


def test_a_partitions_actions_complete_after_its_earlier_ones_and_free_it_after_the_last():
    doc = cluster({"N0": 2, "N1": 0}, {})
    flight = InFlight()
    flight.issue(Action.from_document(_move("p0", "r0", "N0", "N1")), 0, 3)
    flight.issue(Action.from_document(_move("p0", "r0", "N1", "N0")), 1, 1)  # due at 2, but after the first: at 3
    flight.issue(Action.from_document(_move("p1", "r1", "N0", "N1")), 1, 1)
    assert flight.frozen() == {(SERVICE, "p0"), (SERVICE, "p1")} and flight.next_done() == 2
    state = parse_state(doc)
    places = Places.of(state.partitions)
    after, _, applied = flight.complete(state, places, 2)
    assert applied == 1 and counts(as_doc(after)) == {"N0": 1, "N1": 1} and flight.frozen() == {(SERVICE, "p0")}
    after, _, applied = flight.complete(after, places, 3)
    assert applied == 2 and counts(as_doc(after)) == {"N0": 1, "N1": 1} and flight.next_done() is None
    assert flight.frozen() == frozenset() and counts(as_doc(state)) == {"N0": 2, "N1": 0}  # `state` is not changed


def test_an_action_that_no_longer_fits_is_cancelled_and_an_add_gets_an_unused_id():
    doc = cluster({"N0": 2, "N1": 0}, {})
    doc["Partitions"][0]["Replicas"] = []
    doc["Partitions"][1]["Replicas"][0]["ReplicaId"] = "replay-1"
    add = _move("p0", "r0", "", "N1") | {"ReplicaId": None, "Action": "AddInstance", "SourceNode": None}
    flight = InFlight()
    flight.issue(Action.from_document(add), 0, 0)
    flight.issue(Action.from_document(_move("p1", "replay-1", "N0", "N9")), 0, 0)  # N9 is not Up
    state = parse_state(doc)
    after, touched, applied = flight.complete(state, Places.of(state.partitions), 0)
    assert applied == 1 and flight.cancelled == 1 and touched == [0]
    assert as_doc(after)["Partitions"][0]["Replicas"] == [
        {"ReplicaId": "replay-2", "Role": "Instance", "NodeName": "N1"}
    ]


def test_actions_in_flight_freeze_their_partition_and_land_when_done():
    state = cluster({"N0": 3, "N1": 0}, {})
    planner = OneMove()
    events = [{"Time": 6.5, "Kind": "ReplicaFailed", "ReplicaId": "r1"}]
    result = play(state, events, planner=planner, duration=9, ActionSeconds={"Move": 3})
    assert [(c[0], c[3]) for c in planner.calls] == [
        ("Balancing", frozenset()),
        ("Placement", frozenset({(SERVICE, "p0")})),
    ]
    assert planner.calls[1][2]["Partitions"][0]["Replicas"][0]["NodeName"] == "N0"  # not moved before 8
    assert result.rows[0].needs.node_loads["N0"]["Count"] == 3  # load still on N0 at 5
    where = {r["ReplicaId"]: r["NodeName"] for p in result.final_state["Partitions"] for r in p["Replicas"]}
    assert where["r0"] == "N1" and len(where) == 3 and "replay-1" in where  # the add got an id
    parse_state(result.final_state)


def test_cancelled_when_its_target_went_down():
    state = cluster({"N0": 3, "N1": 0}, {})
    events = [{"Time": 6, "Kind": "NodeDown", "NodeName": "N1"}]
    result = play(state, events, duration=9, ActionSeconds={"Move": 3})
    assert result.cancelled == 1 and counts(result.final_state) == {"N0": 3}


def test_a_rounds_adds_complete_together_with_distinct_new_ids():
    state = cluster({"N0": 2, "N1": 2, "N2": 0}, {})
    events = [
        {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
        {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r2"},
    ]
    result = play(state, events, duration=6)
    placed = [a for a in result.actions if a["Phase"] == "Placement"]
    assert len(placed) == 2 and {a["Time"] for a in placed} == {3}
    ids = sorted(str(r["ReplicaId"]) for p in result.final_state["Partitions"] for r in p["Replicas"])
    assert ids == ["r1", "r3", "replay-1", "replay-2"]
    parse_state(result.final_state)
