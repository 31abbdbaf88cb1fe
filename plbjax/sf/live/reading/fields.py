"""What becomes of each field of SF's REST responses (the shapes `Report.walk` reads).

Field names are those of the Service Fabric REST API reference (learn.microsoft.com/rest/api/servicefabric,
the 8.2 swagger in Azure/azure-rest-api-specs), as serialised by microsoft/service-fabric-client-dotnet
(src/Microsoft.ServiceFabric.Client.Http/Generated/Serialization/*Converter.cs: NodeInfo, NodeLoadInfo,
NodeLoadMetricInformation, ApplicationInfo, ApplicationLoadInfo, ApplicationLoadMetricInformation,
Stateful/StatelessServiceInfo, Stateful/StatelessServiceDescription,
ServiceLoadMetricDescription, ServiceCorrelationDescription, ServicePlacement*PolicyDescription,
Stateful/StatelessServicePartitionInfo, Int64Range/NamedPartitionInformation, StatefulServiceReplicaInfo,
StatelessServiceInstanceInfo, PartitionLoadInformation, LoadMetricReportInfo,
DeployedStatefulServiceReplicaDetailInfo, DeployedStatelessServiceInstanceDetailInfo) and by SF's own
ReplicaLoadInformationQueryResult (microsoft/service-fabric, src/prod/src/ServiceModel).
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]  # one JSON object as SF's REST API (or a plbjax document) gives it, read at a door


class Info(str):
    """Why a field is not carried, for a field that has no bearing on placement or balancing (an
    address, a version, a health state, a value plbjax derives): the report counts these per kind of
    file; every other reason (a setting, a policy plbjax does not model) gets a line of its own."""


HEALTH = Info("health state is not a placement input")
TIMING = Info("failover timing, not a placement input")
NOT_PLACEMENT = Info("no bearing on placement")
DERIVED = Info("derived: plbjax computes it from the replicas' loads")
QUORUM = Info("quorum size, not a placement input")
AVAILABILITY = Info("availability minimum, not a placement input")
COUNT = Info("the service description's count is used")
AUX = "auxiliary replicas are not modelled by plbjax"
TAGS = "node tags (TagsRequiredToPlace/Run) are not modelled by plbjax"
TIME = Info("report time is not modelled")

NODE = {
    "Name": True,
    "Type": True,
    "FaultDomain": True,
    "UpgradeDomain": True,
    "NodeStatus": True,
    "IsStopped": True,
    "NodeDeactivationInfo": {
        "NodeDeactivationIntent": True,
        "NodeDeactivationStatus": True,
        "NodeDeactivationTask": Info("deactivation tasks: only the resulting node status is used"),
        "PendingSafetyChecks": Info("safety checks: only the resulting node status is used"),
    },
    "IpAddressOrFQDN": NOT_PLACEMENT,
    "CodeVersion": NOT_PLACEMENT,
    "ConfigVersion": NOT_PLACEMENT,
    "NodeUpTimeInSeconds": NOT_PLACEMENT,
    "NodeDownTimeInSeconds": NOT_PLACEMENT,
    "NodeUpAt": NOT_PLACEMENT,
    "NodeDownAt": NOT_PLACEMENT,
    "HealthState": HEALTH,
    "Id": Info("SF's internal node id; plbjax names nodes by Name"),
    "InstanceId": NOT_PLACEMENT,
    "IsSeedNode": Info("seed nodes matter to the cluster's quorum, not to placement"),
    "NodeTags": TAGS,
    "IsNodeByNodeUpgradeInProgress": "upgrade progress is not read from a dump",
    "InfrastructurePlacementID": NOT_PLACEMENT,
}
NODE_LOAD = {
    "NodeName": True,
    "NodeLoadMetricInformation": {
        "Name": True,
        "NodeCapacity": True,
        "NodeLoad": DERIVED,
        "NodeRemainingCapacity": DERIVED,
        "IsCapacityViolation": DERIVED,
        "NodeBufferedCapacity": Info("derived from NodeBufferPercentage"),
        "NodeRemainingBufferedCapacity": DERIVED,
        "CurrentNodeLoad": DERIVED,
        "NodeCapacityRemaining": DERIVED,
        "BufferedNodeCapacityRemaining": DERIVED,
        "PlannedNodeLoadRemoval": "load of movements in flight is not modelled",
    },
}
APPLICATION = {
    "Id": True,
    "Name": True,
    "TypeName": NOT_PLACEMENT,
    "TypeVersion": NOT_PLACEMENT,
    "Status": NOT_PLACEMENT,
    "Parameters": Info("already applied by SF in the service descriptions"),
    "HealthState": HEALTH,
    "ApplicationDefinitionKind": NOT_PLACEMENT,
    "ManagedApplicationIdentity": NOT_PLACEMENT,
    "ApplicationMetadata": NOT_PLACEMENT,
}
APPLICATION_LOAD = {  # Get Application Load Info (ApplicationLoadInfo): `applications`
    "Id": True,
    "MinimumNodes": True,
    "MaximumNodes": True,
    "NodeCount": DERIVED,
    "ApplicationLoadMetricInformation": {
        "Name": True,
        "ReservationCapacity": True,
        "ApplicationCapacity": True,
        "ApplicationLoad": DERIVED,
    },
}
SERVICE = {
    "Id": True,
    "Name": True,
    "ServiceKind": True,
    "TypeName": True,
    "ManifestVersion": NOT_PLACEMENT,
    "HealthState": HEALTH,
    "ServiceStatus": NOT_PLACEMENT,
    "IsServiceGroup": "service groups are not modelled",
    "HasPersistedState": NOT_PLACEMENT,
    "ServiceMetadata": NOT_PLACEMENT,
}
METRIC = {
    "Name": True,
    "Weight": True,
    "PrimaryDefaultLoad": True,
    "SecondaryDefaultLoad": True,
    "DefaultLoad": True,
    "AuxiliaryDefaultLoad": AUX,
    "MaximumLoad": "a metric's maximum load (application capacity) is not modelled",
}
DESCRIPTION = {
    "ServiceKind": True,
    "ApplicationName": True,
    "ServiceName": True,
    "ServiceTypeName": True,
    "PlacementConstraints": True,
    "CorrelationScheme": {"Scheme": True, "ServiceName": True},
    "ServiceLoadMetrics": METRIC,
    "ServicePlacementPolicies": {"Type": True, "DomainName": True},
    "DefaultMoveCost": True,
    "IsDefaultMoveCostSpecified": True,
    "TargetReplicaSetSize": True,
    "InstanceCount": True,
    "PartitionDescription": Info("the partitioning scheme: the partitions themselves come from partitions/"),
    "InitializationData": NOT_PLACEMENT,
    "ServicePackageActivationMode": "activation mode is not modelled",
    "ServiceDnsName": NOT_PLACEMENT,
    "ScalingPolicies": "auto-scaling is not modelled; the current counts are planned for",
    "TagsRequiredToPlace": TAGS,
    "TagsRequiredToRun": TAGS,
    "MinReplicaSetSize": QUORUM,
    "HasPersistedState": NOT_PLACEMENT,
    "Flags": Info("says which optional fields were set; read from the fields"),
    "ReplicaRestartWaitDurationSeconds": TIMING,
    "QuorumLossWaitDurationSeconds": TIMING,
    "StandByReplicaKeepDurationSeconds": TIMING,
    "ServicePlacementTimeLimitSeconds": TIMING,
    "DropSourceReplicaOnMove": Info("how SF carries out a move, not where replicas go"),
    "ReplicaLifecycleDescription": TIMING,
    "AuxiliaryReplicaCount": AUX,
    "ServiceSensitivityDescription": "service sensitivity is not modelled",
    "MinInstanceCount": AVAILABILITY,
    "MinInstancePercentage": AVAILABILITY,
    "InstanceCloseDelayDurationSeconds": TIMING,
    "InstanceLifecycleDescription": TIMING,
    "InstanceRestartWaitDurationSeconds": TIMING,
}
PARTITION = {
    "ServiceKind": True,
    "PartitionInformation": {
        "Id": True,
        "ServicePartitionKind": Info("plbjax keys partitions by Id only"),
        "LowKey": Info("partition key range, no bearing on placement"),
        "HighKey": Info("partition key range, no bearing on placement"),
        "Name": Info("partition name, no bearing on placement"),
    },
    "HealthState": HEALTH,
    "PartitionStatus": NOT_PLACEMENT,
    "TargetReplicaSetSize": COUNT,
    "InstanceCount": COUNT,
    "MinReplicaSetSize": QUORUM,
    "AuxiliaryReplicaCount": AUX,
    "LastQuorumLossDuration": NOT_PLACEMENT,
    "PrimaryEpoch": NOT_PLACEMENT,
    "CurrentConfigurationEpoch": NOT_PLACEMENT,
    "MinInstanceCount": AVAILABILITY,
    "MinInstancePercentage": AVAILABILITY,
}
REPLICA = {
    "ServiceKind": True,
    "ReplicaId": True,
    "InstanceId": True,
    "ReplicaRole": True,
    "ReplicaStatus": True,
    "NodeName": True,
    "HealthState": HEALTH,
    "Address": NOT_PLACEMENT,
    "LastInBuildDurationInSeconds": NOT_PLACEMENT,
    "PreviousReplicaRole": NOT_PLACEMENT,
}
REPORT = {"Name": True, "Value": True, "CurrentValue": True, "LastReportedUtc": TIME}
PARTITION_LOAD = {
    "PartitionId": True,
    "PrimaryLoadMetricReports": REPORT,
    "SecondaryLoadMetricReports": REPORT,
    "AuxiliaryLoadMetricReports": AUX,
}
REPLICA_LOAD = {
    "PartitionId": True,
    "ReplicaOrInstanceId": True,
    "ReplicaId": True,
    "InstanceId": True,
    "LoadMetricReports": REPORT,
    "ReportedLoad": REPORT,
    "ServiceKind": True,
    "ServiceName": True,
    "CurrentServiceOperation": NOT_PLACEMENT,
    "CurrentServiceOperationStartTimeUtc": NOT_PLACEMENT,
    "CurrentReplicatorOperation": NOT_PLACEMENT,
    "ReadStatus": NOT_PLACEMENT,
    "WriteStatus": NOT_PLACEMENT,
    "ReplicatorStatus": NOT_PLACEMENT,
    "ReplicaStatus": NOT_PLACEMENT,
    "DeployedServiceReplicaQueryResult": NOT_PLACEMENT,
}
MANIFEST = {"Manifest": True}
PAGE = {"ContinuationToken": True, "Items": True}


def _names(*shapes: dict) -> dict[str, str]:
    """lower case -> SF's spelling of every field name of `shapes` (nested shapes included)."""
    out: dict[str, str] = {}
    for shape in shapes:
        for key, rule in shape.items():
            out.setdefault(key.lower(), key)
            if isinstance(rule, dict):
                out |= {k: v for k, v in _names(rule).items() if k not in out}
    return out


# The field names `dumpdir.canonical` restores (sfctl writes them in camelCase).
NAMES = _names(
    PAGE,
    MANIFEST,
    NODE,
    NODE_LOAD,
    APPLICATION,
    APPLICATION_LOAD,
    SERVICE,
    DESCRIPTION,
    PARTITION,
    REPLICA,
    PARTITION_LOAD,
    REPLICA_LOAD,
)
