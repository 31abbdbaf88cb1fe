"""SF's movement throttles over the replay's clock (plbjax.sf.replay.scheduler.throttles): the global throttles'
allowance and what the planner's Settings say of it, the counting windows, the per-partition throttle."""

from __future__ import annotations

from replay_fakes import SERVICE, OneMove, cluster, play, probe, ran

from plbjax import parse_state
from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.scheduler.settings import read_settings
from plbjax.sf.replay.scheduler.throttles import (
    Allowance,
    Movement,
    Window,
    limit,
    throttle_allowance,
    throttle_overrides,
)
from plbjax.sf.replay.types import Needs

A, B = (SERVICE, "p0"), (SERVICE, "p1")


def test_a_throttle_allows_the_stricter_of_its_count_and_its_percentage():
    assert limit(10, 0.0, 500) == 10 and limit(0, 0.1, 55) == 6 and limit(10, 0.01, 500) == 5
    assert limit(0, 0.0, 9) is None


def test_the_allowance_counts_the_movements_in_the_window_of_the_phases_each_throttle_counts():
    settings = {
        "GlobalMovementThrottleThreshold": 5,
        "GlobalMovementThrottleThresholdForBalancing": 2,
        "GlobalMovementThrottleCountingInterval": 10,
    }
    s = read_settings(parse_state(cluster({"N0": 4, "N1": 0}, settings)))
    moves = [Movement(0, "Balancing"), Movement(3, "Placement"), Movement(4, "Balancing")]
    assert throttle_allowance(s, moves, 5, existing=4) == Allowance(2, 0, None)
    assert throttle_allowance(s, moves, 10.5, existing=4) == Allowance(3, 1, None)  # 0 has left the window
    assert Allowance(2, 0, None).reached("Balancing") and not Allowance(2, 0, None).reached("Placement")
    assert Allowance(0, None, None).reached("Placement")


def test_the_planner_is_told_the_absolute_allowance_left_and_placement_when_it_may_not_move():
    assert throttle_overrides(Allowance(2, 0, None), "Balancing") == {
        "GlobalMovementThrottleThreshold": 2,
        "GlobalMovementThrottleThresholdPercentage": 0,
    }
    assert throttle_overrides(Allowance(2, None, 0), "Placement") == {
        "GlobalMovementThrottleThreshold": 2,
        "GlobalMovementThrottleThresholdPercentage": 0,
        "MaxPercentageToMoveForPlacement": 0,
    }
    assert throttle_overrides(Allowance(None, None, None), "Placement") == {}


def test_the_window_forgets_what_its_intervals_no_longer_hold_and_wakes_when_they_let_go():
    settings = {
        "GlobalMovementThrottleCountingInterval": 10,
        "MovementPerPartitionThrottleCountingInterval": 4,
        "MovementPerPartitionThrottleThreshold": 2,
    }
    s = read_settings(parse_state(cluster({"N0": 1}, settings)))
    window = Window()
    window.moved(1, "Balancing")
    window.moved(1, "ConstraintCheck")  # not throttled
    window.partitions_moved(1, {B, A})
    window.partitions_moved(2, {A})
    assert window.movements == [Movement(1, "Balancing")] and window.partition_moves == [(1, A), (1, B), (2, A)]
    assert window.wakes(s) == [11, 5] and window.throttled_partitions(s.partition_threshold) == {A}
    window.slide(5, s)
    assert window.movements == [Movement(1, "Balancing")] and window.partition_moves == [(2, A)]
    assert window.throttled_partitions(s.partition_threshold) == set()


def test_throttle_window_admits_movements_again_once_it_slides_past_them():
    state = cluster(
        {"N0": 8, "N1": 0, "N2": 0, "N3": 0},
        {"GlobalMovementThrottleThresholdForBalancing": 2, "GlobalMovementThrottleCountingInterval": 12},
    )
    planner = OneMove()
    result = play(state, planner=planner, duration=45)
    assert ran(result, "Balancing") == [(t, "Balancing", None) for t in (5, 10, 17, 22, 29, 34)]
    for _, _, doc, _ in planner.calls:
        parse_state(doc)
    allowance = [doc["Settings"]["GlobalMovementThrottleThresholdForBalancing"] for _, _, doc, _ in planner.calls]
    assert allowance == [2, 1, 1, 1, 1, 1]
    assert planner.calls[1][2]["Settings"]["GlobalMovementThrottleThreshold"] == 999  # SF's 1000, one used
    assert result.rows[-1].cumulative_movements == 6


def test_partitions_at_the_per_partition_throttle_are_frozen_for_balancing():
    state = cluster(
        {"N0": 4, "N1": 0, "N2": 0},
        {"MovementPerPartitionThrottleThreshold": 1, "MovementPerPartitionThrottleCountingInterval": 7},
    )
    planner = OneMove()
    play(state, planner=planner, duration=10)
    assert [(c[0], sorted(c[3])) for c in planner.calls] == [("Balancing", []), ("Balancing", [(SERVICE, "p0")])]


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
