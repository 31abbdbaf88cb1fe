"""SF's load decay in a replay (LoadDecayFactor, LoadDecayInterval; LoadMetricStats.cpp:120-146,
get_Value): a report is averaged with the replica's past reports, each weighted by
factor ** (age / interval); factor 0 (SF's default) lets a report replace the load."""

from __future__ import annotations

import copy

import pytest
from paths import ROOT
from replay_fakes import play

from plbjax import load_state
from plbjax.sf._state import resolve_settings
from plbjax.sf.replay.timeline.decay import LoadDecay

ORDERS = "fabric:/Shop/Orders"


def test_a_report_is_averaged_with_the_decayed_past():
    decay = LoadDecay.of(resolve_settings({"LoadDecayFactor": 0.5}))
    assert decay is not None and decay.interval == 60
    key = (ORDERS, "0", "100", "CPU")
    assert decay.report(key, 20, 60.0, 12) == pytest.approx((12 * 0.5 + 20) / 1.5)
    assert decay.report(key, 20, 120.0, None) == pytest.approx((26 * 0.5 + 20) / (1.5 * 0.5 + 1))
    assert decay.report((ORDERS, "0", "101", "CPU"), 30, 60.0, None) == 30  # its first report


def test_a_past_old_enough_is_forgotten():
    decay = LoadDecay.of(resolve_settings({"LoadDecayFactor": 0.5, "LoadDecayInterval": 1}))
    assert decay is not None
    assert decay.report(("S", "0", "1", "CPU"), 20, 3600.0, 12) == 20  # 0.5 ** 3600 < SF's SmallValue


def test_no_decay_by_default():
    assert LoadDecay.of(resolve_settings()) is None


def _replica_load(doc: dict, rid: int) -> float:
    return next(r for p in doc["Partitions"] for r in p["Replicas"] if r["ReplicaId"] == rid)["Loads"]["CPU"]


@pytest.mark.parametrize("factor", [0, 0.5])
def test_a_replay_averages_the_reports_it_is_told_to(factor):
    state = copy.deepcopy(load_state(ROOT / "examples" / "small.yaml").document)
    state["Settings"] = dict(state.get("Settings", {}), LoadDecayFactor=factor)
    events = [
        {"Time": t, "Kind": "LoadReport", "ServiceName": ORDERS, "ReplicaId": 100, "Loads": {"CPU": 20}}
        for t in (60, 120)
    ]
    result = play(state, events, duration=130)
    expected = 20 if factor == 0 else (26 * 0.5 + 20) / 1.75  # the start's 12 counted as reported at 0
    assert _replica_load(result.final_state, 100) == pytest.approx(expected)
