"""The search driver: chains vmapped under one jit, blocks looped on the host.

Looping blocks on the host gives progress reports, checkpoints and a wall-time budget without
recompiling; compiled programs are kept per model, kernel config and shapes, so runs that differ in
their `Schedule` share them. Out of device memory, a search starts again smaller.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from plbjax.anneal._config import KernelConfig, Schedule
from plbjax.anneal._kernel import Chain, init, resample, run_block
from plbjax.anneal._model import Model
from plbjax.anneal._store import compiled, forget, stored

STOP = threading.Event()  # set (e.g. by a signal handler): running searches end after their block
AFTER_STOP_SECONDS = 1.5  # how long a search that must finish (`finish=True`) goes on after STOP


@stored
def init_chains(model: Model, problem, keys: jax.Array) -> Chain:
    """One chain per key, all at the initial solution (compiled: run op by op, a model's exact
    statistics cost a dispatch per operation, about half a second at 30,000 replicas; its program
    stored, `_store.stored`)."""
    return jax.vmap(init, in_axes=(None, None, 0))(model, problem, keys)


@stored
def _seeded_chains(model: Model, problem, seed: jax.Array, chains: int) -> Chain:
    """`init_chains` with the keys split from `seed` in the same program (op by op, the seed and the
    split are two more programs a process compiles)."""
    return init_chains.__wrapped__(model, problem, jax.random.split(jax.random.PRNGKey(seed), chains))


@eqx.filter_jit(donate="all-except-first")
def _run_blocks(kept, chains: Chain, model: Model, config: KernelConfig, layout=None) -> Chain:
    """One block of every chain. `kept` = (problem, [start, end] temperatures, steps) is read only;
    the block's length is a runtime value, so blocks of every length share the program (`config`'s
    `block_steps` is not part of it). The chains passed in are donated (their buffers hold the
    result, so a run needs one copy of them). `layout`: the chains' sharding over devices (None on
    one device)."""
    problem, temperatures, steps = kept
    chains = run_block(model, problem, config, chains, temperatures[0], temperatures[1], steps, batched=True)
    return resample(chains, temperatures[0], temperatures[1], layout) if config.population else chains


def _accelerator_plugins() -> bool:
    """Whether a JAX plugin (CUDA, ROCm, ...) is installed, found as JAX finds them (the `jax_plugins`
    namespace package, or its entry points) but without starting a backend."""
    if importlib.util.find_spec("jax_plugins") is not None:
        return True
    return any(True for _ in importlib.metadata.entry_points(group="jax_plugins"))


def enable_compilation_cache(only_if_unset: bool = False) -> None:
    """Keep compiled searches on disk (`PLBJAX_CACHE_DIR`, by default ~/.cache/plbjax/xla) so
    repeated runs on similar clusters skip tracing, lowering (`_store`) and XLA compilation. `only_if_unset`:
    leave a cache directory the caller chose for JAX alone."""
    if only_if_unset and jax.config.values["jax_compilation_cache_dir"]:
        return
    logging.getLogger("jax").setLevel(logging.WARNING)  # not Hydra's INFO lines about absent TPUs
    path = os.environ.get("PLBJAX_CACHE_DIR", str(Path.home() / ".cache" / "plbjax" / "xla"))
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES" not in os.environ and not _accelerator_plugins():
        # XLA's GPU caches: nothing without a GPU, but their directory (under the cache's) enters every
        # entry's key, so a cache copied elsewhere (a container image, a CI cache) would be compiled again
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    # op-by-op programs under 0.5 s are compiled again by each process; the store writes its own whatever their time
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def shard(problem, chains: Chain):
    """Chains split over every device (all local devices, or every process's after
    `jax.distributed.initialize()`), the problem replicated on each; unchanged on one device or
    when the chains do not divide evenly."""
    devices = jax.devices()
    if len(devices) == 1 or chains.key.shape[0] % len(devices):
        return problem, chains
    mesh = Mesh(np.array(devices), ("chains",))
    put = lambda tree, spec: jax.tree.map(
        lambda x: jax.device_put(x, NamedSharding(mesh, spec)) if isinstance(x, jax.Array) else x, tree
    )
    return put(problem, PartitionSpec()), put(chains, PartitionSpec("chains"))


def _host(x: jax.Array) -> np.ndarray:
    """A (possibly multi-process) array as one NumPy array on this host."""
    if jax.process_count() > 1:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


_executables: dict = {}


def clear_compiled() -> None:
    """Forget every compiled search (and JAX's compiled functions). A process that plans many
    differently shaped clusters keeps each compiled program until then; on a CPU each holds memory
    maps, and a few hundred exhaust the system's limit ("LLVM compilation error: Cannot allocate
    memory"; seen in the validity sweep after ~400 clusters of 17 shapes)."""
    _executables.clear()
    forget()
    jax.clear_caches()


MAPS_SHARE = 0.5  # of the system's memory-map limit, past which compiled programs are dropped


def _maps_share() -> float:
    """The share of the system's memory-map limit (Linux's vm.max_map_count) this process uses; 0
    where the system does not say."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            used = sum(1 for _ in maps)
        return used / int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError, ZeroDivisionError):
        return 0.0


def clear_compiled_if_crowded() -> bool:
    """`clear_compiled` once this process's compiled programs hold more than `MAPS_SHARE` of the
    system's memory maps: XLA:CPU maps each program's code, and a compilation that finds no map
    left crashes the process (a segmentation fault in LLVM, seen in a test worker after ~500
    tests). Whether it cleared."""
    if _maps_share() <= MAPS_SHARE:
        return False
    clear_compiled()
    return True


def _compiled_blocks(model: Model, problem, chains: Chain, config: KernelConfig):
    """The compiled block runner for this model, these shapes and this kernel config, and the seconds
    compiling took."""
    layout = chains.key.sharding if isinstance(chains.key.sharding, NamedSharding) else None
    config = dataclasses.replace(config, block_steps=0)  # a runtime value (`_run_blocks`)
    key = (
        model,
        config,
        layout,
        jax.tree.structure((problem, chains)),
        tuple((x.shape, x.dtype) for x in jax.tree.leaves((problem, chains))),
    )
    if key not in _executables:
        clear_compiled_if_crowded()
        start = time.perf_counter()
        kept = (problem, np.ones(2, np.float32), np.array(1, np.int32))  # host arrays: no program to compile
        if layout is None and jax.process_count() == 1:
            blocks = lambda kept, chains: _run_blocks(kept, chains, model, config)
            _executables[key] = compiled(blocks, kept, chains)
        else:
            sharded = _run_blocks.lower(kept, chains, model, config, layout).compile()
            _executables[key] = lambda kept, chains: sharded(kept, chains, model, config, layout)
        return _executables[key], time.perf_counter() - start
    return _executables[key], 0.0


@dataclasses.dataclass(frozen=True)
class AnnealResult:
    solution: Any  # the model's best solution over all chains (host arrays)
    energy: float
    initial_energy: float
    steps: int  # per chain
    chains: int
    seconds: float  # search wall time, compilation excluded
    compile_seconds: float
    accepted: int
    initial_temperature: float
    energies: np.ndarray  # best energy per chain
    shrunk: str | None = None  # why the search ran smaller than asked, if it did
    stopped: str = "steps"  # why it ended: steps, seconds, converged, interrupted (a phase adds fixed)
    blocks: int = 0  # blocks run


def _out_of_memory(error: Exception) -> bool:
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def _smaller(kernel: KernelConfig, schedule: Schedule) -> tuple[KernelConfig, Schedule] | None:
    """Half the chains, or with one chain half the tries (None: nothing left to halve)."""
    if schedule.chains > 1:
        return kernel, dataclasses.replace(schedule, chains=schedule.chains // 2)
    halved = kernel.halved()
    return None if halved is None else (halved, schedule)


def anneal(
    model: Model,
    problem,
    kernel: KernelConfig,
    schedule: Schedule,
    progress: Callable[[int, int, float, float], None] | None = None,
    deadline: float | None = None,
    checkpoint: Callable[[Any, float], None] | None = None,
    checkpoint_seconds: float = 5.0,
    finish: bool = False,
) -> AnnealResult:
    """Run `schedule.chains` chains; return the best solution found (or the initial one).

    A `progress` with a `compiling(seconds)` method hears when setting up and compiling the search
    starts (None) and ends (its seconds); one with a `block(steps, temperature, best_energy, best)`
    method hears each block's steps, the temperature it ended at, the lowest best energy over the
    chains (read with the block's result, so a trace costs no device sync) and a function that
    fetches that chain's best solution (called during `block` only).
    `deadline` (a `time.perf_counter()` instant) also bounds the search, compilation included;
    `STOP.set()` ends it after the current block (the best so far is returned); a search that should
    `finish` (a last pass over a result) goes on for `AFTER_STOP_SECONDS` more at most. The last
    blocks are fitted to leave `schedule.reserve_blocks` blocks' time of `schedule.seconds`.
    `checkpoint(solution, energy)` receives the best solution so far (host arrays) when it has
    improved, at most every `checkpoint_seconds`, for callers that must hold a result at any time.
    When the device runs out of memory the search starts again with half the chains (with one chain,
    half the tries a step), as often as needed; the result says so (`shrunk`).
    """
    asked = (kernel, schedule)
    while True:
        try:
            result = _anneal(
                model, problem, kernel, schedule, progress, deadline, checkpoint, checkpoint_seconds, finish
            )
        except jax.errors.JaxRuntimeError as error:
            smaller = _smaller(kernel, schedule)
            if not _out_of_memory(error) or smaller is None:
                raise
            logging.getLogger(__name__).warning(
                "out of device memory with %d chain(s) x %d tries: retrying with %d x %d",
                schedule.chains,
                kernel.tries,
                smaller[1].chains,
                smaller[0].tries,
            )
            clear_compiled()
            kernel, schedule = smaller
            continue
        if (kernel, schedule) != asked:
            result = dataclasses.replace(
                result,
                shrunk=f"out of device memory: {schedule.chains} chain(s) x "
                f"{kernel.tries} tries a step instead of {asked[1].chains} x {asked[0].tries}",
            )
        return result


def _anneal(
    model: Model,
    problem,
    kernel: KernelConfig,
    schedule: Schedule,
    progress,
    deadline,
    checkpoint,
    checkpoint_seconds: float,
    finish: bool,
) -> AnnealResult:
    """`anneal` with these configs."""
    notice = getattr(progress, "compiling", None)  # hears when the chains' setup and compilation start and end
    traced = getattr(progress, "block", None)  # hears each block's steps, temperature, best energy and solution
    ready_at = time.perf_counter()
    if notice is not None:
        notice(None)
    if -(2**31) <= schedule.seed < 2**31:
        initial = _seeded_chains(model, problem, np.array(schedule.seed, np.int32), schedule.chains)
    else:
        initial = init_chains(model, problem, jax.random.split(jax.random.PRNGKey(schedule.seed), schedule.chains))
    problem, chains = shard(problem, initial)
    initial_energy = float(_host(chains.state.energy)[0])
    compiled, compile_seconds = _compiled_blocks(model, problem, chains, kernel)
    if notice is not None:
        notice(time.perf_counter() - ready_at)

    # Without a given temperature the first block is the probe (SF: T0 from the largest |dE| of random
    # valid moves): it runs greedy, so chains stay near the input, and sets T0 for the rest.
    t0 = schedule.initial_temperature
    steps = np.array(kernel.block_steps, np.int32)
    planned = math.ceil(schedule.steps / kernel.block_steps) if schedule.steps else None
    blocks = planned or 1
    done = 0
    start = time.perf_counter()
    budget = min(schedule.seconds or math.inf, deadline - start if deadline is not None else math.inf)
    first_seconds = 0.0
    saved_energy, saved_at = initial_energy, start
    still = _Stillness(schedule.patience, schedule.tolerance)
    while done < blocks and not (done and STOP.is_set() and not finish) and not still.converged:
        if t0 is None:
            t_a = t_b = 0.0
        else:
            t_a = t0 * schedule.final_ratio ** (done / blocks)
            t_b = t0 * schedule.final_ratio ** ((done + 1) / blocks)
        chains = compiled((problem, np.array([t_a, t_b], np.float32), steps), chains)
        best_energy = _host(chains.best_energy)  # waits for the block
        done += 1
        elapsed = time.perf_counter() - start
        if t0 is None:
            found = float(np.median(_host(chains.largest_delta)))
            t0 = schedule.probe_factor * found if found > 0 else max(initial_energy, 1.0)
        else:
            still.observe(best_energy, _host(chains.state.energy))
        if done == 1:
            first_seconds = elapsed
        if finish and STOP.is_set():  # from the first block after the stop: AFTER_STOP_SECONDS more at most
            budget = min(budget, elapsed + AFTER_STOP_SECONDS)
        if math.isfinite(budget):  # fit the schedule to the budget from the blocks run so far
            per_block = (elapsed - first_seconds) / (done - 1) if done > 1 else first_seconds
            fit = done + max(0, int((budget - elapsed) / max(per_block, 1e-9)) - schedule.reserve_blocks)
            blocks = max(done, min(planned, fit) if planned else fit)
        if progress is not None:
            progress(done, blocks, elapsed, float(best_energy.min()))
        if traced is not None:
            lowest = int(np.argmin(best_energy))
            best_now = lambda b=lowest, best=chains.best: jax.tree.map(lambda x: _host(x)[b], best)
            traced(kernel.block_steps, t_b, float(best_energy[lowest]), best_now)
        if (
            checkpoint is not None
            and best_energy.min() < saved_energy
            and (time.perf_counter() - saved_at >= checkpoint_seconds)
        ):
            best = int(np.argmin(best_energy))
            checkpoint(jax.tree.map(lambda x, b=best: _host(x)[b], chains.best), float(best_energy[best]))
            saved_energy, saved_at = float(best_energy[best]), time.perf_counter()
    seconds = time.perf_counter() - start

    energies = _host(chains.best_energy)
    best = int(np.argmin(energies))
    assert t0 is not None  # the first block sets it
    return AnnealResult(
        solution=jax.tree.map(lambda x: _host(x)[best], chains.best),
        energy=float(energies[best]),
        initial_energy=initial_energy,
        steps=done * kernel.block_steps,
        chains=schedule.chains,
        seconds=seconds,
        compile_seconds=compile_seconds,
        accepted=int(_host(chains.accepted).sum()),
        initial_temperature=t0,
        energies=energies,
        stopped=_why_stopped(still.converged, done, planned),
        blocks=done,
    )


def _why_stopped(converged: bool, done: int, planned: int | None) -> str:
    """Why a search that ran `done` of `planned` blocks ended (`AnnealResult.stopped`)."""
    if converged:
        return "converged"
    if planned is not None and done >= planned:
        return "steps"
    return "interrupted" if STOP.is_set() else "seconds"


class _Stillness:
    """Whether a search has converged: `patience` blocks in a row (after the probe) that lowered no
    chain's best energy by more than `tolerance` of it and ended with every chain at its best (the
    chains are frozen: at their temperature they no longer leave their best state, so cooling further
    finds nothing; a hot chain wanders above its best and keeps the search going)."""

    def __init__(self, patience: int | None, tolerance: float):
        self.patience, self.tolerance = patience, tolerance
        self.quiet, self.best, self.converged = 0, math.inf, False

    def observe(self, best: np.ndarray, current: np.ndarray) -> None:
        if self.patience is None:
            return
        margin = self.tolerance * max(1.0, float(np.abs(best).max()))
        improved = float(best.min()) < self.best - margin
        frozen = bool(np.all(current - best <= margin))
        self.best = min(self.best, float(best.min()))
        self.quiet = 0 if improved or not frozen else self.quiet + 1
        self.converged = self.quiet >= self.patience
