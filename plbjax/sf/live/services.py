"""Get Service Description -> one ``Services`` entry of the state document.

SF's names (Service Fabric REST API reference, StatefulServiceDescription / StatelessServiceDescription,
ServiceLoadMetricDescription, ServiceCorrelationDescription, ServicePlacementPolicyDescription; the
placement policy ``Type`` values ``RequireDomain``, ``InvalidDomain``, ``PreferPrimaryDomain``,
``RequireDomainDistribution``, ``NonPartiallyPlaceService``, ``AllowMultipleStatelessInstancesOnNode``
as in ServicePlacementPolicyDescriptionConverter.cs of microsoft/service-fabric-client-dotnet).
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf.live.dumpdir import at, need
from plbjax.sf.live.report import Report

# SF's built-in metrics: their load comes from the replica's role, never from default loads.
BUILTIN_METRICS = frozenset({"PrimaryCount", "SecondaryCount", "ReplicaCount", "InstanceCount", "Count"})
POLICY_TYPES = {
    "RequireDomain": "RequiredDomain",
    "InvalidDomain": "InvalidDomain",
    "PreferPrimaryDomain": "PreferPrimaryDomain",
    "RequireDomainDistribution": "RequireDomainDistribution",
}
SCHEMES = ("Affinity", "AlignedAffinity", "NonAlignedAffinity")
KINDS = ("Stateful", "Stateless")


def service_entry(desc: dict, where: str, report: Report) -> dict:
    """The state's Services entry for one service description."""
    kind = need(desc, "ServiceKind", where)
    if kind not in KINDS:
        raise BadInput(f"{at(where, 'ServiceKind')}: {kind!r} is not Stateful or Stateless")
    count_key = "TargetReplicaSetSize" if kind == "Stateful" else "InstanceCount"
    entry = {
        "ServiceName": need(desc, "ServiceName", where),
        "ServiceKind": kind,
        count_key: need(desc, count_key, where, int),
    }
    for key in ("ServiceTypeName", "ApplicationName"):
        if desc.get(key):
            entry[key] = desc[key]
    if (desc.get("PlacementConstraints") or "").strip():
        entry["PlacementConstraints"] = desc["PlacementConstraints"]
    if desc.get("DefaultMoveCost") and desc.get("IsDefaultMoveCostSpecified", True):
        entry["DefaultMoveCost"] = desc["DefaultMoveCost"]
    metrics = [
        _metric(m, kind, at(where, f"ServiceLoadMetrics[{i}]"), report)
        for i, m in enumerate(desc.get("ServiceLoadMetrics") or [])
    ]
    correlations = [
        c
        for i, c in enumerate(desc.get("CorrelationScheme") or [])
        if _kept_correlation(c, at(where, f"CorrelationScheme[{i}]"), report)
    ]
    policies = [
        kept
        for i, p in enumerate(desc.get("ServicePlacementPolicies") or [])
        if (kept := _policy(p, at(where, f"ServicePlacementPolicies[{i}]"), report))
    ]
    entry |= {
        k: v for k, v in (("Metrics", metrics), ("Correlations", correlations), ("PlacementPolicies", policies)) if v
    }
    return entry


def _metric(metric: dict, kind: str, where: str, report: Report) -> dict:
    """A ServiceLoadMetricDescription as a state metric: the default loads its kind uses."""
    name = need(metric, "Name", where)
    out = {"Name": name}
    if metric.get("Weight"):
        out["Weight"] = metric["Weight"]
    used = ("PrimaryDefaultLoad", "SecondaryDefaultLoad") if kind == "Stateful" else ("DefaultLoad",)
    if name in BUILTIN_METRICS:
        used = ()
    elif kind == "Stateless" and "DefaultLoad" not in metric and "PrimaryDefaultLoad" in metric:
        out["DefaultLoad"] = metric["PrimaryDefaultLoad"]
    out |= {k: metric[k] for k in used if k in metric}
    same = out.get("DefaultLoad", out.get("PrimaryDefaultLoad"))
    for key in ("PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad"):
        if key in metric and key not in out and metric[key] and metric[key] != same:
            why = (
                "SF derives a built-in metric's load from the role"
                if name in BUILTIN_METRICS
                else f"a {kind.lower()} service does not use it"
            )
            report.note(f"{where}.{key} = {metric[key]} not carried: {why}")
    return out


def _kept_correlation(correlation: dict, where: str, report: Report) -> bool:
    scheme = correlation.get("Scheme")
    if scheme in SCHEMES and correlation.get("ServiceName"):
        return True
    report.note(
        f"{where}: correlation {correlation!r} not carried: SF places by it only with "
        f"Scheme one of {', '.join(SCHEMES)}"
    )
    return False


def _policy(policy: dict, where: str, report: Report) -> dict | None:
    """A ServicePlacementPolicyDescription in the state's terms, or None (reported) if not modelled."""
    kind = policy.get("Type")
    if kind not in POLICY_TYPES:
        report.note(f"{where}: placement policy {kind!r} not carried: not modelled by plbjax")
        return None
    out = {"Type": POLICY_TYPES[kind]}
    if policy.get("DomainName"):
        out["DomainName"] = policy["DomainName"]
    return out
