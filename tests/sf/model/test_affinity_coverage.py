"""Affinity with children of larger target (SF's AllowHigherChildTargetReplicaCountForAffinity,
AffinityConstraint::GetInvalidReplicas): a child partition with more replicas than its parent and
one beside every parent replica has no replica in violation; each move's affinity change is exact
(`anneal.check_model`) though it flips the violation of the child's other replicas."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import QUICK, searchable
from sf_affinity_cases import document, fu, nodes, stateful

from plbjax import anneal as A
from plbjax.sf import parse_state
from plbjax.sf._encoding import encode
from plbjax.sf._model import chain as S
from plbjax.sf._model import energy as E
from plbjax.sf._model import violations
from plbjax.sf._model.energy import node_loads

pytestmark = pytest.mark.slow  # searches checked step by step


def _state(child: str):
    """A parent of three replicas on N0-N2 and an aligned child of five, laid out as `child`."""
    services = [stateful("S0", 3), stateful("S1", 5, "S0"), stateful("S2", 3, "S0")]
    partitions = [fu("S0", 0, "P/0, S/1, S/2"), fu("S1", 1, child), fu("S2", 2, "P/0, S/1, S/3")]
    return parse_state(document(services, partitions, nodes(6)))


def _strays(child: str) -> list[str]:
    problem, index = encode(_state(child))
    node_of, primary_of = jnp.asarray(index.initial_node), jnp.asarray(index.initial_primary)
    report = violations(problem, node_of, primary_of, node_loads(problem, node_of, primary_of))
    return [str(index.replica_ids[r]) for r in np.flatnonzero(np.asarray(report.affinity)[: index.n_replicas])]


def test_a_covering_child_of_larger_target_has_no_stray():
    """Child 1 is beside every parent replica: its two others are free; child 2 (target 3, as its
    parent's) has its N3 secondary astray."""
    assert _strays("P/0, S/1, S/2, S/3, S/4") == ["2.2"]


def test_a_child_that_leaves_a_parent_replica_uncovered_has_every_stray_in_violation():
    """Child 1 leaves the parent's N2 uncovered: its replicas off the parent's nodes are in violation."""
    assert _strays("P/0, S/1, S/3, S/4, S/5") == ["1.2", "1.3", "1.4", "2.2"]


def test_moves_keep_the_affinity_measure_exact():
    """Incremental energies (the affinity change of each move included) equal recomputation."""
    problem, _ = searchable(_state("P/0, S/1, S/3, S/4, S/5"), enforce=False)
    report = A.check_model(
        S.model(),
        problem,
        jax.random.PRNGKey(1),
        QUICK.kernel,
        tolerance=A.Tolerance(rtol=2e-5, atol=1e-3),
        fields=(
            "node_of",
            "primary_of",
            "loads",
            "local",
            "g_total",
            "l_total",
            "local_score",
            "cost",
            "moves",
            "energy",
        ),
        energy=lambda p, solution: E.energy_of(p, *solution),
    )
    assert report.valid > 20
