"""The cluster manifest (Get Cluster Manifest: the XML inside ``Manifest``) -> the state document's
cluster-wide parts: ``Settings``, the per-metric sections and ``NodeTypes``.

Element names follow SF's ServiceFabricServiceModel.xsd as the manifest writes them
(``ClusterManifest/NodeTypes/NodeType`` with ``PlacementProperties/Property``,
``Capacities/Capacity`` and ``PlacementAndLoadBalancingOverrides``; ``FabricSettings/Section/Parameter``),
see "Balancing your cluster", per-node-type section, in MicrosoftDocs/azure-docs
(service-fabric-cluster-resource-manager-balancing.md) and the PlacementAndLoadBalancing tables of
service-fabric-cluster-fabric-settings.md. Every value is probed alone with `plbjax.parse_state`,
so a name or value plbjax refuses goes to the report instead of failing the import.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from plbjax.errors import BadInput
from plbjax.sf import parse_state
from plbjax.sf.live.reading.fields import Info, Json
from plbjax.sf.live.reading.report import Report

WHERE = "cluster-manifest"
# FabricSettings sections that are per-metric maps in the state document, with the value type.
METRIC_SECTIONS = {
    "MetricBalancingThresholds": float,
    "MetricActivityThresholds": float,
    "DefragmentationMetrics": "bool",
    "NodeBufferPercentage": float,
    "GlobalMetricWeights": float,
}
OVERRIDES = {"MetricBalancingThresholdsPerNodeType": float, "MetricActivityThresholdsPerNodeType": float}


def _local(tag: str) -> str:
    """An element's name without its XML namespace."""
    return tag.rsplit("}", 1)[-1]


def _children(element: ET.Element, name: str) -> list[ET.Element]:
    return [child for child in element if _local(child.tag) == name]


def _value(text: str, kind) -> object:
    """An SF config string as the state document's type (a string that does not parse stays a string)."""
    if kind == "bool":
        return {"true": True, "false": False}.get(text.strip().lower(), text)
    try:
        return kind(text)
    except ValueError:
        return text


def _refused(part: Json) -> str | None:
    """Why plbjax refuses `part` of a state document (None if it accepts it)."""
    try:
        parse_state({"Nodes": [], "Services": [], "Partitions": [], **part}, WHERE)
    except BadInput as exc:
        return str(exc).removeprefix(f"{WHERE}: ")
    return None


def parse_manifest(xml: str, source: str, report: Report) -> Json:
    """The state document's cluster-wide keys from the manifest text; BadInput if it is not XML."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise BadInput(f"{source}: invalid XML: {exc}") from None
    if _local(root.tag) != "ClusterManifest":
        raise BadInput(f"{source}: the root element is {_local(root.tag)!r}, not 'ClusterManifest'")
    doc: dict = {}
    for child in root:
        name = _local(child.tag)
        if name == "FabricSettings":
            doc.update(_fabric_settings(child, report))
        elif name == "NodeTypes":
            doc["NodeTypes"] = [_node_type(n, report) for n in _children(child, "NodeType")]
        else:
            report.drop(WHERE, f"ClusterManifest/{name}", Info("not a placement input (nodes come from nodes.json)"))
    return doc


def _fabric_settings(element: ET.Element, report: Report) -> Json:
    """Settings and the per-metric sections; every other section is reported."""
    doc: dict = {}
    for section in _children(element, "Section"):
        name = section.get("Name", "")
        params = [(p.get("Name", ""), p.get("Value", "")) for p in _children(section, "Parameter")]
        where = f"FabricSettings/Section[{name}]"
        if name == "PlacementAndLoadBalancing":
            doc["Settings"] = _accepted("Settings", {k: v for k, v in params}, where, report)
        elif name in METRIC_SECTIONS:
            values = {k: _value(v, METRIC_SECTIONS[name]) for k, v in params}
            doc[name] = _accepted(name, values, where, report)
        else:
            report.drop(WHERE, where, Info(f"{len(params)} parameter(s); not a placement setting plbjax models"))
    return {k: v for k, v in doc.items() if v}


def _accepted(key: str, values: Json, where: str, report: Report) -> Json:
    """The entries of `values` that plbjax accepts under `key`; each refused one is reported."""
    kept = {}
    for name, value in values.items():
        why = _refused({key: {name: value}})
        if why is None:
            kept[name] = value
        else:
            report.drop(WHERE, f"{where}/Parameter[{name}]", why)
    return kept


def _node_type(element: ET.Element, report: Report) -> Json:
    """One NodeTypes entry: capacities, placement properties and PLB overrides."""
    name = element.get("Name", "")
    entry: dict = {"Name": name}
    for child in element:
        part = _local(child.tag)
        pairs = {p.get("Name", ""): p.get("Value", "") for p in child}
        if part in ("Capacities", "PlacementProperties"):
            values = {k: _value(v, float) if part == "Capacities" else v for k, v in pairs.items()}
            kept = {}
            for key, value in values.items():
                why = _refused({"NodeTypes": [{"Name": name or "_", part: {key: value}}]})
                if why is None:
                    kept[key] = value
                else:
                    report.drop(WHERE, f"NodeTypes/NodeType[{name}]/{part}/{key}", why)
            entry[part] = kept
        elif part == "PlacementAndLoadBalancingOverrides":
            entry["PlacementAndLoadBalancingOverrides"] = _overrides(child, f"NodeTypes/NodeType[{name}]", report)
        else:
            report.drop(WHERE, f"NodeTypes/NodeType[{name}]/{part}", Info("not a placement input"))
    why = _refused({"NodeTypes": [entry]})
    if why is not None:
        raise BadInput(f"{WHERE}: NodeTypes/NodeType[{name}]: {why}")
    return entry


def _overrides(element: ET.Element, where: str, report: Report) -> Json:
    """PlacementAndLoadBalancingOverrides: thresholds per metric and MinLoadBalancingIntervalPerNodeType."""
    out: dict = {}
    for child in element:
        part = _local(child.tag)
        spot = f"{where}/PlacementAndLoadBalancingOverrides/{part}"
        if part in OVERRIDES:
            values = {p.get("Name", ""): _value(p.get("Value", ""), OVERRIDES[part]) for p in child}
            out[part] = {k: v for k, v in values.items() if _override_ok({part: {k: v}}, f"{spot}/{k}", report)}
        elif part == "MinLoadBalancingIntervalPerNodeType":
            value = _value((child.text or "").strip(), float)
            if _override_ok({part: value}, spot, report):
                out[part] = value
        else:
            report.drop(WHERE, spot, "not modelled by plbjax")
    return {k: v for k, v in out.items() if v != {}}


def _override_ok(override: Json, spot: str, report: Report) -> bool:
    """Whether plbjax accepts this override (reported if not)."""
    why = _refused({"NodeTypes": [{"Name": "_", "PlacementAndLoadBalancingOverrides": override}]})
    if why is not None:
        report.drop(WHERE, spot, why)
    return why is None
