"""plbjax-apply's preflight alone: the cluster as read (typed records) against a plan's actions."""

from __future__ import annotations

from plbjax.sf import Action, ActionKind, NodeStatus
from plbjax.sf.live.apply.expectations import Holding
from plbjax.sf.live.apply.preflight import Read, Standing, verdict

PRIMARY = Holding("Primary", "Primary", "Ready")
SECONDARY = Holding("Secondary", "ActiveSecondary", "Ready")
BUILDING = Holding("InBuild", "IdleSecondary", "InBuild")
UP = {n: NodeStatus.UP for n in ("N1", "N2", "N3", "N4")}


def _act(kind: ActionKind, src: str | None, dst: str | None, pid: str = "p1") -> Action:
    return Action("fabric:/App/Svc", pid, None, kind, src, dst)


# p1: swap N1 -> N2 (N2's secondary becomes primary), then the old primary (now a secondary) N1 -> N3
PLAN = [
    _act(ActionKind.SWAP_PRIMARY_SECONDARY, "N1", "N2"),
    _act(ActionKind.MOVE_SECONDARY, "N1", "N3"),
    _act(ActionKind.MOVE_SECONDARY, "N3", "N4", pid="p2"),
]
INPUT = {"p1": {"N1": PRIMARY, "N2": SECONDARY}, "p2": {"N3": SECONDARY, "N1": PRIMARY}}


def test_the_plans_input_may_go_ahead():
    found = verdict(PLAN[:2], Read(INPUT, UP))
    assert [p.standing for p in found.partitions] == [Standing.READY]
    assert not found.drift and not found.done and not found.drifted and not found.nothing_to_do and not found.foreign


def test_a_cluster_at_the_target_has_nothing_to_do():
    at_target = {"p1": {"N2": PRIMARY, "N3": SECONDARY}}
    found = verdict(PLAN[:2], Read(at_target, UP))
    assert found.nothing_to_do and found.partitions[0].standing is Standing.TARGET
    assert found.done == {0: "the cluster is past it", 1: "the cluster is past it"}


def test_a_partition_part_way_counts_its_first_actions_done():
    swapped = {"p1": {"N2": PRIMARY, "N1": SECONDARY}}
    found = verdict(PLAN[:2], Read(swapped, UP))
    assert found.partitions[0].standing is Standing.READY and found.partitions[0].past == 1
    assert list(found.done) == [0] and not found.drift


def test_a_move_under_way_is_not_drift():
    building = {"p1": {"N2": PRIMARY, "N1": SECONDARY, "N3": BUILDING}}
    found = verdict(PLAN[:2], Read(building, UP))
    assert not found.drift and found.partitions[0].past == 1


def test_a_replica_moved_by_hand_is_drift_listed_in_sfs_words():
    moved = {"p1": {"N1": PRIMARY, "N4": SECONDARY}}  # the secondary N2 -> N4 by hand
    found = verdict(PLAN[:2], Read(moved, UP))
    assert found.drift and found.partitions[0].standing is Standing.DRIFTED
    assert found.lines() == [
        "fabric:/App/Svc partition p1: N2 holds no replica, the plan expects a Ready ActiveSecondary"
    ]
    assert set(found.drifted) == {0, 1} and not found.done


def test_only_the_drifted_partition_is_held_back():
    moved = {"p1": {"N1": PRIMARY, "N4": SECONDARY}, "p2": INPUT["p2"]}
    found = verdict(PLAN, Read(moved, UP))
    assert [p.partition for p in found.drift] == ["p1"] and set(found.drifted) == {0, 1}


def test_another_clusters_plan_is_foreign():
    found = verdict(PLAN, Read({"p1": None, "p2": None}, UP))
    assert found.foreign and all(p.standing is Standing.MISSING for p in found.partitions)


def test_one_partition_missing_is_drift_not_another_cluster():
    found = verdict(PLAN, Read({"p1": None, "p2": INPUT["p2"]}, UP))
    assert not found.foreign and [p.partition for p in found.drift] == ["p1"]
    assert found.lines() == ["fabric:/App/Svc partition p1: not in the cluster"]


def test_a_node_the_remaining_moves_use_must_be_up():
    found = verdict(PLAN[:2], Read(INPUT, UP | {"N3": NodeStatus.DOWN}))
    assert found.lines() == ["fabric:/App/Svc partition p1: node N3 is Down, not Up"]
    gone = verdict(PLAN[:2], Read(INPUT, {n: s for n, s in UP.items() if n != "N3"}))
    assert gone.lines() == ["fabric:/App/Svc partition p1: node N3 is not in the cluster"]


def test_a_node_only_the_done_moves_used_does_not_matter():
    at_target = {"p1": {"N2": PRIMARY, "N3": SECONDARY}}
    assert verdict(PLAN[:2], Read(at_target, UP | {"N1": NodeStatus.DOWN})).nothing_to_do


def test_the_states_replicas_are_the_input_with_bases():
    bases = {"p1": {"N1": "Primary", "N2": "Secondary", "N3": "Secondary"}}  # N3 holds one already
    found = verdict(PLAN[:2], Read(INPUT, UP), bases)
    assert found.drift and "N3" in found.lines()[0]
    assert not verdict(PLAN[:2], Read({"p1": {**INPUT["p1"], "N3": SECONDARY}}, UP), bases).drift


def test_the_failover_managers_add_is_at_the_target_once_made():
    plan = [_act(ActionKind.ADD_SECONDARY, None, "N3")]
    assert verdict(plan, Read({"p1": {"N1": PRIMARY}}, UP)).partitions[0].standing is Standing.READY
    assert verdict(plan, Read({"p1": {"N1": PRIMARY, "N3": SECONDARY}}, UP)).nothing_to_do


def test_the_failover_manager_may_make_its_add_before_the_moves_before_it():
    plan = [_act(ActionKind.MOVE_PRIMARY, "N1", "N3"), _act(ActionKind.ADD_SECONDARY, "N4", "N2")]
    bases = {"p1": {"N1": "Primary", "N4": "Secondary"}}
    early = {"p1": {"N1": PRIMARY, "N2": SECONDARY}}  # the replica on (Down) N4 replaced on N2 already
    found = verdict(plan, Read(early, UP), bases)
    assert not found.drift and found.partitions[0].standing is Standing.READY and not found.done
    assert verdict(plan, Read({"p1": {"N3": PRIMARY, "N2": SECONDARY}}, UP), bases).nothing_to_do
    moved = verdict(plan, Read({"p1": {"N3": PRIMARY}}, UP), bases)
    assert not moved.drift and list(moved.done) == [0] and not moved.nothing_to_do


def test_a_round_trip_counts_as_the_input_and_as_the_target():
    plan = [_act(ActionKind.MOVE_SECONDARY, "N2", "N3"), _act(ActionKind.MOVE_SECONDARY, "N3", "N2")]
    found = verdict(plan, Read(INPUT, UP))
    assert found.nothing_to_do and found.partitions[0].past == 0 and not found.done
