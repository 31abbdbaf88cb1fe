"""How a plan searches: the `search` settings (the Hydra `search` group's schema) and their defaults.

`auto` values are chosen for the backend and the cluster's size (`resolved`): what the benchmarks
found best (docs/benchmarks.md), parallel tries, and blocks of steps that grow with the cluster
(`auto_search`), so a tiny cluster is not searched as long as a large one. On a CPU a small cluster
(1,024 replicas or fewer) shares the 256 tries among up to 8 independent chains: one wide chain
settles in whichever local optimum it reaches first (a movement too many, a costlier fix), where SF's
few, tiny clusters need the best of several; and its blocks (one temperature each) are as short as
`BLOCK_PROPOSALS` a replica allow (at least `MIN_BLOCK_STEPS`). Every search stops early once it has
tried every move of a replica to a node `patience` times over (at least two blocks, and half a
step-bound search's blocks) without improving, every chain frozen at its best.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from plbjax.anneal import KernelConfig, Schedule
from plbjax.errors import BadInput

AUTO = "auto"
_AUTO_KEYS = ("chains", "steps", "tries", "parallel", "block_steps")
BLOCK_STEPS = 1_000  # steps a block at most (SF: 1,000 a round)
_MIN_STEPS = 2_000  # two blocks: the probe (greedy) and one that cools
_MIN_CPU_BLOCKS = 10  # a CPU chain's floor: tiny clusters' optima need a few cooling blocks (the brute-force oracle)
BLOCK_PROPOSALS = 64  # on a CPU, a block's proposals per replica (a chain's), in power-of-two steps
MIN_BLOCK_STEPS = 256  # on a CPU, a block's steps at least: tiny clusters' optima need them (the brute-force oracle)
MIN_PATIENCE = 2  # blocks in a row that improve nothing before a search may stop
PATIENCE_SHARE = 0.5  # and at least this share of a step-bound search's blocks: a search cools half its course
SMALL_CLUSTER = 2048  # on a CPU, fewer replicas than this share a step's tries among several chains


def auto_search(backend: str, replicas: int) -> dict:
    """The `auto` values for a backend and a cluster of `replicas` replicas. On a CPU a block is
    `BLOCK_PROPOSALS` proposals a replica (at least `MIN_BLOCK_STEPS`, at most 1,000), and the steps
    grow with the cluster: 20 a replica up to 20,000 (at least 10 blocks), then 500 proposals a
    replica beyond 10,000 replicas (shorter blocks are more blocks: at 1,000 replicas, 20 blocks of
    512 steps planned 8 % worse than 40); on a GPU a step per ten replicas, at
    least 2,000 (a probe block and one cooling block; docs/benchmarks.md, "Default search length")."""
    if backend == "cpu":
        chains = min(8, 2 ** max(0, math.floor(math.log2(SMALL_CLUSTER / max(replicas, 1)))))
        tries = 256 // chains
        wanted = max(1, math.ceil(BLOCK_PROPOSALS * replicas / tries))
        block_steps = min(BLOCK_STEPS, max(MIN_BLOCK_STEPS, 2 ** math.ceil(math.log2(wanted))))
        steps = min(20 * replicas, max(20_000, math.ceil(500 * replicas / 256)))
        blocks = max(_MIN_CPU_BLOCKS, math.ceil(steps / block_steps))
        return dict(chains=chains, tries=tries, parallel=True, steps=blocks * block_steps, block_steps=block_steps)
    steps = max(_MIN_STEPS, math.ceil(replicas / 10))
    return dict(chains=1, tries=65_536, parallel=True, steps=steps, block_steps=BLOCK_STEPS)


def _check_number(name: str, value, kind: type, minimum: float | None = None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise BadInput(f"search.{name}: {value!r} is not a valid {kind.__name__}")
    if minimum is not None and value < minimum:
        raise BadInput(f"search.{name}: {value!r} is below the minimum {minimum}")


@dataclasses.dataclass
class SearchConfig:
    """The search of every phase of a plan. `chains`, `steps`, `tries`, `parallel` and `block_steps`
    may be `auto`."""

    seed: int = 0  # random seed: the same state, seed and steps give the same plan
    seconds: float | None = None  # null: steps bound the search (deterministic); N: its budget in s, compile excluded
    chains: Any = AUTO  # independent annealing chains (vmapped)
    steps: Any = AUTO  # steps per chain (auto: unbound when seconds are given); null: as many as seconds allow
    tries: Any = AUTO  # proposals evaluated together per step
    parallel: Any = AUTO  # apply every accepted proposal independent of earlier ones
    room: int | None = None  # most proposals a step finishes; None: tries / 16, at least 32
    block_steps: Any = AUTO  # steps between exact refreshes and best-so-far checks (one temperature)
    patience: float | None = 2.0  # stop a search once it has tried this many times every replica on every node
    # (at least two blocks) and improved nothing, every chain frozen at its best; null: run every block
    swap_probability: float = 0.3  # SF's SwapPrimaryProbability
    initial_temperature: float | None = None  # None: probe_factor x the largest |dE| of the first block
    probe_factor: float = 50.0  # SF's factor
    final_ratio: float = 1e-4  # final temperature / initial temperature (geometric cooling)
    population: bool = False  # population annealing: chains redrawn by Boltzmann weight per block

    def __post_init__(self) -> None:
        """Every bad value is a BadInput naming its key."""
        for name, kind, minimum in (("chains", int, 1), ("steps", int, 1), ("tries", int, 1)):
            value = getattr(self, name)
            if value != AUTO:
                _check_number(name, value, kind, minimum, allow_none=name == "steps")
        if self.parallel != AUTO and not isinstance(self.parallel, bool):
            raise BadInput(f"search.parallel: {self.parallel!r} is not true, false or auto")
        _check_number("seed", self.seed, int)
        _check_number("seconds", self.seconds, float, 0.0, allow_none=True)
        _check_number("room", self.room, int, 1, allow_none=True)
        if self.block_steps != AUTO:
            _check_number("block_steps", self.block_steps, int, 1)
        _check_number("patience", self.patience, float, 0.0, allow_none=True)
        _check_number("swap_probability", self.swap_probability, float, 0.0)
        _check_number("initial_temperature", self.initial_temperature, float, 0.0, allow_none=True)
        _check_number("probe_factor", self.probe_factor, float, 0.0)
        _check_number("final_ratio", self.final_ratio, float, 0.0)
        if self.swap_probability > 1:
            raise BadInput(f"search.swap_probability: {self.swap_probability} is above 1")
        if self.steps is None and not self.seconds:
            raise BadInput("search.steps: null needs search.seconds to bound the search")

    @property
    def budget(self) -> str:
        """What bounds the search (the plan's `Search.Budget`): `steps` (the default: deterministic,
        whatever the machine's load), `seconds` (seconds given, steps not: the search takes the time
        it is given), or `steps or seconds` (both given: whichever comes first)."""
        if self.seconds is None:
            return "steps"
        return "seconds" if self.steps in (None, AUTO) else "steps or seconds"

    def resolved(self, backend: str, replicas: int) -> SearchConfig:
        """This search with its `auto` values chosen for the backend and cluster size; `auto` steps
        with `seconds` given are unbounded (the seconds are the budget)."""
        chosen = auto_search(backend, replicas)
        if self.seconds is not None:
            chosen["steps"] = None
        return dataclasses.replace(self, **{k: chosen[k] for k in _AUTO_KEYS if getattr(self, k) == AUTO})

    @property
    def kernel(self) -> KernelConfig:
        return KernelConfig(
            tries=self.tries,
            parallel=self.parallel,
            room=self.room,
            block_steps=self.block_steps,
            population=self.population,
        )

    def schedule_for(self, replicas: int, nodes: int) -> Schedule:
        """`schedule` for a cluster of `replicas` replicas on `nodes` nodes: `patience` in blocks, as
        many as try every move of a replica to a node `patience` times, at least `MIN_PATIENCE` and,
        when steps bound the search, `PATIENCE_SHARE` of its blocks (a frozen tiny cluster is not
        yet cold: stopping in the first half of the cooling lost optima the brute-force oracle finds)."""
        if self.patience is None:
            return self.schedule
        sweep = replicas * nodes / (self.kernel.tries * self.kernel.block_steps)
        planned = math.ceil(PATIENCE_SHARE * self.steps / self.block_steps) if self.steps else 0
        patience = max(MIN_PATIENCE, planned, math.ceil(self.patience * sweep))
        return dataclasses.replace(self.schedule, patience=patience)

    @property
    def schedule(self) -> Schedule:
        """The search's schedule; it runs every block its steps or seconds allow (`schedule_for`)."""
        return Schedule(
            chains=self.chains,
            steps=self.steps,
            seconds=self.seconds,
            seed=self.seed,
            initial_temperature=self.initial_temperature,
            probe_factor=self.probe_factor,
            final_ratio=self.final_ratio,
        )
