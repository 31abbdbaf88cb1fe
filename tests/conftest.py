"""Shared fixtures. Clusters share one shape so compiled searches are reused across tests."""

from __future__ import annotations

import dataclasses

import pytest

import numpy as np

from plbjax.annealer import AnnealConfig
from plbjax.encoding import CONSTRAINTS, encode, scope
from plbjax.generator import ClusterSpec, generate
from plbjax.state import parse_state

# 20 nodes of two node types in 4 fault domains x 2 racks, 4 services (half of them constrained to a
# node type) x 6 partitions x 3 replicas; every test cluster has this shape.
SPEC = ClusterSpec(nodes=20, node_types=2, fault_domains=4, racks_per_fault_domain=2, upgrade_domains=5,
                   metrics=2, services=4, partitions_per_service=6, replicas_per_partition=3,
                   stateless_fraction=0.25, skew=0.8, capacity_headroom=2.0,
                   placement_constraint_fraction=0.5)
QUICK = AnnealConfig(chains=8, steps=3000, seconds=None, block_steps=500)


def cluster(seed: int, **changes) -> dict:
    """A random 20-node test cluster document."""
    return generate(dataclasses.replace(SPEC, seed=seed, **changes))


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
    """The encoded problem with every placed replica movable and every primary swappable, but for
    affinity parents' (which do not swap, as in every phase)."""
    problem, index = encode(state)
    movable = index.node_of >= 0
    swappable = np.zeros(index.primary_of.shape[0], bool)
    swappable[: index.n_partitions] = index.stateful[: index.n_partitions] & (index.primary_of[: index.n_partitions] >= 0)
    parents = np.unique(np.asarray(problem.replica_parent))
    swappable[parents[parents >= 0]] = False
    enforce = np.array([enforce] * (CONSTRAINTS - 1) + [False])
    return scope(problem, index.node_of, index.primary_of, movable, swappable, enforce), index
