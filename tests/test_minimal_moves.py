"""The fewest movements for the result (issue 21.6) and trades of two replicas (21.7)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from conftest import QUICK

from plbjax.sf import _energy as E
from plbjax.sf import full_scope, model, scope
from plbjax.sf._encoding import encode
from plbjax.sf._phases import Placement, _frozen_masks, _priorities, _Run, _tidy, assess, plan
from plbjax.sf._state import parse_state

LOADED, EMPTY = ("N0", "N1", "N2"), ("N3", "N4", "N5")
CONFIG = dataclasses.replace(QUICK, chains=1, tries=64, parallel=True, steps=4000, block_steps=500)


def _spread_cluster() -> dict:
    """One metric, equal loads: three nodes with 20 instances, three empty, four at the average 10."""
    counts = [20, 20, 20, 0, 0, 0, 10, 10, 10, 10]
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
    result = plan(parse_state(_spread_cluster()), CONFIG)
    assert result["Score"]["After"] < 1e-6
    assert len(result["Actions"]) == 30
    assert all(a["SourceNode"] in LOADED and a["TargetNode"] in EMPTY for a in result["Actions"])


def test_tidy_collapses_chains_and_undoes_moves_that_do_not_pay():
    """A balanced placement reached with 5 two-move chains through average nodes and a needless
    trade of two replicas between average nodes ends with the 30 direct moves."""
    state = parse_state(_spread_cluster())
    problem, index = encode(state)
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
    final = Placement(node_of, index.initial_primary, assess(problem, node_of, index.initial_primary))
    assert int(((node_of != index.initial_node) & (index.initial_node >= 0)).sum()) == 37
    run = _Run(
        state, problem, index, _priorities(state), model(), CONFIG.kernel, None, *_frozen_masks(index, problem, ())
    )
    tidied, removed, *_ = _tidy(run, final, CONFIG.schedule)
    assert removed == 7
    assert int(((tidied.node_of != index.initial_node) & (index.initial_node >= 0)).sum()) == 30
    np.testing.assert_allclose(tidied.report["loads"], final.report["loads"])
    energy = jax.jit(E.energy_of)
    search = scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index))  # SF's energy
    assert float(energy(search, tidied.node_of, tidied.primary_of)) < float(energy(search, node_of, index.initial_primary))


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
    result = plan(parse_state(_tight_cluster()), CONFIG)
    moves = {(a["ServiceName"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"]}
    assert moves == {("X", "C", "A"), ("Y", "A", "C")}
    assert "violations reduced" in result["Phases"][1]["Reason"]
