"""Decoding (`plbjax/sf/_encoding/decoding.py`): a placement -> the minimal, executable action list, and
actions applied back to a document."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from conftest import QUICK, cluster, searchable

from plbjax import anneal as A
from plbjax.sf import encode
from plbjax.sf._encoding.decoding import apply_actions, diff, settle
from plbjax.sf._model import chain as S
from plbjax.sf._state.reading import parse_state


def _placed(index, document: dict) -> dict[str, tuple[str, str]]:
    """{replica id: (node, role)} of a document."""
    return {str(r["ReplicaId"]): (r["NodeName"], r["Role"]) for p in document["Partitions"] for r in p["Replicas"]}


def _expected(index, node_of, primary_of) -> dict[str, tuple[str, str]]:
    """{replica id: (node, role)} of a placement."""
    out = {}
    for p in range(index.n_partitions):
        for r in index.partition_rows[p]:
            role = "Primary" if primary_of[p] == r else ("Secondary" if index.stateful[p] else "Instance")
            out[str(index.replica_ids[r])] = (index.nodes[node_of[r]], role)
    return out


def _check_decoded(state, index, node_of, primary_of) -> None:
    """The settled placement's actions apply in order (each executable where it stands), reproduce
    it, and are minimal: one move per replica whose node changed, one swap per changed primary."""
    node_of, primary_of = settle(index, node_of, primary_of)
    actions = diff(index, node_of, primary_of)
    assert _placed(index, apply_actions(state.document, actions)) == _expected(index, node_of, primary_of)
    assert sum(a.kind != "SwapPrimarySecondary" for a in actions) == int(
        (node_of != index.initial_node)[: index.n_replicas].sum()
    )
    assert sum(a.kind == "SwapPrimarySecondary" for a in actions) == int(
        (primary_of != index.initial_primary)[: index.n_partitions].sum()
    )


def test_decoded_actions_reproduce_every_chain(states):
    state = states[1]
    problem, index = searchable(state)
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    chains = A.hot_chains(S.model(), problem, QUICK.kernel, keys, 1000, 50.0)
    for c in range(chains.state.node_of.shape[0]):
        _check_decoded(state, index, np.asarray(chains.state.node_of[c]), np.asarray(chains.state.primary_of[c]))


@functools.cache
def _encoded(seed: int):
    state = parse_state(cluster(seed))
    return state, encode(state)[1]


@pytest.mark.parametrize("seed", range(4))
def test_any_placement_decodes_to_actions_that_reproduce_it(seed):
    """Random placements of generated clusters (a share of the partitions on new distinct nodes, moves
    and rotations among their own nodes alike, and a new primary)."""
    state, index = _encoded(seed)
    rng = np.random.default_rng(seed)
    for share in rng.uniform(0.05, 1.0, 10):
        node_of, primary_of = index.initial_node.copy(), index.initial_primary.copy()
        for p in np.flatnonzero(rng.random(index.n_partitions) < share):
            rows = list(index.partition_rows[p])
            own = rng.random() < 0.3  # a rotation among its own nodes, which `settle` undoes
            node_of[rows] = rng.permutation(node_of[rows]) if own else rng.choice(index.n_nodes, len(rows), False)
            if index.stateful[p]:
                primary_of[p] = rng.choice(rows)
        _check_decoded(state, index, node_of, primary_of)


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
    assert [(x.kind, x.source, x.target) for x in actions] == [
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
    assert [x.replica for x in actions] == [index.replica_ids[b], index.replica_ids[a]]
    primary_of[p] = a  # and a becomes primary: swap first
    actions = diff(index, node_of, primary_of)
    assert [x.kind for x in actions] == ["SwapPrimarySecondary", "MoveSecondary", "MovePrimary"]
    apply_actions(state.document, actions)


def test_on_a_swap_the_load_follows_the_role():
    """SF's FailoverUnit keeps one primary load per partition (whichever replica is primary) and
    gives a replica new to the secondary role the other secondaries' average (UpdateSecondaryLoadMap):
    before issue 31 the replay left each replica's reported loads where they were, so a swap moved
    no load and balancing found the same gain round after round."""
    replicas = [
        {"ReplicaId": "a", "Role": "Primary", "NodeName": "N0", "Loads": {"CPU": 15}},
        {"ReplicaId": "b", "Role": "Secondary", "NodeName": "N1", "Loads": {"CPU": 5}},
        {"ReplicaId": "c", "Role": "Secondary", "NodeName": "N2", "Loads": {"CPU": 7}},
    ]
    doc = {"Partitions": [{"ServiceName": "S", "PartitionId": 0, "Replicas": replicas}]}
    swap = {"ServiceName": "S", "PartitionId": 0, "ReplicaId": "a", "Action": "SwapPrimarySecondary"}
    after = apply_actions(doc, [swap | {"SourceNode": "N0", "TargetNode": "N1"}])["Partitions"][0]["Replicas"]
    assert [(r["Role"], r["Loads"]) for r in after] == [
        ("Secondary", {"CPU": 7.0}),  # the other secondary's load (its average)
        ("Primary", {"CPU": 15}),
        ("Secondary", {"CPU": 7}),
    ]
    pair = {"ServiceName": "S", "PartitionId": 0, "Replicas": replicas[:2]}
    after = apply_actions({"Partitions": [pair]}, [swap | {"SourceNode": "N0", "TargetNode": "N1"}])
    assert [r["Loads"] for r in after["Partitions"][0]["Replicas"]] == [{"CPU": 5.0}, {"CPU": 15}]
