"""Shared fixtures. Clusters share one shape so compiled searches are reused across tests."""

from __future__ import annotations

import dataclasses

import pytest

from plbjax.sf import ClusterSpec, SearchConfig, encode, full_scope, generate, parse_state, scope

# 20 nodes of two node types in 4 fault domains x 2 racks, 4 services (half of them constrained to a
# node type) x 6 partitions x 3 replicas; every test cluster has this shape.
SPEC = ClusterSpec(
    nodes=20,
    node_types=2,
    fault_domains=4,
    racks_per_fault_domain=2,
    upgrade_domains=5,
    metrics=2,
    services=4,
    partitions_per_service=6,
    replicas_per_partition=3,
    stateless_fraction=0.25,
    skew=0.8,
    capacity_headroom=2.0,
    placement_constraint_fraction=0.5,
)
QUICK = SearchConfig(chains=8, steps=3000, seconds=None, block_steps=500, tries=1, parallel=False)


def cluster(seed: int, **changes) -> dict:
    """A random 20-node test cluster document."""
    return generate(seed, dataclasses.replace(SPEC, **changes))


def packed_cluster(seed: int = 7) -> dict:
    """A test cluster whose first partition has two replicas in one fault domain (a violation)."""
    doc = cluster(seed)
    part = doc["Partitions"][0]
    fd = {n["NodeName"]: n["FaultDomain"] for n in doc["Nodes"]}
    taken = {r["NodeName"] for r in part["Replicas"]}
    first_fd = fd[part["Replicas"][0]["NodeName"]]
    part["Replicas"][1]["NodeName"] = next(n for n, f in fd.items() if f == first_fd and n not in taken)
    return doc


@pytest.fixture(scope="session")
def documents() -> list[dict]:
    return [cluster(seed) for seed in range(4)]


@pytest.fixture(scope="session")
def states(documents):
    return [parse_state(doc) for doc in documents]


def searchable(state, enforce=True):
    """The encoded problem scoped so that everything may move (`full_scope`), and its index."""
    problem, index = encode(state)
    return scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index, enforce)), index
