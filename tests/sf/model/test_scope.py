"""`search_scope`: a phase's scope is built apart from the cluster it searches, which it neither changes nor copies."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from conftest import cluster

from plbjax.sf import Scope, Search, encode, full_scope, parse_state, scope
from plbjax.sf._encoding.problem import CAPACITY, CONSTRAINTS, UNPLACED


def _encoded(seed: int = 0, history: bool = False):
    doc = cluster(seed)
    if history:  # one replica left a node in an earlier balancing run
        replica = doc["Partitions"][0]["Replicas"][0]
        doc["History"] = {str(replica["ReplicaId"]): [doc["Nodes"][0]["NodeName"]]}
    return encode(parse_state(doc))


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x).copy() for x in jax.tree.leaves(tree)]


def _narrow(problem, index) -> Scope:
    """A scope that differs from `full_scope` in every field it has."""
    n, r = problem.node_up.shape[0], index.initial_node.shape[0]
    movable = index.initial_node >= 0
    movable[::2] = False
    return Scope(
        movable,
        np.zeros(index.initial_primary.shape[0], bool),
        np.ones(CONSTRAINTS, bool),
        move_weight=0.5,
        open_nodes=np.arange(n) % 2 == 0,
        budget=3,
        partition_budget=1,
        history=True,
        start=(np.full(r, -1, np.int32), np.full(index.initial_primary.shape[0], -1, np.int32)),
        undo_share=1.0,
        partners=index.initial_node >= 0,
    )


def test_a_scope_does_not_change_the_cluster():
    problem, index = _encoded(history=True)
    before, features = _leaves(problem), problem.features
    for what in (full_scope(problem, index), _narrow(problem, index)):
        search = scope(problem, index.initial_node, index.initial_primary, what)
        assert isinstance(search, Search) and search.cluster is problem
    assert problem.features == features
    assert all(np.array_equal(x, y) for x, y in zip(before, _leaves(problem)))


def test_two_scopes_of_one_cluster_share_its_arrays():
    problem, index = _encoded()
    wide = scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index))
    narrow = scope(problem, index.initial_node, index.initial_primary, _narrow(problem, index))
    assert wide.cluster is narrow.cluster is problem
    assert all(x is y for x, y in zip(jax.tree.leaves(wide.cluster), jax.tree.leaves(narrow.cluster)))
    assert not np.array_equal(np.asarray(wide.scope.movable), np.asarray(narrow.scope.movable))


def test_the_search_starts_at_its_origin_unless_the_scope_says_otherwise():
    problem, index = _encoded()
    origin = index.initial_node.copy()
    origin[0] = -1
    wide = scope(problem, origin, index.initial_primary, full_scope(problem, index)).scope
    assert np.array_equal(np.asarray(wide.origin_node), origin)
    assert np.array_equal(np.asarray(wide.start_node), origin)
    narrow = scope(problem, origin, index.initial_primary, _narrow(problem, index)).scope
    assert np.array_equal(np.asarray(narrow.origin_node), origin)
    assert (np.asarray(narrow.start_node) == -1).all() and (np.asarray(narrow.start_primary) == -1).all()


def test_the_scope_pads_its_rows_and_keeps_open_only_up_nodes():
    problem, index = _encoded()
    what = _narrow(problem, index)
    within = scope(problem, index.initial_node, index.initial_primary, what).scope
    moving = np.flatnonzero(what.movable)
    assert int(within.n_movable) == moving.size
    assert np.array_equal(np.asarray(within.movable)[: moving.size], moving)
    assert np.array_equal(np.asarray(within.node_open), np.asarray(problem.node_up) & what.open_nodes)
    assert int(within.move_budget) == 3 and int(within.partition_budget) == 1
    assert float(within.move_penalty) == np.float32(0.5 * float(problem.replica_count + 1000.0))
    # exchange partners by their origin node: by_node[node_first[n]:node_first[n + 1]] are on node n
    by_node, first = np.asarray(within.by_node), np.asarray(within.node_first)
    for n in range(problem.node_up.shape[0]):
        on = by_node[first[n] : first[n + 1]]
        assert (index.initial_node[on] == n).all()
        assert sorted(on.tolist()) == np.flatnonzero(what.partners & (index.initial_node == n)).tolist()


def test_history_applies_only_where_the_phase_honours_it_and_the_cluster_has_some():
    for has_history in (False, True):
        problem, index = _encoded(history=has_history)
        for honoured in (False, True):
            what = dataclasses.replace(full_scope(problem, index), history=honoured)
            within = scope(problem, index.initial_node, index.initial_primary, what).scope
            assert within.history == (honoured and has_history)


def test_full_scope_moves_every_placed_replica_and_enforces_all_but_unplaced():
    problem, index = _encoded()
    what = full_scope(problem, index)
    placed = index.initial_node >= 0
    placed[index.n_replicas :] = False
    assert np.array_equal(what.movable, placed)
    assert what.enforce[CAPACITY] and not what.enforce[UNPLACED]
    assert not full_scope(problem, index, enforce=False).enforce.any()
    stateful = index.stateful & (index.initial_primary >= 0)
    assert not (what.swappable & ~stateful).any() and what.swappable.any()
