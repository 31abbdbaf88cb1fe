"""Service Fabric's application groups (the document's `Applications`) read into `Application` records.

A service belongs to the application its `ApplicationName` names, or, without one, to the
application its name starts with (fabric:/App/Svc belongs to fabric:/App): one rule, read once by
`building`. An application's limits are SF's ApplicationCapacityDescription's, checked as SF's
TryValidate checks them (ServiceModel/reliability/failover/applicationcapacitydescription.cpp:109,
applicationmetricdescription.cpp:95); 0 means no limit for MaximumNodes, MaximumCapacity and
TotalApplicationCapacity, as in SF.
"""

from __future__ import annotations

from plbjax.errors import BadInput
from plbjax.sf._state.cluster import Application, ApplicationMetric, Service

# SF gives each its own priority setting; plbjax measures a scaleout violation with placement's
# and an application-capacity violation with capacity's, so each must equal that one's.
FOLDED_PRIORITIES = (
    ("ScaleoutCountConstraintPriority", "PlacementConstraintPriority"),
    ("ApplicationCapacityConstraintPriority", "CapacityConstraintPriority"),
)


def read_applications(entries: list[dict], services: list[Service], settings: dict) -> tuple[Application, ...]:
    """The document's `Applications` (schema-valid), checked: unique names, SF's limits consistent,
    and the priority settings the search can honour (`FOLDED_PRIORITIES`)."""
    seen: dict[str, str] = {}
    applications = []
    for i, entry in enumerate(entries):
        where = f"Applications[{i}]"
        name = entry["ApplicationName"]
        if name in seen:
            raise BadInput(f"{where}.ApplicationName: duplicate application {name!r} (first at {seen[name]})")
        seen[name] = where
        maximum = entry.get("MaximumNodes", 0)
        minimum = entry.get("MinimumNodes", 0)
        if maximum and minimum > maximum:
            raise BadInput(f"{where}.MinimumNodes: {minimum} is greater than MaximumNodes ({maximum})")
        metrics = tuple(_metric(m, maximum, f"{where}.Metrics[{j}]") for j, m in enumerate(entry.get("Metrics", [])))
        names = [m.name for m in metrics]
        for j, metric_name in enumerate(names):
            if metric_name in names[:j]:
                raise BadInput(f"{where}.Metrics[{j}].Name: duplicate metric {metric_name!r}")
        applications.append(Application(name, minimum, maximum or None, metrics))
    if any(app.limits for app in applications):
        _check_priorities(settings)
    return tuple(applications)


def application_notes(
    applications: tuple[Application, ...], services: list[Service], metrics: set[str]
) -> tuple[str, ...]:
    """What the application groups name that nothing uses: an application without services, a
    metric no service reports (SF keeps both; they limit nothing here)."""
    used = {s.application for s in services}
    notes = [f"Applications: {a.name!r} has no service (it limits nothing)" for a in applications if a.name not in used]
    notes += [
        f"Applications: {a.name!r} metric {m.name!r} is no service's metric (it limits nothing)"
        for a in applications
        for m in a.metrics
        if m.name not in metrics
    ]
    return tuple(notes)


def _metric(entry: dict, maximum_nodes: int, where: str) -> ApplicationMetric:
    node = entry.get("MaximumCapacity", 0)
    reservation = entry.get("ReservationCapacity", 0)
    total = entry.get("TotalApplicationCapacity", 0)
    if node and reservation > node:
        raise BadInput(f"{where}.ReservationCapacity: {reservation:g} is greater than MaximumCapacity ({node:g})")
    if node and total and maximum_nodes * node > total:
        raise BadInput(
            f"{where}.TotalApplicationCapacity: {total:g} is smaller than MaximumCapacity * MaximumNodes "
            f"({node:g} * {maximum_nodes})"
        )
    return ApplicationMetric(entry["Name"], float(node) or None, float(reservation), float(total) or None)


def _check_priorities(settings: dict) -> None:
    for own, measured_with in FOLDED_PRIORITIES:
        if int(settings[own]) != int(settings[measured_with]):
            raise BadInput(
                f"Settings.{own}: {settings[own]} differs from {measured_with} ({settings[measured_with]}); "
                f"plbjax measures application groups with {measured_with}'s priority"
            )
