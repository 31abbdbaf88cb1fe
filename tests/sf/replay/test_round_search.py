"""How long a replay round searches (plbjax.sf.replay.rounds.search) and History bounded as SF bounds
its per-partition movement counters (plbjax.sf.replay.scheduler.history)."""

from __future__ import annotations

import pytest
from replay_fakes import SERVICE, OneMove, as_doc, cluster, play

from plbjax.sf import Action, Partition, SearchConfig, parse_state
from plbjax.sf.replay.rounds.search import QUICK, SLOW, BalancingAction, Touched, effort, round_search
from plbjax.sf.replay.scheduler.history import HistoryAge
from plbjax.sf.replay.scheduler.settings import read_settings
from plbjax.sf.replay.timeline.changes import LoadReport, NodeDown
from plbjax.sf.replay.types import Effort

SEARCH = SearchConfig(seconds=None, steps=2000, block_steps=500)


@pytest.mark.parametrize(
    ("share", "steps"), [(0.0, 500), (0.01, 500), (0.25, 500), (0.26, 1000), (0.5, 1000), (0.9, 2000), (1.0, 2000)]
)
def test_a_round_searches_whole_blocks_in_proportion_to_what_changed(share, steps):
    assert round_search(SEARCH, Effort(share)).steps == steps


def test_sf_caps_bound_the_round_and_search_keys_still_override():
    capped = round_search(SEARCH, Effort(1.0, seconds=10.0, blocks=2))
    assert (capped.steps, capped.seconds) == (1000, 10.0)  # MaxSimulatedAnnealingIterations, the SF timeout
    given = SearchConfig(seconds=3.0, steps=4000, block_steps=1000)
    assert (round_search(given, Effort(0.5, seconds=10.0)).steps, round_search(given, Effort(0.5, 10.0)).seconds) == (
        2000,
        3.0,
    )
    auto = SearchConfig(seconds=None)  # auto steps: the search's own length
    assert round_search(auto, Effort(0.1, 10.0)).steps == auto.steps


def test_effort_follows_the_phase_and_sfs_balancing_action():
    settings = read_settings(parse_state(cluster({"N0": 1}, {"MaxSimulatedAnnealingIterations": 7})))
    assert effort("Placement", QUICK, 0.1, settings) == Effort(1.0, None, 7)
    assert effort("ConstraintCheck", QUICK, 0.1, settings) == Effort(1.0, None, 7)
    assert effort("Balancing", SLOW, 0.1, settings) == Effort(1.0, 120.0, 7)  # SlowBalancingSearchTimeout
    assert effort("Balancing", QUICK, 0.1, settings) == Effort(0.1, 10.0, 7)  # FastBalancingSearchTimeout
    assert (
        effort("Balancing", QUICK, 0.1, read_settings(parse_state(cluster({"N0": 1}, {})))).blocks is None
    )  # -1: no limit


def test_balancing_alternates_quick_and_slow_searches_as_sf_and_turns_quick_when_balanced():
    action, seen = BalancingAction(), []
    for _ in range(7):
        seen.append(action.action)
        action.ran(3)  # PLBActionRetryTimes
    assert seen == [QUICK] * 3 + [SLOW] * 3 + [QUICK]
    action.ran(3)
    action.balanced()
    assert (action.action, action.iteration) == (QUICK, 0)


def test_touched_counts_reported_and_moved_partitions_and_anything_else_as_everything():
    parts = [Partition(s, str(k), ()) for s in ("A", "B") for k in range(5)]
    touched = Touched()
    assert touched.share(parts) == 1.0  # the start: everything is new
    touched.clear()
    touched.event(LoadReport("A", {}, partition=1))
    touched.moved(("A", "2"))
    touched.moved(("A", "2"))
    assert touched.share(parts) == pytest.approx(0.2)
    touched.event(LoadReport("B", {}))  # the service's default loads: all of B
    assert touched.share(parts) == pytest.approx(0.7)
    touched.event(NodeDown("N0"))
    assert touched.share(parts) == 1.0


class Efforts(OneMove):
    """OneMove keeping each call's effort."""

    def __init__(self):
        super().__init__()
        self.efforts = []

    def __call__(self, state_doc, phase, node_type, seed, frozen, effort=None):
        state_doc = as_doc(state_doc)
        self.efforts.append((phase, effort))
        return super().__call__(state_doc, phase, node_type, seed, frozen, effort)


def test_the_loop_asks_a_full_search_first_and_after_events_then_only_what_its_moves_changed():
    state = cluster({"N0": 8, "N1": 0, "N2": 0, "N3": 0}, {"PLBActionRetryTimes": 100})
    load = {"Time": 31, "Kind": "LoadReport", "ServiceName": SERVICE, "PartitionId": "p7", "Loads": {"CPU": 2}}
    planner = Efforts()
    play(state, [load], planner=planner, duration=40)
    shares = [e.share for phase, e in planner.efforts if phase == "Balancing"]
    assert shares[0] == 1.0  # the first round: everything is new
    assert shares[1] == pytest.approx(1 / 8)  # one move since
    assert all(e.seconds == 10.0 for phase, e in planner.efforts if phase == "Balancing")  # quick rounds


def test_history_entries_go_once_their_partitions_last_balancing_move_leaves_the_counting_window():
    doc = cluster({"N0": 0, "N1": 2}, {}) | {"History": {"r0": ["N0"]}}
    age = HistoryAge(parse_state(doc))
    assert age.expired(doc["History"], 599.0, 600.0) == set()  # the initial History moved at the start
    move = {
        "ServiceName": SERVICE,
        "PartitionId": "p1",
        "ReplicaId": "r1",
        "Action": "MoveInstance",
        "TargetNode": "N0",
    }
    age.moved(Action.from_document(move), 300.0)
    history = {"r0": ["N1"], "r1": ["N0"], "r9": ["N3"]}  # r9: no balancing move known
    assert age.expired(history, 600.0, 600.0) == {"r0", "r9"}
    assert age.expired(history, 899.0, 600.0) == {"r0", "r9"}
    assert age.expired(history, 900.0, 600.0) == {"r0", "r1", "r9"}
    assert age.last_moved == {} and age.partition_of == {}  # nothing kept of forgotten partitions


def test_a_replays_history_holds_only_the_counting_windows_balancing_moves():
    state = cluster({"N0": 6, "N1": 0}, {"MovementPerPartitionThrottleCountingInterval": 20})
    record = play(state, planner=OneMove(), duration=60)
    moved = [a for a in record.actions if a["Action"] == "MoveInstance"]
    assert moved and max(a["Time"] for a in moved) + 20 < 60
    assert not record.final_state.get("History")  # their partitions' last moves are over 20 s old
