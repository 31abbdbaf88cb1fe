"""The phases as such: each hands on a `PhaseResult` (with nothing to do it does not run and says
why), balancing, the constraint check's trades, the minimal-movement pass (issue 21.6 and 21.7),
and the `Plan` whose document renders the phases' results and the plan's own actions and History."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from conftest import QUICK

from plbjax.sf import full_scope, model, parse_state, scope
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._model import energy as E
from plbjax.sf._model.assessment import assessed
from plbjax.sf._phases.balancing import balancing_phase
from plbjax.sf._phases.constraint_check import constraint_phase
from plbjax.sf._phases.fewest_movements import fewest_movements_phase
from plbjax.sf._phases.phase import PhaseResult, Reached, Run
from plbjax.sf._phases.placement import placement_phase
from plbjax.sf._phases.preparation import Encoded, frozen_masks, priorities_of
from plbjax.sf._plan.planning import Plan, plan

LOADED, EMPTY = ("N0", "N1", "N2"), ("N3", "N4", "N5")
CONFIG = dataclasses.replace(QUICK, chains=1, tries=64, parallel=True, steps=4000, block_steps=500)


def _spread_cluster(counts: tuple[int, ...] = (20, 20, 20, 0, 0, 0, 10, 10, 10, 10)) -> dict:
    """One metric, equal loads: by default three nodes with 20 instances, three empty, four at the
    average 10."""
    nodes = [
        {"NodeName": f"N{i}", "FaultDomain": f"fd:/{i}", "UpgradeDomain": f"ud{i % 5}", "Capacities": {"M": 1000}}
        for i in range(len(counts))
    ]
    partitions, k = [], 0
    for i, count in enumerate(counts):
        for _ in range(count):
            partitions.append(
                {
                    "ServiceName": "S",
                    "PartitionId": f"p{k}",
                    "Replicas": [{"ReplicaId": k, "NodeName": f"N{i}", "Role": "Instance", "Loads": {"M": 10}}],
                }
            )
            k += 1
    return {
        "Nodes": nodes,
        "Partitions": partitions,
        "Services": [
            {
                "ServiceName": "S",
                "ServiceKind": "Stateless",
                "InstanceCount": 1,
                "Metrics": [{"Name": "M", "Weight": "High", "DefaultLoad": 10}],
            }
        ],
        "Settings": {"GlobalMovementThrottleThreshold": 0, "MaxPercentageToMove": 1},
    }


def test_balancing_moves_only_from_overloaded_to_empty_nodes():
    result = plan(parse_state(_spread_cluster()), CONFIG).document()
    assert result["Score"]["After"] < 1e-6
    assert len(result["Actions"]) == 30
    assert all(a["SourceNode"] in LOADED and a["TargetNode"] in EMPTY for a in result["Actions"])


def test_tidy_collapses_chains_and_undoes_moves_that_do_not_pay():
    """A balanced placement reached with 5 two-move chains through average nodes and a needless
    trade of two replicas between average nodes ends with the 30 direct moves."""
    run = _run(parse_state(_spread_cluster()))
    _, _, problem, index = run.encoded
    node = {name: i for i, name in enumerate(index.nodes)}
    on = lambda name: [r for r in range(index.n_replicas) if index.initial_node[r] == node[name]]
    node_of = index.initial_node.copy()
    for source in LOADED:  # the direct moves: 10 from every loaded node
        for j, r in enumerate(on(source)[:10]):
            node_of[r] = node[EMPTY[LOADED.index(source)]]
    for k in range(5):  # reroute five of them: loaded -> N6, N6 -> empty
        x, y = on("N0")[k], on("N6")[k]
        node_of[x], node_of[y] = node["N6"], node_of[x]
    a, b = on("N7")[0], on("N8")[0]  # a needless trade
    node_of[a], node_of[b] = node["N8"], node["N7"]
    final = assessed(problem, node_of, index.initial_primary)
    assert int(((node_of != index.initial_node) & (index.initial_node >= 0)).sum()) == 37
    result = fewest_movements_phase(run, Reached(final), CONFIG.schedule)
    tidied = result.placement
    assert result.reason == "7 movement(s) undone"
    assert int(((tidied.node_of != index.initial_node) & (index.initial_node >= 0)).sum()) == 30
    np.testing.assert_allclose(tidied.report.loads, final.report.loads)
    energy = jax.jit(E.energy_of)
    search = scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index))  # SF's energy
    assert float(energy(search, tidied.node_of, tidied.primary_of)) < float(
        energy(search, node_of, index.initial_primary)
    )


def _tight_cluster() -> dict:
    """Two nodes of capacity 10, each holding a load-6 instance: X (which may only be on A) sits on
    C, Y on A. Neither can move alone; trading nodes fixes X's placement."""
    nodes = [
        {
            "NodeName": name,
            "FaultDomain": f"fd:/{name}",
            "UpgradeDomain": name,
            "Capacities": {"M": 10},
            "PlacementProperties": {"Home": name},
        }
        for name in ("A", "C")
    ]
    service = lambda name, constraint: {
        "ServiceName": name,
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
        "Metrics": [{"Name": "M", "Weight": "High", "DefaultLoad": 6}],
        **constraint,
    }
    replica = lambda i, node: {"ReplicaId": i, "NodeName": node, "Role": "Instance", "Loads": {"M": 6}}
    return {
        "Nodes": nodes,
        "Services": [service("X", {"PlacementConstraints": "Home == A"}), service("Y", {})],
        "Partitions": [
            {"ServiceName": "X", "PartitionId": "x", "Replicas": [replica(1, "C")]},
            {"ServiceName": "Y", "PartitionId": "y", "Replicas": [replica(2, "A")]},
        ],
    }


def test_constraint_check_trades_two_replicas_under_tight_capacity():
    result = plan(parse_state(_tight_cluster()), CONFIG).document()
    moves = {(a["ServiceName"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]}
    assert moves == {("X", "C", "A"), ("Y", "A", "C")}
    assert "violations reduced" in result["Phases"][1]["Reason"]


def _run(state) -> Run:
    """What the phases read for `state`, encoded as it is (no preparation)."""
    problem, index = encode(state)
    masks = frozen_masks(index, problem, ())
    return Run(Encoded(state, [], problem, index), priorities_of(state), model(), CONFIG.kernel, None, *masks)


def test_phases_with_nothing_to_do_do_not_run_say_why_and_keep_the_placement():
    """A balanced cluster with every replica placed and no violation: no phase searches."""
    state = parse_state(_spread_cluster((10,) * 10))
    run = _run(state)
    _, _, problem, index = run.encoded
    now = assessed(problem, index.initial_node, index.initial_primary)
    results = [
        placement_phase(run, Reached(now), CONFIG.schedule),
        constraint_phase(run, Reached(now), CONFIG.schedule),
        balancing_phase(run, Reached(now), CONFIG.schedule),
    ]
    assert [(r.phase, r.ran, r.reason, r.search) for r in results] == [
        ("Placement", False, "no replica is missing", None),
        ("ConstraintCheck", False, "no constraint violation", None),
        ("Balancing", False, "every metric is balanced", None),
    ]
    assert all(r.placement is now for r in results)


def test_a_phase_result_is_frozen():
    state = parse_state(_spread_cluster((10,) * 10))
    run = _run(state)
    _, _, problem, index = run.encoded
    result = placement_phase(
        run, Reached(assessed(problem, index.initial_node, index.initial_primary)), CONFIG.schedule
    )
    assert isinstance(result, PhaseResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.reason = "changed"  # type: ignore[misc]


def test_the_plan_document_renders_the_plans_actions_history_search_and_phases():
    result = plan(parse_state(_spread_cluster()), CONFIG)
    assert isinstance(result, Plan) and result.actions
    document = result.document()
    assert document["Actions"] == [a.document() for a in result.actions]
    assert document["History"] == {k: list(v) for k, v in result.history.items()}
    assert document["Search"] == result.search.entry()
    assert [(p["Phase"], p["Ran"]) for p in document["Phases"]] == [
        ("Placement", False),
        ("ConstraintCheck", False),
        ("Balancing", True),
    ]
    assert json.dumps(result.document(), sort_keys=True) == json.dumps(document, sort_keys=True)
    moved = {str(a.replica): a.source for a in result.actions}
    assert {k: v[-1] for k, v in result.history.items()} == moved  # each balancing move remembers its node
