"""Load reports and completed actions on the resident state's records (plbjax.sf.replay.state) give
the states that applying them one by one to the whole document gives, the inputs unchanged, across
chains of batches that reuse the state's places."""

from __future__ import annotations

import copy
import dataclasses
import json
import random

import pytest

from plbjax import BadInput, apply_actions
from plbjax.sf import (
    Action,
    ClusterSpec,
    ClusterState,
    Partition,
    Replica,
    Role,
    completed,
    generate,
    parse_state,
    state_document,
)
from plbjax.sf._state import partition_document
from plbjax.sf.replay.scheduler.inflight import InFlight, _one_primary
from plbjax.sf.replay.state.places import Census, Places
from plbjax.sf.replay.state.resident import Resident
from plbjax.sf.replay.timeline.events import NAMED, Event, apply_events, describe
from plbjax.sf.replay.types import Stopwatch

KINDS = (
    "MovePrimary",
    "MoveSecondary",
    "MoveInstance",
    "AddPrimary",
    "AddSecondary",
    "AddInstance",
    "DropPrimary",
    "DropSecondary",
    "DropInstance",
    "SwapPrimarySecondary",
    "PromoteSecondary",
)


@pytest.fixture(scope="module")
def cluster() -> dict:
    spec = ClusterSpec(
        nodes=12,
        fault_domains=3,
        upgrade_domains=3,
        metrics=2,
        services=4,
        partitions_per_service=5,
        replicas_per_partition=3,
        stateless_fraction=0.25,
        skew=0.5,
    )
    return generate(7, spec)


def same(a: dict, b: dict) -> bool:
    return json.dumps(a) == json.dumps(b)


def typed(doc: dict) -> ClusterState:
    return parse_state(doc)


def norm(parts) -> list[dict]:
    """Partitions (records or a document's) as the document writes them, loads as floats."""
    docs = [p if isinstance(p, dict) else partition_document(p) for p in parts]
    out = []
    for p in docs:
        replicas = [{k: v for k, v in r.items() if k != "Loads"} for r in p["Replicas"]]
        for r, given in zip(replicas, p["Replicas"]):
            if given.get("Loads"):
                r["Loads"] = {m: float(v) for m, v in given["Loads"].items()}
        out.append({"ServiceName": p["ServiceName"], "PartitionId": p["PartitionId"], "Replicas": replicas})
    return out


def placed(state: ClusterState) -> Places:
    return Places.of(state.partitions)


def reports_one_by_one(doc: dict, reports: list[dict]) -> dict:
    """Each report merged into each replica it names, one report after the other."""
    doc = copy.deepcopy(doc)
    for f in reports:
        for p in doc["Partitions"]:
            if p["ServiceName"] != f["ServiceName"] or str(p["PartitionId"]) != str(
                f.get("PartitionId", p["PartitionId"])
            ):
                continue
            for r in p["Replicas"]:
                named = (
                    str(r["ReplicaId"]) == str(f["ReplicaId"])
                    if "ReplicaId" in f
                    else f.get("Role") in (None, r["Role"])
                )
                if named:
                    r["Loads"] = {**r.get("Loads", {}), **f["Loads"]}
    return doc


def random_reports(doc: dict, rng: random.Random, count: int) -> list[dict]:
    metrics = {s["ServiceName"]: [m["Name"] for m in s.get("Metrics", [])] for s in doc["Services"]}
    out = []
    for _ in range(count):
        p = rng.choice(doc["Partitions"])
        names = rng.sample(metrics[p["ServiceName"]], rng.randint(1, len(metrics[p["ServiceName"]])))
        f = {
            "ServiceName": p["ServiceName"],
            "Loads": {m: rng.choice([rng.randint(0, 50), rng.random() * 9]) for m in names},
        }
        shape = rng.random()
        if shape < 0.6:
            f["PartitionId"] = p["PartitionId"]
            if rng.random() < 0.8:
                f["Role"] = rng.choice(["Primary", "Secondary", "Instance"])
        elif shape < 0.9 and p["Replicas"]:
            f["ReplicaId"] = rng.choice(p["Replicas"])["ReplicaId"]
            if rng.random() < 0.5:
                f["PartitionId"] = p["PartitionId"]
        else:
            f["Role"] = rng.choice(["Primary", "Secondary"])
            f["PartitionId"] = p["PartitionId"]
        out.append(f)
    return out


def random_action(doc: dict, rng: random.Random) -> dict:
    p = rng.choice(doc["Partitions"])
    nodes = [n["NodeName"] for n in doc["Nodes"]]
    kind = rng.choice(KINDS)
    replica = rng.choice(p["Replicas"]) if p["Replicas"] and not kind.startswith("Add") else None
    return {
        "ServiceName": p["ServiceName"],
        "PartitionId": p["PartitionId"],
        "ReplicaId": None if replica is None else rng.choice([replica["ReplicaId"], replica["ReplicaId"], "gone"]),
        "Action": kind,
        "SourceNode": None if replica is None else rng.choice([replica.get("NodeName"), replica.get("NodeName"), "N0"]),
        "TargetNode": rng.choice([r.get("NodeName") for r in p["Replicas"]] + nodes if p["Replicas"] else nodes),
    }


def _typed_partition(part: dict) -> Partition:
    """A document's partition as a record, read as it is (the oracle's: two primaries allowed)."""
    replicas = tuple(
        Replica(
            r["ReplicaId"],
            Role(r["Role"]),
            r.get("NodeName"),
            {m: float(v) for m, v in r.get("Loads", {}).items()},
            r.get("MoveCost"),
        )
        for r in part["Replicas"]
    )
    return Partition(part["ServiceName"], part["PartitionId"], replicas)


def test_a_partitions_action_completed_alone_is_apply_actions(cluster):
    rng = random.Random(0)
    parts = {(p.service, p.partition_id): p for p in typed(cluster).partitions}
    fits = 0
    for _ in range(2000):
        action = random_action(cluster, rng)
        part = next(
            p
            for p in cluster["Partitions"]
            if (p["ServiceName"], p["PartitionId"]) == (action["ServiceName"], action["PartitionId"])
        )
        try:
            expected = apply_actions({"Partitions": [part]}, [action])["Partitions"][0]
        except (ValueError, KeyError, StopIteration):
            expected = None
        record = parts[(part["ServiceName"], part["PartitionId"])]
        try:
            got = partition_document(completed(record, Action.from_document(action)))
        except ValueError:
            got = None
        assert (got is None) == (expected is None), action
        assert got is None or expected is None or norm([got]) == norm([expected]), action
        fits += got is not None
    assert fits > 300  # the draws fit often enough to compare results, not only failures


def test_load_report_batches_are_the_reports_one_by_one_across_completions(cluster):
    rng, flight = random.Random(1), InFlight()
    state, t = typed(cluster), 0.0
    places = placed(state)
    for _ in range(8):
        doc = state_document(state)
        reports = random_reports(doc, rng, 60)
        before = state.partitions
        batch = apply_events(state, places, [Event.read(t, "LoadReport", f, i) for i, f in enumerate(reports)], t)
        assert len(batch.events) == len(reports) and not batch.reread and state.partitions is before
        assert norm(batch.state.partitions) == norm(reports_one_by_one(doc, reports)["Partitions"])
        state = batch.state
        for _ in range(6):
            flight.issue(Action.from_document(random_action(state_document(state), rng)), t, 1.0)
        given = state.partitions
        after, touched, _ = flight.complete(state, places, t + 1)
        places = places.after(state.partitions, after.partitions, touched)
        assert state.partitions is given and places.census == Census.of(after.partitions)
        state, t = after, t + 2
    assert sum(len(p.replicas) for p in state.partitions) != sum(len(p["Replicas"]) for p in cluster["Partitions"])


def test_completions_are_apply_actions_one_after_the_other(cluster):
    rng, flight, oracle = random.Random(2), InFlight(), InFlight()
    state = typed(cluster)
    for t in range(10):
        doc = state_document(state)
        actions = [random_action(doc, rng) for _ in range(12)]
        for action in actions:
            flight.issue(Action.from_document(action), t, 0.5)
        given = state.partitions
        got, _, count = flight.complete(state, placed(state), t + 0.5)
        expected, expected_count = one_by_one(doc, actions, oracle)
        assert state.partitions is given and count == expected_count
        assert norm(got.partitions) == norm(expected["Partitions"])
        state = got


def one_by_one(doc: dict, actions: list[dict], namer: InFlight) -> tuple[dict, int]:
    """`apply_actions` on the whole document per action (not Up targets and misfits cancelled; an
    AddPrimary keeping one Primary, as `inflight._one_primary`), a new replica named as `InFlight`
    names it."""
    up = {n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus", "Up") == "Up"}
    count, taken = 0, None
    for action in actions:
        if action["Action"][:4] in ("Move", "Add") and action["TargetNode"] not in up:
            continue
        try:
            after = apply_actions(doc, [action])
        except (ValueError, KeyError, StopIteration):
            continue
        if action["Action"] == "AddPrimary":  # one Primary kept (issue 57)
            done = Action.from_document(action)
            key = (action["ServiceName"], str(action["PartitionId"]))
            after["Partitions"] = [
                partition_document(_one_primary(_typed_partition(p), done))
                if (p["ServiceName"], str(p["PartitionId"])) == key
                else p
                for p in after["Partitions"]
            ]
        if action["ReplicaId"] is None:
            for p in after["Partitions"]:
                for r in p["Replicas"]:
                    if r["ReplicaId"] is None:
                        taken = taken or {str(x["ReplicaId"]) for q in doc["Partitions"] for x in q["Replicas"]}
                        r["ReplicaId"] = namer.new_id(taken)
        doc, count = after, count + 1
    return doc, count


def test_bad_reports_raise_as_before_and_change_nothing(cluster):
    state = typed(cluster)
    places = placed(state)
    p = cluster["Partitions"][0]
    name = p["ServiceName"]
    metric = next(m["Name"] for s in cluster["Services"] if s["ServiceName"] == name for m in s["Metrics"])
    good = {"ServiceName": name, "PartitionId": p["PartitionId"], "Loads": {metric: 3}}
    cases = [
        ({**good, "ServiceName": "fabric:/None"}, "ServiceName: 'fabric:/None' is not a service"),
        ({**good, "Loads": {}}, "Loads: a non-empty mapping"),
        ({**good, "Loads": {metric: -1}}, f"Loads.{metric}: -1 is not a non-negative number"),
        ({**good, "Loads": {metric: True}}, f"Loads.{metric}: True is not"),
        ({**good, "Loads": {"Nope": 1}}, "Loads.Nope: service"),
        ({**good, "PartitionId": "p9"}, "PartitionId: 'p9' is not a partition of"),
        ({"ServiceName": name, "ReplicaId": "gone", "Loads": {metric: 1}}, "ReplicaId: 'gone' is not a replica of"),
    ]
    for fields, message in cases:
        events = [Event.read(0, "LoadReport", good, 0), Event.read(0, "LoadReport", fields, 1)]
        with pytest.raises(BadInput, match="^Events\\[1\\]." + message.replace("[", "\\[").replace("(", "\\(")):
            apply_events(state, places, events, 0)
    with pytest.raises(BadInput, match="^Role: 'Leader' is not Primary"):  # read at the timeline's door
        Event.read(0, "LoadReport", {**good, "Role": "Leader"}, 1)
    gone = Event.read(0, "LoadReport", cases[-1][0], 1)
    batch = apply_events(state, places, [Event.read(0, "LoadReport", good, 0), gone], 0, skip_gone=True)
    assert batch.events == [Event.read(0, "LoadReport", good, 0)]
    assert norm(batch.state.partitions) == norm(reports_one_by_one(cluster, [good])["Partitions"])


def test_an_add_may_take_the_name_of_a_replica_dropped_earlier_in_its_batch(cluster):
    doc = copy.deepcopy(cluster)
    first, second = [p for p in doc["Partitions"] if any(r["Role"] == "Secondary" for r in p["Replicas"])][:2]
    secondary = next(r for r in first["Replicas"] if r["Role"] == "Secondary")
    secondary["ReplicaId"] = "replay-1"
    held = {r["NodeName"] for r in second["Replicas"]}
    target = next(n["NodeName"] for n in doc["Nodes"] if n["NodeName"] not in held)
    key = {"ServiceName": second["ServiceName"], "PartitionId": second["PartitionId"]}
    drop = {
        "ServiceName": first["ServiceName"],
        "PartitionId": first["PartitionId"],
        "ReplicaId": "replay-1",
        "Action": "DropSecondary",
        "SourceNode": secondary["NodeName"],
        "TargetNode": None,
    }
    add = key | {"ReplicaId": None, "Action": "AddSecondary", "SourceNode": None, "TargetNode": target}
    flight, state = InFlight(), typed(doc)
    flight.issue(Action.from_document(drop), 0, 1)
    flight.issue(Action.from_document(add), 0, 1)
    after, _, count = flight.complete(state, placed(state), 1)
    added = [
        r for p in after.partitions for r in p.replicas if r.node == target and p.partition_id == second["PartitionId"]
    ]
    assert count == 2 and [r.replica_id for r in added] == ["replay-1"]


def described_from_every_subject(events: list[Event]) -> tuple[tuple[str, str], ...]:
    """`describe`'s rule computed from every event's subject."""
    subjects: dict[str, list[str]] = {}
    for event in events:
        subjects.setdefault(event.kind, []).append(event.change.subject)
    out = []
    for kind, named in subjects.items():
        distinct = [s for s in dict.fromkeys(named) if s]
        if len(named) == 1 or (len(named) <= NAMED and len(distinct) == len(named)):
            out.append((kind, " ".join([kind, ", ".join(distinct)]).rstrip()))
        else:
            listed = f" ({', '.join(distinct)})" if distinct and len(distinct) <= NAMED else ""
            out.append((kind, f"{len(named)} {kind} events{listed}"))
    return tuple(out)


def test_describe_looks_at_no_more_subjects_than_it_names():
    rng = random.Random(3)
    for _ in range(300):
        events = []
        for _ in range(rng.randint(1, 9)):
            kind = rng.choice(["NodeDown", "LoadReport", "UpgradeCompleted"])
            subject = rng.choice(["a", "b", "c", "d", "e"])
            fields = (
                {"NodeName": subject}
                if kind == "NodeDown"
                else {"ServiceName": subject, "Loads": {}}
                if kind == "LoadReport"
                else {}
            )
            events.append(Event.read(0, kind, fields))
        assert describe(events) == described_from_every_subject(events)


def test_clean_history_is_the_entries_of_replicas_and_nodes_still_there(cluster):
    rng, base = random.Random(4), typed(cluster)
    ids = [str(r["ReplicaId"]) for p in cluster["Partitions"] for r in p["Replicas"]]
    nodes = [n["NodeName"] for n in cluster["Nodes"]]
    for _ in range(200):
        history = {
            rng.choice([*ids, "gone"]): rng.choice([list, tuple])(rng.sample([*nodes, "N-gone"], rng.randint(0, 2)))
            for _ in range(rng.randint(1, 6))
        }
        if rng.random() < 0.5:
            history = {k: list(v) for k, v in history.items() if v and "N-gone" not in v and k != "gone"} or history
        given = dataclasses.replace(base, history={k: tuple(v) for k, v in history.items()})
        state = Resident(given, probe=None, stopwatch=Stopwatch())  # type: ignore[arg-type]
        state.clean_history()
        kept = {k: tuple(n for n in v if n in nodes) for k, v in history.items() if k in ids}
        kept = {k: v for k, v in kept.items() if v}
        assert state.state.history == kept and (state.state is given) == (kept == given.history)
