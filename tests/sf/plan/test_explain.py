"""Plans that explain themselves (issue 32, items 1 and 2): every action says why (its phase and
reason), and the plan says why each phase stopped and what is left (the throttle that bound it,
metrics still imbalanced and what keeps them so, violations left by kind, why a phase moved
nothing); the console summary prints it. Clusters share conftest's shape (one compilation)."""

from __future__ import annotations

import copy
import json
import math

import jsonschema
import pytest
from conftest import QUICK, cluster, packed_cluster
from paths import ROOT

from plbjax import load_state, parse_state, plan
from plbjax.cli import summary
from plbjax.sf._phases.phase import PHASES, movement_budget, throttle_limits
from plbjax.sf._plan.explain import movements_entry
from plbjax.sf._state.settings import PLB_SETTINGS
from plbjax.sf.replay import parse_timeline, replay, write_outputs
from plbjax.sf.replay.engine import engine

ROOT = ROOT
SCHEMA = json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text())
EXAMPLE = ROOT / "examples" / "small.yaml"


def _plan(doc: dict, **settings) -> dict:
    doc = copy.deepcopy(doc)
    doc.setdefault("Settings", {}).update(settings)
    result = plan(parse_state(doc), QUICK).document()
    jsonschema.Draft202012Validator(SCHEMA).validate(result)
    return result


def _phase(result: dict, name: str) -> dict:
    return next(p for p in result["Phases"] if p["Phase"] == name)


@pytest.fixture(scope="module")
def throttled() -> dict:
    """cluster(0) (72 replicas, imbalanced) balanced under MaxPercentageToMove 0.1: 8 movements."""
    return _plan(cluster(0), MaxPercentageToMove=0.1)


# ---------------------------------------------------------------------------- 1. every action says why


def test_every_action_carries_its_phase_and_a_reason(throttled):
    assert throttled["Actions"]
    for action in throttled["Actions"]:
        assert action["Phase"] in PHASES and action["Reason"], action


def test_a_balancing_action_names_its_metric_and_share_of_the_gain(throttled):
    balancing = [a for a in throttled["Actions"] if a["Phase"] == "Balancing"]
    imbalanced = {b["Metric"] for b in throttled["Balance"] if not b["IsBalancedBefore"]}
    assert balancing and all(a["Metric"] in imbalanced for a in balancing)
    assert all(
        a["Reason"].startswith(f"reduces {a['Metric']}'s imbalance") and "of balancing's gain" in a["Reason"]
        for a in balancing
    )
    assert sum(a["EnergyShare"] for a in balancing) == pytest.approx(1.0, abs=1e-3)


def test_a_constraint_check_move_names_the_violation_it_fixes():
    """packed_cluster(7): the first partition has two replicas in one fault domain."""
    result = _plan(packed_cluster(7))
    fixes = [a for a in result["Actions"] if a["Phase"] == "ConstraintCheck"]
    assert fixes and "FaultDomain of its partition" in fixes[0]["Reason"]  # (the pile also overloads its node)
    assert fixes[0]["Reason"].startswith("fixes ") and fixes[0]["Constraint"] in ("NodeCapacity", "FaultDomain")
    assert f"on {fixes[0]['SourceNode']}" in fixes[0]["Reason"]
    check = _phase(result, "ConstraintCheck")
    assert {"Constraint": "FaultDomain", "Count": 1, "Of": "Partitions"} in check["ViolationsBefore"]
    assert all(v["Constraint"] != "FaultDomain" for v in check["ViolationsAfter"])


def test_a_placed_replica_and_a_dropped_surplus_say_so():
    doc = cluster(1)
    missing = doc["Partitions"][0]["Replicas"].pop()
    surplus = copy.deepcopy(doc["Partitions"][1]["Replicas"][-1])
    surplus["ReplicaId"] = "extra"
    surplus["NodeName"] = next(
        n["NodeName"]
        for n in doc["Nodes"]
        if n["NodeName"] not in {r["NodeName"] for r in doc["Partitions"][1]["Replicas"]}
    )
    doc["Partitions"][1]["Replicas"].append(surplus)
    result = _plan(doc, MaxPercentageToMove=0)
    added = [a for a in result["Actions"] if a["Action"].startswith("Add")]
    assert [a["Phase"] for a in added] == ["Placement"] and added[0]["Reason"].startswith("places a missing replica on")
    assert added[0]["PartitionId"] == doc["Partitions"][0]["PartitionId"] and missing
    drops = [a for a in result["Actions"] if a["Action"].startswith("Drop")]
    assert [a["Phase"] for a in drops] == ["Placement"] and "surplus" in drops[0]["Reason"]


def test_the_replay_records_each_action_with_its_phase_and_reason(tmp_path):
    state = load_state(EXAMPLE).document
    # SF's first balancing comes one MinLoadBalancingInterval (5 s) after the start
    timeline = {"State": state, "Duration": 6, "Events": [{"Time": 0, "Kind": "SettingsChanged", "Settings": {}}]}
    record = replay(parse_timeline(timeline), *engine(QUICK), seed=0)
    out = write_outputs(record, tmp_path / "replay")
    actions = [json.loads(line) for line in (out / "actions.jsonl").read_text().splitlines()]
    assert actions and all(a["Phase"] == "Balancing" and "'s imbalance" in a["Reason"] for a in actions)


# ------------------------------------------------------------------ 2. why it stopped, what is left


def test_throttles_are_named_with_the_movements_they_allow():
    settings = dict(PLB_SETTINGS)
    defaults = {"MaxPercentageToMove": 144, "GlobalMovementThrottleThreshold": 1000}  # SF's defaults
    assert throttle_limits(settings, "Balancing", 480) == defaults
    assert movement_budget(parse_state(cluster(0)), "Balancing", 480) == 144
    settings |= {"GlobalMovementThrottleThreshold": 100, "GlobalMovementThrottleThresholdPercentageForBalancing": 0.5}
    limits = throttle_limits(settings, "Balancing", 480)
    assert limits == defaults | {"GlobalMovementThrottleThreshold": 100,
                                 "GlobalMovementThrottleThresholdPercentageForBalancing": 240}  # fmt: skip
    bound = movements_entry(limits, 10, 90)
    assert bound["Throttle"] == {"Setting": "GlobalMovementThrottleThreshold", "Limit": 100, "Allowed": 90, "Used": 90}
    assert "Throttle" not in movements_entry(limits, 0, 12) and throttle_limits(settings, "ConstraintCheck", 9) == {}


def test_the_throttle_that_bound_balancing_is_in_the_plan(throttled):
    balancing = _phase(throttled, "Balancing")
    allowed = math.ceil(0.1 * 72)
    assert balancing["Throttle"] == {
        "Setting": "MaxPercentageToMove",
        "Limit": allowed,
        "Allowed": allowed,
        "Used": allowed,
    }
    assert balancing["Movements"] == {"Allowed": allowed, "Used": allowed}
    assert balancing["Stopped"].startswith("stopped at the throttle MaxPercentageToMove")
    for metric in throttled["Remaining"]["Imbalanced"]:
        assert any("MaxPercentageToMove" in cause for cause in metric["Causes"]), metric


def test_every_metric_still_imbalanced_has_its_ratio_threshold_and_causes(throttled):
    still = {b["Metric"] for b in throttled["Balance"] if not b["IsBalancedAfter"]}
    left = throttled["Remaining"]["Imbalanced"]
    assert still and {m["Metric"] for m in left} == still
    loads = {n["NodeName"]: n["LoadsAfter"] for n in throttled["Nodes"]}
    for m in left:
        assert m["Ratio"] == pytest.approx(m["MaxLoad"] / m["MinLoad"]) and m["Ratio"] > m["BalancingThreshold"]
        assert loads[m["MostLoadedNode"]][m["Metric"]] == pytest.approx(m["MaxLoad"])
        assert loads[m["LeastLoadedNode"]][m["Metric"]] == pytest.approx(m["MinLoad"])
        if m["BalancingThreshold"] <= 1:  # SF's rule: a threshold of 1 holds only for a gap of at most 1
            assert (
                f"its BalancingThreshold {m['BalancingThreshold']:g} holds only where max - min <= 1 (SF's rule)"
                in m["Causes"]
            )


def test_a_node_at_load_zero_makes_the_ratio_infinite_and_says_why():
    """The example (N3, N4 empty) with balancing allowed 1 movement (MaxPercentageToMove 0.01 of
    22): a node stays without CPU load."""
    doc = copy.deepcopy(load_state(EXAMPLE).document)
    doc["Settings"]["MaxPercentageToMove"] = 0.01
    result = plan(parse_state(doc), QUICK).document()
    cpu = next(m for m in result["Remaining"]["Imbalanced"] if m["Metric"] == "CPU")
    assert cpu["Ratio"] is None and cpu["MinLoad"] == 0 and cpu["LeastLoadedNode"] in ("N3", "N4")
    assert f"{cpu['LeastLoadedNode']} carries no CPU, so max/min is infinite" in cpu["Causes"]
    assert "balancing stopped at MaxPercentageToMove (1 of 1 movements allowed)" in cpu["Causes"]


def test_violations_left_are_counted_by_kind_and_idle_phases_say_why():
    """A service whose placement constraint no node meets, one of its replicas missing: the others
    stay in violation, the missing one fits no node."""
    doc = cluster(0)
    name = doc["Services"][0]["ServiceName"]
    doc["Services"][0]["PlacementConstraints"] = "NodeType == Nowhere"
    next(p for p in doc["Partitions"] if p["ServiceName"] == name)["Replicas"].pop()
    result = _plan(doc, MaxPercentageToMove=0)
    replicas = sum(len(p["Replicas"]) for p in doc["Partitions"] if p["ServiceName"] == name)
    left = [
        {"Constraint": "ReplicaUnplaced", "Count": 1, "Of": "Replicas"},
        {"Constraint": "PlacementConstraint", "Count": replicas, "Of": "Replicas"},
    ]
    assert result["Remaining"]["Violations"] == left
    placement = _phase(result, "Placement")
    assert placement["Stopped"] == "moved nothing: 1 replica(s) fit no node (see Unplaced)"
    check = _phase(result, "ConstraintCheck")
    assert check["Ran"] and check["ViolationsAfter"] == left and check["Movements"] == {"Allowed": None, "Used": 0}
    assert check["Stopped"] == (
        "moved nothing: no movement found that reduces the violations "
        f"(ReplicaUnplaced 1 replicas, PlacementConstraint {replicas} replicas)"
    )
    assert f"violations left: ReplicaUnplaced 1 replicas, PlacementConstraint {replicas} replicas" in summary(result, 1)


def test_a_balancing_phase_that_moved_nothing_says_why():
    result = _plan(cluster(0), ScoreImprovementThreshold=100)
    balancing = _phase(result, "Balancing")
    assert balancing["Ran"] and balancing["Movements"]["Used"] == 0
    assert (
        balancing["Stopped"].startswith("moved nothing: no placement found")
        and "ScoreImprovementThreshold" in balancing["Stopped"]
    )


# ------------------------------------------------------------------------------------- console


def test_the_console_summary_shows_the_largest_actions_the_throttle_and_what_is_left(throttled):
    text = summary(throttled, 1.0)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["Phase", "Action"])
    rows = lines[header + 1 : header + 6]
    assert all(row.split()[0] in PHASES for row in rows)
    assert "-> stopped at the throttle MaxPercentageToMove" in text
    assert f"... and {len(throttled['Actions']) - 5} more" in text
    first = throttled["Remaining"]["Imbalanced"][0]
    assert f"still imbalanced: {first['Metric']}, max/min {first['Ratio']:.2f}" in text
    assert "violations left: none" in text


def test_the_console_lists_a_swap_before_the_move_of_the_replica_it_demoted():
    """Issue 38: a primary swapped (SwapPrimarySecondary N0 -> N5) then moved as a secondary has two
    actions; the console's table shows both, the swap first, not the move alone."""
    from plbjax.cli.summary import largest_actions

    def action(replica, kind, source, target, share):
        return {
            "ServiceName": "fabric:/S",
            "PartitionId": "2",
            "ReplicaId": replica,
            "Action": kind,
            "SourceNode": source,
            "TargetNode": target,
            "Phase": "Balancing",
            "EnergyShare": share,
        }

    actions = [
        action("120", "SwapPrimarySecondary", "N0", "N5", 0.0),
        action("120", "MoveSecondary", "N0", "N3", 0.5),
        *(action(f"r{k}", "MoveSecondary", "N1", "N2", 0.1 - 0.01 * k) for k in range(6)),
    ]
    lines = largest_actions(actions)
    swap = next(i for i, line in enumerate(lines) if "SwapPrimarySecondary" in line)
    assert "fabric:/S/2/120" in lines[swap] and "N0 -> N5" in lines[swap]
    assert "MoveSecondary" in lines[swap + 1] and "fabric:/S/2/120" in lines[swap + 1]
    assert lines[-1] == "    ... and 2 more (the plan's Actions)"  # 6 listed of 8
