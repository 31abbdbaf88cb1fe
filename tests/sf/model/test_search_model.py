"""Service Fabric's search: the model's contract (`anneal.check_model`), every chain's validity, plans."""

from __future__ import annotations

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checker import document_with, no_new_violations, placement_of, violations
from conftest import QUICK, cluster, model_check, packed_cluster, searchable

from plbjax import anneal as A
from plbjax.anneal import _driver
from plbjax.sf import parse_state
from plbjax.sf._encoding.decoding import apply_actions
from plbjax.sf._model import chain as S
from plbjax.sf._model.constraints import domain_violations_of
from plbjax.sf._model.moves import DRAWS
from plbjax.sf._plan.planning import plan

pytestmark = pytest.mark.slow  # model checks on random clusters, each a search of its own


def _hot(problem, temperature: float, steps: int, n: int = 8, config=QUICK.kernel):
    """n chains after `steps` steps at `temperature` (no refresh)."""
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    return A.hot_chains(S.model(), problem, config, keys, steps, temperature)


# the state's fields `refresh` recomputes (the leaf-domain loads only with defragmentation)
RECOMPUTED = ("node_of", "primary_of", "loads", "local", "g_total", "l_total", "local_score", "cost", "moves", "energy")
DEFRAG = ("fd_loads", "ud_loads", "fd_total", "ud_total")


@pytest.mark.parametrize("parallel", [False, True], ids=["first", "parallel"])
@pytest.mark.parametrize("seed", [0, 1, "featured"])
def test_the_model_passes_the_model_check(states, seed, parallel):
    """Incremental statistics equal recomputation (the energy SF's exact one), a parallel step equals
    its kept moves one by one, the same key the same chain; `featured`: affinity parents move with a
    child, and defragmentation keeps leaf-domain loads."""
    problem, _ = searchable(_featured_state(5) if seed == "featured" else states[seed])
    assert problem.cluster.features.defrag == problem.cluster.features.affinity == (seed == "featured")
    config = A.KernelConfig(tries=16, parallel=True, room=16) if parallel else QUICK.kernel
    report = model_check(problem, config, RECOMPUTED + (DEFRAG if problem.cluster.features.defrag else ()))
    assert report.valid > 20 and report.kept >= (5 if parallel else 1)


@eqx.filter_jit
def _finished(problem, state, key):
    """256 random proposals from one state, finished: (valid, energies, each one's domain violations
    after it and their recomputation, the energy bound `propose` gave, whether it may be valid)."""
    words = jax.random.bits(key, (256, DRAWS), jnp.uint32)
    moves, bound, maybe, changes = S.propose(problem, state, words, 0.3)
    moves, energies, valid, changes = S.finish(problem, state, moves, changes)

    def one(move, energy, change):
        after = S.apply_one(problem, state, move, jnp.asarray(True), energy, change)
        return after.domain_violations, domain_violations_of(problem.cluster, after.node_of)

    domains, exact = jax.vmap(one)(moves, energies, changes)
    return valid, energies, domains, exact, bound, maybe


def test_finishing_only_rules_moves_out_and_keeps_domain_violations_exact(states):
    """`propose` gives a lower bound and a necessary condition; `finish` the domain violations each
    move leaves, which `refresh` does not recompute (the model check cannot see them)."""
    for state in states[:2] + [_featured_state(5)]:
        problem, _ = searchable(state)
        chain = jax.tree.map(lambda x: x[0], _hot(problem, 5.0, 300).state)
        valid, energies, domains, exact, bound, maybe = _finished(problem, chain, jax.random.PRNGKey(1))
        assert valid.dtype == bool and int(valid.sum()) > 20
        assert not np.any(np.asarray(valid & ~maybe))  # finishing only ever rules moves out
        assert np.all(np.asarray(bound) <= np.asarray(energies) * (1 + 1e-6))
        np.testing.assert_array_equal(np.asarray(domains)[valid], np.asarray(exact)[valid])


def test_every_chain_state_respects_hard_constraints(states, documents):
    """Run hot (many accepted moves) and check every chain's placement with the independent checker."""
    for state, doc in zip(states, documents):
        problem, index = searchable(state)
        chains = _hot(problem, 50.0, 1500)
        before = violations(state, placement_of(doc))
        for c in range(chains.state.node_of.shape[0]):
            after_doc = document_with(state, index, chains.state.node_of[c], chains.state.primary_of[c])
            assert no_new_violations(before, violations(state, placement_of(after_doc))) == []


def test_existing_violation_is_never_made_worse():
    """A cluster whose placement already breaks fault-domain spread still only gets valid moves."""
    doc = packed_cluster()
    state = parse_state(doc)
    problem, index = searchable(state)
    chains = _hot(problem, 50.0, 1500)
    before = violations(state, placement_of(doc))
    assert before["fault_domain"]
    for c in range(chains.state.node_of.shape[0]):
        after = violations(
            state, placement_of(document_with(state, index, chains.state.node_of[c], chains.state.primary_of[c]))
        )
        assert no_new_violations(before, after) == []


@pytest.mark.parametrize(
    "config", [QUICK, dataclasses.replace(QUICK, chains=1, tries=16, parallel=True, room=4)], ids=["chains", "parallel"]
)
def test_plans_on_random_clusters_improve_and_break_nothing(states, documents, config):
    for state, doc in zip(states, documents):
        result = plan(state, config).document()
        assert result["Phases"][2]["Ran"]
        assert result["Score"]["After"] < result["Score"]["Before"]
        assert result["Actions"]
        after_doc = apply_actions(doc, result["Actions"])
        assert no_new_violations(violations(state, placement_of(doc)), violations(state, placement_of(after_doc))) == []
        assert doc == state.document  # the input is not changed


def test_same_seed_same_plan_and_seed_matters(states):
    a = plan(states[2], QUICK).document()
    b = plan(states[2], QUICK).document()
    assert json.dumps(a["Actions"]) == json.dumps(b["Actions"])
    assert a["Score"] == b["Score"]
    c = plan(states[2], dataclasses.replace(QUICK, seed=5)).document()
    assert c["Search"]["Seed"] == 5


def test_balanced_cluster_moves_nothing(documents):
    # skewed clusters have empty nodes (min 0: imbalanced at any ratio), so the activity threshold decides
    doc = dict(documents[0], MetricActivityThresholds={"Metric0": 10**6, "Metric1": 10**6})
    result = plan(parse_state(doc), QUICK).document()
    assert result["Actions"] == []
    assert result["Phases"][2] == {"Phase": "Balancing", "Ran": False, "Reason": "every metric is balanced"}
    assert all(b["IsBalancedBefore"] for b in result["Balance"])


def test_missing_replica_is_placed(documents):
    doc = json.loads(json.dumps(documents[0]))
    part = next(p for p in doc["Partitions"] if p["Replicas"][0]["Role"] == "Primary")
    gone = part["Replicas"].pop()  # one secondary short of the target
    result = plan(parse_state(doc), QUICK).document()
    adds = [a for a in result["Actions"] if a["Action"].startswith("Add")]
    assert [(a["Action"], a["PartitionId"], a["ReplicaId"]) for a in adds] == [
        ("AddSecondary", part["PartitionId"], None)
    ]
    assert result["Unplaced"] == [] and result["Phases"][0]["Ran"]
    assert adds[0]["TargetNode"] not in {r["NodeName"] for r in part["Replicas"]}
    assert gone["NodeName"]  # the test removed a placed replica


def _featured_state(seed: int):
    """A test cluster with affinity (Svc1 follows Svc0) and a defragmentation metric."""
    doc = cluster(seed)
    doc["Services"][1]["Correlations"] = [{"ServiceName": doc["Services"][0]["ServiceName"], "Scheme": "Affinity"}]
    doc["DefragmentationMetrics"] = {"Metric1": True}
    return parse_state(doc)


def test_parallel_search_keeps_every_chain_valid(states, documents):
    """Many moves a step (disjoint footprints; the first 16 proposals that may be accepted finished):
    no hard constraint broken."""
    problem, index = searchable(states[2])
    config = dataclasses.replace(QUICK, tries=32, parallel=True, room=16)
    chains = _hot(problem, 5.0, 200, n=4, config=config.kernel)
    assert int(chains.accepted.sum()) > 4 * 200
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
    result = plan(states[0], dataclasses.replace(QUICK, chains=4, tries=4, steps=500, block_steps=250)).document()
    assert calls[:4] == [(4, 4), (2, 4), (1, 4), (1, 2)]
    assert result["Search"]["Chains"] == 1
    assert result["Search"]["DeviceMemory"].startswith("out of device memory: 1 chain(s) x 2 tries")
