"""The violations record (`violation_record.Violations`): each field measured in its constraint kind, the
measured order the fields' order, the record crossing `jit`, and the comparisons made on it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from plbjax.sf._encoding import problem as _problem
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._encoding.problem import CONSTRAINTS, PREFERRED, UNPLACED
from plbjax.sf._model.assessment import Assessment, assess, no_worse
from plbjax.sf._model.constraints import measures, violations
from plbjax.sf._model.energy import node_loads
from plbjax.sf._model.violation_record import Violations
from plbjax.sf._state.reading import parse_state

SHAPES = {"capacity": (3, 2), "threshold": (3, 2)}  # per node and metric; the others one per row
MEASURED_WITH = {"away": PREFERRED, "headless": UNPLACED, "exclusion": None}  # fields after the kinds


def _one(field: str) -> Violations:
    """A record with 1 in every entry of `field` and 0 elsewhere."""
    return Violations(*(jnp.full(SHAPES.get(f, (4,)), float(f == field)) for f in Violations._fields))


def test_the_first_fields_are_the_constraint_kinds_in_measured_order():
    kinds = Violations._fields[:CONSTRAINTS]
    assert [getattr(_problem, name.upper()) for name in kinds] == list(range(CONSTRAINTS))
    assert set(Violations._fields[CONSTRAINTS:]) == set(MEASURED_WITH)


@pytest.mark.parametrize("field", Violations._fields)
def test_each_field_is_measured_in_its_kind(field):
    kind = Violations._fields.index(field) if field in Violations._fields[:CONSTRAINTS] else MEASURED_WITH[field]
    expected = np.zeros(CONSTRAINTS, np.float32)
    if kind is not None:
        expected[kind] = np.prod(SHAPES.get(field, (4,)))
    np.testing.assert_array_equal(np.asarray(jax.jit(measures)(_one(field))), expected)


def _tight() -> dict:
    """X (only allowed on A) on C and Y on A; capacity 10 each, load 6 each."""
    nodes = [
        {"NodeName": n, "FaultDomain": f"fd:/{n}", "UpgradeDomain": n, "Capacities": {"M": 10}}
        | {"PlacementProperties": {"Home": n}}
        for n in ("A", "C")
    ]
    metric = [{"Name": "M", "Weight": "High", "DefaultLoad": 6}]
    services = [
        {"ServiceName": "X", "ServiceKind": "Stateless", "InstanceCount": 1, "Metrics": metric}
        | {"PlacementConstraints": "Home == A"},
        {"ServiceName": "Y", "ServiceKind": "Stateless", "InstanceCount": 1, "Metrics": metric},
    ]
    replica = lambda i, node: {"ReplicaId": i, "NodeName": node, "Role": "Instance", "Loads": {"M": 6}}
    partitions = [
        {"ServiceName": "X", "PartitionId": "x", "Replicas": [replica(1, "C")]},
        {"ServiceName": "Y", "PartitionId": "y", "Replicas": [replica(2, "A")]},
    ]
    return {"Nodes": nodes, "Services": services, "Partitions": partitions}


def test_the_record_crosses_jit_and_assess_hands_it_back_on_the_host():
    problem, index = encode(parse_state(_tight()))
    node_of, primary_of = jnp.asarray(index.initial_node), jnp.asarray(index.initial_primary)
    found = jax.jit(violations)(problem, node_of, primary_of, node_loads(problem, node_of, primary_of))
    assert isinstance(found, Violations)
    report = assess(problem, index.initial_node, index.initial_primary)
    assert isinstance(report, Assessment) and isinstance(report.violations, Violations)
    assert all(isinstance(x, np.ndarray) for x in report.violations)
    x = index.partition_rows[[service for service, _ in index.partitions].index("X")][0]
    assert report.violations.placement[x] and int(report.violations.placement.sum()) == 1
    np.testing.assert_array_equal(report.measures, np.asarray(measures(found)))


def test_no_worse_compares_the_enforced_kinds_only():
    before = Violations(*(np.zeros(SHAPES.get(f, (4,))) for f in Violations._fields))
    enforced = np.where(np.arange(CONSTRAINTS) == UNPLACED, -2, 0)  # as `priorities_of`: unplaced ranks apart
    for field in Violations._fields:
        after = before._replace(**{field: np.ones(SHAPES.get(field, (4,)))})
        kind = Violations._fields.index(field) if field in Violations._fields[:CONSTRAINTS] else MEASURED_WITH[field]
        assert no_worse(before, after, enforced) == (kind is None or kind == UNPLACED), field
        assert no_worse(before, after, np.full(CONSTRAINTS, -1))
        assert no_worse(after, before, enforced)
