"""The search engine: incremental energy, constraint validity of every chain, decoding, determinism."""

from __future__ import annotations

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checker import document_with, no_new_violations, placement_of, violations
from conftest import QUICK, cluster, packed_cluster, searchable

from plbjax import anneal as A
from plbjax.anneal import _driver, _kernel
from plbjax.sf import _energy as E
from plbjax.sf import _model as S
from plbjax.sf._constraints import domain_violations_of
from plbjax.sf._decoding import apply_actions, diff, settle
from plbjax.sf._moves import DRAWS
from plbjax.sf._phases import plan
from plbjax.sf._state import parse_state


@eqx.filter_jit
def _steps(problem, config, chains, temperature, n: int):
    """n raw steps (no refresh) on every chain."""

    def body(_, c):
        return jax.vmap(A.step, in_axes=(None, None, None, 0, None))(S.model(), problem, config, c, temperature)

    return jax.lax.fori_loop(0, n, body, chains)


@eqx.filter_jit
def _move_energies(problem, chain, key):
    """For 256 random proposals from one chain, finished: (valid, incremental energy, recomputed
    energy, each one's state after it, the energy bound `propose` gave, whether it may be valid)."""
    words = jax.random.bits(key, (256, DRAWS), jnp.uint32)
    moves, bound, maybe, changes = S.propose(problem, chain, words, 0.3)
    moves, energies, valid, changes = S.finish(problem, chain, moves, changes)

    def one(move, energy, change):
        after = S.apply_one(problem, chain, move, jnp.asarray(True), energy, change)
        return E.energy_of(problem, after.node_of, after.primary_of), after

    exact, after = jax.vmap(one)(moves, energies, changes)
    return valid, energies, exact, after, bound, maybe


def _chains(problem, n=8, seed=0):
    return A.init_chains(S.model(), problem, jax.random.split(jax.random.PRNGKey(seed), n))


def test_move_energy_equals_recomputation(states):
    for state in states[:2] + [_featured_state(5)]:  # the last: affinity parents move with a child
        problem, _ = searchable(state)
        chains = _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(5.0), 300)
        chain = jax.tree.map(lambda x: x[0], chains.state)
        valid, incremental, exact, after, bound, maybe = _move_energies(problem, chain, jax.random.PRNGKey(1))
        assert valid.dtype == bool and int(valid.sum()) > 20
        assert not np.any(np.asarray(valid & ~maybe))  # finishing only ever rules moves out
        assert np.all(np.asarray(bound) <= np.asarray(incremental) * (1 + 1e-6))
        np.testing.assert_allclose(np.asarray(incremental)[valid], np.asarray(exact)[valid], rtol=2e-5)
        recomputed = jax.jit(jax.vmap(domain_violations_of, in_axes=(None, 0)))(problem.cluster, after.node_of)
        np.testing.assert_array_equal(np.asarray(after.domain_violations)[valid], np.asarray(recomputed)[valid])
        loads = jax.vmap(E.node_loads, in_axes=(None, 0, 0))(problem.cluster, after.node_of, after.primary_of)
        np.testing.assert_allclose(np.asarray(after.loads)[valid], np.asarray(loads)[valid], atol=1e-3)


def test_running_energy_equals_recomputation(states):
    problem, _ = searchable(states[0])
    chains = _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(2.0), 2000)
    exact = jax.jit(jax.vmap(E.energy_of, in_axes=(None, 0, 0)))(problem, chains.state.node_of, chains.state.primary_of)
    np.testing.assert_allclose(np.asarray(chains.state.energy), np.asarray(exact), rtol=1e-4)
    assert int(chains.accepted.sum()) > 100


def test_every_chain_state_respects_hard_constraints(states, documents):
    """Run hot (many accepted moves) and check every chain's placement with the independent checker."""
    for state, doc in zip(states, documents):
        problem, index = searchable(state)
        chains = _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(50.0), 1500)
        before = violations(state, placement_of(doc))
        for c in range(chains.state.node_of.shape[0]):
            after_doc = document_with(state, index, chains.state.node_of[c], chains.state.primary_of[c])
            assert no_new_violations(before, violations(state, placement_of(after_doc))) == []


def test_existing_violation_is_never_made_worse():
    """A cluster whose placement already breaks fault-domain spread still only gets valid moves."""
    doc = packed_cluster()
    state = parse_state(doc)
    problem, index = searchable(state)
    chains = _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(50.0), 1500)
    before = violations(state, placement_of(doc))
    assert before["fault_domain"]
    for c in range(chains.state.node_of.shape[0]):
        after = violations(
            state, placement_of(document_with(state, index, chains.state.node_of[c], chains.state.primary_of[c]))
        )
        assert no_new_violations(before, after) == []


def test_decoded_actions_reproduce_every_chain(states):
    state = states[1]
    problem, index = searchable(state)
    chains = _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(50.0), 1000)
    for c in range(chains.state.node_of.shape[0]):
        node_of, primary_of = settle(index, np.asarray(chains.state.node_of[c]), np.asarray(chains.state.primary_of[c]))
        actions = diff(index, node_of, primary_of)
        got = {
            str(r["ReplicaId"]): (r["NodeName"], r["Role"])
            for p in apply_actions(state.document, actions)["Partitions"]
            for r in p["Replicas"]
        }
        for r in range(index.n_replicas):
            p = int(problem.cluster.replica_partition[r])
            role = "Primary" if primary_of[p] == r else ("Secondary" if index.stateful[p] else "Instance")
            assert got[str(index.replica_ids[r])] == (index.nodes[node_of[r]], role)
        # minimal: one move per replica whose node changed, one swap per changed primary
        assert sum(a["Action"] != "SwapPrimarySecondary" for a in actions) == int(
            (node_of != index.initial_node)[: index.n_replicas].sum()
        )
        assert sum(a["Action"] == "SwapPrimarySecondary" for a in actions) == int(
            (primary_of != index.initial_primary)[: index.n_partitions].sum()
        )


def test_diff_is_net_of_intermediate_steps(states):
    state = states[0]
    problem, index = searchable(state)
    node_of, primary_of = index.initial_node.copy(), index.initial_primary.copy()
    assert diff(index, node_of, primary_of) == []  # nothing changed
    p = next(p for p in range(index.n_partitions) if index.stateful[p])
    rows = index.partition_rows[p]
    used = {int(index.initial_node[r]) for r in rows}
    free = [n for n in range(index.n_nodes) if n not in used]
    a, b = [r for r in rows if r != index.initial_primary[p]][:2]
    original = int(node_of[a])
    node_of[a] = free[0]  # N1 -> N2
    node_of[a] = free[1]  # N2 -> N3
    actions = diff(index, node_of, primary_of)
    assert [(x["Action"], x["SourceNode"], x["TargetNode"]) for x in actions] == [
        ("MoveSecondary", index.nodes[original], index.nodes[free[1]])
    ]
    node_of[a] = original  # and back
    assert diff(index, node_of, primary_of) == []
    node_of[a], node_of[b] = node_of[b], node_of[a]  # a rotation cannot be executed
    with pytest.raises(ValueError):
        diff(index, node_of, primary_of)
    assert diff(index, *settle(index, node_of, primary_of)) == []
    node_of = index.initial_node.copy()
    node_of[b] = free[0]  # b leaves, a takes b's node
    node_of[a] = index.initial_node[b]
    actions = diff(index, node_of, primary_of)
    assert [x["ReplicaId"] for x in actions] == [index.replica_ids[b], index.replica_ids[a]]
    primary_of[p] = a  # and a becomes primary: swap first
    actions = diff(index, node_of, primary_of)
    assert [x["Action"] for x in actions] == ["SwapPrimarySecondary", "MoveSecondary", "MovePrimary"]
    apply_actions(state.document, actions)


@pytest.mark.parametrize(
    "config", [QUICK, dataclasses.replace(QUICK, chains=1, tries=16, parallel=True, room=4)], ids=["chains", "parallel"]
)
def test_plans_on_random_clusters_improve_and_break_nothing(states, documents, config):
    for state, doc in zip(states, documents):
        result = plan(state, config)
        assert result["Phases"][2]["Ran"]
        assert result["Score"]["After"] < result["Score"]["Before"]
        assert result["Actions"]
        after_doc = apply_actions(doc, result["Actions"])
        assert no_new_violations(violations(state, placement_of(doc)), violations(state, placement_of(after_doc))) == []
        assert doc == state.document  # the input is not changed


def test_same_seed_same_plan_and_seed_matters(states):
    a = plan(states[2], QUICK)
    b = plan(states[2], QUICK)
    assert json.dumps(a["Actions"]) == json.dumps(b["Actions"])
    assert a["Score"] == b["Score"]
    c = plan(states[2], dataclasses.replace(QUICK, seed=5))
    assert c["Search"]["Seed"] == 5


def test_balanced_cluster_moves_nothing(documents):
    # skewed clusters have empty nodes (min 0: imbalanced at any ratio), so the activity threshold decides
    doc = dict(documents[0], MetricActivityThresholds={"Metric0": 10**6, "Metric1": 10**6})
    result = plan(parse_state(doc), QUICK)
    assert result["Actions"] == []
    assert result["Phases"][2] == {"Phase": "Balancing", "Ran": False, "Reason": "every metric is balanced"}
    assert all(b["IsBalancedBefore"] for b in result["Balance"])


def test_missing_replica_is_placed(documents):
    doc = json.loads(json.dumps(documents[0]))
    part = next(p for p in doc["Partitions"] if p["Replicas"][0]["Role"] == "Primary")
    gone = part["Replicas"].pop()  # one secondary short of the target
    result = plan(parse_state(doc), QUICK)
    adds = [a for a in result["Actions"] if a["Action"].startswith("Add")]
    assert [(a["Action"], a["PartitionId"], a["ReplicaId"]) for a in adds] == [
        ("AddSecondary", part["PartitionId"], None)
    ]
    assert result["Unplaced"] == [] and result["Phases"][0]["Ran"]
    assert adds[0]["TargetNode"] not in {r["NodeName"] for r in part["Replicas"]}
    assert gone["NodeName"]  # the test removed a placed replica


def test_multi_try_step_is_the_sequential_chain_stopping_at_its_first_acceptance(states):
    """A step over T proposals = trying them one by one from the same state until one is accepted."""
    problem, _ = searchable(states[0])
    config = dataclasses.replace(QUICK, tries=16)
    chains = _steps(problem, QUICK.kernel, _chains(problem, n=4), jnp.float32(2.0), 100)
    temperature = jnp.float32(0.02)
    for c in range(4):
        chain = jax.tree.map(lambda x: x[c], chains)
        after = eqx.filter_jit(A.step)(S.model(), problem, config.kernel, chain, temperature)
        n = DRAWS + 1
        tries, _ = _kernel.proposal_words(chain.key, config.tries, n)
        state = chain.state
        moves, _, _, stats = jax.jit(S.propose, static_argnums=3)(problem, state, tries, config.swap_probability)
        moves, energies, valid, stats = jax.jit(S.finish)(problem, state, moves, stats)
        for i, words in enumerate(tries):
            delta = float(energies[i] - state.energy)
            if bool(valid[i]) and (delta <= 0 or float(A.uniform(words[DRAWS])) < np.exp(-delta / float(temperature))):
                move, change = jax.tree.map(lambda x: x[i], (moves, stats))
                state = jax.jit(S.apply_one)(problem, state, move, jnp.asarray(True), energies[i], change)
                break
        np.testing.assert_array_equal(after.state.node_of, state.node_of)
        np.testing.assert_array_equal(after.state.primary_of, state.primary_of)
        np.testing.assert_allclose(after.state.energy, state.energy, rtol=1e-6)


def test_screening_finishes_only_what_may_be_accepted_and_changes_nothing(states):
    """A parallel step that finishes (domain checks) only the first `room` proposals passing the
    lower-bound screen leaves the state of the step that finishes all of them, when no more than
    `room` pass."""
    problem, _ = searchable(states[1])
    chains = _steps(problem, QUICK.kernel, _chains(problem, n=4), jnp.float32(2.0), 100)
    every, screened = (dataclasses.replace(QUICK, tries=64, parallel=True, room=r) for r in (64, 24))
    for c in range(4):
        chain = jax.tree.map(lambda x: x[c], chains)
        a = eqx.filter_jit(A.step)(S.model(), problem, every.kernel, chain, jnp.float32(0.05))
        b = eqx.filter_jit(A.step)(S.model(), problem, screened.kernel, chain, jnp.float32(0.05))
        assert int(a.accepted - chain.accepted) > 0
        for name in ("node_of", "primary_of", "domain_violations", "energy"):
            np.testing.assert_array_equal(getattr(a.state, name), getattr(b.state, name), err_msg=name)


def test_room_defaults_to_a_sixteenth_of_the_tries():
    assert [A.KernelConfig(tries=t).step_room for t in (1, 256, 4096, 65536)] == [32, 32, 256, 4096]
    assert A.KernelConfig(tries=65536, room=5).step_room == 5


def test_population_resampling_draws_states_by_boltzmann_weight(states):
    """Each chain's state becomes a copy of some chain's state, about n x its weight share of copies
    each; keys and best records stay; no cooling leaves the chains alone."""
    problem, _ = searchable(states[0])
    chains = _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(50.0), 200)
    energy = np.asarray(chains.state.energy, np.float64)
    assert len(np.unique(energy)) > 1
    resample = eqx.filter_jit(A.resample)
    for t_start, t_end in [(1.0, 0.5), (0.2, 0.1), (1.0, 1e-6)]:
        after = resample(chains, jnp.float32(t_start), jnp.float32(t_end))
        parents = [
            int(np.flatnonzero((np.asarray(chains.state.node_of) == row).all(axis=1) & (energy == e))[0])
            for row, e in zip(np.asarray(after.state.node_of), np.asarray(after.state.energy, np.float64))
        ]
        weight = np.exp(-(1 / t_end - 1 / t_start) * (energy - energy.min()))
        expected = len(energy) * weight / weight.sum()
        copies = np.bincount(parents, minlength=len(energy))
        assert np.all(copies >= np.floor(expected - 1e-4)) and np.all(copies <= np.ceil(expected + 1e-4))
        np.testing.assert_array_equal(after.key, chains.key)
        np.testing.assert_array_equal(after.best_energy, chains.best_energy)
    coldest = resample(chains, jnp.float32(1.0), jnp.float32(1e-6))
    np.testing.assert_array_equal(np.asarray(coldest.state.energy), np.full(len(energy), energy.min(), np.float32))
    for t_start, t_end in [(0.0, 0.0), (1.0, 1.0)]:
        same = resample(chains, jnp.float32(t_start), jnp.float32(t_end))
        np.testing.assert_array_equal(same.state.node_of, chains.state.node_of)


def _featured_state(seed: int):
    """A test cluster with affinity (Svc1 follows Svc0) and a defragmentation metric."""
    doc = cluster(seed)
    doc["Services"][1]["Correlations"] = [{"ServiceName": doc["Services"][0]["ServiceName"], "Scheme": "Affinity"}]
    doc["DefragmentationMetrics"] = {"Metric1": True}
    return parse_state(doc)


def test_independent_moves_by_pairs_and_by_tables_agree_with_the_rule():
    """Both ways of picking independent proposals keep exactly what the round rule keeps, computed here
    one proposal at a time: a proposal sharing no id with a kept one is kept when no earlier open
    proposal shares an id with it."""
    rng = np.random.default_rng(0)
    for trial in range(20):
        ids = np.where(rng.random((48, 8)) < 0.5, -1, rng.integers(0, 60, (48, 8)))
        accepts = rng.random(48) < 0.7
        keep = np.zeros(48, bool)
        for _ in range(3):
            shares = lambda i, j: bool(set(ids[i][ids[i] >= 0]) & set(ids[j][ids[j] >= 0]))
            open_ = [
                accepts[i] and not keep[i] and not any(keep[j] and shares(i, j) for j in range(48)) for i in range(48)
            ]
            keep = keep | [open_[i] and not any(open_[j] and shares(i, j) for j in range(i)) for i in range(48)]
        for n_ids in (60, 1 << 20):  # tables over 60 ids; all pairs (a huge id space)
            np.testing.assert_array_equal(_kernel._independent(jnp.asarray(ids), jnp.asarray(accepts), n_ids), keep)


@eqx.filter_jit
def _finished(problem, state, words):
    """A batch of proposals, finished: (moves, energies, valid, changes)."""
    moves, _, _, changes = S.propose(problem, state, words, 0.3)
    return S.finish(problem, state, moves, changes)


@pytest.mark.parametrize("featured", [False, True])
def test_parallel_step_equals_its_kept_moves_applied_one_by_one(states, featured):
    """Accepted proposals with disjoint footprints applied together = applied in order, each
    re-proposed from the same words on the state its predecessors left: same move, still valid,
    same statistics; the energy is the recomputed one."""
    problem, _ = searchable(_featured_state(5) if featured else states[1])
    assert problem.cluster.features.defrag == problem.cluster.features.affinity == featured
    chain = jax.tree.map(lambda x: x[0], _steps(problem, QUICK.kernel, _chains(problem), jnp.float32(5.0), 300))
    state = chain.state
    words = jax.random.bits(jax.random.PRNGKey(3), (256, DRAWS), jnp.uint32)
    moves, energies, valid, changes = _finished(problem, state, words)
    ids = jax.vmap(S.footprint, in_axes=(None, None, 0))(problem, state, moves)
    keep = _kernel._independent(ids, valid, S.footprint_ids(problem))
    together = jax.jit(S.apply)(problem, state, moves, keep, energies, changes)
    one_by_one = state
    for i in np.flatnonzero(np.asarray(keep)):
        move, energy, ok, change = jax.tree.map(lambda x: x[i : i + 1], _finished(problem, one_by_one, words))
        assert bool(ok[0]) and int(move.replica[0]) == int(moves.replica[i])
        assert int(move.target[0]) == int(moves.target[i])
        np.testing.assert_allclose(change.g_sq[0], changes.g_sq[i], rtol=1e-5, atol=1e-3)
        one_by_one = jax.jit(S.apply)(problem, one_by_one, move, ok, energy, change)
    assert int(keep.sum()) >= 5
    for name in ("node_of", "primary_of", "domain_violations"):
        np.testing.assert_array_equal(getattr(together, name), getattr(one_by_one, name), err_msg=name)
    for name in (
        "loads",
        "local",
        "fd_loads",
        "ud_loads",
        "g_total",
        "g_sq",
        "l_total",
        "l_sq",
        "local_score",
        "cost",
        "moves",
        "penalty",
        "energy",
    ):
        np.testing.assert_allclose(
            getattr(together, name), getattr(one_by_one, name), rtol=1e-5, atol=1e-3, err_msg=name
        )
    exact = jax.jit(S.refresh)(problem, together)
    np.testing.assert_allclose(together.energy, exact.energy, rtol=2e-5)
    np.testing.assert_allclose(together.loads, exact.loads, atol=1e-3)


def test_parallel_search_keeps_every_chain_valid(states, documents):
    """Many moves a step (disjoint footprints; the first 16 proposals that may be accepted finished):
    no hard constraint broken, the running energy exact."""
    problem, index = searchable(states[2])
    config = dataclasses.replace(QUICK, tries=32, parallel=True, room=16)
    chains = _steps(problem, config.kernel, _chains(problem, n=4), jnp.float32(5.0), 200)
    assert int(chains.accepted.sum()) > 4 * 200
    exact = jax.jit(jax.vmap(E.energy_of, in_axes=(None, 0, 0)))(problem, chains.state.node_of, chains.state.primary_of)
    np.testing.assert_allclose(chains.state.energy, exact, rtol=5e-5)
    before = violations(states[2], placement_of(documents[2]))
    for c in range(4):
        after = document_with(states[2], index, chains.state.node_of[c], chains.state.primary_of[c])
        assert no_new_violations(before, violations(states[2], placement_of(after))) == []


def test_out_of_device_memory_retries_with_fewer_chains_and_says_so(states, monkeypatch):
    """A search that runs out of device memory starts again with half the chains (one chain: half
    the tries) until it fits, and the plan says so."""
    compile_blocks, calls = _driver._compiled_blocks, []

    def tight(model, problem, chains, kernel):
        calls.append((chains.key.shape[0], kernel.tries))
        if chains.key.shape[0] * kernel.tries > 2:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return compile_blocks(model, problem, chains, kernel)

    monkeypatch.setattr(_driver, "_compiled_blocks", tight)
    result = plan(states[0], dataclasses.replace(QUICK, chains=4, tries=4, steps=500, block_steps=250))
    assert calls[:4] == [(4, 4), (2, 4), (1, 4), (1, 2)]
    assert result["Search"]["Chains"] == 1
    assert result["Search"]["DeviceMemory"].startswith("out of device memory: 1 chain(s) x 2 tries")
