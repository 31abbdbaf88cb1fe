"""Hydra config -> plain frozen dataclasses, before anything reaches jit."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from plbjax.annealer import AnnealConfig
from plbjax.errors import BadInput


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
    anneal = AnnealConfig(
        chains=_number(cfg, "search.chains", int, False, 1),
        steps=_number(cfg, "search.steps", int, True, 1),
        seconds=_number(cfg, "search.seconds", float, True, 0.0),
        seed=_number(cfg, "search.seed", int, False),
        tries=_number(cfg, "search.tries", int, False, 1),
        parallel=_flag(cfg, "search.parallel"),
        room=_number(cfg, "search.room", int, True, 1),
        block_steps=_number(cfg, "anneal.block_steps", int, False, 1),
        swap_probability=_number(cfg, "anneal.swap_probability", float, False, 0.0),
        initial_temperature=_number(cfg, "anneal.initial_temperature", float, True, 0.0),
        probe_factor=_number(cfg, "anneal.probe_factor", float, False, 0.0),
        final_ratio=_number(cfg, "anneal.final_ratio", float, False, 0.0),
        population=_flag(cfg, "anneal.population"),
    )
    if anneal.steps is None and not anneal.seconds:
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
                     memory_fraction=fraction, distributed=bool(OmegaConf.select(cfg, "device.distributed")))
