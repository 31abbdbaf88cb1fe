"""SF's Get Application Load Info answers (``application-load/<ApplicationId>.json``, ApplicationLoadInfo)
-> the state's `Applications` (application groups).

SF's answer (REST API reference, ApplicationLoadInfo and ApplicationLoadMetricInformation) carries
MinimumNodes, MaximumNodes and, per metric, ReservationCapacity (the capacity reserved in the
cluster: the per-node reservation times MinimumNodes) and ApplicationCapacity (the application's
TotalApplicationCapacity). It does not carry a metric's MaximumCapacity (the per-node limit): the
report says so, and the state leaves it unlimited. NodeCount and ApplicationLoad are derived.
An application without application capacity (SF answers zeros and no metric) gets no entry, so a
cluster without application groups imports as it did before them.
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf.live.reading import fields
from plbjax.sf.live.reading.dumpdir import Dump, at
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.reading.report import Report

KIND = "application-load/*.json"
NO_NODE_CAPACITY = (
    "MaximumCapacity (an application's most load on one node) is not in SF's application load "
    "information: not carried, unlimited in the state"
)


def read_application_groups(dump: Dump, applications: list[tuple[str, str]], report: Report) -> list[Json]:
    """The `Applications` entries of the applications (Id, Name) whose load file holds a capacity."""
    out = []
    for app_id, name in applications:
        rel = f"application-load/{app_id}.json"
        if not dump.exists(rel):
            continue
        body = dump.object(rel)
        report.walk(KIND, body, fields.APPLICATION_LOAD)
        report.count(KIND)
        entry = _group(body, name, rel, report)
        if entry is not None:
            out.append(entry)
    return out


def _group(body: Json, name: str, rel: str, report: Report) -> Json | None:
    minimum, maximum = _count(body, "MinimumNodes", f"{rel}:"), _count(body, "MaximumNodes", f"{rel}:")
    given = body.get("ApplicationLoadMetricInformation") or []
    if not isinstance(given, list):
        raise BadInput(f"{rel}: ApplicationLoadMetricInformation: expected a list")
    metrics = [
        _metric(m, minimum, f"{rel}: ApplicationLoadMetricInformation[{i}]", name, report) for i, m in enumerate(given)
    ]
    if not (minimum or maximum or metrics):
        return None
    if metrics:
        report.note(f"{rel}: {name}: {NO_NODE_CAPACITY}")
    entry: Json = {"ApplicationName": name, "MinimumNodes": minimum, "MaximumNodes": maximum}
    return entry | ({"Metrics": metrics} if metrics else {})


def _metric(item: object, minimum: int, where: str, name: str, report: Report) -> Json:
    if not isinstance(item, dict) or not isinstance(item.get("Name"), str) or not item["Name"]:
        raise BadInput(f"{at(where, 'Name')}: expected a metric name")
    reserved, total = _count(item, "ReservationCapacity", where), _count(item, "ApplicationCapacity", where)
    if reserved and not minimum:
        report.note(f"{where}: {name}: ReservationCapacity {reserved} without MinimumNodes: not carried")
        reserved = 0
    if reserved % max(minimum, 1):
        raise BadInput(f"{at(where, 'ReservationCapacity')}: {reserved} is not a multiple of MinimumNodes ({minimum})")
    out: Json = {"Name": item["Name"], "TotalApplicationCapacity": total}
    return out | ({"ReservationCapacity": reserved // minimum} if reserved else {})


def _count(item: Json, key: str, where: str) -> int:
    """A non-negative integer of SF's answer (an int64 may come as a string); 0 when absent."""
    value = item.get(key, 0)
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0 or isinstance(value, (bool, float)):
        raise BadInput(f"{at(where, key)}: {value!r} is not a non-negative integer")
    return number
