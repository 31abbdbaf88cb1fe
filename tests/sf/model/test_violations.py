"""The violations record (`violation_record.Violations`): each field measured in its constraint kind, the
measured order the fields' order, the record crossing `jit`, and the comparisons made on it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from plbjax.sf._encoding import problem as _problem
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._encoding.problem import CAPACITY, CONSTRAINTS, PLACEMENT, PREFERRED, UNPLACED
from plbjax.sf._model.assessment import Assessment, assess, no_worse
from plbjax.sf._model.constraints import measures, violations
from plbjax.sf._model.energy import node_loads
from plbjax.sf._model.violation_record import AppViolations, Violations
from plbjax.sf._state.reading import parse_state

SHAPES = {"capacity": (3, 2), "threshold": (3, 2)}  # per node and metric; the others one per row
MEASURED_WITH = {"away": PREFERRED, "headless": UNPLACED, "exclusion": None}  # fields after the kinds
ARRAYS = tuple(f for f in Violations._fields if f != "apps")  # `apps`: the application groups' record or None
APP_SHAPES = {"scaleout": (2,), "node": (2, 3, 2), "total": (2, 2), "reserved": (3, 2)}  # the others one per row
APP_MEASURED_WITH = {"scaleout": PLACEMENT, "node": CAPACITY, "total": CAPACITY, "reserved": CAPACITY}


def _one(field: str, app_field: str | None = None) -> Violations:
    """A record with 1 in every entry of `field` (of the application groups' record: `app_field`)
    and 0 elsewhere; no application groups unless `app_field`."""
    arrays = {f: jnp.full(SHAPES.get(f, (4,)), float(f == field)) for f in ARRAYS}
    apps = None
    if app_field is not None:
        apps = AppViolations(
            *(jnp.full(APP_SHAPES.get(f, (4,)), float(f == app_field)) for f in AppViolations.__dataclass_fields__)
        )
    return Violations(**arrays, apps=apps)


def test_the_first_fields_are_the_constraint_kinds_in_measured_order():
    kinds = Violations._fields[:CONSTRAINTS]
    assert [getattr(_problem, name.upper()) for name in kinds] == list(range(CONSTRAINTS))
    assert set(ARRAYS[CONSTRAINTS:]) == set(MEASURED_WITH) and Violations._fields[-1] == "apps"


@pytest.mark.parametrize("field", AppViolations.__dataclass_fields__)
def test_each_application_group_field_is_measured_in_its_kind(field):
    """A scaleout violation counts as placement's, an application capacity's and a reservation's as
    capacity's (their SF priorities must be those: `_state.applications.FOLDED_PRIORITIES`); the
    replicas involved are reported only."""
    expected = np.zeros(CONSTRAINTS, np.float32)
    if field in APP_MEASURED_WITH:
        expected[APP_MEASURED_WITH[field]] = np.prod(APP_SHAPES[field])
    np.testing.assert_array_equal(np.asarray(jax.jit(measures)(_one("", field))), expected)


@pytest.mark.parametrize("field", ARRAYS)
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
    assert all(isinstance(x, np.ndarray) for x in report.violations[:-1]) and report.violations.apps is None
    x = index.partition_rows[[service for service, _ in index.partitions].index("X")][0]
    assert report.violations.placement[x] and int(report.violations.placement.sum()) == 1
    np.testing.assert_array_equal(report.measures, np.asarray(measures(found)))


def test_no_worse_compares_the_enforced_kinds_only():
    before = Violations(*(np.zeros(SHAPES.get(f, (4,))) for f in ARRAYS))
    enforced = np.where(np.arange(CONSTRAINTS) == UNPLACED, -2, 0)  # as `priorities_of`: unplaced ranks apart
    for field in ARRAYS:
        after = before._replace(**{field: np.ones(SHAPES.get(field, (4,)))})
        kind = Violations._fields.index(field) if field in Violations._fields[:CONSTRAINTS] else MEASURED_WITH[field]
        assert no_worse(before, after, enforced) == (kind is None or kind == UNPLACED), field
        assert no_worse(before, after, np.full(CONSTRAINTS, -1))
        assert no_worse(after, before, enforced)
