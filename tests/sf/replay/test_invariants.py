"""The replay never corrupts its own cluster (issue 57): the invariants checked after every event
and completed action (`state.invariants`), a violation stopping the replay as an internal error
with its record up to the time before, and the orders that gave a partition a second Primary."""

from __future__ import annotations

import dataclasses
import json

import pytest
from replay_fakes import as_doc, cluster, probe

from plbjax.sf import Role, parse_state
from plbjax.sf.replay import summary
from plbjax.sf.replay.record.writing import story, write_outputs
from plbjax.sf.replay.rounds.loop import replay
from plbjax.sf.replay.scheduler import inflight
from plbjax.sf.replay.state.invariants import Corrupted, changed, problem
from plbjax.sf.replay.timeline import changes, events
from plbjax.sf.replay.timeline.reading import parse_timeline
from plbjax.sf.replay.types import PlannedRound

NEW = "fabric:/New"


def created(at: float = 2) -> dict:
    """A stateful service of target 4 and two partitions, New-P1 listing one unplaced Primary."""
    service = {
        "ServiceName": NEW,
        "ServiceTypeName": "NewType",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 4,
        "Metrics": [{"Name": "CPU", "Weight": "High", "PrimaryDefaultLoad": 5, "SecondaryDefaultLoad": 2}],
    }
    partitions = [
        {"PartitionId": "New-P0", "Replicas": []},
        {"PartitionId": "New-P1", "Replicas": [{"ReplicaId": "np1", "Role": "Primary", "NodeName": None}]},
    ]
    return {"Time": at, "Kind": "ServiceCreated", "Service": service, "Partitions": partitions}


def missing(doc: dict) -> int:
    """Replicas the stateful service still needs placed (unplaced or below its target)."""
    return sum(
        sum(r["NodeName"] is None for r in p["Replicas"]) + max(0, 4 - len(p["Replicas"]))
        for p in doc["Partitions"]
        if p["ServiceName"] == NEW
    )


def stateful_probe(state_doc: dict, frozen: frozenset):
    state_doc = as_doc(state_doc)
    return dataclasses.replace(probe(state_doc, frozen), unplaced=missing(state_doc))


def play(state: dict, evs: list[dict], planner, duration: float, patch=None, **extra):
    """The replay of `evs` with the stateful probe (`patch`, if given, runs after the timeline is read)."""
    timeline = parse_timeline({"State": state, "Events": evs, "Duration": duration} | extra)
    if patch is not None:
        patch()
    return replay(timeline, planner, stateful_probe, 0)


@dataclasses.dataclass
class DecodedPlacement:
    """Places the new service as the decoded plan does: a partition's unplaced Primary is added as
    a secondary on the first Up node, a new Primary on the next, new secondaries after them."""

    seen: list[dict] = dataclasses.field(default_factory=list)

    def __call__(self, state, phase, node_type, seed, frozen, effort=None):
        doc = as_doc(state)
        self.seen.append(doc)
        if phase != "Placement":
            return PlannedRound((), {})
        up = sorted(n["NodeName"] for n in doc["Nodes"] if n.get("NodeStatus", "Up") == "Up")
        actions = []
        for p in doc["Partitions"]:
            if p["ServiceName"] != NEW or (NEW, str(p["PartitionId"])) in frozen:
                continue
            placed = [r for r in p["Replicas"] if r["NodeName"] is not None]
            free = [n for n in up if n not in {r["NodeName"] for r in placed}]
            has_primary = any(r["Role"] == Role.PRIMARY for r in placed)
            adds = [(r["ReplicaId"], "AddSecondary") for r in p["Replicas"] if r["NodeName"] is None]
            if not has_primary:
                adds.append((None, "AddPrimary"))
            adds += [(None, "AddSecondary")] * (4 - len(placed) - len(adds))
            for (rid, kind), target in zip(adds, free):
                actions.append(_add(p, rid, kind, target))
        return PlannedRound(tuple(actions), {})


def _add(p: dict, rid, kind: str, target: str) -> dict:
    return {
        "ServiceName": NEW,
        "PartitionId": p["PartitionId"],
        "ReplicaId": rid,
        "Action": kind,
        "SourceNode": None,
        "TargetNode": target,
    }


def primaries(doc: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in doc["Partitions"]:
        out[str(p["PartitionId"])] = sum(r["Role"] == Role.PRIMARY for r in p["Replicas"])
    return out


def one_primary_everywhere(result, planner: DecodedPlacement) -> None:
    assert result.fault is None, result.fault
    for doc in [*planner.seen, result.final_state]:
        state = parse_state(doc)
        assert problem(state.partitions, range(len(state.partitions)), {n.name for n in state.nodes}) is None
        assert max(primaries(doc).values()) <= 1


STATE = {"N0": 1, "N1": 1, "N2": 1, "N3": 1, "N4": 1, "N5": 1}
REPORTS = [
    {"Time": 4, "Kind": "LoadReport", "ServiceName": NEW, "ReplicaId": "np1", "Loads": {"CPU": 7}},
    {
        "Time": 4,
        "Kind": "LoadReport",
        "ServiceName": NEW,
        "PartitionId": "New-P1",
        "Role": "Primary",
        "Loads": {"CPU": 9},
    },
]

# The orders of issue 57 (Add takes 10 s: the adds issued at 2 s complete at 12 s). N0, the first
# Up node, is where the plan adds the unplaced Primary np1 as a secondary.
ORDERS = {
    # the created partition's unplaced primary: its add cancelled (N0 went down), the new primary's completes
    "unplaced-primary": [created(), {"Time": 3, "Kind": "NodeDown", "NodeName": "N0"}],
    # ... with a load report by Role Primary while np1 is still the unplaced primary
    "role-keyed-report": [created(), {"Time": 3, "Kind": "NodeDown", "NodeName": "N0"}, *REPORTS],
    # ... and the node coming back before the adds complete (np1's add then completes)
    "node-returns": [
        created(),
        {"Time": 3, "Kind": "NodeDown", "NodeName": "N0"},
        *REPORTS,
        {"Time": 6, "Kind": "NodeUp", "NodeName": "N0"},
    ],
    # ... and coming back after the new primary's add completed (placement places np1 again)
    "completed-add-then-node-returns": [
        created(),
        {"Time": 3, "Kind": "NodeDown", "NodeName": "N0"},
        *REPORTS,
        {"Time": 14, "Kind": "NodeUp", "NodeName": "N0"},
    ],
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_a_partition_never_gets_a_second_primary(order):
    planner = DecodedPlacement()
    state = cluster(STATE, {})
    result = play(state, ORDERS[order], planner, 30, ActionSeconds={"Add": 10, "Move": 10})
    one_primary_everywhere(result, planner)
    assert missing(result.final_state) == 0 or order == "unplaced-primary"


def test_an_add_primary_where_a_placed_primary_is_adds_a_secondary():
    from plbjax.sf import Action, Partition, Replica, completed

    part = Partition(NEW, "P", (Replica("a", Role.PRIMARY, "N0", {}, None),))
    action = Action.from_document(_add({"PartitionId": "P"}, None, "AddPrimary", "N1"))
    fixed = inflight._one_primary(completed(part, action), action)
    assert [(r.node, r.role) for r in fixed.replicas] == [("N0", Role.PRIMARY), ("N1", Role.SECONDARY)]


def test_a_broken_invariant_stops_the_replay_as_an_internal_error_with_its_record(monkeypatch, tmp_path):
    """With the repair undone, the completion that gives a second Primary stops the clock: the
    record ends at the time before, interrupted, names the action; `story` raises `Corrupted`."""
    monkeypatch.setattr(inflight, "_one_primary", lambda part, action: part)
    planner = DecodedPlacement()
    result = play(cluster(STATE, {}), ORDERS["unplaced-primary"], planner, 30, ActionSeconds={"Add": 10})
    assert result.fault is not None and result.interrupted
    assert "at 12 s: completing" in result.fault and "AddPrimary" in result.fault and "second Primary" in result.fault
    assert result.duration < 12 and all(r.time < 12 for r in result.rows)
    assert max(primaries(result.final_state).values()) <= 1
    write_outputs(result, tmp_path)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["Interrupted"] and written["Fault"] == result.fault == summary(result)["Fault"]
    with pytest.raises(Corrupted, match="second Primary"):
        story(result)


def test_an_event_that_breaks_the_state_is_named(monkeypatch):
    def bad_up(doc, c):
        parts = list(doc["Partitions"])
        parts[0] = dict(parts[0], Replicas=[dict(r, NodeName="nowhere") for r in parts[0]["Replicas"]])
        return {**doc, "Partitions": parts}

    evs = [{"Time": 3, "Kind": "NodeDown", "NodeName": "N5"}, {"Time": 5, "Kind": "NodeUp", "NodeName": "N5"}]
    result = play(
        cluster(STATE, {}),
        evs,
        DecodedPlacement(),
        30,
        patch=lambda: monkeypatch.setitem(events._HANDLERS, changes.NodeUp, bad_up),
    )
    assert result.fault is not None and result.interrupted and result.duration < 5
    assert "event Events[1] (NodeUp N5)" in result.fault and "nowhere" in result.fault


def test_invariants_see_only_changed_partitions():
    state = parse_state(cluster({"N0": 2, "N1": 0}, {}))
    nodes = {"N0", "N1"}
    assert changed(state, dataclasses.replace(state, partitions=tuple(state.partitions))) == []
    first, second = state.partitions
    moved = dataclasses.replace(second, replicas=(dataclasses.replace(second.replicas[0], node="N1"),))
    after = dataclasses.replace(state, partitions=(first, moved))
    assert changed(state, after) == [1] and problem(after.partitions, [1], nodes) is None
    twice = dataclasses.replace(
        moved, replicas=(*moved.replicas, dataclasses.replace(moved.replicas[0], replica_id="r9"))
    )
    assert "two replicas on N1" in (problem([twice], [0], nodes) or "")
    inf = dataclasses.replace(moved, replicas=(dataclasses.replace(moved.replicas[0], loads={"CPU": float("inf")}),))
    assert "not finite" in (problem([inf], [0], nodes) or "")
