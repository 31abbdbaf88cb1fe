"""The scheduler's settings of a state document (plbjax.sf.replay.scheduler.settings)."""

from __future__ import annotations

from replay_fakes import cluster

from plbjax.sf import parse_state
from plbjax.sf.replay.scheduler.settings import read_settings, with_settings

TYPES = {"A0": "A", "B0": "B"}


def test_each_node_type_balances_on_its_own_interval_when_balancing_is_separate():
    intervals = {"A": 3.0, "B": 9.0}
    separate = cluster({"A0": 1, "B0": 0, "X": 0}, {"SeparateBalancingStrategyPerNodeType": True}, TYPES, intervals)
    assert read_settings(parse_state(separate)).balancing_intervals == {None: 5.0, "A": 3.0, "B": 9.0}
    assert read_settings(parse_state(cluster({"A0": 1, "B0": 0}, {}, TYPES, intervals))).balancing_intervals == {
        None: 5.0
    }


def test_an_upgrade_pauses_balancing_an_application_one_only_when_not_allowed():
    state = cluster({"N0": 1}, {})
    assert read_settings(parse_state(state)).balancing_enabled
    assert not read_settings(
        parse_state(state | {"Upgrade": {"InProgress": True, "Scope": "Cluster"}})
    ).balancing_enabled
    upgrade = {"InProgress": True, "Scope": "Application", "ApplicationName": "fabric:/App"}
    application = state | {"Upgrade": upgrade}
    assert read_settings(parse_state(application)).balancing_enabled
    assert not read_settings(
        parse_state(with_settings(application, {"AllowBalancingDuringApplicationUpgrade": False}))
    ).balancing_enabled
    assert not read_settings(parse_state(with_settings(state, {"LoadBalancingEnabled": False}))).balancing_enabled


def test_with_settings_replaces_any_spelling_of_a_name():
    state = cluster({"N0": 1}, {})
    state["Settings"] = {"plbrefreshgap": 2}
    assert read_settings(parse_state(state)).refresh_gap == 2
    view = with_settings(state, {"PLBRefreshGap": 0.5})
    assert view["Settings"]["PLBRefreshGap"] == 0.5 and "plbrefreshgap" not in view["Settings"]
    assert read_settings(parse_state(view)).refresh_gap == 0.5 and state["Settings"]["plbrefreshgap"] == 2
