"""The apply executor's pure decision: starts within the limits, knock-on skips, time-outs; no cluster, no clock."""

from plbjax.sf import Action, ActionKind
from plbjax.sf.live.apply.decide import Board, Limits, decide
from plbjax.sf.live.apply.journal import Status
from plbjax.sf.live.apply.steps import Step

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
