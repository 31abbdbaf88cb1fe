"""A replay round encodes a state once: the probe and the planner share its encoding (issue 30)."""

from __future__ import annotations

from pathlib import Path

from plbjax import SearchConfig
from plbjax.sf import _phases
from plbjax.sf.replay import load_timeline, replay
from plbjax.sf.replay.engine import EnginePlanner, EngineProbe

TIMELINES = Path(__file__).parent.parent / "examples" / "timelines"
SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=500, seconds=None, block_steps=250)


def test_each_state_a_replay_probes_and_plans_is_encoded_once(monkeypatch):
    encoded, seen = [], []
    encode, governed = _phases.encode, _phases._governed_encoding

    def counting_encode(state, *args, **kwargs):
        encoded.append(state)
        return encode(state, *args, **kwargs)

    def noting(state):
        if not any(state is s for s in seen):
            seen.append(state)
        return governed(state)

    monkeypatch.setattr(_phases, "encode", counting_encode)
    monkeypatch.setattr(_phases, "_governed_encoding", noting)
    result = replay(load_timeline(TIMELINES / "small-fd-failure.yaml"), EnginePlanner(SEARCH), EngineProbe())
    assert sum(result.rounds.values()) >= 3, "the timeline should plan several rounds"
    assert len(encoded) == len(seen), f"{len(encoded)} encodings of {len(seen)} states"
