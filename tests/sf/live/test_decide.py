"""The apply executor's pure decision: starts within the limits, knock-on skips, time-outs; no cluster, no clock."""

from plbjax.sf import Action, ActionKind, HealthState
from plbjax.sf.live.apply.decide import Board, Gates, Limits, Policy, decide, held_by
from plbjax.sf.live.apply.journal import Status
from plbjax.sf.live.apply.steps import Step
from plbjax.sf.live.rest import rolling

LIMITS = Limits(per_node=1, max_in_flight=2, step_timeout=10.0)


def _step(index: int, kind: ActionKind, source: str | None, target: str | None, *needs: int) -> Step:
    action = Action("fabric:/A/S", f"p{index}", str(index), kind, source, target)
    return Step(index, action, {d: "the partition's previous step" for d in needs})


def _board(*state: Status, since: dict[int, float] | None = None, load: dict[str, int] | None = None) -> Board:
    return Board(state, since or {}, load or {}, sum((load or {}).values()) // 2)


def test_moves_start_within_the_per_node_and_cluster_limits_in_the_steps_order():
    steps = [
        _step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"),
        _step(1, ActionKind.MOVE_SECONDARY, "N1", "N3"),  # N1 already counts step 0's move
        _step(2, ActionKind.MOVE_PRIMARY, "N4", "N5"),
        _step(3, ActionKind.MOVE_SECONDARY, "N6", "N7"),  # the cluster's two are taken
        _step(4, ActionKind.ADD_SECONDARY, None, "N1"),  # the Failover Manager's: no limit
    ]
    decision, after = decide(steps, _board(*[Status.PENDING] * 5), LIMITS, now=0.0)
    assert decision.begin == (0, 2, 4) and decision.skip == () and decision.time_out == ()
    assert after.state == (Status.CHECKING, Status.PENDING, Status.CHECKING, Status.PENDING, Status.ISSUED)
    assert after.in_flight == 2 and after.load == {"N1": 1, "N2": 1, "N4": 1, "N5": 1}


def test_a_step_waits_for_the_steps_it_needs_and_is_skipped_when_one_ends_not_done():
    steps = [
        _step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"),
        _step(1, ActionKind.MOVE_SECONDARY, "N3", "N4", 0),
        _step(2, ActionKind.MOVE_SECONDARY, "N5", "N6", 1),  # skipped too: what it needs was just skipped
        _step(3, ActionKind.MOVE_SECONDARY, "N7", "N8"),
    ]
    waiting, _ = decide(steps, _board(Status.ISSUED, *[Status.PENDING] * 3), LIMITS, now=0.0)
    assert waiting.begin == (3,) and waiting.skip == ()
    decision, after = decide(steps, _board(Status.FAILED, *[Status.PENDING] * 3), LIMITS, now=0.0)
    assert decision.skip == ((1, 0), (2, 1)) and decision.begin == (3,)
    assert after.state[:3] == (Status.FAILED, Status.SKIPPED, Status.SKIPPED)


def test_watched_steps_past_the_timeout_time_out_and_nothing_starts_once_stopping():
    steps = [_step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"), _step(1, ActionKind.MOVE_SECONDARY, "N3", "N4")]
    board = _board(Status.ISSUED, Status.PENDING, since={0: 5.0}, load={"N1": 1, "N2": 1})
    assert decide(steps, board, LIMITS, now=15.0)[0].time_out == ()
    decision, after = decide(steps, board, LIMITS, now=15.5, starting=False)
    assert decision == type(decision)(time_out=(0,))
    assert after.state == (Status.TIMED_OUT, Status.PENDING) and after.since == {}


GATE = Policy(strict=False, hold_upgrade=True, timeout=30.0)


def test_a_move_whose_partition_is_in_error_is_held_then_skipped_after_the_timeout():
    steps = [_step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"), _step(1, ActionKind.MOVE_PRIMARY, "N3", "N4")]
    gates = Gates(partitions={"p0": HealthState.ERROR, "p1": HealthState.WARNING})
    decision, after = decide(steps, _board(Status.PENDING, Status.PENDING), LIMITS, 100.0, gates=gates, policy=GATE)
    assert decision.begin == (1,) and decision.hold == ((0, "partition p0 is Error (SF's health)"),)
    assert after.held == {0: 100.0} and after.state[0] == Status.PENDING
    board = Board(after.state, {}, {}, 0, after.held)
    decision, after = decide(steps, board, LIMITS, 130.0, gates=gates, policy=GATE)
    assert decision.hold == ((0, "partition p0 is Error (SF's health)"),) and decision.gave_up == ()
    decision, after = decide(steps, board, LIMITS, 130.5, gates=gates, policy=GATE)
    assert decision.gave_up == ((0, "partition p0 is Error (SF's health)"),) and after.state[0] == Status.SKIPPED
    assert after.held == {}


def test_a_node_in_warning_holds_only_when_strict_and_a_healthy_read_lets_the_move_start():
    steps = [_step(0, ActionKind.MOVE_SECONDARY, "N1", "N2")]
    gates = Gates(nodes={"N2": HealthState.WARNING})
    decision, _ = decide(steps, _board(Status.PENDING), LIMITS, 0.0, gates=gates, policy=GATE)
    assert decision.begin == (0,) and decision.hold == ()
    strict = Policy(strict=True, timeout=30.0)
    decision, after = decide(steps, _board(Status.PENDING), LIMITS, 0.0, gates=gates, policy=strict)
    assert decision.hold == ((0, "node N2 is Warning (SF's health)"),) and decision.begin == ()
    decision, after = decide(
        steps, Board(after.state, {}, {}, 0, after.held), LIMITS, 5.0, gates=Gates(), policy=strict
    )
    assert decision.begin == (0,) and after.held == {}


def test_a_rolling_upgrade_holds_every_move_but_not_the_failover_managers_steps_unless_continue():
    steps = [_step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"), _step(1, ActionKind.ADD_SECONDARY, None, "N3")]
    gates = Gates(upgrade="RollingForwardInProgress")
    decision, _ = decide(steps, _board(Status.PENDING, Status.PENDING), LIMITS, 0.0, gates=gates, policy=GATE)
    assert decision.hold == ((0, "a cluster upgrade is RollingForwardInProgress"),) and decision.begin == (1,)
    go = Policy(hold_upgrade=False)
    decision, _ = decide(steps, _board(Status.PENDING, Status.PENDING), LIMITS, 0.0, gates=gates, policy=go)
    assert decision.begin == (0, 1) and decision.hold == ()
    app = Gates(applications={"A": "RollingForwardInProgress"})
    decision, _ = decide(steps, _board(Status.PENDING, Status.PENDING), LIMITS, 0.0, gates=app, policy=GATE)
    assert decision.hold == ((0, "an upgrade of application fabric:/A is RollingForwardInProgress"),)


def test_a_step_waiting_for_another_is_not_held_and_sfs_words_map_once_at_the_door():
    steps = [_step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"), _step(1, ActionKind.MOVE_SECONDARY, "N2", "N3", 0)]
    gates = Gates(nodes={"N1": HealthState.ERROR, "N3": HealthState.ERROR})
    decision, _ = decide(steps, _board(Status.PENDING, Status.PENDING), LIMITS, 0.0, gates=gates, policy=GATE)
    assert decision.hold == ((0, "node N1 is Error (SF's health)"),)  # step 1 waits for step 0, not held
    assert HealthState.from_sf("error") is HealthState.ERROR and HealthState.from_sf("Invalid") is HealthState.UNKNOWN
    assert rolling("RollingForwardInProgress") and rolling("RollingBackInProgress")
    assert not rolling("RollingForwardCompleted") and not rolling(None)
    assert held_by(steps[0], Gates(), GATE) == ""


def test_a_move_whose_partitions_health_was_not_read_yet_waits_without_being_held():
    steps = [_step(0, ActionKind.MOVE_SECONDARY, "N1", "N2"), _step(1, ActionKind.MOVE_PRIMARY, "N3", "N4")]
    gates = Gates(partitions={"p0": HealthState.OK}, read=frozenset({"p0"}))
    decision, after = decide(steps, _board(Status.PENDING, Status.PENDING), LIMITS, 0.0, gates=gates, policy=GATE)
    assert decision.begin == (0,) and decision.hold == () and after.held == {}
