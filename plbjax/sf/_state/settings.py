"""Service Fabric's PlacementAndLoadBalancing settings: every name with SF's default.

Names and defaults come from ``src/prod/src/Reliability/LoadBalancing/PLBConfig.h``
(microsoft/service-fabric, newest stored commit 9bc71185) plus the public settings that are newer
than that source, taken from the PlacementAndLoadBalancing table of SF's "Customize cluster
settings" page (service-fabric-cluster-fabric-settings.md). The value type of each setting is the
type of its default: TimeSpan settings are seconds (float), uint settings are listed in
``_UNSIGNED``. Names are matched case-insensitively and reported in SF's spelling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import cast

from plbjax.errors import BadInput, did_you_mean

PLB_SETTINGS: dict[str, bool | int | float | str] = {
    # ---- health reporting and tracing
    "UseCRMPublicName": True,
    "TraceCRMReasons": True,
    "ValidatePlacementConstraint": True,
    "ValidatePrimaryPlacementConstraintOnPromote": True,
    "PlacementConstraintValidationCacheSize": 10000,
    "ConstraintViolationReportingPolicy": 0,
    "VerboseHealthReportLimit": 20,
    "ConstraintViolationHealthReportLimit": 50,
    "DetailedConstraintViolationHealthReportLimit": 200,
    "DetailedVerboseHealthReportLimit": 200,
    "ConsecutiveDroppedMovementsHealthReportLimit": 20,
    "DetailedNodeListLimit": 15,
    "DetailedPartitionListLimit": 15,
    "DetailedDiagnosticsInfoListLimit": 15,
    "DetailedMetricListLimit": 15,
    "PLBHealthEventTTL": 65.0,
    "SubclusteringReportingPolicy": 1,
    "DecisionOperationalTracingEnabled": False,
    "NodeLoadsOperationalTracingEnabled": True,
    "NodeLoadsOperationalTracingInterval": 20.0,
    "NodeLoadsTracingInterval": 20.0,
    "ApplicationLoadsTracingInterval": 40.0,
    "PLBPeriodicalTraceInterval": 20.0,
    "StatisticsTracingInterval": 60.0,
    "MaxViolatedItemsToTrace": 100,
    "MaxInvalidReplicasToTrace": 10,
    "TraceMetricInfoForBalancingRun": True,
    "PLBPeriodicalTraceApplicationCount": 10,
    "PLBPeriodicalTraceNodeCount": 20,
    "PLBPeriodicalTraceServiceCount": 20,
    "PLBNodeLoadTraceEntryCount": 500,
    "PLBApplicationLoadTraceMaxSize": 100,
    "PLBApplicationLoadTraceBatchSize": 100,
    # ---- timers (seconds)
    "PLBRefreshInterval": 1.0,  # deprecated, use PLBRefreshGap
    "PLBRefreshGap": 1.0,
    "MinPlacementInterval": 1.0,
    "MinConstraintCheckInterval": 1.0,
    "MinLoadBalancingInterval": 5.0,
    "BalancingDelayAfterNodeDown": 120.0,
    "BalancingDelayAfterNewNode": 120.0,
    "ConstraintFixPartialDelayAfterNodeDown": 120.0,
    "ConstraintFixPartialDelayAfterNewNode": 120.0,
    "PLBRewindInterval": 300.0,
    "PLBActionRetryTimes": 3,
    "MaxMovementHoldingTime": 3600.0,
    "MaxMovementExecutionTime": 10.0,
    "ProcessPendingUpdatesInterval": 0.3,
    "ServiceRepartitionForAutoScalingTimeout": 60.0,
    # ---- throttling
    "AvgStdDevDeltaThrottleThreshold": -1.0,
    "GlobalMovementThrottleThreshold": 1000,
    "GlobalMovementThrottleThresholdPercentage": 0.0,
    "GlobalMovementThrottleThresholdForPlacement": 0,
    "GlobalMovementThrottleThresholdPercentageForPlacement": 0.0,
    "GlobalMovementThrottleThresholdForBalancing": 0,
    "GlobalMovementThrottleThresholdPercentageForBalancing": 0.0,
    "GlobalMovementThrottleCountingInterval": 600.0,
    "MovementPerPartitionThrottleThreshold": 50,
    "MovementPerPartitionThrottleCountingInterval": 600.0,
    "MovementThrottledPartitionsPercentageThreshold": 0.5,
    "InBuildThrottlingEnabled": False,
    "InBuildThrottlingAssociatedMetric": "",
    "InBuildThrottlingGlobalMaxValue": 0,
    "SwapPrimaryThrottlingEnabled": False,
    "SwapPrimaryThrottlingAssociatedMetric": "",
    "SwapPrimaryThrottlingGlobalMaxValue": 0,
    "ThrottlingConstraintPriority": 0,
    "ThrottlePlacementPhase": False,
    "ThrottleBalancingPhase": True,
    "ThrottleConstraintCheckPhase": False,
    # ---- search
    "PlacementSearchTimeout": 0.5,
    "ConstraintCheckSearchTimeout": 0.5,
    "FastBalancingSearchTimeout": 10.0,
    "SlowBalancingSearchTimeout": 120.0,
    "YieldDurationPer10ms": 7,
    "InitialRandomSeed": -1,
    "MaxSimulatedAnnealingIterations": -1,
    "MaxPercentageToMove": 0.3,
    "MaxPercentageToMoveForPlacement": 0.1,
    "FastBalancingPopulationSize": 1,  # deprecated
    "SlowBalancingPopulationSize": 2,  # deprecated
    "FastBalancingTemperatureDecayRate": 0.8,
    "SlowBalancingTemperatureDecayRate": 0.98,
    "EnableClusterSpecificInitialTemperature": False,
    "ClusterSpecificTemperatureCoefficient": 100.0,
    "InitialTemperatureProbeCount": 50,
    "SimulatedAnnealingIterationsPerRound": 1000,
    "PlacementSearchIterationsPerRound": 100,
    "ConstraintCheckIterationsPerRound": 100,
    "SwapPrimaryProbability": 0.3,
    "UseScoreInConstraintCheck": True,
    "EnablePreferredSwapSolutionInConstraintCheck": True,
    "ScoreImprovementThreshold": 0.0,
    "UseBatchPlacement": True,
    "PlacementReplicaCountPerBatch": 100000,
    "RestrictedDefragmentationHeuristicEnabled": False,
    "PartiallyPlaceServices": True,
    "InterruptBalancingForAllFailoverUnitUpdates": False,
    # ---- scoring
    "LocalBalancingThreshold": 0.0,
    "LocalDomainWeight": 0.25,
    "IgnoreCostInScoring": False,
    "UseMoveCostReports": False,
    "MoveCostOffset": 1000,
    "MoveCostZeroValue": 0,
    "MoveCostLowValue": 1,
    "MoveCostMediumValue": 15,
    "MoveCostHighValue": 40,
    "SwapCost": 0.1,
    "NodesWithReservedLoadOverlap": False,
    "DefragmentationNodesStdDevFactor": 1.0,
    "DefragmentationFdsStdDevFactor": 0.01,
    "DefragmentationUdsStdDevFactor": 0.01,
    "SeparateBalancingStrategyPerNodeType": False,
    "SubclusteringEnabled": False,
    # ---- constraint priorities: 0 hard, 1 soft, 2 optimization, negative off
    "PlacementConstraintPriority": 0,
    "PreferredLocationConstraintPriority": 2,
    "PreferredPrimaryDomainsConstraintPriority": 1,
    "CapacityConstraintPriority": 0,
    "AffinityConstraintPriority": 0,
    "FaultDomainConstraintPriority": 0,
    "UpgradeDomainConstraintPriority": 1,
    "ScaleoutCountConstraintPriority": 0,
    "ApplicationCapacityConstraintPriority": 0,
    "BlockNodeInUpgradeConstraintPriority": -1,
    "NodeTaggingConstraintPriority": 0,
    "NodeTaggingEnabled": False,
    "FaultDomainEnabled": True,
    "UpgradeDomainEnabled": True,
    # ---- affinity, placement and upgrades
    "IsAffinityBidirectional": False,  # deprecated, use MoveParentToFixAffinityViolation
    "MoveParentToFixAffinityViolation": False,
    "MoveParentToFixAffinityViolationTransitionPercentage": 0.2,
    "AffinityMoveParentReplicaProbability": 0.5,  # deprecated
    "AllowHigherChildTargetReplicaCountForAffinity": True,
    "PlaceChildWithoutParent": True,
    "MoveExistingReplicaForPlacement": True,
    "RelaxConstraintsForPlacementEnabled": False,  # deprecated
    "RelaxFaultDomainConstraintsForPlacement": True,  # deprecated
    "RelaxAffinityConstraintsForPlacement": False,  # deprecated
    "RelaxCapacityConstraintsForPlacement": False,  # deprecated
    "RelaxConstraintForPlacement": True,
    "RelaxAffinityConstraintDuringUpgrade": True,
    "RelaxCapacityConstraintForUpgrade": True,
    "RelaxScaleoutConstraintDuringUpgrade": False,
    "RelaxAlignAffinityConstraintDuringSingletonUpgrade": True,
    "CheckAlignedAffinityForUpgrade": False,
    "CheckAffinityForUpgradePlacement": False,
    "AllowConstraintCheckFixesDuringApplicationUpgrade": True,
    "AllowBalancingDuringApplicationUpgrade": True,
    # PLBConfig.h says true; the public settings table says the default became false in SF 7.0.
    "PreferUpgradedUDs": False,
    "PreferExistingReplicaLocations": True,
    "PreferNodesForContainerPlacement": True,
    "QuorumBasedReplicaDistributionPerUpgradeDomains": False,
    "QuorumBasedReplicaDistributionPerFaultDomains": False,
    "QuorumBasedLogicAutoSwitch": True,
    "RelaxUnlimitedPartitionBasedAutoScaling": False,
    "RelaxUnlimitedInstanceBasedAutoScaling": False,
    # ---- loads, move costs and resources
    "UseSeparateSecondaryLoad": True,
    "UseSeparateSecondaryMoveCost": True,
    "UseSeparateAuxiliaryLoad": True,
    "UseSeparateAuxiliaryMoveCost": False,
    "UseDefaultLoadForServiceOnEveryNode": False,
    "LoadDecayInterval": 60.0,
    "LoadDecayFactor": 0.0,
    "PreventTransientOvercommit": False,
    "PreventIntermediateOvercommit": False,  # deprecated, use PreventTransientOvercommit
    "CountDisappearingLoadForSimulatedAnnealing": True,
    "AutoDetectAvailableResources": True,
    "CpuPercentageNodeCapacity": 0.8,
    "MemoryPercentageNodeCapacity": 0.8,
    "CpuCoresMetricWeight": 1.0,
    "MemoryInMBMetricWeight": 1.0,
    "IncludeResourceGovernanceNoneReplicaLoad": True,
    "EnforceUserServiceMetricCapacities": False,
    # ---- test-only entries of PLBConfig.h (accepted so that no real name is rejected)
    "DummyPLBEnabled": False,
    "LoadBalancingEnabled": True,
    "ConstraintCheckEnabled": True,
    "SplitDomainEnabled": False,
    "IsTestMode": False,
    "AllowedBalancingScoreDifference": 0.1,
    "PerfTestNumberOfNodes": 3000,
    "PerfTestNumberOfPartitions": 100000,
    "PerfTestNumberOfInstances": 10,
    "PrintRefreshTimers": False,
    "PerNodeThrottlingCheck": -1,
    "TraceSimulatedAnnealingStatistics": False,
    "SimulatedAnnealingStatisticsInterval": 100,
    "UseAppGroupsInBoost": False,
    "UseRGInBoost": False,
}

# Settings that SF declares `uint`, and the two that it requires to be greater than 0.
_UNSIGNED = frozenset(
    {
        "GlobalMovementThrottleThreshold",
        "GlobalMovementThrottleThresholdForPlacement",
        "GlobalMovementThrottleThresholdForBalancing",
        "MovementPerPartitionThrottleThreshold",
        "PLBPeriodicalTraceApplicationCount",
        "PLBPeriodicalTraceNodeCount",
        "PLBPeriodicalTraceServiceCount",
        "PLBNodeLoadTraceEntryCount",
        "PLBApplicationLoadTraceMaxSize",
        "PLBApplicationLoadTraceBatchSize",
    }
)
_POSITIVE = frozenset({"MaxViolatedItemsToTrace", "MaxInvalidReplicasToTrace"})

# Settings whose other values plbjax does not model and refuses (docs/settings.md, "Refused").
REFUSED = frozenset(
    {
        "UseScoreInConstraintCheck",
        "UseBatchPlacement",
        "PartiallyPlaceServices",
        "PreferredPrimaryDomainsConstraintPriority",
        "BlockNodeInUpgradeConstraintPriority",
        "NodeTaggingEnabled",
    }
)

# A domain kind switched off has no domain structure in SF (BalanceCheckerCreator.cpp:61): its
# constraint is off whatever its priority says.
_DOMAINS_OFF = {
    "FaultDomainEnabled": "FaultDomainConstraintPriority",
    "UpgradeDomainEnabled": "UpgradeDomainConstraintPriority",
}

_BY_LOWER = {name.lower(): name for name in PLB_SETTINGS}
_TYPE_NAMES = {bool: "boolean ('true' or 'false')", int: "integer", float: "number", str: "string"}


def resolve_settings(given: Mapping | None = None) -> dict[str, bool | int | float | str]:
    """Every PLB setting: SF's defaults overridden by `given` (values may be SF-style strings).

    Raises BadInput naming the key for an unknown name or a value that does not parse.
    """
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise BadInput(f"Settings: expected a mapping of setting names to values, got {given!r}")
    result = dict(PLB_SETTINGS)
    seen: dict[str, str] = {}
    for key, value in given.items():
        name = _BY_LOWER.get(str(key).lower())
        if name is None:
            hint = did_you_mean(str(key), PLB_SETTINGS)
            raise BadInput(f"Settings.{key}: unknown PlacementAndLoadBalancing setting{hint}")
        if name in seen:
            raise BadInput(f"Settings.{key}: given twice (also as '{seen[name]}')")
        seen[name] = str(key)
        result[name] = _coerce(name, value)
    for enabled, priority in _DOMAINS_OFF.items():
        if not result[enabled]:
            result[priority] = -1
    return result


def _coerce(name: str, value: object) -> bool | int | float | str:
    """`value` as the type of the setting's default, or BadInput."""
    kind = type(PLB_SETTINGS[name])
    parsed = parse_document(kind, value)
    if parsed is None:
        raise BadInput(f"Settings.{name}: {value!r} is not a valid {_TYPE_NAMES[kind]}")
    if name in _UNSIGNED and cast(float, parsed) < 0:  # the unsigned settings are numbers
        raise BadInput(f"Settings.{name}: {value!r} must not be negative")
    if name in _POSITIVE and cast(float, parsed) <= 0:  # so are the positive ones
        raise BadInput(f"Settings.{name}: {value!r} must be greater than 0")
    if name in REFUSED and parsed != PLB_SETTINGS[name]:
        default = PLB_SETTINGS[name]
        raise BadInput(f"Settings.{name}: {value!r} is refused: plbjax models only SF's default {default!r}")
    return parsed


def parse_document(kind: type, value: object) -> bool | int | float | str | None:
    """`value` parsed as `kind` (SF config strings accepted), or None if it does not parse."""
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        if kind is bool:
            return {"true": True, "false": False}.get(text.lower())
        try:
            number = int(text) if kind is int else float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, bool) or kind in (bool, str):
        return cast("bool | str", value) if type(value) is kind else None  # a bool or a str when it is kind
    if isinstance(value, int):
        return kind(value)
    if isinstance(value, float) and math.isfinite(value):
        if kind is float:
            return value
        return int(value) if value.is_integer() else None
    return None
