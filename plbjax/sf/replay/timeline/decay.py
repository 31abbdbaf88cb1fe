"""SF's load decay (LoadDecayFactor, LoadDecayInterval; LoadMetricStats.cpp:120-146 and get_Value):
with a factor above 0, the load in force for a replica's metric is the average of everything it
reported, each report weighted by factor ** (its age / interval). The loads the replay starts from
count as reported at its start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

SMALL = 1e-6  # SF's Constants::SmallValue: a weight below it forgets the past


@dataclass
class _Stats:
    """One replica metric's reports: their decayed weighted sum and sum of weights, as of `time`."""

    weighted: float
    weights: float
    time: float


@dataclass
class LoadDecay:
    """The reports of every replica metric so far, to average the next one into (`report`)."""

    factor: float
    interval: float
    start: float = 0.0
    stats: dict[tuple[str, str, str, str], _Stats] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Mapping, start: float = 0.0) -> LoadDecay | None:
        """The decay the settings ask for, or None (SF's default factor 0: a report replaces the load)."""
        factor = float(settings["LoadDecayFactor"])
        return cls(factor, float(settings["LoadDecayInterval"]), start) if factor > 0 else None

    def report(self, key: tuple[str, str, str, str], value: float, now: float, before: float | None) -> float:
        """The load in force after `value` is reported at `now` for `key` (service, partition, replica,
        metric), whose load in force was `before` (None: never reported)."""
        stats = self.stats.get(key)
        if stats is None and before is not None:
            stats = _Stats(before, 1.0, self.start)
        if stats is None:
            stats = self.stats[key] = _Stats(value, 1.0, now)
            return value
        weight = self.factor ** (max(now - stats.time, 0.0) / self.interval) if self.interval > 0 else 0.0
        if weight > SMALL:
            stats.weighted, stats.weights = stats.weighted * weight + value, stats.weights * weight + 1.0
        else:
            stats.weighted, stats.weights = value, 1.0
        stats.time = max(stats.time, now)
        self.stats[key] = stats
        return stats.weighted / stats.weights
