"""SF's scheduler rules the replay follows (plbjax.sf.replay.scheduler.phases; PLBScheduler.cpp,
ServiceDomain.cpp), with fake planners and probes: the timers and their order, the first balancing,
the settings and upgrades that gate phases, placement retries."""

from __future__ import annotations

import pytest
from replay_fakes import OneMove, action, as_doc, cluster, counts, planned, play, probe, ran

from plbjax.sf import Phase, parse_state
from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.scheduler.phases import (
    ChangeTimes,
    PlacementMode,
    Timers,
    after_node_event,
    expired_phases,
    last_check_before,
    next_placement,
    small_change,
    tick_at_or_after,
)
from plbjax.sf.replay.scheduler.settings import read_settings
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
    state_doc = as_doc(state_doc)
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

    def planner(state_doc, phase, node_type, seed, frozen, effort=None):
        state_doc = as_doc(state_doc)
        seen.append(phase)
        return planned([], {})

    events = [{"Time": 0, "Kind": "NodeDown", "NodeName": "N2"}]
    result = replay(parse_timeline({"State": state, "Events": events, "Duration": 4.5}), planner, _violating, 0)
    assert ran(result) == [(4, "ConstraintCheck", None)] and seen == ["ConstraintCheck"]


def test_placement_retries_without_moves_then_places_with_moves():
    """PLBScheduler::RefreshAction's Placement stage and PLBSchedulerAction::CanRetry: NewReplicaPlacement
    PLBActionRetryTimes times, then NewReplicaPlacementWithMove (MoveExistingReplicaForPlacement);
    a placement that found nothing is not searched again (the same state), but its retries count."""
    state = cluster({"N0": 2, "N1": 0}, {"PLBActionRetryTimes": 3, "LoadBalancingEnabled": False})
    modes = []

    def planner(state_doc, phase, node_type, seed, frozen, effort=None):
        state_doc = as_doc(state_doc)
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


def test_timer_helpers():
    assert tick_at_or_after(2.5, 1) == 3 and tick_at_or_after(3.0, 1) == 3 and tick_at_or_after(0.1, 0.1) == 0.1
    assert last_check_before(0, 1, 1, since=1, until=8) == 7  # restarts at 1..7
    assert last_check_before(0, 5, 1, since=1, until=12) == 10  # restarts at 5 and 10
    assert last_check_before(0, 5, 1, since=1, until=5) == 0  # not expired before 5


def test_placement_and_balancing_timers_run_in_sfs_order():
    """A 1-s placement timer and a 5-s balancing timer: balancing runs every 5 s while the cluster
    is imbalanced, the first one interval after the start (SF's ServiceDomain starts its scheduler's
    lastBalancing at its creation); a failed instance is placed at the first refresh after it
    failed; rounds never run two phases."""
    state = cluster({"N0": 6, "N1": 0, "N2": 0, "N3": 0}, {})
    result = play(state, [{"Time": 7.5, "Kind": "ReplicaFailed", "ReplicaId": "r5"}], duration=40)
    assert ran(result) == [
        (5, "Balancing", None),
        (8, "Placement", None),
        (10, "Balancing", None),
        (15, "Balancing", None),
    ]
    assert [r.time for r in result.rows if r.trigger == "Event"] == [7.5]
    assert result.rounds == {"Balancing": 3, "Placement": 1}
    assert counts(result.final_state) == {"N0": 2, "N1": 2, "N2": 1, "N3": 1}


def test_balancing_waits_for_placement_on_the_same_tick_then_takes_its_turn():
    """SF visits expired timers from the one that waited longest: when both are due at 5,
    placement (needed) runs; balancing, due since 5, goes before placement due at 6."""
    state = cluster({"N0": 4, "N1": 0, "N2": 0}, {})
    events = [
        {"Time": 4.5, "Kind": "ReplicaFailed", "ReplicaId": "r0"},
        {"Time": 5.5, "Kind": "ReplicaFailed", "ReplicaId": "r1"},
    ]
    result = play(state, events, duration=7)
    assert ran(result) == [
        (5, "Placement", None),
        (6, "Balancing", None),
        (7, "Placement", None),
    ]


def test_node_type_whose_interval_has_not_passed_is_not_balanced():
    state = cluster(
        {"A0": 6, "A1": 0, "B0": 6, "B1": 0},
        {"SeparateBalancingStrategyPerNodeType": True},
        node_types={"A0": "A", "A1": "A", "B0": "B", "B1": "B"},
        intervals={"A": 5, "B": 20},
    )
    result = play(state, duration=45)
    assert ran(result) == [  # each timer starts at 0: A's first balancing at 5, B's at 20
        (5, "Balancing", "A"),
        (10, "Balancing", "A"),
        (15, "Balancing", "A"),
        (20, "Balancing", "B"),
        (40, "Balancing", "B"),
    ]
    assert result.rounds == {"Balancing": 5}
    assert {a["NodeType"] for a in result.actions} == {"A", "B"}


def test_no_balancing_during_an_upgrade_and_domains_return_to_their_snapshot():
    state = cluster({"N0": 4, "N1": 0, "N2": 0, "N3": 0}, {})

    class MovesForPlacement(OneMove):
        """Placement also moves r1 from N0 to N3 (placement with move)."""

        def __call__(self, state_doc, phase, node_type, seed, frozen, effort=None):
            state_doc = as_doc(state_doc)
            plan = super().__call__(state_doc, phase, node_type, seed, frozen, effort)
            if phase == "Placement":
                moved = action({"PartitionId": "p1"}, "r1", "MoveInstance", "N0", "N3")
                return plan._replace(actions=(*plan.actions, moved))
            return plan

    events = [
        {"Time": 2, "Kind": "UpgradeStarted", "Scope": "Cluster", "UpgradeDomains": ["UD0", "UD1"]},
        {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r2"},
        {"Time": 10, "Kind": "UpgradeDomainCompleted", "UpgradeDomain": "UD1"},
        {"Time": 20, "Kind": "UpgradeDomainCompleted", "UpgradeDomain": "UD0"},
        {"Time": 30, "Kind": "UpgradeCompleted"},
    ]
    upgrading = play(state, events[:-1], planner=MovesForPlacement(), duration=29)
    assert ran(upgrading) == [(3, "Placement", None)]
    where = {r["ReplicaId"]: r["NodeName"] for p in upgrading.final_state["Partitions"] for r in p["Replicas"]}
    assert where["r1"] == "N0"  # back on its snapshot node when UD0 completed
    assert upgrading.final_state["Upgrade"]["UpgradeDomainsDone"] == ["UD1", "UD0"]
    done = play(state, events, planner=MovesForPlacement(), duration=31)
    assert ran(done)[-1] == (30, "Balancing", None)  # balancing resumes when the upgrade completes


def test_with_sfs_default_timers_phases_run_at_the_refresh_their_timer_expires():
    """SF's defaults (PLBRefreshGap 0.1, MinPlacementInterval 1, MinLoadBalancingInterval 5): a
    replica failing at 7.05 is placed when the placement timer next expires (8.0, not the next
    refresh at 7.1); two failures within a second are placed in one round; balancing runs every 5 s
    while imbalanced; one phase per round, placement first."""
    state = cluster({"N0": 10, "N1": 0, "N2": 0, "N3": 0}, {"PLBRefreshGap": 0.1})
    events = [
        {"Time": 7.05, "Kind": "ReplicaFailed", "ReplicaId": "r9"},
        {"Time": 9.5, "Kind": "ReplicaFailed", "ReplicaId": "r8"},
        {"Time": 9.95, "Kind": "ReplicaFailed", "ReplicaId": "r7"},
    ]
    result = play(state, events, duration=16)
    assert ran(result) == [
        (5, "Balancing", None),
        (8, "Placement", None),
        (10, "Placement", None),
        (pytest.approx(10.1), "Balancing", None),  # due at 10 too: placement went first, then its turn
        (pytest.approx(15.1), "Balancing", None),
    ]
    assert [r.time for r in result.rows if r.trigger == "Event"] == [7.05, 9.5, 9.95]
    assert [a["Action"] for a in result.actions if a["Time"] == 10] == ["AddInstance", "AddInstance"]


def _scheduler(state: dict, probe_=probe):
    from plbjax.sf import parse_state
    from plbjax.sf.replay.scheduler.inflight import InFlight
    from plbjax.sf.replay.scheduler.phases import Scheduler
    from plbjax.sf.replay.scheduler.throttles import Window
    from plbjax.sf.replay.state.resident import Resident
    from plbjax.sf.replay.types import Stopwatch

    return Scheduler(Resident(parse_state(state), probe_, Stopwatch()), InFlight(), Window())


def _round(scheduler, now: float, issued: int = 0):
    """One refresh at `now` without the loop: the phase it picks is taken to have run, issuing `issued`."""
    choice = scheduler.begin_round(now)
    if choice is not None:
        scheduler.ran(choice[0], issued)
    scheduler.end_round()
    return choice and choice[0]


def _holds(scheduler, end: float) -> list[tuple]:
    return [(h.phase, h.since, h.until, h.setting, h.open) for h in scheduler.story(end).holds]


def test_the_scheduler_says_what_holds_balancing_back_and_until_when():
    """PLBScheduler::IsBalancingThrottled (BalancingDelayAfterNodeDown from OnNodeDown) and
    ThrottleBalancingForSmallStdDevChange (no change since the last balancing): each stretch an
    imbalanced cluster is not balanced, with its setting; the state at time 0 is kept."""
    from plbjax.sf.replay.timeline.events import Event

    state = cluster({"N0": 4, "N1": 0, "N2": 0}, {})
    scheduler = _scheduler(state)
    assert scheduler.story(0).initial == probe(state, frozenset())
    assert _round(scheduler, 5) == "Balancing"  # then nothing changes: held until something does
    scheduler.applied(7, [Event.read(7, "NodeDown", {"NodeName": "N2"})])
    assert _round(scheduler, 7) is None and _round(scheduler, 10) is None  # within the 120 s delay
    assert _round(scheduler, 127) == "Balancing"
    assert _holds(scheduler, 200) == [
        ("Balancing", 5, 7, "PLBScheduler::ThrottleBalancingForSmallStdDevChange", False),
        ("Balancing", 7, 127, "BalancingDelayAfterNodeDown", False),
        ("Balancing", 127, 200, "PLBScheduler::ThrottleBalancingForSmallStdDevChange", True),
    ]
    why = scheduler.story(200).holds[1].why
    assert "120 s after a node went down (at 7 s)" in why and "until 127 s" in why
    assert [(e.time, e.kind, e.subject) for e in scheduler.story(200).events] == [(7, "NodeDown", "N2")]


def test_the_scheduler_says_what_holds_a_violation_and_names_its_own_rule():
    """IsConstraintCheckThrottled with AllViolationsSkippable: after a node came up (OnNodeUp), a
    fault-domain-only violation waits ConstraintFixPartialDelayAfterNewNode; a check that found no
    fix is not searched again on the same state (the replay's rule, named as such, not SF's)."""
    from plbjax.sf.replay.timeline.events import Event

    scheduler = _scheduler(cluster({"N0": 2, "N1": 0, "N2": 0}, {"LoadBalancingEnabled": False}), _violating)
    scheduler.applied(0, [Event.read(0, "NodeUp", {"NodeName": "N2"})])
    assert _round(scheduler, 0) is None
    assert _round(scheduler, 120) == "ConstraintCheck"  # it found nothing
    assert _holds(scheduler, 130) == [
        ("ConstraintCheck", 0, 120, "ConstraintFixPartialDelayAfterNewNode", False),
        ("ConstraintCheck", 120, 130, "replay: no new search of an unchanged state", True),
    ]
    assert "until 120 s" in scheduler.story(130).holds[0].why
    off = _scheduler(cluster({"N0": 2, "N1": 0}, {"ConstraintCheckEnabled": False}), _violating)
    _round(off, 0)
    assert [h.setting for h in off.story(1).holds] == ["ConstraintCheckEnabled"]


def test_a_changed_plb_refresh_interval_sets_the_placement_and_constraint_check_intervals():
    """PLBScheduler::GetMinPlacementInterval/GetMinConstraintCheckInterval: the deprecated
    PLBRefreshInterval, changed from its default, stands for MinPlacementInterval and
    MinConstraintCheckInterval left at theirs (1 s); one set explicitly keeps its own value."""
    failed = {"Time": 3, "Kind": "ReplicaFailed", "ReplicaId": "r0"}
    settings = {"PLBRefreshInterval": 10, "MinLoadBalancingInterval": 100}
    state = cluster({"N0": 1, "N1": 1}, settings)
    del state["Settings"]["MinPlacementInterval"], state["Settings"]["MinConstraintCheckInterval"]
    assert ran(play(state, [failed], duration=12)) == [(10, "Placement", None)]
    state["Settings"]["MinPlacementInterval"] = 2
    assert ran(play(state, [failed], duration=12)) == [(4, "Placement", None)]  # timer restarted at 0 and 2


def test_the_scheduler_names_the_upgrade_or_setting_that_stops_balancing():
    """PLBScheduler::RefreshAction's isBalancingEnabled: LoadBalancingEnabled, a cluster upgrade
    (SetBalancingEnabled), an application upgrade without AllowBalancingDuringApplicationUpgrade."""

    def held(settings: dict, upgrade: dict | None) -> list[str]:
        state = cluster({"N0": 4, "N1": 0}, settings) | ({"Upgrade": upgrade} if upgrade else {})
        scheduler = _scheduler(state)
        _round(scheduler, 5)
        return [h.setting for h in scheduler.story(6).holds]

    assert held({"LoadBalancingEnabled": False}, None) == ["LoadBalancingEnabled"]
    assert held({}, {"InProgress": True, "Scope": "Cluster"}) == ["cluster upgrade"]
    app = {"InProgress": True, "Scope": "Application", "ApplicationName": "fabric:/App"}
    assert held({"AllowBalancingDuringApplicationUpgrade": False}, app) == ["AllowBalancingDuringApplicationUpgrade"]
    assert held({}, app) == ["PLBScheduler::ThrottleBalancingForSmallStdDevChange"]  # balancing ran at 5


def test_placement_retries_without_moves_then_once_with_moves():
    """SF's placementAction_, decided without a clock: PLBActionRetryTimes rounds without moves,
    one with (when MoveExistingReplicaForPlacement allows), again; a throttle stops the one with."""
    mode, seen = PlacementMode(), []
    for _ in range(6):
        with_move, mode = next_placement(mode, 2, True, False)
        seen.append(with_move)
    assert seen == [False, False, True, False, False, True]
    mode, seen = PlacementMode(), []
    for _ in range(4):
        with_move, mode = next_placement(mode, 2, False, False)
        seen.append(with_move)
    assert seen == [False] * 4
    assert next_placement(PlacementMode("WithMove", 0), 2, True, True) == (False, PlacementMode("New", 1))


def test_small_change_skips_balancing_until_something_changed_enough():
    """SF's ThrottleBalancingForSmallStdDevChange, decided without a clock: a state change since the
    last balancing lets it run; none at all holds it; only load changes hold it while AvgStdDev is
    at most the threshold worse than after the last balancing."""
    assert small_change(10, ChangeTimes(state_change=11), 0.1, 1.0, 5.0) is None
    nothing = small_change(10, ChangeTimes(state_change=5, load_change=5), 0.1, 1.0, 5.0)
    assert nothing is not None and nothing.setting == "PLBScheduler::ThrottleBalancingForSmallStdDevChange"
    loads = ChangeTimes(state_change=5, load_change=12)
    held = small_change(10, loads, 0.1, 1.0, 1.05)
    assert held is not None and held.setting == "AvgStdDevDeltaThrottleThreshold"
    assert small_change(10, loads, 0.1, 1.0, 1.2) is None
    assert small_change(10, loads, -1, 1.0, 1.05) is None and small_change(10, loads, 0.1, None, 1.05) is None


def test_after_node_event_names_the_delay_still_running_a_node_down_first():
    """SF's delays after a node went down or came up, decided without a clock."""
    changes = ChangeTimes(node_down=30, new_node=100)
    assert after_node_event(50, changes, 120, 120) == ("down", 30, 120)
    assert after_node_event(160, changes, 120, 120) == ("up", 100, 120)
    assert after_node_event(220, changes, 120, 120) is None
    assert after_node_event(150, changes, 0, 0) is None
    assert after_node_event(0, ChangeTimes(), 120, 120) is None  # no node event yet


def test_expired_phases_come_the_longest_waiting_first():
    """SF's RefreshAction visits the expired timers from the one that waited longest (ties:
    Placement, ConstraintCheck, Balancing), decided without a clock."""
    settings = read_settings(
        parse_state(cluster({"N0": 1}, {"MinPlacementInterval": 1, "MinConstraintCheckInterval": 1}))
    )
    timers = Timers()  # placement and the constraint check start expired; balancing one interval in
    assert expired_phases(timers, settings, 0.0) == [Phase.PLACEMENT, Phase.CONSTRAINT_CHECK]
    timers = Timers({Phase.PLACEMENT: 10.0, Phase.CONSTRAINT_CHECK: 10.0}, {None: -1000.0})
    assert expired_phases(timers, settings, 10.5) == [Phase.BALANCING]
    assert expired_phases(timers, settings, 11.0) == [Phase.BALANCING, Phase.PLACEMENT, Phase.CONSTRAINT_CHECK]
    off = read_settings(
        parse_state(cluster({"N0": 1}, {"ConstraintCheckEnabled": False, "LoadBalancingEnabled": False}))
    )
    assert expired_phases(Timers(), off, 0.0) == [Phase.PLACEMENT]
