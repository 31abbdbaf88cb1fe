"""SF's scheduler rules the replay follows (PLBScheduler.cpp, ServiceDomain.cpp), with fake planners
and probes: the first balancing, the settings that gate or throttle phases, placement retries, a
stopped replay, progress."""

from __future__ import annotations

import io

from test_replay_loop import OneMove, cluster, counts, planned, play, probe, ran

from plbjax.sf.replay import parse_timeline, replay, summary
from plbjax.sf.replay.progress import ReplayProgress
from plbjax.sf.replay.types import Needs

FAILED_R0 = {"Time": 0, "Kind": "ReplicaFailed", "ReplicaId": "r0"}


def test_first_balancing_one_interval_after_the_start_placement_at_once():
    """ServiceDomain::ServiceDomain creates its PLBScheduler with lastBalancing = Stopwatch::Now()
    and lastPlacement = lastConstraintCheck = 0; AddService (OnServiceChanged) makes the initial
    state a change, so ThrottleBalancingForSmallStdDevChange does not skip the first balancing."""
    state = cluster({"N0": 4, "N1": 0}, {"MinLoadBalancingInterval": 7})
    result = play(state, [FAILED_R0], duration=8)
    assert ran(result) == [(0, "Placement", None), (7, "Balancing", None)]
    assert ran(play(state, duration=7)) == [(7, "Balancing", None)]  # no event: the initial state changed at 0


def test_first_balancing_per_node_type_after_its_own_interval():
    """Under SeparateBalancingStrategyPerNodeType each node type's timer starts at 0 too."""
    state = cluster(
        {"A0": 4, "A1": 0, "B0": 4, "B1": 0},
        {"SeparateBalancingStrategyPerNodeType": True},
        node_types={"A0": "A", "A1": "A", "B0": "B", "B1": "B"},
        intervals={"A": 3, "B": 8},
    )
    assert ran(play(state, duration=8))[:2] == [(3, "Balancing", "A"), (6, "Balancing", "A")]
    assert (8, "Balancing", "B") in ran(play(state, duration=8))


def test_load_balancing_enabled_false_gates_balancing():
    """PLBScheduler::RefreshAction: isBalancingEnabled = LoadBalancingEnabled && ..."""
    state = cluster({"N0": 4, "N1": 0}, {"LoadBalancingEnabled": False})
    result = play(state, [FAILED_R0], duration=20)
    assert ran(result) == [(0, "Placement", None)]


def _violating(state_doc, frozen) -> Needs:
    """One violation while N0 holds more than one replica; it is a fault domain one only (none left
    with FaultDomainConstraintPriority -1)."""
    fd_off = str(state_doc.get("Settings", {}).get("FaultDomainConstraintPriority")) == "-1"
    needs = probe(state_doc, frozen)
    return Needs(needs.unplaced, 0 if fd_off or counts(state_doc).get("N0", 0) <= 1 else 1)


def test_constraint_check_enabled_false_gates_the_constraint_check():
    """PLBScheduler::RefreshAction: the ConstraintCheck stage only when ConstraintCheckEnabled."""
    for enabled, expected in ((True, [(0, "ConstraintCheck", None)]), (False, [])):
        state = cluster({"N0": 2, "N1": 0}, {"ConstraintCheckEnabled": enabled})
        result = replay(parse_timeline({"State": state, "Events": [], "Duration": 0.5}), OneMove(), _violating, 0)
        assert ran(result) == expected


def test_domain_violations_wait_out_the_constraint_fix_partial_delay_after_a_node_event():
    """PLBScheduler::RefreshAction with IsConstraintCheckThrottled and AllViolationsSkippable: within
    ConstraintFixPartialDelayAfterNodeDown of a node going down, a check whose violations are all
    fault/upgrade domain ones is skipped (its timer restarted); after it, the check runs."""
    state = cluster({"N0": 2, "N1": 0, "N2": 0}, {"ConstraintFixPartialDelayAfterNodeDown": 4})
    seen = []

    def planner(state_doc, phase, node_type, seed, frozen):
        seen.append(phase)
        return planned([], {})

    events = [{"Time": 0, "Kind": "NodeDown", "NodeName": "N2"}]
    result = replay(parse_timeline({"State": state, "Events": events, "Duration": 4.5}), planner, _violating, 0)
    assert ran(result) == [(4, "ConstraintCheck", None)] and seen == ["ConstraintCheck"]


def test_balancing_skipped_while_too_many_imbalanced_partitions_are_movement_throttled():
    """PLBScheduler::IsBalancingThrottled -> ThrottleBalancingForPerFUMovements: more partitions of
    imbalanced services at MovementPerPartitionThrottleThreshold than
    MovementThrottledPartitionsPercentageThreshold of them: balancing is skipped without restarting
    its timer, and runs at the first refresh after the counting window lets them go."""
    settings = {
        "MovementPerPartitionThrottleThreshold": 1,
        "MovementPerPartitionThrottleCountingInterval": 12,
        "MovementThrottledPartitionsPercentageThreshold": 0.2,
    }
    state = cluster({"N0": 8, "N1": 0, "N2": 0}, settings)

    def cpu_probe(state_doc, frozen):  # the service's own metric (CPU) is the imbalanced one
        needs = probe(state_doc, frozen)
        return Needs(imbalanced=frozenset({("CPU", None)}) if needs.imbalanced else frozenset())

    result = replay(parse_timeline({"State": state, "Events": [], "Duration": 23}), OneMove(), cpu_probe, 0)
    # 5, 10: a partition moves each time; 15: two of 8 throttled (2 > 8 x 0.2): skipped until 17,
    # when the first leaves the window; 22: the second has left it
    assert [t for t, _, _ in ran(result)] == [5, 10, 17, 22]
    loose = cluster({"N0": 8, "N1": 0, "N2": 0}, settings | {"MovementThrottledPartitionsPercentageThreshold": 1})
    loose = replay(parse_timeline({"State": loose, "Events": [], "Duration": 23}), OneMove(), cpu_probe, 0)
    assert [t for t, _, _ in ran(loose)][:3] == [5, 10, 15]


def test_placement_retries_without_moves_then_places_with_moves():
    """PLBScheduler::RefreshAction's Placement stage and PLBSchedulerAction::CanRetry: NewReplicaPlacement
    PLBActionRetryTimes times, then NewReplicaPlacementWithMove (MoveExistingReplicaForPlacement);
    a placement that found nothing is not searched again (the same state), but its retries count."""
    state = cluster({"N0": 2, "N1": 0}, {"PLBActionRetryTimes": 3, "LoadBalancingEnabled": False})
    modes = []

    def planner(state_doc, phase, node_type, seed, frozen):
        modes.append((phase, state_doc["Settings"].get("MoveExistingReplicaForPlacement", True)))
        return planned([], {})

    replay(parse_timeline({"State": state, "Events": [FAILED_R0], "Duration": 10}), planner, probe, 0)
    assert modes == [("Placement", False), ("Placement", True)]
    modes.clear()
    state["Settings"]["MoveExistingReplicaForPlacement"] = False
    replay(parse_timeline({"State": state, "Events": [FAILED_R0], "Duration": 10}), planner, probe, 0)
    assert modes == [("Placement", False)]


def test_application_upgrade_stops_balancing_only_when_not_allowed_a_cluster_upgrade_always():
    """PLBScheduler::RefreshAction: canBalanceDueToAppUpgrade = !HasPartitionInAppUpgrade ||
    AllowBalancingDuringApplicationUpgrade (default true); a cluster upgrade pauses balancing."""

    def balancing(scope: str, allow: bool) -> list:
        state = cluster({"N0": 4, "N1": 0}, {"AllowBalancingDuringApplicationUpgrade": allow})
        state["Services"][0]["ApplicationName"] = "fabric:/App"
        start = {"Time": 0, "Kind": "UpgradeStarted", "Scope": scope, "UpgradeDomains": ["UD0", "UD1"]}
        start |= {"ApplicationName": "fabric:/App"} if scope == "Application" else {}
        return ran(play(state, [start], duration=6), "Balancing")

    assert balancing("Application", True) == [(5, "Balancing", None)]
    assert balancing("Application", False) == []
    assert balancing("Cluster", True) == []


def test_a_stopped_replay_ends_where_it_stopped_and_says_so():
    """The clock stops at the round whose search was cut short (its plan is not issued); the record
    up to there is kept and the summary says Interrupted with the simulated time reached."""
    state = cluster({"N0": 6, "N1": 0, "N2": 0}, {})
    planner = OneMove()
    stop = lambda: len(planner.calls) >= 2
    result = replay(parse_timeline({"State": state, "Events": [], "Duration": 3600}), planner, probe, 0, stop=stop)
    assert result.interrupted and result.duration == 10
    assert [a["Time"] for a in result.actions] == [5]  # the plan of 10 was not issued
    assert all(r.time <= 10 for r in result.rows)
    assert summary(result)["Interrupted"] is True and summary(result)["SimulatedSeconds"] == 10
    whole = replay(parse_timeline({"State": state, "Events": [], "Duration": 20}), OneMove(), probe, 0)
    assert not whole.interrupted and summary(whole)["Interrupted"] is False


def test_progress_line_says_time_rounds_movements_and_speed():
    shown = io.StringIO()
    progress = ReplayProgress(7200, quiet_for=0, every=0, stream=shown)
    progress(3600, {}, {"Balancing": 12, "Placement": 3}, 5)
    line = shown.getvalue()
    assert "simulated 3,600 s of 7,200 (50%)" in line and "Balancing 12, Placement 3" in line
    assert "5 movement(s)" in line and "simulated h per wall minute" in line
    assert progress.line(3600, {}, 0, 60.0).endswith("1.00 simulated h per wall minute")
