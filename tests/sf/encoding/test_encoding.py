"""`_encoding` and its stages: the cluster as arrays (`Problem`), no phase's search in it, and the
host-side `Index` with the input's and the plan's initial placement."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import cluster
from sf_affinity_cases import document, fu, node, stateful

from plbjax.sf import encode, parse_state
from plbjax.sf._encoding.arrays import bucket
from plbjax.sf._encoding.rows import _order_within
from plbjax.sf._model.search_scope import SearchScope

SCOPE_FIELDS = set(SearchScope.__dataclass_fields__) - {"history"}  # `Problem.history` is the cluster's History


def test_the_cluster_holds_no_field_of_a_phase():
    problem, _ = encode(parse_state(cluster(0)))
    assert not SCOPE_FIELDS & set(type(problem).__dataclass_fields__)


def test_sizes_round_up_to_buckets():
    assert [bucket(n) for n in (0, 1, 3, 5, 8, 9, 11, 13, 15, 17, 33)] == [1, 1, 4, 8, 8, 10, 12, 14, 16, 20, 40]
    assert bucket(3, minimum=8) == 8


def test_small_clusters_of_different_sizes_share_one_shape():
    """SF's unit-test clusters (3 to 9 nodes, 1 to 4 services and metrics, up to 15 fault domains of
    one depth) encode to arrays of one shape each, so they share one compiled search (`FLOORS`)."""
    metric = lambda name: {"Name": name, "Weight": "High", "PrimaryDefaultLoad": 1, "SecondaryDefaultLoad": 1}
    small = document([stateful("S", 1)], [fu("S", 0, "P/0")], [node(i, f"dc{i}/r0") for i in range(3)])
    services = [stateful(f"S{k}", 3, Metrics=[metric(f"M{k}")]) for k in range(4)]
    partitions = [fu(f"S{k}", k, "P/0, S/3, S/6") for k in range(4)]
    larger = document(services, partitions, [node(i, f"dc{i % 4}/r{i}", f"ud{i % 4}") for i in range(9)])
    shapes = [jax.tree.map(np.shape, encode(parse_state(doc))[0]) for doc in (small, larger)]
    assert shapes[0] == shapes[1]


def test_a_replica_on_a_down_node_is_in_the_input_and_unplaced_at_the_start():
    doc = cluster(1)
    replica = doc["Partitions"][0]["Replicas"][0]
    down = next(n for n in doc["Nodes"] if n["NodeName"] == replica["NodeName"])
    down["NodeStatus"] = "Down"
    problem, index = encode(parse_state(doc))
    r = index.replica_ids.index(replica["ReplicaId"])
    assert index.nodes[index.input_node[r]] == replica["NodeName"]
    assert index.initial_node[r] == -1
    assert np.array_equal(np.asarray(problem.initial_node), index.initial_node)
    assert np.array_equal(np.asarray(problem.initial_primary), index.initial_primary)
    others = np.arange(index.n_replicas) != r
    assert np.array_equal(index.input_node[: index.n_replicas][others], index.initial_node[: index.n_replicas][others])


@pytest.mark.parametrize(
    "texts",
    [
        ["b", "a", "c", "a2", "x"],
        ["r" * 70, "r" * 65, "a", "r" * 80, "q"],
        ["a\0", "a", "b", "a\0\0", "c"],
        ["10", "9", "100", "1", "2"],
        ["é", "e", "z", "ß", "a"],
    ],
)
def test_replicas_sort_as_python_sorts_them(texts):
    part = np.array([0, 0, 0, 1, 1])
    order = _order_within(texts, part)
    got = list(range(len(texts))) if order is None else order.tolist()
    assert got == sorted(range(len(texts)), key=lambda i: (part[i], texts[i]))
