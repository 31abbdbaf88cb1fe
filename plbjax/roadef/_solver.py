"""Solve one instance with the annealer: encode, search under 64-bit arithmetic, check on the host.

The search's own energy is the objective, but the returned solution is re-checked with the exact
host-side objective and constraints (`objective`); the original assignment is returned when nothing
better and feasible was found.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from importlib import resources

import jax
import numpy as np
import yaml

from plbjax.anneal import KernelConfig, Schedule, anneal
from plbjax.roadef import _model
from plbjax.roadef._instance import Instance
from plbjax.roadef._objective import Costs, costs, violations


@dataclasses.dataclass(frozen=True)
class Tuning:
    """The search's settings by instance size (conf/roadef.yaml explains the values)."""

    tries: int
    block_steps: int
    swap_probability: float
    probe_factor: float
    final_ratio: float
    large: int
    large_tries: int
    large_probe_factor: float
    coarse: int
    coarse_swap_probability: float


@functools.cache
def tuning() -> Tuning:
    """The tuning shipped in conf/roadef.yaml."""
    text = resources.files("plbjax.conf").joinpath("roadef.yaml").read_text()
    return Tuning(**yaml.safe_load(text))


@dataclasses.dataclass(frozen=True)
class Search:
    """One ROADEF search: the annealer's kernel and schedule, and the model's swap probability."""

    kernel: KernelConfig
    schedule: Schedule
    swap_probability: float


def search_config(instance: Instance, tune: Tuning | None = None) -> Search:
    """The search for this instance: large instances evaluate more proposals a step and start colder,
    small packed ones swap more; below the large size, one chain per device when the devices are CPU
    cores (each runs on its own core; on large instances two chains share memory bandwidth and one
    fast chain does better)."""
    tune = tune or tuning()
    processes, machines = len(instance.service), len(instance.location)
    large = processes >= tune.large
    kernel = KernelConfig(tries=tune.large_tries if large else tune.tries, parallel=True, block_steps=tune.block_steps)
    chains = len(jax.devices()) if not large and jax.default_backend() == "cpu" else 1
    schedule = Schedule(
        chains=chains,
        steps=None,
        seconds=None,
        final_ratio=tune.final_ratio,
        probe_factor=tune.large_probe_factor if large else tune.probe_factor,
    )
    coarse = processes <= tune.coarse * machines
    return Search(kernel, schedule, tune.coarse_swap_probability if coarse else tune.swap_probability)


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


def solve(
    instance: Instance,
    original: np.ndarray,
    config: Search | None = None,
    deadline: float | None = None,
    on_better: Callable[[np.ndarray, Costs], None] | None = None,
) -> Solution:
    """The best feasible assignment found within `config`'s budget and `deadline` (a
    `time.perf_counter()` instant, compilation included). `on_better(assignment, costs)` gets each
    better feasible assignment found along the way (every few seconds at most)."""
    config = config or search_config(instance)
    initial = costs(instance, original, original)

    def checkpoint(solution, _energy):
        if on_better is not None:
            on_better(*checked(instance, original, solution))

    with jax.enable_x64(True):
        problem = _model.encode(instance, original)
        result = anneal(
            _model.model(config.swap_probability),
            problem,
            config.kernel,
            config.schedule,
            deadline=deadline,
            checkpoint=checkpoint,
        )
    found, found_costs = checked(instance, original, result.solution)
    return Solution(
        assignment=found,
        costs=found_costs,
        initial_cost=initial.total,
        search_seconds=result.seconds,
        compile_seconds=result.compile_seconds,
        proposals=result.steps * result.chains * config.kernel.tries,
    )
