"""SF's compound move (`compound_moves.propose_compound`): where a partition fills its domains evenly, no
replica can move alone; a move and its repairs keep the model's contract and every hard rule."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checker import document_with, no_new_violations, placement_of, violations
from conftest import QUICK, cluster, model_check, searchable

from plbjax import anneal as A
from plbjax.sf import parse_state
from plbjax.sf._model import chain as S
from plbjax.sf._model.compound_moves import propose_compound
from plbjax.sf._model.constraints import NodeLoads, domain_violations_of
from plbjax.sf._model.moves import DRAWS

pytestmark = pytest.mark.slow  # model checks, each a search of its own

FIELDS = ("node_of", "primary_of", "loads", "local", "g_total", "l_total", "local_score", "cost", "moves", "energy")
DEFRAG = ("fd_loads", "ud_loads", "fd_total", "ud_total")


def tight_document(seed: int, defrag: bool = False) -> dict:
    """Sixteen nodes, one for each pair of four fault domains (two racks each) and four upgrade
    domains, and eight four-replica partitions of two services, each with one replica in every
    fault and upgrade domain (a random pairing), under random loads: no replica can move alone."""
    rng = np.random.default_rng(seed)
    metrics = ["Metric0", "Metric1"]
    nodes = [
        {
            "NodeName": f"N{4 * f + u}",
            "FaultDomain": f"fd:/dc{f}/r{u % 2}",
            "UpgradeDomain": f"UD{u}",
            "Capacities": {m: 400 for m in metrics},
        }
        for f in range(4)
        for u in range(4)
    ]
    services = [
        {
            "ServiceName": f"S{s}",
            "ServiceTypeName": "T",
            "ServiceKind": "Stateful",
            "TargetReplicaSetSize": 4,
            "Metrics": [
                {"Name": m, "Weight": "High", "PrimaryDefaultLoad": 10, "SecondaryDefaultLoad": 5} for m in metrics
            ],
        }
        for s in range(2)
    ]
    partitions = []
    for p in range(8):
        ud = rng.permutation(4)
        replicas = [
            {
                "ReplicaId": f"{p}.{f}",
                "Role": "Primary" if f == 0 else "Secondary",
                "NodeName": f"N{4 * f + ud[f]}",
                "Loads": {m: int(rng.integers(1, 60)) for m in metrics},
            }
            for f in range(4)
        ]
        partitions.append({"ServiceName": f"S{p % 2}", "PartitionId": str(p), "Replicas": replicas})
    doc = {"SchemaVersion": 1, "Nodes": nodes, "Services": services, "Partitions": partitions}
    if defrag:
        doc["DefragmentationMetrics"] = {"Metric1": True}
    return doc


def test_only_partitions_that_fill_their_domains_evenly_bring_compound_moves():
    """Four replicas over four fault and upgrade domains: compound moves; three over four and five
    (the random test clusters'): none, and the search compiles as before."""
    tight, _ = searchable(parse_state(tight_document(0)))
    loose, _ = searchable(parse_state(cluster(0)))
    assert tight.cluster.features.compound and not loose.cluster.features.compound


@pytest.mark.parametrize("parallel", [False, True], ids=["first", "parallel"])
@pytest.mark.parametrize("defrag", [False, True], ids=["plain", "defrag"])
def test_compound_moves_pass_the_model_check(parallel, defrag):
    """Incremental statistics equal recomputation with moves of up to six nodes, and a parallel step
    equals its kept moves one by one."""
    problem, _ = searchable(parse_state(tight_document(1, defrag)))
    config = A.KernelConfig(tries=64, parallel=True, room=32) if parallel else QUICK.kernel  # 3 compound a step
    report = model_check(problem, config, FIELDS + (DEFRAG if defrag else ()))
    assert report.valid > 20 and report.kept >= (5 if parallel else 1)


@eqx.filter_jit
def _compound(problem, state, key):
    """512 compound proposals from one state, finished, and each one applied: (valid, the number of
    replicas each moves, domain violations after it and their recomputation, the energy after it
    and its recomputation)."""
    words = jax.random.bits(key, (512, DRAWS), jnp.uint32)
    moves = jax.vmap(propose_compound, in_axes=(None, None, None, None, 0))(
        problem, state.node_of, state.primary_of, NodeLoads(state.loads, state.held), words
    )
    energies, changes = jax.vmap(functools.partial(S.evaluate, paired=False), in_axes=(None, None, 0))(
        problem, state, moves
    )
    moves, energies, valid, changes = S.finish(problem, state, moves, changes)

    def one(move, energy, change):
        after = S.apply_one(problem, state, move, jnp.asarray(True), energy, change)
        moved = jnp.sum(after.node_of != state.node_of)
        exact = S.refresh(problem, after).energy
        return moved, after.domain_violations, domain_violations_of(problem.cluster, after.node_of), energy, exact

    return valid, *jax.vmap(one)(moves, energies, changes)


def test_compound_moves_of_two_and_three_replicas_keep_every_domain():
    """From the start (each partition one replica per domain), the valid compound moves move two
    or three replicas (one cannot move alone), leave no domain violation, and their energy is the
    recomputed one."""
    problem, _ = searchable(parse_state(tight_document(2)))
    valid, moved, domains, exact, energy, recomputed = _compound(problem, S.start(problem), jax.random.PRNGKey(0))
    valid, moved = np.asarray(valid), np.asarray(moved)
    assert valid.sum() > 10
    assert set(moved[valid]) == {2, 3}
    assert not np.asarray(domains)[valid].any() and not np.asarray(exact)[valid].any()
    np.testing.assert_allclose(np.asarray(energy)[valid], np.asarray(recomputed)[valid], rtol=2e-5)


def test_every_chain_state_respects_hard_constraints_with_compound_moves():
    """Run hot (many accepted moves) and check every chain's placement with the independent checker."""
    doc = tight_document(3)
    state = parse_state(doc)
    problem, index = searchable(state)
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    chains = A.hot_chains(S.model(), problem, QUICK.kernel, keys, 1500, 50.0)
    before = violations(state, placement_of(doc))
    assert not any(before.values())
    assert (np.asarray(chains.state.node_of) != np.asarray(index.initial_node)).sum(axis=1).min() >= 8
    for c in range(chains.state.node_of.shape[0]):
        after = document_with(state, index, chains.state.node_of[c], chains.state.primary_of[c])
        assert no_new_violations(before, violations(state, placement_of(after))) == []
