"""Shared fixtures: clusters of one shape (so compiled searches are reused across tests), test certificates."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from planned import plan_dump

from plbjax.anneal import Tolerance as check_tolerance
from plbjax.anneal import check_model, clear_compiled_if_crowded, enable_compilation_cache
from plbjax.sf import ClusterSpec, SearchConfig, encode, full_scope, generate, parse_state, scope
from plbjax.sf._model.chain import model as sf_model
from plbjax.sf._model.energy import energy_of

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


def pytest_configure(config):
    """Every test process keeps what it compiles in the persistent cache `plan` uses
    (PLBJAX_CACHE_DIR), from its first compilation on: tests that run the annealer without `plan`
    share programs across xdist workers too. JAX binds its cache to a directory once, at the first
    compilation, so one is made now, before a test points the setting at a directory of its own
    (tests/anneal/test_store.py); and without the GPU-only XLA caches, whose directory (under the
    setting's) would enter every program's key, such a test still finds what others compiled. The
    plbjax processes tests start inherit that setting, so their programs have the same keys."""
    os.environ["JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"] = "none"
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    enable_compilation_cache()
    jax.jit(jnp.negative)(jnp.zeros(()))


@pytest.fixture(autouse=True)
def _room_for_programs():
    """A test worker runs hundreds of tests, each compiling programs that hold memory maps: before
    each test, compiled programs are dropped once they hold half the system's limit (a compilation
    finding none left crashes the worker)."""
    clear_compiled_if_crowded()


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


def exact_energy(search, solution):
    """SF's energy of a placement from scratch (one function for every model check: a compiled check
    is kept per function)."""
    return energy_of(search, *solution)


def model_check(search, config, fields):
    """`anneal.check_model` of SF's model on `search` (key 3): the incremental `fields` against their
    recomputation and the energy against SF's exact one."""
    tolerance = check_tolerance(rtol=2e-5, atol=1e-3)
    return check_model(
        sf_model(), search, jax.random.PRNGKey(3), config, tolerance=tolerance, fields=fields, energy=exact_energy
    )


def searchable(state, enforce=True):
    """The encoded problem scoped so that everything may move (`full_scope`), and its index."""
    problem, index = encode(state)
    return scope(problem, index.initial_node, index.initial_primary, full_scope(problem, index, enforce)), index


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(name: str, subject: str, extension: str, pki: Path) -> None:
    """name.key and name.crt, signed by the CA in `pki`, with one X.509 extension."""
    (pki / f"{name}.ext").write_text(extension + "\n")
    _openssl(*f"req -newkey rsa:2048 -nodes -keyout {name}.key -out {name}.csr".split(), "-subj", subject, cwd=pki)
    sign = f"x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out {name}.crt -days 1"
    _openssl(*sign.split(), "-extfile", f"{name}.ext", cwd=pki)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA, the gateway's certificate for 127.0.0.1 (server.pem, key included) and a client's."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make test certificates")
    pki = tmp_path_factory.mktemp("pki")
    ca = "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1"
    _openssl(*ca.split(), "-subj", "/CN=plbjax test CA", cwd=pki)
    _signed("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1", pki)
    _signed("client", "/CN=operator", "extendedKeyUsage=clientAuth", pki)
    (pki / "server.pem").write_text((pki / "server.crt").read_text() + (pki / "server.key").read_text())
    return pki


@pytest.fixture(scope="session")
def small_dump_plan(tmp_path_factory) -> Path:
    """The bundled dump tests/data/sf-dump/small planned: plan.json, with state.json beside it."""
    return plan_dump("small", tmp_path_factory.mktemp("small-dump"))


@pytest.fixture(scope="session")
def paged_dump_plan(tmp_path_factory) -> Path:
    """The bundled dump tests/data/sf-dump/paged (paged lists, an XML manifest, a replica in build) planned."""
    return plan_dump("paged", tmp_path_factory.mktemp("paged-dump"))
