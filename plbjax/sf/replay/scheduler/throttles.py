"""SF's movement throttles over the replay's clock: the global throttles (AreMovementsThrottled) and
the movements in their counting window, the partitions at the per-partition throttle
(GetMovementThrottledFailoverUnits), and what the planner's Settings say is left."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from plbjax.sf import PHASES, Phase
from plbjax.sf.replay.scheduler.settings import Settings
from plbjax.sf.replay.types import PartitionKey


class Throttle(NamedTuple):
    """A global movement throttle: its two settings (SF's names) and the phases whose movements count."""

    absolute: str
    percentage: str
    phases: tuple[Phase, ...]


# In the order of `Settings.global_throttles` and `Allowance`'s fields.
THROTTLES = (
    Throttle("GlobalMovementThrottleThreshold", "GlobalMovementThrottleThresholdPercentage", PHASES),
    Throttle(
        "GlobalMovementThrottleThresholdForBalancing",
        "GlobalMovementThrottleThresholdPercentageForBalancing",
        (Phase.BALANCING,),
    ),
    Throttle(
        "GlobalMovementThrottleThresholdForPlacement",
        "GlobalMovementThrottleThresholdPercentageForPlacement",
        (Phase.PLACEMENT,),
    ),
)


class Allowance(NamedTuple):
    """Movements left in the counting window under each global throttle (None: the throttle is not set)."""

    overall: int | None
    balancing: int | None
    placement: int | None

    def reached(self, phase: Phase) -> bool:
        """Whether the overall throttle or `phase`'s own (Balancing or Placement) has no movement left."""
        own = self.balancing if phase == Phase.BALANCING else self.placement
        return any(left is not None and left <= 0 for left in (self.overall, own))


@dataclass(frozen=True)
class Movement:
    """A move or swap issued by a phase, counted against the global throttles."""

    time: float
    phase: Phase


def limit(absolute: float, percentage: float, existing: int) -> int | None:
    """SF's AreMovementsThrottled limit: the stricter of an absolute count and a percentage."""
    limits = ([int(absolute)] if absolute > 0 else []) + ([math.ceil(percentage * existing)] if percentage > 0 else [])
    return min(limits) if limits else None


def throttle_allowance(settings: Settings, movements: Sequence[Movement], now: float, existing: int) -> Allowance:
    """The movements left under every global throttle at `now`, of `existing` placed replicas."""
    window = [m for m in movements if now - m.time < settings.movement_interval]
    left = []
    for throttle, (absolute, percentage) in zip(THROTTLES, settings.global_throttles()):
        most = limit(absolute, percentage, existing)
        left.append(None if most is None else most - sum(m.phase in throttle.phases for m in window))
    return Allowance(*left)


def throttle_overrides(allowance: Allowance, phase: Phase) -> dict[str, object]:
    """The planner's Settings for `allowance`: each global throttle set becomes the absolute count left
    (its percentage 0); a placement with none left gets MaxPercentageToMoveForPlacement 0."""
    overrides: dict[str, object] = {}
    for throttle, left in zip(THROTTLES, allowance):
        if left is not None and left > 0:
            overrides |= {throttle.absolute: left, throttle.percentage: 0}
        elif left is not None and phase == Phase.PLACEMENT and phase in throttle.phases:
            overrides["MaxPercentageToMoveForPlacement"] = 0
    return overrides


@dataclass
class Window:
    """The movements a counting window may still hold: every balancing or placement move or swap
    (global throttles), and every partition a balancing round moved (per-partition throttle)."""

    movements: list[Movement] = field(default_factory=list)
    partition_moves: list[tuple[float, PartitionKey]] = field(default_factory=list)

    def slide(self, now: float, settings: Settings) -> None:
        """Forget the movements the windows no longer hold at `now`."""
        self.movements = [m for m in self.movements if now - m.time < settings.movement_interval]
        self.partition_moves = [(t, k) for t, k in self.partition_moves if now - t < settings.partition_interval]

    def moved(self, now: float, phase: Phase) -> None:
        """A move or swap issued by `phase` (the constraint check's do not count)."""
        if phase in (Phase.BALANCING, Phase.PLACEMENT):
            self.movements.append(Movement(now, phase))

    def partitions_moved(self, now: float, keys: set[PartitionKey]) -> None:
        """The partitions a balancing round moved."""
        self.partition_moves += [(now, key) for key in sorted(keys)]

    def wakes(self, settings: Settings) -> list[float]:
        """When the oldest movement leaves each window."""
        wakes = [m.time + settings.movement_interval for m in self.movements[:1]]
        return wakes + [t + settings.partition_interval for t, _ in self.partition_moves[:1]]

    def allowance(self, settings: Settings, now: float, existing: int) -> Allowance:
        return throttle_allowance(settings, self.movements, now, existing)

    def throttled_partitions(self, threshold: int) -> set[PartitionKey]:
        """SF's GetMovementThrottledFailoverUnits: partitions balancing moved as many times as
        MovementPerPartitionThrottleThreshold within MovementPerPartitionThrottleCountingInterval."""
        counts = Counter(key for _, key in self.partition_moves)
        return {k for k, c in counts.items() if c >= threshold}
