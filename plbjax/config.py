"""The `plbjax` command's configuration as Hydra structured configs: typed dataclasses whose
defaults are the defaults, checked by OmegaConf (types) and by their own `__post_init__` (ranges,
`auto`), so every bad value is one message naming its key."""

from __future__ import annotations

import dataclasses
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from plbjax.errors import BadInput, did_you_mean
from plbjax.sf import SearchConfig


@dataclasses.dataclass
class DeviceConfig:
    memory_fraction: float | None = None  # share of GPU memory this job takes (e.g. 0.2 for 4 jobs on a GPU)
    distributed: bool = False  # call jax.distributed.initialize() first: chains span every host

    def __post_init__(self) -> None:
        if self.memory_fraction is not None and not 0 < self.memory_fraction <= 1:
            raise BadInput(f"device.memory_fraction: {self.memory_fraction} is not in (0, 1]")


@dataclasses.dataclass
class BalancingConfig:
    threshold: float | None = None  # replaces every metric's MetricBalancingThresholds entry
    activity_threshold: float | None = None  # replaces every metric's MetricActivityThresholds entry

    def __post_init__(self) -> None:
        for key in ("threshold", "activity_threshold"):
            value = getattr(self, key)
            if value is not None and value < 0:
                raise BadInput(f"balancing.{key}: {value} is below the minimum 0")


@dataclasses.dataclass
class RecordConfig:
    plans: bool = False  # also write each round's plan document (plans/NNNNN-Phase.json, plans/index.json)


@dataclasses.dataclass
class PlanRecordConfig:
    trace: bool = False  # each phase's blocks in the plan (Search.Phases[].Trace); with plot=, also <plot>-trace.png


@dataclasses.dataclass
class RunConfig:
    state: str = MISSING  # cluster state document (JSON or YAML)
    out: str | None = None  # also write the plan here (it is always written to the run directory)
    plot: str | None = None  # PNG of node loads per metric before and after the plan
    progress: bool = True  # progress lines on stderr, each naming its phase, for searches longer than a few seconds
    refresh: Any = False  # one SF refresh: true, the first stage with work; or an SF action's (One refresh, below)
    search: SearchConfig = dataclasses.field(default_factory=SearchConfig)
    device: DeviceConfig = dataclasses.field(default_factory=DeviceConfig)
    balancing: BalancingConfig = dataclasses.field(default_factory=BalancingConfig)
    record: PlanRecordConfig = dataclasses.field(default_factory=PlanRecordConfig)  # what else the plan holds

    def __post_init__(self) -> None:
        from plbjax.sf import REFRESH_ACTIONS  # the planner's (it imports JAX): only to check a named refresh

        if self.refresh not in (True, False) and self.refresh not in REFRESH_ACTIONS:
            raise BadInput(f"refresh: {self.refresh!r} is not true, false or one of {', '.join(REFRESH_ACTIONS)}")


REPLAY_ROUND_STEPS = 2_000  # a replay plans hundreds of rounds: each phase's full search, in steps
REPLAY_BLOCK_STEPS = 500  # a round's search grows in blocks of this many steps (plbjax/sf/replay/round_search.py)
ROUND_SEARCHES = ("adaptive", "fixed")  # how long a replay round searches (round_search.ADAPTIVE, FIXED)


def _replay_search() -> SearchConfig:
    """Steps, not seconds, bound each round's search, so that a replay is the same for the same
    timeline, seed and backend whatever the machine's load."""
    return SearchConfig(seconds=None, steps=REPLAY_ROUND_STEPS, block_steps=REPLAY_BLOCK_STEPS)


@dataclasses.dataclass
class ReplayConfig:
    timeline: str = MISSING  # timeline document (JSON or YAML)
    out: str | None = None  # output directory (default: the run directory)
    search: SearchConfig = dataclasses.field(default_factory=_replay_search)  # each round's search
    device: DeviceConfig = dataclasses.field(default_factory=DeviceConfig)
    balancing: BalancingConfig = dataclasses.field(default_factory=BalancingConfig)  # the initial state's thresholds
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)  # PLB settings by SF name (+settings.NAME=V)
    record: RecordConfig = dataclasses.field(default_factory=RecordConfig)  # what the record holds besides the series
    rounds: str = "adaptive"  # adaptive: quick balancing rounds search as much as changed; fixed: search.steps
    observed: str | None = None  # SF's day (plbjax-import's *.sf-day.json) beside: sf-series.csv, versus-sf.png

    def __post_init__(self) -> None:
        if self.rounds not in ROUND_SEARCHES:
            raise BadInput(f"rounds: {self.rounds!r} is not one of {', '.join(ROUND_SEARCHES)}")


def register() -> None:
    """Make the schemas known to Hydra (conf/config.yaml and conf/replay.yaml name them)."""
    ConfigStore.instance().store(name="plbjax_schema", node=RunConfig)
    ConfigStore.instance().store(name="replay_schema", node=ReplayConfig)


def schema_keys(schema: type, prefix: str = "") -> dict[str, type]:
    """Every key of `schema`, dotted (nested dataclasses' keys included) -> the dataclass declaring it."""
    out: dict[str, type] = {}
    for field in dataclasses.fields(schema):
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        if dataclasses.is_dataclass(default):
            out |= schema_keys(type(default), f"{prefix}{field.name}.")
        else:
            out[prefix + field.name] = schema
    return out


def _refuse_unknown_keys(cfg: DictConfig, known: dict[str, type], prefix: str = "") -> None:
    """BadInput for a key the schema does not have, which Hydra lets through when it is added
    (`+search.chainz=4`), with the nearest known key."""
    for name in map(str, cfg.keys()):
        key = prefix + name
        if key in known:
            continue
        if not OmegaConf.is_missing(cfg, name) and isinstance(cfg[name], DictConfig):  # a group, or a typo of one
            _refuse_unknown_keys(cfg[name], known, key + ".")
            continue
        hint = did_you_mean(key, known)
        if key.startswith("settings"):  # plbjax-replay's key; a plan's settings are the state's
            hint = " (plbjax reads PLB settings from the state document's Settings)"
        raise BadInput(f"{key}: unknown config key{hint}")


def from_hydra(cfg: DictConfig, required: str = "state") -> RunConfig | ReplayConfig:
    """The composed config as dataclasses; every problem is a BadInput naming the key."""
    if OmegaConf.is_missing(cfg, required):
        raise BadInput(f"{required}: missing; run with {required}=PATH")
    _refuse_unknown_keys(cfg, schema_keys(RunConfig if required == "state" else ReplayConfig))
    config = OmegaConf.to_object(cfg)
    assert isinstance(config, (RunConfig, ReplayConfig)), "a config must start from its schema"
    return config
