"""Solve one instance with the annealer: encode, search under 64-bit arithmetic, check on the host.

The search's own energy is the objective, but the returned solution is re-checked with the exact
host-side objective and constraints (`objective`); the original assignment is returned when nothing
better and feasible was found.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np

from plbjax.annealer import AnnealConfig, anneal
from plbjax.roadef import search
from plbjax.roadef.instance import Instance
from plbjax.roadef.objective import Costs, costs, violations

# Search settings measured on sets A and B (scripts/bench_roadef.py): one chain; every accepted
# proposal of a step whose footprint is free is applied (parallel), which is what lets the 20,000-50,000
# process instances move fast enough; ejection chains and swaps matter on tightly packed machines.
ROADEF_SEARCH = AnnealConfig(chains=1, tries=64, steps=None, seconds=None, block_steps=1_000,
                             swap_probability=0.6, probe_factor=0.05, final_ratio=1e-3, parallel=True)
LARGE = 10_000          # processes from which a step evaluates `LARGE_TRIES` proposals and starts colder
LARGE_TRIES = 256
LARGE_PROBE_FACTOR = 0.005
COARSE = 20             # processes per machine at or below which `COARSE_SWAP` of the proposals move two processes
COARSE_SWAP = 0.8


def search_config(instance: Instance) -> AnnealConfig:
    """`ROADEF_SEARCH`, adjusted by size.

    Large instances evaluate more proposals per step (more moves are independent) and start colder:
    hot, a chain moves thousands of processes that cooling cannot bring back in time, each keeping its
    transient resources held on its original machine (set B at 30 s, T0 = 5 % -> 0.5 % of the probe:
    b_3 2.6 -> 1.7 %, b_5 4.5 -> 2.3 %, b_8 4.5 -> 0.6 %; b_4, b_6, b_9 stay at <= 0.03 %; b_1 and b_2,
    with 5,000 processes, did worse colder). Below that size, one chain per device when the devices are
    CPU cores (each runs on its own core; on large instances two chains share memory bandwidth and one
    fast chain does better). With few processes per machine a single shift changes a machine's usage
    coarsely, and swaps and chains, which trade one process for another, do more of the fine packing
    (set A at 12 s: mean score 8.8 -> 7.5 % with 0.8 instead of 0.6; b_1, b_3 and b_8, with 50-500
    processes per machine, did worse with it)."""
    config = ROADEF_SEARCH
    if len(instance.service) <= COARSE * len(instance.location):
        config = dataclasses.replace(config, swap_probability=COARSE_SWAP)
    if len(instance.service) >= LARGE:
        return dataclasses.replace(config, tries=LARGE_TRIES, probe_factor=LARGE_PROBE_FACTOR)
    if jax.default_backend() == "cpu":
        return dataclasses.replace(config, chains=len(jax.devices()))
    return config


@dataclasses.dataclass(frozen=True)
class Solution:
    assignment: np.ndarray
    costs: Costs
    initial_cost: int
    search_seconds: float
    compile_seconds: float
    proposals: int


def checked(instance: Instance, original: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, Costs]:
    """`found` and its exact costs if it is feasible and no worse than the original, else the original."""
    found = np.asarray(found, np.int64)
    initial, found_costs = costs(instance, original, original), costs(instance, original, found)
    if violations(instance, original, found) or found_costs.total > initial.total:
        return original.copy(), initial
    return found, found_costs


def solve(instance: Instance, original: np.ndarray, config: AnnealConfig | None = None,
          deadline: float | None = None, on_better: Callable[[np.ndarray, Costs], None] | None = None) -> Solution:
    """The best feasible assignment found within `config`'s budget and `deadline` (a
    `time.perf_counter()` instant, compilation included). `on_better(assignment, costs)` gets each
    better feasible assignment found along the way (every few seconds at most)."""
    config = config or search_config(instance)
    initial = costs(instance, original, original)

    def checkpoint(solution, _energy):
        if on_better is not None:
            on_better(*checked(instance, original, solution))

    with jax.enable_x64(True):
        problem = search.encode(instance, original)
        result = anneal(search.MODEL, problem, config, deadline=deadline, checkpoint=checkpoint)
    found, found_costs = checked(instance, original, result.solution)
    return Solution(assignment=found, costs=found_costs, initial_cost=initial.total,
                    search_seconds=result.seconds, compile_seconds=result.compile_seconds,
                    proposals=result.steps * result.chains * config.tries)
