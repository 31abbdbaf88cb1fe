"""A `Session` holds a cluster encoded across PLB rounds and takes each round's typed state as an
update: the encoding it holds is the one parsing, governing and encoding the state's document
afresh gives (issue 30), a replay through it plays as one that encodes every state afresh, and a
replay without structural events encodes the cluster once."""

from __future__ import annotations

import dataclasses
import random

import jax
import numpy as np
import pytest
from conftest import QUICK, cluster
from paths import ROOT

from plbjax import SearchConfig, load_state
from plbjax.sf import ClusterState, Session, parse_state
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._phases.preparation import Encoded, governed_encoding, surplus_replicas
from plbjax.sf._plan.planning import plan_encoded
from plbjax.sf._plan.probe import findings_encoded
from plbjax.sf.replay import Timeline, load_timeline, parse_timeline, replay
from plbjax.sf.replay.engine import engine
from plbjax.sf.replay.scenarios import diurnal

EXAMPLES = ROOT / "examples"
SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=500, seconds=None, block_steps=250)


def assert_same_encoding(ours: Encoded, fresh: Encoded) -> None:
    """Every array of the problems and every field of the indexes and governed states equal."""
    assert ours.problem.features == fresh.problem.features
    leaves, theirs = jax.tree.leaves(ours.problem), jax.tree.leaves(fresh.problem)
    assert len(leaves) == len(theirs)
    names = [".".join(map(str, path)) for path, _ in jax.tree_util.tree_flatten_with_path(fresh.problem)[0]]
    for name, a, b in zip(names, leaves, theirs):
        assert np.shape(a) == np.shape(b) and np.array_equal(a, b, equal_nan=True), name
    for field in dataclasses.fields(fresh.index):
        if field.compare:
            a, b = getattr(ours.index, field.name), getattr(fresh.index, field.name)
            assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, field.name
    assert ours.state == fresh.state and ours.health == fresh.health


def _as_update(held: ClusterState, doc: dict) -> ClusterState:
    """`doc`'s state as a replay hands it to a session after `held`: `held`'s records where they did
    not change (the same objects), new ones where they did."""
    fresh = parse_state(doc)
    if len(fresh.partitions) != len(held.partitions):
        return fresh
    partitions = tuple(h if h == f else f for h, f in zip(held.partitions, fresh.partitions))
    partitions = held.partitions if partitions == held.partitions else partitions
    history = held.history if held.history == fresh.history else fresh.history
    settings = held.settings if held.settings == fresh.settings else fresh.settings
    return dataclasses.replace(held, partitions=partitions, history=history, settings=settings)


def _changed(doc: dict, rng: random.Random) -> dict:
    """`doc` (unchanged) after one random round's worth of what a replay changes between rounds:
    loads reported, replicas moved, roles swapped, replicas lost or added, History, throttles."""
    doc = dict(doc, Partitions=list(doc["Partitions"]))
    nodes = [n["NodeName"] for n in doc["Nodes"]]
    for _ in range(rng.randint(1, 4)):
        k = rng.randrange(len(doc["Partitions"]))
        part = dict(doc["Partitions"][k])
        replicas = [dict(r) for r in part["Replicas"]]
        free = [n for n in nodes if n not in {r.get("NodeName") for r in replicas}]
        kind = rng.choice(["loads", "move", "swap", "lose", "add", "surplus"])
        if kind == "loads" and replicas:
            r = rng.choice(replicas)
            r["Loads"] = {m: round(rng.uniform(0, 30), 1) for m in r.get("Loads", {}) or {"Metric0": 0}}
        elif kind == "move" and replicas:
            rng.choice(replicas)["NodeName"] = rng.choice(free)
        elif kind == "swap":
            roles = [r["Role"] for r in replicas]
            if "Primary" in roles and "Secondary" in roles:
                p, s = roles.index("Primary"), roles.index("Secondary")
                replicas[p]["Role"], replicas[s]["Role"] = "Secondary", "Primary"
        elif kind == "lose" and len(replicas) > 1:
            replicas.pop(rng.randrange(len(replicas)))
        elif kind in ("add", "surplus") and (kind == "surplus" or len(replicas) < 3):
            role = "Instance" if replicas and replicas[0]["Role"] == "Instance" else "Secondary"
            replicas.append({"ReplicaId": f"new-{rng.randrange(10**9)}", "Role": role, "NodeName": rng.choice(free)})
        part["Replicas"] = replicas
        doc["Partitions"][k] = part
    ids = [str(r["ReplicaId"]) for p in doc["Partitions"] for r in p["Replicas"]]
    doc["History"] = {k: v for k, v in doc.get("History", {}).items() if k in ids}
    if rng.random() < 0.4:
        doc["History"] = {rid: rng.sample(nodes, rng.randint(1, 3)) for rid in rng.sample(ids, 5)}
    if rng.random() < 0.4:
        doc["Settings"] = dict(doc.get("Settings") or {}, GlobalMovementThrottleThreshold=rng.randint(1, 50))
    return doc


@pytest.mark.parametrize("seed", range(6))
def test_an_updated_encoding_is_the_encoding_of_the_document_afresh(seed):
    rng = random.Random(seed)
    doc = cluster(seed, **({"stateless_fraction": 0.5} if seed % 2 else {}))
    if seed % 3 == 0:
        doc["Settings"] = {"UseMoveCostReports": True}
    if seed % 3 == 1:  # resource governance: governed nodes, services and metric maps held
        doc["Services"][0]["ResourceGovernance"] = {"CpuCores": 1, "CodePackages": [{"Name": "A", "MemoryInMB": 100}]}
    session, state = Session(), parse_state(doc)
    assert_same_encoding(session.encoded(state), governed_encoding(parse_state(doc)))
    for _ in range(8):
        doc = _changed(doc, rng)
        view = dict(doc, Settings={**(doc.get("Settings") or {}), "MaxPercentageToMoveForPlacement": 0})
        state = _as_update(state, doc)
        assert_same_encoding(session.encoded(_as_update(state, view)), governed_encoding(parse_state(view)))
        assert_same_encoding(session.encoded(state), governed_encoding(parse_state(doc)))
    assert (
        session.encodings == 1 and 1 <= session.updates <= 8
    )  # the views kept it; a round that changed nothing: nothing


def test_a_structural_change_encodes_afresh():
    doc = cluster(3)
    session = Session()
    state = parse_state(doc)
    session.encoded(state)
    nodes = [dict(n) for n in doc["Nodes"]]
    nodes[0]["NodeStatus"] = "Down"
    changed = parse_state(dict(doc, Nodes=nodes))
    assert_same_encoding(session.encoded(changed), governed_encoding(changed))
    other = _as_update(changed, dict(doc, Nodes=nodes, Settings={"LocalDomainWeight": 0.75}))
    assert_same_encoding(session.encoded(other), governed_encoding(other))
    assert session.encodings == 3 and session.updates == 0  # a node changed, then a setting that counts


def _series(timeline: Timeline, session: Session):
    record = replay(timeline, *engine(SEARCH, session), seed=0)
    return [(r.time, r.trigger, r.phase, r.node_type, r.counts, r.needs) for r in record.rows], record


@pytest.mark.parametrize("name", ["small-diurnal.yaml", "small-fd-failure.yaml"])
def test_a_replay_through_the_session_plays_as_one_encoding_afresh(name):
    timeline = load_timeline(EXAMPLES / "timelines" / name)
    resident, document_path = Session(), Session(resident=False)
    ours, ours_record = _series(timeline, resident)
    theirs, theirs_record = _series(timeline, document_path)
    assert ours == theirs
    assert ours_record.actions == theirs_record.actions and ours_record.final_state == theirs_record.final_state
    assert resident.encodings < document_path.encodings


def test_a_replay_of_load_reports_encodes_the_cluster_once():
    """Load reports, completed actions, History and throttles are updates: no round encodes."""
    state = load_state(EXAMPLES / "small.yaml").document
    timeline = diurnal(state, seed=0, days=2 / 24, every_minutes=5)
    session = Session()
    record = replay(parse_timeline(timeline), *engine(SEARCH, session), seed=0)
    assert sum(record.rounds.values()) >= 3 and any(a["Action"].startswith("Move") for a in record.actions)
    assert session.encodings == 1 and session.updates >= 24


def test_a_replay_compiles_each_program_once():
    """No shape grows with History, loads or completed actions: after a 1-hour replay, a 3-hour
    replay of the same day (more rounds, longer History) compiles nothing new."""
    state = load_state(EXAMPLES / "small.yaml").document
    replay(parse_timeline(diurnal(state, seed=0, days=1 / 24, every_minutes=5)), *engine(SEARCH), seed=0)
    compiled: list[str] = []

    def heard(event: str, duration: float, fun_name: str = "?", **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(fun_name)

    jax.monitoring.register_event_duration_secs_listener(heard)
    try:
        longer = parse_timeline(diurnal(state, seed=0, days=3 / 24, every_minutes=5))
        record = replay(longer, *engine(SEARCH), seed=0)
    finally:
        jax.monitoring.unregister_event_duration_listener(heard)
    assert record.rounds.get("Balancing", 0) >= 5
    assert not compiled, compiled


# ---- the update path takes what did not change from what it holds


def _load_batch(doc: dict, rng: random.Random) -> dict:
    """`doc` (unchanged) after a load report of every replica: every partition another object."""
    parts = []
    for part in doc["Partitions"]:
        replicas = [
            dict(r, Loads={m: round(rng.uniform(0, 30), 1) for m in ("Metric0", "Metric1")}) for r in part["Replicas"]
        ]
        parts.append(dict(part, Replicas=replicas))
    return dict(doc, Partitions=parts)


@pytest.mark.parametrize("seed", range(3))
def test_a_load_batch_updates_to_the_encoding_and_findings_afresh(seed):
    rng = random.Random(seed)
    doc = cluster(seed, **({"stateless_fraction": 0.5} if seed % 2 else {}))
    session, state = Session(), parse_state(doc)
    session.encoded(state)
    for _ in range(3):
        doc = _load_batch(doc, rng)
        fresh = governed_encoding(parse_state(doc))
        state = _as_update(state, doc)
        assert_same_encoding(session.encoded(state), fresh)
        assert session.findings(state) == findings_encoded(fresh)
    assert session.encodings == 1 and session.updates == 3


def test_rows_named_are_the_rows_whose_ids_are_keys_in_row_order():
    index = encode(parse_state(cluster(1)))[1]
    rows = index.rows
    assert rows is not None
    texts = [str(r) for r in rows.ids if r is not None]
    by_id = {t: None for t in random.Random(0).sample(texts, 20)} | {"no such replica": None, 7: None}
    expected = [(row, rid) for row, rid in enumerate(rows.ids) if rid is not None and str(rid) in by_id]
    assert list(rows.named(by_id)) == expected and list(rows.named({})) == []


def test_surplus_replicas_count_those_beyond_the_target_and_are_dropped():
    doc = cluster(2)
    part = doc["Partitions"][0]
    taken = {r["NodeName"] for r in part["Replicas"]}
    nodes = [n["NodeName"] for n in doc["Nodes"] if n["NodeName"] not in taken]
    role = "Instance" if part["Replicas"][0]["Role"] == "Instance" else "Secondary"
    part["Replicas"] += [{"ReplicaId": f"extra-{k}", "Role": role, "NodeName": nodes[k]} for k in range(2)]
    encoded = governed_encoding(parse_state(doc))
    surplus = surplus_replicas(encoded.state, encoded.problem, encoded.index)
    p = encoded.index.partitions.index((part["ServiceName"], part["PartitionId"]))
    assert surplus[p] == 2 and surplus.sum() == 2
    assert sum(a.kind.is_drop for a in plan_encoded(encoded, QUICK).actions) == 2
    unchanged = governed_encoding(parse_state(cluster(2)))
    assert not surplus_replicas(unchanged.state, unchanged.problem, unchanged.index).any()


def test_a_history_only_update_is_the_encoding_afresh():
    doc = cluster(4)
    session, state = Session(), parse_state(doc)
    session.encoded(state)
    nodes = [n["NodeName"] for n in doc["Nodes"]]
    ids = [str(r["ReplicaId"]) for p in doc["Partitions"] for r in p["Replicas"]]
    for k in range(3):
        doc = dict(doc, History={rid: nodes[k : k + 1 + k] for rid in ids[k::7]})
        state = _as_update(state, doc)
        assert_same_encoding(session.encoded(state), governed_encoding(parse_state(doc)))
    assert session.encodings == 1 and session.updates == 3
