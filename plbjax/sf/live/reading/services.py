"""Get Service Description -> one ``Services`` entry of the state document.

SF's names (Service Fabric REST API reference, StatefulServiceDescription / StatelessServiceDescription,
ServiceLoadMetricDescription, ServiceCorrelationDescription, ServicePlacementPolicyDescription; the
placement policy ``Type`` values ``RequireDomain``, ``InvalidDomain``, ``PreferPrimaryDomain``,
``RequireDomainDistribution``, ``NonPartiallyPlaceService``, ``AllowMultipleStatelessInstancesOnNode``
as in ServicePlacementPolicyDescriptionConverter.cs of microsoft/service-fabric-client-dotnet; the
``Weight`` values Zero/Low/Medium/High, ``DefaultMoveCost`` Zero/Low/Medium/High/VeryHigh and
correlation ``Scheme`` Invalid/Affinity/AlignedAffinity/NonAlignedAffinity as in its
ServiceLoadMetricWeightConverter.cs, MoveCostConverter.cs and ServiceCorrelationSchemeConverter.cs).
Enum values are compared without regard to case, as SF's clients read them; counts and default loads
are read whether written as JSON numbers or as strings. A value plbjax cannot carry (a placement policy
it does not model, a correlation scheme ``Invalid``, a policy without its domain) is reported, never fatal.
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf.live.reading.dumpdir import at, enum, integer, need, need_name, number
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.reading.report import Report

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
WEIGHTS = ("Zero", "Low", "Medium", "High")
MOVE_COSTS = ("Zero", "Low", "Medium", "High", "VeryHigh")
LOAD_KEYS = ("PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad")


def service_kind(desc: Json, where: str) -> str | None:
    """Stateful or Stateless; None for SF's ServiceKind Invalid; BadInput for anything else."""
    raw = need(desc, "ServiceKind", where)
    kind = enum(raw, (*KINDS, "Invalid"))
    if kind is None:
        raise BadInput(f"{at(where, 'ServiceKind')}: {raw!r} is not Stateful or Stateless")
    return None if kind == "Invalid" else kind


def _list(desc: Json, key: str, where: str) -> list:
    """desc[key], a list of JSON objects (absent or null: empty)."""
    value = desc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BadInput(f"{at(where, key)}: expected a list of JSON objects")
    return value


def service_entry(desc: Json, where: str, report: Report) -> Json:
    """The state's Services entry for one service description (whose ServiceKind is not Invalid)."""
    kind = service_kind(desc, where) or "Stateless"
    count_key = "TargetReplicaSetSize" if kind == "Stateful" else "InstanceCount"
    if count_key not in desc:
        raise BadInput(f"{at(where, count_key)}: missing")
    entry = {
        "ServiceName": need_name(desc, "ServiceName", where),
        "ServiceKind": kind,
        count_key: integer(desc[count_key], at(where, count_key)),
    }
    for key in ("ServiceTypeName", "ApplicationName"):
        if isinstance(desc.get(key), str) and desc[key].strip():
            entry[key] = desc[key]
    constraints = desc.get("PlacementConstraints")
    if isinstance(constraints, str) and constraints.strip():
        entry["PlacementConstraints"] = constraints
    cost = desc.get("DefaultMoveCost")
    specified = desc.get("IsDefaultMoveCostSpecified", True)
    if cost not in (None, "") and specified not in (False, "false", "False"):
        if enum(cost, MOVE_COSTS) is None:
            report.note(f"{at(where, 'DefaultMoveCost')} = {cost!r} not carried: not one of {', '.join(MOVE_COSTS)}")
        else:
            entry["DefaultMoveCost"] = enum(cost, MOVE_COSTS)
    metrics = []
    for i, m in enumerate(_list(desc, "ServiceLoadMetrics", where)):
        metric = _metric(m, kind, at(where, f"ServiceLoadMetrics[{i}]"), report)
        if any(metric["Name"] == other["Name"] for other in metrics):
            report.note(f"{at(where, f'ServiceLoadMetrics[{i}]')}: second metric {metric['Name']!r} not carried")
        else:
            metrics.append(metric)
    correlations = [
        kept
        for i, c in enumerate(_list(desc, "CorrelationScheme", where))
        if (kept := _correlation(c, at(where, f"CorrelationScheme[{i}]"), report))
    ]
    policies = [
        kept
        for i, p in enumerate(_list(desc, "ServicePlacementPolicies", where))
        if (kept := _policy(p, at(where, f"ServicePlacementPolicies[{i}]"), report))
    ]
    entry |= {
        k: v for k, v in (("Metrics", metrics), ("Correlations", correlations), ("PlacementPolicies", policies)) if v
    }
    return entry


def _metric(raw: Json, kind: str, where: str, report: Report) -> Json:
    """A ServiceLoadMetricDescription as a state metric: the default loads its kind uses."""
    name = need_name(raw, "Name", where)
    out: dict = {"Name": name}
    if raw.get("Weight") not in (None, ""):
        weight = enum(raw["Weight"], WEIGHTS)
        if weight is None:
            report.note(f"{where}.Weight = {raw['Weight']!r} not carried: not one of {', '.join(WEIGHTS)}")
        else:
            out["Weight"] = weight
    metric = {}
    for key in LOAD_KEYS:
        if raw.get(key) not in (None, ""):
            metric[key] = number(raw[key], f"{where}.{key}")
            if metric[key] < 0:
                raise BadInput(f"{where}.{key}: negative load {metric[key]:g}")
            if metric[key].is_integer():
                metric[key] = int(metric[key])
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


def _correlation(correlation: Json, where: str, report: Report) -> Json | None:
    """A ServiceCorrelationDescription in the state's terms, or None (reported)."""
    scheme = enum(correlation.get("Scheme"), SCHEMES)
    other = correlation.get("ServiceName")
    if scheme is not None and isinstance(other, str) and other.strip():
        return {"Scheme": scheme, "ServiceName": other}
    report.note(
        f"{where}: correlation {correlation!r} not carried: SF places by it only with "
        f"Scheme one of {', '.join(SCHEMES)} and a ServiceName"
    )
    return None


def _is_domain(value: object) -> bool:
    """A fault domain as the state takes it: fd:/dc0/r0 or /dc0/r0."""
    if not isinstance(value, str):
        return False
    path = value[3:] if value.startswith("fd:") else value
    return path.startswith("/") and "" not in path.split("/")[1:]


def _policy(policy: Json, where: str, report: Report) -> Json | None:
    """A ServicePlacementPolicyDescription in the state's terms, or None (reported) if not modelled."""
    kind = enum(policy.get("Type"), tuple(POLICY_TYPES))
    if kind is None:
        report.note(f"{where}: placement policy {policy.get('Type')!r} not carried: not modelled by plbjax")
        return None
    out = {"Type": POLICY_TYPES[kind]}
    domain = policy.get("DomainName")
    if kind != "RequireDomainDistribution":
        if not _is_domain(domain):
            report.note(
                f"{where}: placement policy {kind} not carried: its DomainName {domain!r} is not a fault domain "
                "like 'fd:/dc0'"
            )
            return None
    if isinstance(domain, str) and domain.strip():
        out["DomainName"] = domain
    return out
