"""The numba benchmark baseline (plbjax.baseline) anneals the same problem plbjax does.

Its reported best energy must be the SF energy of its best placement (recomputed by plbjax), and
that placement must break no constraint that held. Skipped without numba (a benchmark-only extra).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("numba")

from checker import document_with, no_new_violations, placement_of, violations
from conftest import cluster, packed_cluster

from plbjax.baseline import balancing_problem, probe_temperature, run_baseline
from plbjax.baseline import domain_violation as nb_domain_violation
from plbjax.baseline import energy as nb_energy
from plbjax.sf import (
    encode,
    full_scope,
    parse_state,
    scope,
)
from plbjax.sf._model import energy as E
from plbjax.sf._model.constraints import domain_violation


def _check(doc, out):
    state = parse_state(doc)
    problem, index = balancing_problem(state)
    exact = float(
        E.energy_of(problem, jnp.asarray(out["node_of"], jnp.int32), jnp.asarray(out["primary_of"], jnp.int32))
    )
    np.testing.assert_allclose(exact, out["best_energy"], rtol=1e-4)
    np.testing.assert_allclose(nb_energy(problem, out["node_of"], out["primary_of"]), out["best_energy"], rtol=1e-9)
    after = violations(state, placement_of(document_with(state, index, out["node_of"], out["primary_of"])))
    assert no_new_violations(violations(state, placement_of(doc)), after) == []


def test_annealed_best_is_exact_and_valid():
    doc = cluster(0)
    problem, _ = balancing_problem(parse_state(doc))
    t0 = probe_temperature(problem, seed=0)
    out = run_baseline(problem, steps=30_000, seed=0, t0=t0, checkpoints=4)
    assert out["best_energy"] < 0.8 * out["initial_energy"]
    assert out["accepted"] > 100
    times = [t for t, _ in out["energy_trace"]]
    bests = [e for _, e in out["energy_trace"]]
    assert len(out["energy_trace"]) == 5 and times == sorted(times) and bests == sorted(bests, reverse=True)
    _check(doc, out)


def test_hot_walk_keeps_best_and_constraints():
    """Constant high temperature: many accepted moves, the undo log overflows and is materialised."""
    doc = cluster(1)
    problem, _ = balancing_problem(parse_state(doc))
    out = run_baseline(problem, steps=20_000, seed=3, t0=1e6, final_ratio=1.0, checkpoints=3, refresh_steps=1_000)
    assert out["accepted"] > 2_000
    _check(doc, out)


def test_existing_violation_is_never_made_worse():
    doc = packed_cluster()
    problem, _ = balancing_problem(parse_state(doc))
    out = run_baseline(problem, steps=10_000, seed=1, t0=1e6, final_ratio=1e-6, checkpoints=2)
    _check(doc, out)


def test_domain_violation_matches_plbjax():
    """The numba domain measure equals plbjax's on random partitions of a two-level fault-domain tree."""
    problem, _ = encode(parse_state(cluster(2, racks_per_fault_domain=2, fault_domains=3)))
    rng = np.random.default_rng(0)
    fd_tree, fd_children = np.asarray(problem.fd_tree), np.asarray(problem.fd_children)
    ud_tree, ud_children = np.asarray(problem.ud_tree), np.asarray(problem.ud_children)
    n_nodes = 20
    sets = []
    for _ in range(200):
        k = rng.integers(1, 5)
        nodes = np.full(4, -1, np.int64)
        nodes[:k] = rng.choice(n_nodes, size=k, replace=False)
        sets.append(rng.permutation(nodes))
    sets = np.array(sets)
    cls = jnp.zeros((), jnp.int32)
    fd_usable, ud_usable = np.asarray(problem.fd_usable), np.asarray(problem.ud_usable)
    for tree, children, usable, nonpacking in (
        (fd_tree, fd_children, fd_usable, False),
        (ud_tree, ud_children, ud_usable, False),
        (fd_tree, fd_children, fd_usable, True),
    ):
        want = jax.vmap(domain_violation, in_axes=(None, None, None, 0, None, None))(
            jnp.asarray(tree),
            jnp.asarray(children),
            jnp.asarray(usable),
            jnp.asarray(sets, jnp.int32),
            cls,
            jnp.asarray(nonpacking),
        )
        got = [
            nb_domain_violation(tree.astype(np.int64), children.astype(np.int64), usable, s, 0, nonpacking)
            for s in sets
        ]
        assert got == np.asarray(want).tolist()
        assert max(got) > 0


def test_violation_penalties_match_plbjax():
    """With nothing enforced, a hot walk places, misplaces and overloads freely: the baseline's
    energy (with the violation penalties) still equals plbjax's for its best placement."""
    doc = cluster(3)
    doc["Partitions"][0]["Replicas"].pop()  # a replica to place
    doc["Partitions"][5]["Replicas"].pop()
    doc["Nodes"][0]["Capacities"] = {m: 5 for m in doc["Nodes"][0]["Capacities"]}  # over capacity
    doc["Services"][1]["PlacementConstraints"] = "NodeColor != Blue"  # misplaced replicas
    problem, index = encode(parse_state(doc))
    everything = full_scope(problem, index, enforce=False)  # nothing enforced
    placing = np.arange(index.initial_node.shape[0]) < index.n_replicas  # unplaced replicas move too
    scoped = scope(problem, index.initial_node, index.initial_primary, dataclasses.replace(everything, movable=placing))
    initial = float(E.energy_of(scoped, scoped.scope.origin_node, scoped.scope.origin_primary))
    assert initial > 1e5  # penalties are in
    for seed, t0 in ((0, 1e9), (1, 1e4)):
        out = run_baseline(scoped, steps=20_000, seed=seed, t0=t0, final_ratio=1e-6, checkpoints=2, refresh_steps=1_000)
        np.testing.assert_allclose(out["initial_energy"], initial, rtol=1e-4)
        assert out["accepted"] > 1_000
        exact = float(
            E.energy_of(scoped, jnp.asarray(out["node_of"], jnp.int32), jnp.asarray(out["primary_of"], jnp.int32))
        )
        np.testing.assert_allclose(exact, out["best_energy"], rtol=1e-4)
    assert out["best_energy"] < 0.5 * initial
