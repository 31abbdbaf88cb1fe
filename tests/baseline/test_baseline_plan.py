"""The baseline's plan (`sequential_plan`, plbjax-baseline's): a plan document of plbjax's shape whose
actions give its score, under SF's movement throttles; states it cannot plan refused with BadInput."""

from __future__ import annotations

import json

import jsonschema
import pytest

pytest.importorskip("numba")

from conftest import cluster, packed_cluster
from paths import ROOT

from plbjax.baseline import balancing_limits, sequential_plan
from plbjax.errors import BadInput
from plbjax.sf import SearchConfig, apply_actions, findings, parse_state, plan

SCHEMA = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())


def _plan(doc: dict, **search) -> dict:
    return sequential_plan(parse_state(doc), SearchConfig(steps=20_000, **search), "0.0.0").document()


def test_the_plan_is_valid_and_its_actions_give_its_score():
    """Schema-valid; applying its Actions to the input scores Score.After; its movements are counted
    against MaxPercentageToMove; the same seed gives the same plan."""
    doc = cluster(0)
    plan = _plan(doc, seed=1)
    jsonschema.validate(plan, SCHEMA)
    after = findings(parse_state(apply_actions(doc, plan["Actions"])))
    assert (
        plan["Score"]["After"] == pytest.approx(after.avg_std_dev) and plan["Score"]["After"] < plan["Score"]["Before"]
    )
    balancing = plan["Phases"][-1]
    assert balancing["Movements"]["Used"] <= balancing["Movements"]["Allowed"]
    assert plan["Search"]["Phases"][0]["Steps"] == 20_000 and plan["Search"]["Chains"] == 1
    assert _plan(doc, seed=1)["Actions"] == plan["Actions"]


def test_the_throttle_binds_the_chain():
    """GlobalMovementThrottleThreshold=3: at most 3 movements, the throttle named."""
    doc = cluster(0)
    doc["Settings"] = dict(doc.get("Settings", {}), GlobalMovementThrottleThreshold=3)
    plan = _plan(doc)
    balancing = plan["Phases"][-1]
    assert balancing["Movements"] == {"Allowed": 3, "Used": len(plan["Actions"])} and len(plan["Actions"]) <= 3
    assert balancing.get("Throttle", {"Setting": "GlobalMovementThrottleThreshold"})["Setting"] == (
        "GlobalMovementThrottleThreshold"
    )


@pytest.mark.slow  # plbjax's plans compile (about 20 s on a loaded 2-core machine)
def test_the_throttles_are_plbjaxs():
    """The baseline's own reading of SF's throttles gives balancing's Movements and Throttle entries
    exactly as plbjax's plan does, under the default, an absolute and a per-phase percentage throttle."""
    for settings in (
        {},
        {"GlobalMovementThrottleThreshold": 3},
        {"GlobalMovementThrottleThresholdPercentageForBalancing": 0.05, "MaxPercentageToMove": 0.5},
    ):
        doc = cluster(0)
        doc["Settings"] = dict(doc.get("Settings", {}), **settings)
        theirs = plan(parse_state(doc), SearchConfig(steps=512)).document()["Phases"][-1]
        ours = _plan(doc)["Phases"][-1]
        assert (ours["Movements"], ours.get("Throttle")) == (theirs["Movements"], theirs.get("Throttle")), settings


def test_balancing_limits_read_sf_settings():
    """Percentages of the placed replicas rounded up; 0 is no limit but for MaxPercentageToMove."""
    settings = {
        "MaxPercentageToMove": 0.1,
        "GlobalMovementThrottleThreshold": 0,
        "GlobalMovementThrottleThresholdPercentage": 0.05,
        "GlobalMovementThrottleThresholdForBalancing": 7,
        "GlobalMovementThrottleThresholdPercentageForBalancing": 0,
    }
    assert balancing_limits(settings, 41) == {
        "MaxPercentageToMove": 5,
        "GlobalMovementThrottleThresholdPercentage": 3,
        "GlobalMovementThrottleThresholdForBalancing": 7,
    }


def test_a_state_with_a_violation_is_refused():
    """The baseline balances only: a broken hard constraint is plbjax's to fix."""
    with pytest.raises(BadInput, match="plbjax-baseline only balances"):
        _plan(packed_cluster())


def test_a_balanced_state_is_left_alone():
    """Every metric's loads under its activity threshold: balancing does not run, nothing moves (SF's trigger)."""
    doc = cluster(0)
    doc["MetricActivityThresholds"] = dict.fromkeys(parse_state(doc).metric_names(), 1e9)
    plan = _plan(doc)
    assert plan["Actions"] == [] and plan["Phases"][-1]["Ran"] is False
    assert plan["Search"]["Steps"] == 0 and plan["Search"]["Phases"] == []  # no chain ran
    jsonschema.validate(plan, SCHEMA)
