"""The document path is the resident cluster's oracle: generated timelines of every kind, with random
seeds, replay to the same series, actions and final state through a resident `Session` as through
parsing, governing and encoding every document afresh (`Session(resident=False)`)."""

from __future__ import annotations

import random

import pytest
from paths import ROOT
from replay_fakes import random_timeline

from plbjax import SearchConfig, load_state
from plbjax.sf import Session
from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.engine import engine
from plbjax.sf.replay.scenarios import GENERATORS

EXAMPLES = ROOT / "examples"
SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=1000, seconds=None, block_steps=250)
SHORT = {  # each scenario within a few simulated minutes
    "diurnal": {"days": 1 / 48, "every_minutes": 3.0},
    "fault-domain-failure": {"at": 20.0, "down_for": 120.0},
    "rolling-upgrade": {"at": 20.0, "per_domain": 60.0},
    "scale-out": {"at": 20.0, "every": 15.0},
    "hot-service": {"at": 20.0, "lasts": 240.0},
}


def _played(timeline, session: Session):
    record = replay(timeline, *engine(SEARCH, session), seed=3)
    rows = [(r.time, r.trigger, r.phase, r.node_type, r.counts, r.cumulative_movements, r.needs) for r in record.rows]
    return rows, record.actions, record.final_state


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_a_generated_timeline_replays_alike_through_the_resident_cluster_and_the_document_path(kind):
    seed = {"diurnal": 11, "fault-domain-failure": 5, "rolling-upgrade": 7, "scale-out": 2, "hot-service": 9}[kind]
    state = load_state(EXAMPLES / "small.yaml").document
    timeline = parse_timeline(GENERATORS[kind](state, seed=seed, **SHORT[kind]))
    resident, fresh = Session(), Session(resident=False)
    ours, theirs = _played(timeline, resident), _played(timeline, fresh)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1] and ours[2] == theirs[2]
    assert any(r[1] != "Event" for r in ours[0])  # some round ran
    assert resident.encodings < fresh.encodings


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_a_random_timeline_replays_alike_and_sound_through_both_paths(seed):
    """Random node downs and returns, services created (with an unplaced Primary) and deleted, and
    load reports by Role and by ReplicaId (`replay_fakes.random_timeline`): both paths agree and
    the replay's state never breaks its invariants (`Replay.fault`, issue 57)."""
    state = load_state(EXAMPLES / "small.yaml").document
    timeline = parse_timeline(random_timeline(state, random.Random(seed)))
    records = [replay(timeline, *engine(SEARCH, session), seed=3) for session in (Session(), Session(resident=False))]
    assert all(r.fault is None for r in records), [r.fault for r in records]
    assert records[0].rows == records[1].rows and records[0].actions == records[1].actions
    assert records[0].final_state == records[1].final_state
