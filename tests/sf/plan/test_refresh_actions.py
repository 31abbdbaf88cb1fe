"""`refresh=<action>`: one SF refresh running the stage of one of PLBScheduler's actions
(PLBSchedulerActionType), as Searcher::ProcessSearchType runs it."""

from __future__ import annotations

import pytest

from plbjax import SearchConfig, parse_state, plan
from plbjax.errors import BadInput

SEARCH = SearchConfig(chains=4, steps=1000, seconds=None, block_steps=250, tries=1, parallel=False)


def _service(name: str, load: float) -> dict:
    return {
        "ServiceName": name,
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 1,
        "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": load, "SecondaryDefaultLoad": load}],
    }


def _crowded() -> dict:
    """A new 70-load primary fits on neither node (60 and 50 of 100 used) until a 30-load replica
    moves off N0: creation with move's case."""
    placed = {"fabric:/A/S30a": "N0", "fabric:/A/S30b": "N0", "fabric:/A/S50": "N1", "fabric:/A/S70": None}
    loads = {"fabric:/A/S30a": 30, "fabric:/A/S30b": 30, "fabric:/A/S50": 50, "fabric:/A/S70": 70}
    return {
        "SchemaVersion": 1,
        "Nodes": [
            {"NodeName": n, "FaultDomain": f"fd:/{n}", "UpgradeDomain": n, "Capacities": {"Load": 100}}
            for n in ("N0", "N1")
        ],
        "Services": [_service(name, load) for name, load in loads.items()],
        "Partitions": [
            {
                "ServiceName": name,
                "PartitionId": name[-3:],
                "Replicas": [
                    {"ReplicaId": None if node is None else f"{name[-3:]}.0", "Role": "Primary", "NodeName": node}
                ]
                if node
                else [],
            }
            for name, node in placed.items()
        ],
    }


def _kinds(doc: dict) -> list[str]:
    return sorted(a["Action"] for a in doc["Actions"])


def test_new_replica_placement_moves_nothing_and_leaves_the_big_primary_unplaced():
    for refresh in ("NewReplicaPlacement", True):
        result = plan(parse_state(_crowded()), SEARCH, refresh=refresh).document()
        assert result["Actions"] == [], refresh
        assert [u["ServiceName"] for u in result["Unplaced"]] == ["fabric:/A/S70"]


def test_new_replica_placement_with_move_makes_room_first():
    result = plan(parse_state(_crowded()), SEARCH, refresh="NewReplicaPlacementWithMove").document()
    assert _kinds(result) == ["AddPrimary", "MovePrimary"]
    assert result["Unplaced"] == []


def test_an_action_runs_its_stage_only():
    result = plan(parse_state(_crowded()), SEARCH, refresh="ConstraintCheck").document()
    reasons = {p["Phase"]: p["Reason"] for p in result["Phases"]}
    assert reasons["Placement"] == reasons["Balancing"] == "one refresh runs one stage: ConstraintCheck"
    assert reasons["ConstraintCheck"] == "no constraint violation"  # it ran and found none
    assert result["Actions"] == []


def test_an_unknown_action_is_bad_input_naming_it():
    with pytest.raises(BadInput, match="refresh: 'Balancing' is not true, false or one of NewReplicaPlacement"):
        plan(parse_state(_crowded()), SEARCH, refresh="Balancing")


def test_the_command_line_takes_an_action_and_refuses_others():
    from plbjax.config import RunConfig

    assert RunConfig(state="s.yaml", refresh="NewReplicaPlacementWithMove").refresh == "NewReplicaPlacementWithMove"
    with pytest.raises(BadInput, match="refresh: 'Bogus' is not true, false or one of"):
        RunConfig(state="s.yaml", refresh="Bogus")
