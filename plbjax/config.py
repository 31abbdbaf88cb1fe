"""Hydra config -> plain frozen dataclasses, before anything reaches jit."""

from __future__ import annotations

import dataclasses
import math

from omegaconf import DictConfig, OmegaConf

from plbjax.annealer import AnnealConfig
from plbjax.errors import BadInput


AUTO = "auto"
_AUTO_KEYS = ("chains", "steps", "tries", "parallel")


def auto_search(backend: str, replicas: int) -> dict:
    """The default search for a backend and a cluster size: what the benchmarks found best (README),
    one deep chain with parallel tries, and steps for about 500 proposals per replica on a CPU (at
    least 20,000 steps), or a step per ten replicas (at least 2,000) of 65,536 tries on a GPU."""
    if backend == "cpu":
        return dict(chains=1, tries=256, parallel=True, steps=max(20_000, math.ceil(500 * replicas / 256)))
    return dict(chains=1, tries=65_536, parallel=True, steps=max(2_000, math.ceil(replicas / 10)))


@dataclasses.dataclass(frozen=True)
class RunConfig:
    state: str
    out: str | None
    plot: str | None
    progress: bool
    anneal: AnnealConfig
    balancing_threshold: float | None
    activity_threshold: float | None
    memory_fraction: float | None = None
    distributed: bool = False
    auto: tuple[str, ...] = ()      # search keys left to `auto_search`

    def search(self, backend: str, replicas: int) -> AnnealConfig:
        """The search settings, with the `auto` ones chosen for this backend and cluster size."""
        chosen = auto_search(backend, replicas)
        return dataclasses.replace(self.anneal, **{k: chosen[k] for k in self.auto})


def _number(cfg: DictConfig, key: str, kind, allow_none: bool = True, minimum=None):
    value = OmegaConf.select(cfg, key)
    if value is None:
        if allow_none:
            return None
        raise BadInput(f"{key}: a value is required")
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise BadInput(f"{key}: {value!r} is not a valid {kind.__name__}") from None
    if isinstance(value, bool) or (kind is int and number != value):
        raise BadInput(f"{key}: {value!r} is not a valid {kind.__name__}")
    if minimum is not None and number < minimum:
        raise BadInput(f"{key}: {value!r} is below the minimum {minimum}")
    return number


def _flag(cfg: DictConfig, key: str) -> bool:
    value = OmegaConf.select(cfg, key, default=False)
    if not isinstance(value, bool):
        raise BadInput(f"{key}: {value!r} is not true or false")
    return value


def from_hydra(cfg: DictConfig) -> RunConfig:
    """Validate the composed config; every problem is a BadInput naming the key."""
    if OmegaConf.is_missing(cfg, "state"):
        raise BadInput("state: missing; run `plbjax state=PATH` with a cluster state document")
    auto = tuple(k for k in _AUTO_KEYS if OmegaConf.select(cfg, f"search.{k}") == AUTO)
    placeholder = AnnealConfig()
    anneal = AnnealConfig(
        chains=placeholder.chains if "chains" in auto else _number(cfg, "search.chains", int, False, 1),
        steps=placeholder.steps if "steps" in auto else _number(cfg, "search.steps", int, True, 1),
        seconds=_number(cfg, "search.seconds", float, True, 0.0),
        seed=_number(cfg, "search.seed", int, False),
        tries=placeholder.tries if "tries" in auto else _number(cfg, "search.tries", int, False, 1),
        parallel=placeholder.parallel if "parallel" in auto else _flag(cfg, "search.parallel"),
        room=_number(cfg, "search.room", int, True, 1),
        block_steps=_number(cfg, "anneal.block_steps", int, False, 1),
        swap_probability=_number(cfg, "anneal.swap_probability", float, False, 0.0),
        initial_temperature=_number(cfg, "anneal.initial_temperature", float, True, 0.0),
        probe_factor=_number(cfg, "anneal.probe_factor", float, False, 0.0),
        final_ratio=_number(cfg, "anneal.final_ratio", float, False, 0.0),
        population=_flag(cfg, "anneal.population"),
    )
    if anneal.steps is None and not anneal.seconds and "steps" not in auto:
        raise BadInput("search.steps: null needs search.seconds to bound the search")
    if anneal.swap_probability > 1:
        raise BadInput(f"anneal.swap_probability: {anneal.swap_probability} is above 1")
    fraction = _number(cfg, "device.memory_fraction", float, True, 0.0)
    if fraction is not None and not 0 < fraction <= 1:
        raise BadInput(f"device.memory_fraction: {fraction} is not in (0, 1]")
    return RunConfig(state=str(cfg.state), out=cfg.get("out"), plot=cfg.get("plot"),
                     progress=bool(cfg.get("progress", True)), anneal=anneal,
                     balancing_threshold=_number(cfg, "balancing.threshold", float, True, 0.0),
                     activity_threshold=_number(cfg, "balancing.activity_threshold", float, True, 0.0),
                     memory_fraction=fraction, distributed=bool(OmegaConf.select(cfg, "device.distributed")),
                     auto=auto)
