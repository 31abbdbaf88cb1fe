"""The scheduler's settings, read from the replay's state once per version (SF's PLB settings it
follows, each node type's balancing interval, whether balancing is enabled)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from plbjax.sf import ClusterState, Phase
from plbjax.sf.replay.timeline.reading import scheduled


def _sf(name: str):
    """A field read from SF's setting `name`."""
    return field(metadata={"sf": name})


@dataclass(frozen=True)
class Settings:
    """What the scheduler reads of a state document (timeline.md §2): SF's settings by their role."""

    refresh_gap: float = _sf("PLBRefreshGap")
    placement_interval: float = _sf("MinPlacementInterval")
    constraint_check_interval: float = _sf("MinConstraintCheckInterval")
    constraint_check_enabled: bool = _sf("ConstraintCheckEnabled")
    balancing_delay_after_node_down: float = _sf("BalancingDelayAfterNodeDown")
    balancing_delay_after_new_node: float = _sf("BalancingDelayAfterNewNode")
    fix_partial_delay_after_node_down: float = _sf("ConstraintFixPartialDelayAfterNodeDown")
    fix_partial_delay_after_new_node: float = _sf("ConstraintFixPartialDelayAfterNewNode")
    retry_times: int = _sf("PLBActionRetryTimes")
    move_for_placement: bool = _sf("MoveExistingReplicaForPlacement")
    max_percentage_to_move_for_placement: float = _sf("MaxPercentageToMoveForPlacement")
    max_percentage_to_move: float = _sf("MaxPercentageToMove")
    movement_interval: float = _sf("GlobalMovementThrottleCountingInterval")
    partition_threshold: int = _sf("MovementPerPartitionThrottleThreshold")
    partition_interval: float = _sf("MovementPerPartitionThrottleCountingInterval")
    throttled_partitions_share: float = _sf("MovementThrottledPartitionsPercentageThreshold")
    avg_std_dev_delta: float = _sf("AvgStdDevDeltaThrottleThreshold")
    per_node_type: bool = _sf("SeparateBalancingStrategyPerNodeType")
    fast_balancing_timeout: float = _sf("FastBalancingSearchTimeout")
    slow_balancing_timeout: float = _sf("SlowBalancingSearchTimeout")
    max_annealing_rounds: int = _sf("MaxSimulatedAnnealingIterations")
    global_threshold: float = _sf("GlobalMovementThrottleThreshold")
    global_percentage: float = _sf("GlobalMovementThrottleThresholdPercentage")
    balancing_threshold: float = _sf("GlobalMovementThrottleThresholdForBalancing")
    balancing_percentage: float = _sf("GlobalMovementThrottleThresholdPercentageForBalancing")
    placement_threshold: float = _sf("GlobalMovementThrottleThresholdForPlacement")
    placement_percentage: float = _sf("GlobalMovementThrottleThresholdPercentageForPlacement")
    balancing_intervals: Mapping[str | None, float] = field(default_factory=dict)  # node type (None: cluster)
    balancing_enabled: bool = True

    def interval(self, phase: Phase) -> float:
        """The placement or constraint-check timer's interval."""
        return float(self.placement_interval if phase == Phase.PLACEMENT else self.constraint_check_interval)

    def global_throttles(self) -> tuple[tuple[float, float], ...]:
        """(absolute, percentage) of the global throttles: overall, for balancing, for placement."""
        return (
            (self.global_threshold, self.global_percentage),
            (self.balancing_threshold, self.balancing_percentage),
            (self.placement_threshold, self.placement_percentage),
        )

    def phases_on(self) -> tuple[Phase, ...]:
        """Placement, and the constraint check unless ConstraintCheckEnabled is false (SF's RefreshAction)."""
        placement = (Phase.PLACEMENT,)
        return (*placement, Phase.CONSTRAINT_CHECK) if self.constraint_check_enabled else placement


def read_settings(state: ClusterState) -> Settings:
    """The scheduler's settings of `state` (SF's defaults where it sets none)."""
    s = scheduled(state.settings)
    named = {f.name: s[f.metadata["sf"]] for f in fields(Settings) if f.metadata}
    return Settings(
        **named,
        balancing_intervals=_balancing_intervals(state, s),
        balancing_enabled=_balancing_enabled(state, s),
    )


def _balancing_intervals(state: ClusterState, s: Mapping) -> dict[str | None, float]:
    """{node type: MinLoadBalancingInterval(PerNodeType)}, or {None: ...} for the whole cluster."""
    if not s["SeparateBalancingStrategyPerNodeType"]:
        return {None: float(s["MinLoadBalancingInterval"])}
    given = state.document.get("NodeTypes", [])
    overrides = {t["Name"]: t.get("PlacementAndLoadBalancingOverrides", {}) for t in given}
    names = sorted({n.node_type for n in state.nodes}, key=lambda t: (t is not None, t or ""))
    return {
        t: float(overrides.get(t, {}).get("MinLoadBalancingIntervalPerNodeType", s["MinLoadBalancingInterval"]))
        for t in names
    }


def _balancing_enabled(state: ClusterState, s: Mapping) -> bool:
    """SF's RefreshAction: isBalancingEnabled = LoadBalancingEnabled, not paused (a cluster upgrade
    pauses it), and canBalanceDueToAppUpgrade (no application upgrade, or
    AllowBalancingDuringApplicationUpgrade)."""
    upgrade = state.upgrade
    if not s["LoadBalancingEnabled"] or upgrade is None or not upgrade.in_progress:
        return bool(s["LoadBalancingEnabled"])
    return upgrade.scope != "Cluster" and bool(s["AllowBalancingDuringApplicationUpgrade"])


def with_settings(state_doc: dict, overrides: Mapping) -> dict:
    """`state_doc` (a document: a timeline's state, a command line's overrides) with Settings
    `overrides` (replacing any spelling of the same names)."""
    lower = {k.lower() for k in overrides}
    settings = {k: v for k, v in state_doc.get("Settings", {}).items() if k.lower() not in lower}
    return {**state_doc, "Settings": {**settings, **overrides}}
