"""Chains sharded over several devices (CPU host devices stand in for GPUs) find what one device finds."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import QUICK, cluster, searchable

from plbjax.anneal import anneal
from plbjax.sf import model, parse_state

pytestmark = pytest.mark.slow  # subprocesses with four host devices

SCRIPT = """
import dataclasses, json, sys
import jax
sys.path.insert(0, "tests")
from conftest import QUICK, cluster, searchable
from plbjax.anneal import anneal, init_chains, shard
from plbjax.sf import model
from plbjax.sf import parse_state
problem, _ = searchable(parse_state(cluster(0)))
config = dataclasses.replace(QUICK, chains=8, steps=2000, seconds=None, population=POPULATION)
_, chains = shard(problem, init_chains(model(), problem, jax.random.split(jax.random.PRNGKey(0), 8)))
result = anneal(model(), problem, config.kernel, config.schedule)
print(json.dumps(dict(devices=len(jax.devices()), sharded_over=len(chains.state.energy.sharding.device_set),
                      energies=result.energies.tolist())))
"""


@pytest.mark.parametrize("population", [False, True])
def test_chains_sharded_over_four_devices_match_one_device(population):
    """Independent chains, and chains resampled across devices (population annealing)."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", f"POPULATION = {population}\n" + SCRIPT], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    sharded = json.loads(out.stdout.strip().splitlines()[-1])
    assert sharded["devices"] == 4 and sharded["sharded_over"] == 4
    problem, _ = searchable(parse_state(cluster(0)))
    config = dataclasses.replace(QUICK, chains=8, steps=2000, seconds=None, population=population)
    one = anneal(model(), problem, config.kernel, config.schedule)
    np.testing.assert_allclose(sharded["energies"], one.energies, rtol=1e-5)
