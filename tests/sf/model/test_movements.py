"""One count of movements (issue 46): SF counts a movement per replica that moves and one per primary
swap; a replica added where it had no node is free, and so is a new primary where the old one had
no node (nothing ran there to swap with: SF's Failover Manager promotes a secondary). The search
(`energy.movements`), the host (`assessment.movements`), balancing's throttle (placement's movements
it charges, `Reached.movements`) and the plan's `Movements` entries all count so."""

from __future__ import annotations

import types

import jax.numpy as jnp
import pytest
from conftest import QUICK
from sf_cases import document, nodes, part, service

from plbjax.sf import full_scope, parse_state, scope
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._model import energy as E
from plbjax.sf._model.assessment import assessed, movements
from plbjax.sf._model.chain import model
from plbjax.sf._phases import balancing
from plbjax.sf._phases.balancing import balances, balancing_phase
from plbjax.sf._phases.phase import Phase, PhaseResult, Reached, Run, throttle_limits
from plbjax.sf._phases.preparation import Encoded, frozen_masks, priorities_of
from plbjax.sf._plan.explain import explain

THROTTLE = 5  # GlobalMovementThrottleThreshold: the least of the balancing throttles here


def _stateful(pid: str, *placed: str | None) -> dict:
    """A partition of the stateful service S: its primary on placed[0] (None: no node), secondaries on the rest."""
    roles = ["Primary"] + ["Secondary"] * (len(placed) - 1)
    replicas = [
        {"ReplicaId": f"{pid}.{k}", "Role": role, "NodeName": n} for k, (role, n) in enumerate(zip(roles, placed))
    ]
    return {"ServiceName": "S", "PartitionId": pid, "Replicas": replicas}


def _state():
    """Partition a's primary has no node; c's primary runs on N2; b is one instance on N2 (all of
    the load, so the cluster is imbalanced)."""
    stateful = {"ServiceName": "S", "ServiceKind": "Stateful", "TargetReplicaSetSize": 3}
    stateful["Metrics"] = [{"Name": "Load", "Weight": "High", "DefaultLoad": 0}]
    doc = document(
        [stateful, service("T", 1, 0)],
        [_stateful("a", None, "N0", "N1"), _stateful("c", "N2", "N3", "N0"), part("T", "b", ("N2", 100.0))],
        nodes(4),
        activity=None,
        frame=False,
        Settings={"GlobalMovementThrottleThreshold": THROTTLE, "MaxPercentageToMove": 1.0},
    )
    return parse_state(doc)


def _row(index, pid: str, k: int) -> int:
    p = next(i for i, (_, name) in enumerate(index.partitions) if str(name) == pid)
    return list(index.partition_rows[p])[k]


def _planned(problem, index):
    """From the input: a's replica without a node placed on N2 and its secondary on N0 made primary
    (free: an add and a promotion), c's primary swapped to its secondary on N3 (one movement), b's
    instance moved from N2 to N3 (one movement)."""
    node_of, primary_of = index.initial_node.copy(), index.initial_primary.copy()
    a0, a1, c1, b0 = _row(index, "a", 0), _row(index, "a", 1), _row(index, "c", 1), _row(index, "b", 0)
    node_of[a0] = index.nodes.index("N2")
    node_of[b0] = index.nodes.index("N3")
    primary_of[[problem.replica_partition[a1], problem.replica_partition[c1]]] = [a1, c1]
    return assessed(problem, node_of, primary_of)


@pytest.fixture(scope="module")
def planned():
    state = _state()
    problem, index = encode(state)
    initial = assessed(problem, index.initial_node, index.initial_primary)
    a = problem.replica_partition[_row(index, "a", 0)]
    assert initial.primary_of[a] == _row(index, "a", 0) and initial.node_of[initial.primary_of[a]] < 0
    return state, problem, index, initial, _planned(problem, index)


def test_the_search_and_the_host_count_a_move_and_a_swap_but_no_promotion(planned):
    _, problem, index, initial, placed = planned
    assert movements(index, initial.node_of, initial.primary_of, placed) == 2
    search = scope(problem, initial.node_of, initial.primary_of, full_scope(problem, index))
    assert float(E.movements(search.scope, jnp.asarray(placed.node_of), jnp.asarray(placed.primary_of))) == 2.0


def _reached(initial, placed) -> Reached:
    ran = lambda phase, ran: PhaseResult(phase, ran, "as planned here", placed)
    return Reached(
        initial, (ran(Phase.PLACEMENT, True), ran(Phase.CONSTRAINT_CHECK, False), ran(Phase.BALANCING, True))
    )


def test_balancing_throttle_and_the_plans_entries_charge_placements_two_movements(planned, monkeypatch):
    state, problem, index, initial, placed = planned
    reached = _reached(initial, placed)
    limit = min(throttle_limits(state.settings, Phase.BALANCING, int((placed.node_of >= 0).sum())).values())
    assert limit == THROTTLE and reached.movements(index, Phase.PLACEMENT) == 2
    after, priorities = balances(state, problem, index, placed), priorities_of(state)
    placement, _, balanced = explain(state, index, problem, reached, after, priorities, 7).phases
    assert placement["Movements"]["Used"] == 2
    assert balanced["Movements"] == {"Allowed": THROTTLE - 2, "Used": 0}
    budgets = []

    def searched(run, now, what, schedule):
        budgets.append(what.budget)
        return now, types.SimpleNamespace(energy=0.0, initial_energy=0.0)  # found nothing better

    monkeypatch.setattr(balancing, "scoped_search", searched)
    encoded, free = Encoded(state, [], problem, index), frozen_masks(index, problem, ())
    run = Run(encoded, priorities, model(), QUICK.kernel, None, *free)
    result = balancing_phase(run, reached._replace(results=reached.results[:2]), QUICK.schedule)
    assert result.ran and budgets == [THROTTLE - 2]
