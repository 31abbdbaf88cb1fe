"""The cluster state document (contract section 1): read, validate, fill in SF's defaults.

`load_state` reads JSON or YAML; `parse_state` checks a parsed document against
``schemas/state.schema.json`` and against Service Fabric's rules (references, uniqueness, ranges)
and returns a frozen `ClusterState`. Every problem is one `BadInput` naming the offending key or
value, e.g. ``small.yaml: Nodes[3].FaultDomain: 5 is not of type 'string'``. Tuples keep the
input order. The input is never modified.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from itertools import chain, islice, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, cast, overload

import numpy as np
import yaml

from plbjax.errors import BadInput
from plbjax.sf._expressions import parse as parse_constraint
from plbjax.sf._settings import resolve_settings

# LoadBalancing/Constants.cpp: MetricWeightZero/Low/Medium/High.
METRIC_WEIGHTS = {"Zero": 0.0, "Low": 0.1, "Medium": 0.3, "High": 1.0}
# A metric without Weight is "Low": the default constructors of ServiceLoadMetricDescription
# (ServiceModel/ServiceLoadMetricDescription.cpp, Reliability/Failover/common/...) say so.
DEFAULT_METRIC_WEIGHT = "Low"
DEFAULT_MOVE_COST = "Low"
# Built-in metrics ignore default loads; SF derives the load from the role
# (LoadBalancing/Service.cpp, Service::GetDefaultMetricLoad):
# name -> ((primary, secondary) of a stateful replica, load of a stateless instance).
# So a stateless instance counts 0 in PrimaryCount and ReplicaCount, 1 in InstanceCount and Count.
BUILTIN_LOADS = {
    "PrimaryCount": ((1.0, 0.0), 0.0),
    "SecondaryCount": ((0.0, 1.0), 0.0),
    "ReplicaCount": ((1.0, 1.0), 0.0),
    "InstanceCount": ((0.0, 0.0), 1.0),
    "Count": ((1.0, 1.0), 1.0),
}
# A service that declares no metrics gets these (LoadBalancing/ServiceDescription.cpp,
# ServiceDescription::AddDefaultMetrics, called from PlacementAndLoadBalancing::UpdateService).
DEFAULT_METRICS = (("PrimaryCount", "High"), ("ReplicaCount", "Medium"), ("Count", "Low"))
_LOAD_KEYS = ("PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad")
_BUILTIN_PROPERTIES = ("NodeName", "NodeType")


@dataclass(frozen=True)
class Metric:
    """A service's metric with its weight and default loads (instance load = primary_load)."""

    name: str
    weight: float  # Zero 0, Low 0.1, Medium 0.3, High 1
    weight_name: str
    primary_load: float
    secondary_load: float


@dataclass(frozen=True)
class Node:
    """A node; capacities and properties already merged with its node type's."""

    name: str
    node_type: str | None
    fault_domain: tuple[str, ...]  # "fd:/dc0/r0" -> ("dc0", "r0")
    upgrade_domain: str
    capacities: dict[str, float]  # a metric absent here is unlimited on this node
    properties: dict[str, str | int | float | bool]  # includes NodeName and NodeType
    status: str  # "Up" | "Down" | "Disabled"
    priority: int
    available_resources: dict[str, float] | None
    deactivation_intent: str | None = None  # a Disabled node's SF NodeDeactivationIntent (default Pause)

    @property
    def keeps_replicas(self) -> bool:
        """Deactivated with Intent Pause or Restart: its replicas stay where they are (SF's PLB moves
        none off a deactivated node; only RemoveData and RemoveNode have them built elsewhere)."""
        return self.deactivation_intent in ("Pause", "Restart")


@dataclass(frozen=True)
class Replica:
    """A replica or instance. `loads` holds only reported loads; others come from the metric."""

    replica_id: str | int  # as given, never rewritten
    role: str  # "Primary" | "Secondary" | "Instance"
    node: str | None  # None: not placed yet
    loads: dict[str, float]
    move_cost: str | None  # None: the service's DefaultMoveCost


@dataclass(frozen=True)
class Partition:
    """A partition and its replicas; fewer replicas than the target = replicas to place."""

    service: str
    partition_id: str | int
    replicas: tuple[Replica, ...]


@dataclass(frozen=True)
class Service:
    """A service with SF's defaults filled in (metrics, move cost, priority, balancing)."""

    name: str
    type_name: str | None
    stateful: bool
    target: int  # TargetReplicaSetSize or InstanceCount (-1: one per eligible node)
    placement_constraints: str | None
    metrics: tuple[Metric, ...]
    default_move_cost: str
    correlations: tuple[dict, ...]
    placement_policies: tuple[dict, ...]
    priority: int
    balancing_enabled: bool
    resource_governance: dict | None
    application: str | None  # ApplicationName, default fabric:/App for fabric:/App/Svc


@dataclass(frozen=True)
class ClusterState:
    """A validated cluster state. Per-metric maps cover every metric of `metric_names()`."""

    settings: dict  # every PLB setting (resolve_settings)
    balancing_thresholds: dict[str, float]  # default 1
    activity_thresholds: dict[str, float]  # default 0
    defragmentation_metrics: dict[str, bool]  # default False
    node_buffer_percentage: dict[str, float]  # default 0
    global_metric_weights: dict[str, float]  # only the given ones (SF's default is computed)
    node_types: tuple[dict, ...]
    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    partitions: tuple[Partition, ...]
    upgrade: dict | None
    block_list: tuple[dict, ...]
    history: dict[str, tuple[str, ...]]  # str(ReplicaId) -> nodes
    resource_thresholds: dict[str, float]  # only the given ones
    document: dict  # deep copy of the validated input
    notes: tuple[str, ...] = ()  # what SF accepts but ignores, for the run summary
    _by_name: dict[str, Service] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {s.name: s for s in self.services})

    def metric_names(self) -> tuple[str, ...]:
        """Every metric of every service, sorted."""
        return tuple(sorted({m.name for s in self.services for m in s.metrics}))

    def service(self, name: str) -> Service:
        """The service called `name` (KeyError if none)."""
        return self._by_name[name]

    def replica_count(self) -> int:
        """Replicas the cluster should run: each partition's target, or the replicas it has if more."""
        return sum(max(len(p.replicas), self.service(p.service).target) for p in self.partitions)


# ---------------------------------------------------------------------------------- reading


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (then back as it was).

    Reading a large state creates millions of containers, none of them garbage; each allocation
    burst otherwise sets off collections that walk every object made so far (at a million replicas
    they took three quarters of the time to read, validate and encode)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_state(path: str | Path) -> ClusterState:
    """Read and validate the state document at `path`: .json, .yaml/.yml, or sniffed."""
    path = Path(path)
    with gc_paused():
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadInput(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"{path}: cannot read: {exc}") from None
        suffix = path.suffix.lower()
        if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip().startswith("{")):
            doc = _load_json(text, path)
        else:
            doc = _load_yaml(text, path)
        del text
        # the document read here is referenced nowhere else: the state may keep it as its `document`
        return _parse(doc, str(path), owned=True)


def _load_json(text: str, path: Path) -> object:
    def pairs(items: list[tuple[str, object]]) -> dict:
        out = dict(items)
        if len(out) == len(items):
            return out
        out = {}
        for key, value in items:
            if key in out:
                raise BadInput(f"{path}: invalid JSON: duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> float:
        raise BadInput(f"{path}: invalid JSON: {name} is not a number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader: _YamlLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            break  # construct_mapping reports it
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_YamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str, path: Path) -> object:
    try:
        return yaml.load(text, Loader=_YamlLoader)  # a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise BadInput(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: invalid YAML: {exc}") from None


# ------------------------------------------------------------------------------- validation


def parse_state(doc: Mapping, source: str = "<state>") -> ClusterState:
    """Validate a parsed state document and build its ClusterState; `doc` is not modified."""
    with gc_paused():
        return _parse(doc, source, owned=False)


def _parse(doc: object, source: str, owned: bool) -> ClusterState:
    """parse_state; with `owned`, nothing else references `doc` and the state may keep parts of it."""
    try:
        if not isinstance(doc, Mapping):
            got = "empty" if doc is None else f"a {type(doc).__name__}"
            raise BadInput(f"the document must be a mapping at the top level; it is {got}")
        state = _parse_columns(doc, owned)
        if state is not None:
            return state
        doc = _plain_copy(doc, "")
        schema = _schema()
        if not _conforms(schema, doc):  # fast path; jsonschema names the problem
            import jsonschema.exceptions  # only for the message: the fast path needs none

            error = jsonschema.exceptions.best_match(_validator().iter_errors(doc))
            if error is not None:
                raise BadInput(_describe(error))
        return _build(doc)
    except BadInput as exc:
        raise BadInput(f"{source}: {exc}") from None


# The top-level keys `reparse` reads again; every other one it takes from the state it is given.
REREAD = ("Partitions", "History", "Settings")


def reparse(state: ClusterState, doc: dict, before: Mapping | None = None) -> ClusterState:
    """The state of `doc`, a document whose top-level values other than `REREAD` are those `state`
    was parsed from (the same objects, unchanged): only Partitions, History and Settings are read
    and checked again (the replay between rounds: loads reported, actions completed, throttles).
    `before`: the document `state` was parsed from; then only the partitions of `doc` that are not
    the same objects are read (a round's completed actions touch a few), and a History that is the
    same object is only checked against the replicas. Whatever the column check cannot take is
    parsed in full, which names any problem."""
    before = before or {}
    with gc_paused():
        try:
            partitions, replica_ids, copies = _reread_partitions(state, doc.get("Partitions"), before.get("Partitions"))
            node_names = {n.name for n in state.nodes}
            history = state.document.get("History", {})
            if "History" not in doc or doc["History"] is not before.get("History"):
                history = _history_copy(doc.get("History", {}))
            fresh = {"Partitions": copies, "History": history, "Settings": _plain_copy(doc.get("Settings"), "")}
            return dataclasses.replace(
                state,
                settings=resolve_settings(doc.get("Settings")),
                partitions=tuple(partitions),
                upgrade=_upgrade(state.document.get("Upgrade"), list(state.services), list(state.nodes), replica_ids),
                block_list=_block_list(state.document.get("BlockList", []), list(state.services), node_names),
                history=_history(history, replica_ids, node_names),
                document={k: fresh[k] if k in fresh else state.document[k] for k in doc},
            )
        except (BadInput, TypeError, ValueError, KeyError):
            return _parse(doc, "state", owned=False)


def _history_copy(history: object) -> dict:
    """A copy of a History that is plainly valid ({ReplicaId text: [node name, ...]}); BadInput
    when it is anything else (the general path names the problem)."""
    if type(history) is dict and all(
        type(k) is str and type(v) is list and all(type(n) is str and n for n in v) for k, v in history.items()
    ):
        return {k: list(v) for k, v in history.items()}
    raise BadInput("the general path names it")


def _reread_partitions(state: ClusterState, parts: object, before: list | None) -> tuple[list, set[str], list]:
    """(Partition objects, every str(ReplicaId), copies for the state's document) of `parts`, read
    by column: all of them, or with `before` only those changed since (a few, keeping their service
    and id). BadInput when the general path must decide."""
    wrong = BadInput("the general path names it")
    if type(parts) is not list:
        raise wrong
    changed = None
    if before is not None and len(before) == len(parts) == len(state.partitions):
        changed = [k for k, (now, then) in enumerate(zip(parts, before)) if now is not then]
        if len(changed) * 4 > len(parts) or any(
            type(parts[k]) is not dict
            or parts[k].get("ServiceName") != before[k]["ServiceName"]
            or parts[k].get("PartitionId") != before[k]["PartitionId"]
            for k in changed
        ):
            changed = None
    columns = _Columns.read(parts if changed is None else [parts[k] for k in changed])
    if columns is None:
        raise wrong
    read, replica_ids = columns.partitions(state._by_name, list(state.nodes))
    if changed is None:
        return read, replica_ids, columns.copy()
    partitions, copies = list(state.partitions), list(state.document["Partitions"])
    for k, partition, copied in zip(changed, read, columns.copy()):
        partitions[k], copies[k] = partition, copied
    ids = [str(r.replica_id) for p in partitions for r in p.replicas]
    replica_ids = set(ids)
    if len(replica_ids) != len(ids):
        raise wrong
    return partitions, replica_ids, copies


@cache
def _schema() -> dict:
    """state.schema.json with every $ref replaced by its definition (the schema is not recursive)."""
    text = (Path(__file__).parents[1] / "schemas" / "state.schema.json").read_text("utf-8")
    schema = json.loads(text)
    definitions = schema.pop("$defs")

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: inline(v) for k, v in node.items()}
            ref = node.pop("$ref", None)
            return node if ref is None else inline(definitions[ref.removeprefix("#/$defs/")]) | node
        return [inline(v) for v in node] if isinstance(node, list) else node

    return inline(schema)


@cache
def _validator():
    """jsonschema's validator of the state schema, where "integer" means a JSON integer (jsonschema
    would also take 3.0, e.g. as a ReplicaId)."""
    import jsonschema.validators

    base = jsonschema.Draft202012Validator
    strict = base.TYPE_CHECKER.redefine("integer", lambda _, v: _TYPES["integer"](v))
    return jsonschema.validators.extend(base, type_checker=strict)(_schema())


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _conforms(schema: dict, value: Any) -> bool:
    """True only if `value` is valid against the inlined `schema`; False also when unsure.

    Handles just the keywords our schema uses; several times faster than jsonschema on big states.
    """
    is_dict, is_number = isinstance(value, dict), _TYPES["number"](value)
    for key, arg in schema.items():
        if key in ("description", "title", "$schema", "$id"):
            continue
        if key == "type":
            ok = any(_TYPES[t](value) for t in ([arg] if isinstance(arg, str) else arg))
        elif key == "enum":
            ok = any(_same(value, option) for option in arg)
        elif key == "const":
            ok = _same(value, arg)
        elif key == "required":
            ok = not is_dict or all(k in value for k in arg)
        elif key == "properties":
            ok = not is_dict or all(k not in value or _conforms(sub, value[k]) for k, sub in arg.items())
        elif key == "additionalProperties":
            known = schema.get("properties", {})
            extra = [v for k, v in cast(dict, value).items() if k not in known] if is_dict else []
            ok = all(_conforms(arg, v) for v in extra) if isinstance(arg, dict) else arg or not extra
        elif key == "propertyNames":
            ok = not is_dict or all(_conforms(arg, k) for k in value)
        elif key == "items":
            ok = not isinstance(value, list) or all(_conforms(arg, v) for v in value)
        elif key == "minimum":
            ok = not is_number or value >= arg
        elif key == "maximum":
            ok = not is_number or value <= arg
        elif key == "exclusiveMaximum":
            ok = not is_number or value < arg
        elif key == "minLength":
            ok = not isinstance(value, str) or len(value) >= arg
        else:
            return False
        if not ok:
            return False
    return True


# Loads, capacities and settings are searched in 32-bit floats, and the score squares node loads:
# larger numbers would overflow to infinities. Identifiers may be any size.
LARGEST = 1e15
_IDENTIFIERS = (".ReplicaId", ".PartitionId", ".InstanceId")


@overload
def _plain_copy(value: Mapping, where: str) -> dict: ...
@overload
def _plain_copy(value: object, where: str) -> object: ...
def _plain_copy(value: object, where: str) -> object:
    """Deep copy with string keys (YAML may give integer keys, e.g. ReplicaIds in History).

    Rejects NaN and infinities, which would pass the schema's range checks.
    """
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if type(key) is int:
                key = str(key)
            if not isinstance(key, str):
                raise BadInput(f"{where or 'top level'}: key {key!r} is not a string")
            out[key] = _plain_copy(item, _join(where, key))
        return out
    if isinstance(value, (list, tuple)):
        return [_plain_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"{where}: {value} is not a finite number")
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and abs(value) > LARGEST
        and not where.endswith(_IDENTIFIERS)
    ):
        shown = (
            f"{value:.6g}"
            if isinstance(value, float) or abs(value) < 1e30
            else f"an integer of {len(str(abs(value)))} digits"
        )
        raise BadInput(f"{where}: {shown} is beyond the largest number plbjax can search with ({LARGEST:g})")
    return value


def _join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _describe(error) -> str:
    """One line naming the path of the offending key or value."""
    where = ""
    for part in error.absolute_path:
        where = _join(where, part)
    where = where or "top level"
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties", {})
        extra = next(k for k in error.instance if k not in known)
        return f"{where}: unknown key {extra!r}"
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        return f"{where}: missing required key {missing!r}"
    return f"{where}: {error.message}"


def _claim(seen: dict, key: object, where: str, what: str) -> None:
    """Record `key` as first seen at `where`; BadInput if it was seen before."""
    if key in seen:
        raise BadInput(f"{where}: duplicate {what} (first at {seen[key]})")
    seen[key] = where


def _fault_domain(value: str, where: str) -> tuple[str, ...]:
    """``fd:/dc0/r0`` or ``/dc0/r0`` -> ("dc0", "r0")."""
    path = value[3:] if value.startswith("fd:") else value
    parts = path.split("/")
    if not path.startswith("/") or "" in parts[1:]:
        raise BadInput(f"{where}: {value!r} is not a fault domain like 'fd:/dc0/r0'")
    return tuple(parts[1:])


def _check_balancing_thresholds(values: dict, where: str) -> None:
    # LoadBalancing/Metric.cpp asserts BalancingThreshold >= 1 or == 0 (0: never balance).
    for metric, value in values.items():
        if value != 0 and value < 1:
            raise BadInput(f"{where}.{metric}: {value} must be 0 (never balance) or at least 1")


def _check_properties(values: dict, where: str) -> None:
    for name in _BUILTIN_PROPERTIES:
        if name in values:
            raise BadInput(f"{where}.{name}: {name} is a built-in node property and cannot be set")


# ------------------------------------------------------------------- large documents, by column
# The Partitions of a large state hold nearly all of it: a million replicas. The general path
# above checks and copies them one value at a time in Python (a minute at a million replicas).
# For a document made of plain dicts and lists, `_parse_columns` checks the same rules a column
# at a time: every replica's keys, the types and ranges of its values, references, uniqueness.
# It only ever accepts what the general path accepts, and builds the same state; anything it does
# not accept goes to the general path, which names the problem as before.

_PARTITION_KEYS = frozenset(("ServiceName", "PartitionId", "Replicas"))
_REPLICA_REQUIRED = frozenset(("ReplicaId", "Role", "NodeName"))
_REPLICA_KEYS = _REPLICA_REQUIRED | {"Loads", "MoveCost"}
_ROLES = {"Primary": 0, "Secondary": 1, "Instance": 2}
_MOVE_COSTS = ("Zero", "Low", "Medium", "High", "VeryHigh")
_NO_LOADS: dict = {}  # never modified
# The (inlined) schema of Partitions that `_Columns.read` checks, rule by rule.
_PARTITIONS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["ServiceName", "PartitionId", "Replicas"],
        "properties": {
            "ServiceName": {"type": "string", "minLength": 1},
            "PartitionId": {"type": ["string", "integer"]},
            "Replicas": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["ReplicaId", "Role", "NodeName"],
                    "properties": {
                        "ReplicaId": {"type": ["string", "integer"]},
                        "Role": {"enum": list(_ROLES)},
                        "NodeName": {"type": ["string", "null"], "minLength": 1},
                        "Loads": {
                            "type": "object",
                            "propertyNames": {"minLength": 1},
                            "additionalProperties": {"type": "number", "minimum": 0},
                        },
                        "MoveCost": {"enum": list(_MOVE_COSTS)},
                    },
                },
            },
        },
    },
}


@cache
def _head_schema() -> dict:
    """The state schema for a document without its Partitions (which `_Columns` checks)."""
    schema = dict(_schema())
    schema["required"] = [k for k in schema["required"] if k != "Partitions"]
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "Partitions"}
    return schema


def _parse_columns(doc: Mapping, owned: bool) -> ClusterState | None:
    """The state of `doc` with its Partitions checked by column; None where the general path must
    decide (anything unusual, or anything wrong: the general path names it)."""
    if type(doc) is not dict or type(doc.get("Partitions")) is not list:
        return None
    try:
        head = {k: v for k, v in doc.items() if k != "Partitions"}
        head_doc = _plain_copy(head, "")
        if not _conforms(_head_schema(), head_doc):
            return None
        columns = _Columns.read(doc["Partitions"])
        if columns is None:
            return None
        copies = doc["Partitions"] if owned else columns.copy()
        # the state shares parts of head_doc: its document needs a copy of its own (an owned
        # document is that copy when reading it did not change it, as for any JSON document)
        kept = head if owned and head == head_doc else _plain_copy(head_doc, "")
        document = {k: copies if k == "Partitions" else kept[k] for k in doc}
        return _build(head_doc, document, columns)
    except (BadInput, TypeError, ValueError, KeyError):  # the general path names the problem
        return None


class _Columns:
    """The Partitions of a document, column by column, schema-checked; replicas in document order."""

    # set by __init__ from `read`'s keyword arguments (annotations only, for type checkers)
    parts: list[dict]
    services: list[str]
    pids: list[str | int]
    counts: np.ndarray
    reps: list[dict]
    rids: list[str | int]
    roles: list[str]
    nodes: list[str | None]
    costs: list[str | None]
    loads: list[dict]
    keys: list[tuple]
    values: np.ndarray

    def __init__(self, **columns):
        self.__dict__.update(columns)

    @classmethod
    def read(cls, parts: list) -> _Columns | None:
        """The columns of `parts` if every partition and replica conforms to the schema (and the
        general path's number rules), else None."""
        if _schema()["properties"]["Partitions"] != _PARTITIONS_SCHEMA or not set(map(type, parts)) <= {dict}:
            return None  # the schema says what this does not check
        if not all(len(keys) == 3 and _PARTITION_KEYS.issuperset(keys) for keys in set(map(tuple, parts))):
            return None
        services = list(map(itemgetter("ServiceName"), parts))
        pids = list(map(itemgetter("PartitionId"), parts))
        lists = list(map(itemgetter("Replicas"), parts))
        if not (
            set(map(type, services)) <= {str}
            and "" not in set(services)
            and set(map(type, pids)) <= {str, int}
            and set(map(type, lists)) <= {list}
        ):
            return None
        counts = np.fromiter(map(len, lists), np.int64, len(lists))
        reps = list(chain.from_iterable(lists))
        if not set(map(type, reps)) <= {dict}:
            return None
        kinds = {frozenset(keys) for keys in set(map(tuple, reps))}
        if not all(_REPLICA_REQUIRED <= keys <= _REPLICA_KEYS for keys in kinds):
            return None
        rids = list(map(itemgetter("ReplicaId"), reps))
        roles = list(map(itemgetter("Role"), reps))
        nodes = list(map(itemgetter("NodeName"), reps))
        if not (
            set(map(type, rids)) <= {str, int}
            and set(map(type, roles)) <= {str}
            and set(roles) <= _ROLES.keys()
            and set(map(type, nodes)) <= {str, type(None)}
            and "" not in set(nodes)
        ):
            return None
        costs = [None] * len(reps)
        if any("MoveCost" in keys for keys in kinds):
            costs = list(map(dict.get, reps, repeat("MoveCost")))
            given = [rep["MoveCost"] for rep in reps if "MoveCost" in rep]
            if not (set(map(type, given)) <= {str} and set(given) <= set(_MOVE_COSTS)):
                return None
        loads, keys, values = [_NO_LOADS] * len(reps), [()] * len(reps), np.zeros(0)
        if any("Loads" in keys for keys in kinds):
            loads = list(map(dict.get, reps, repeat("Loads"), repeat(_NO_LOADS)))
            if not set(map(type, loads)) <= {dict}:
                return None
            keys = list(map(tuple, loads))
            names = set(chain.from_iterable(set(keys)))
            if not all(type(name) is str and name for name in names):
                return None
            flat = list(chain.from_iterable(map(dict.values, loads)))
            if not set(map(type, flat)) <= {int, float}:
                return None
            try:
                values = np.fromiter(flat, np.float64, len(flat))
            except OverflowError:  # an integer beyond any float
                return None
            if not (np.isfinite(values).all() and (values >= 0).all() and (values <= LARGEST).all()):
                return None
        return cls(
            parts=parts,
            services=services,
            pids=pids,
            counts=counts,
            reps=reps,
            rids=rids,
            roles=roles,
            nodes=nodes,
            costs=costs,
            loads=loads,
            keys=keys,
            values=values,
        )

    def copy(self) -> list:
        """A copy of the Partitions as given (for the state's document)."""
        copies = list(map(dict.copy, self.reps))
        if self.values.size:
            for rep in copies:
                if "Loads" in rep:
                    rep["Loads"] = dict(rep["Loads"])
        it = iter(copies)
        return [{**part, "Replicas": list(islice(it, count))} for part, count in zip(self.parts, self.counts.tolist())]

    def partitions(self, services: dict[str, Service], nodes: list[Node]) -> tuple[list[Partition], set[str]]:
        """The Partition objects and every str(ReplicaId); BadInput on any rule `_partitions` states
        (the general path then names it)."""
        wrong = BadInput("the general path names it")
        if not set(self.services) <= services.keys():
            raise wrong
        if len(set(zip(self.services, map(str, self.pids)))) != len(self.pids):
            raise wrong
        rid_text = list(map(str, self.rids))
        replica_ids = set(rid_text)
        if len(replica_ids) != len(rid_text):
            raise wrong
        table = list(services.values())
        position = {name: i for i, name in enumerate(services)}
        part_service = np.fromiter(map(position.__getitem__, self.services), np.int64, len(self.services))
        rep_part = np.repeat(np.arange(len(self.counts)), self.counts)
        rep_service = part_service[rep_part]
        role = np.fromiter(map(_ROLES.__getitem__, self.roles), np.int8, len(self.roles))
        stateful = np.array([s.stateful for s in table] + [False], bool)[rep_service]
        if (stateful == (role == _ROLES["Instance"])).any():
            raise wrong
        if rep_part.size and np.bincount(rep_part[role == _ROLES["Primary"]], minlength=1).max(initial=0) > 1:
            raise wrong
        node_of = {n.name: i for i, n in enumerate(nodes)} | {None: -1}
        node = np.fromiter(map(node_of.get, self.nodes, repeat(-2)), np.int64, len(self.nodes))
        if (node == -2).any():
            raise wrong
        placed = node >= 0
        pairs = np.sort(rep_part[placed] * max(len(nodes), 1) + node[placed])
        if (pairs[1:] == pairs[:-1]).any():
            raise wrong
        if self.values.size:
            allowed = [{m.name for m in s.metrics} - BUILTIN_LOADS.keys() for s in table]
            for si, keys in set(zip(rep_service.tolist(), self.keys)):
                if not allowed[si].issuperset(keys):
                    raise wrong
        floats = iter(self.values.tolist())
        loads = list(map(dict, map(zip, self.keys, repeat(floats))))
        replicas = iter(map(Replica, self.rids, self.roles, self.nodes, loads, self.costs))
        partitions = list(
            map(Partition, self.services, self.pids, [tuple(islice(replicas, count)) for count in self.counts.tolist()])
        )
        return partitions, replica_ids


# --------------------------------------------------------------------------------- building


def _build(doc: dict, document: dict | None = None, columns: _Columns | None = None) -> ClusterState:
    """The state of a schema-valid document (a private copy: the state shares its parts); `document`
    (default: a copy of `doc`) is kept as the state's document; `columns` are doc's Partitions, read."""
    if document is None:
        document = _plain_copy(doc, "")  # a second, independent copy that nothing hands out
    settings = resolve_settings(doc.get("Settings"))
    _check_balancing_thresholds(doc.get("MetricBalancingThresholds", {}), "MetricBalancingThresholds")
    node_types = _node_types(doc.get("NodeTypes", []))
    nodes = _nodes(doc["Nodes"], node_types)
    node_names = {n.name for n in nodes}
    services = _services(doc["Services"])
    if columns is None:
        partitions = _partitions(doc["Partitions"], {s.name: s for s in services}, node_names)
        replica_ids = {str(r.replica_id) for p in partitions for r in p.replicas}
    else:
        partitions, replica_ids = columns.partitions({s.name: s for s in services}, nodes)
    metrics = sorted({m.name for s in services for m in s.metrics})

    def per_metric(key: str, default: float | bool, kind: type) -> dict:
        return {m: default for m in metrics} | {k: kind(v) for k, v in doc.get(key, {}).items()}

    return ClusterState(
        settings=settings,
        balancing_thresholds=per_metric("MetricBalancingThresholds", 1.0, float),
        activity_thresholds=per_metric("MetricActivityThresholds", 0.0, float),
        defragmentation_metrics=per_metric("DefragmentationMetrics", False, bool),
        node_buffer_percentage=per_metric("NodeBufferPercentage", 0.0, float),
        global_metric_weights={k: float(v) for k, v in doc.get("GlobalMetricWeights", {}).items()},
        node_types=tuple(node_types.values()),
        nodes=tuple(nodes),
        services=tuple(services),
        partitions=tuple(partitions),
        upgrade=_upgrade(doc.get("Upgrade"), services, nodes, replica_ids),
        block_list=_block_list(doc.get("BlockList", []), services, node_names),
        history=_history(doc.get("History", {}), replica_ids, node_names),
        resource_thresholds={k: float(v) for k, v in doc.get("ResourceThresholds", {}).items()},
        document=document,
        notes=_ignored_loads(doc["Services"]),
    )


def _ignored_loads(services: list[dict]) -> tuple[str, ...]:
    """Non-zero default loads a service's kind does not use (SF's ServiceLoadMetricDescription carries
    PrimaryDefaultLoad, SecondaryDefaultLoad and DefaultLoad whatever the kind)."""
    out = []
    for i, svc in enumerate(services):
        stateful = svc["ServiceKind"] == "Stateful"
        for j, metric in enumerate(svc.get("Metrics") or []):
            if stateful:
                unused = (
                    ["DefaultLoad"]
                    if {"PrimaryDefaultLoad", "SecondaryDefaultLoad", "DefaultLoad"} <= set(metric)
                    else []
                )
            else:
                unused = [
                    k
                    for k in ("PrimaryDefaultLoad", "SecondaryDefaultLoad")
                    if k in metric and metric[k] != metric.get("DefaultLoad", 0)
                ]
            out += [
                f"Services[{i}].Metrics[{j}].{k} = {metric[k]:g} ignored (a {svc['ServiceKind'].lower()} "
                f"service uses {'Primary/SecondaryDefaultLoad' if stateful else 'DefaultLoad'})"
                for k in unused
                if metric[k]
            ]
    return tuple(out)


def _node_types(entries: list[dict]) -> dict[str, dict]:
    by_name: dict[str, dict] = {}
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"NodeTypes[{i}]"
        _claim(seen, entry["Name"], f"{where}.Name", f"node type {entry['Name']!r}")
        _check_properties(entry.get("PlacementProperties", {}), f"{where}.PlacementProperties")
        overrides = "PlacementAndLoadBalancingOverrides"
        _check_balancing_thresholds(
            entry.get(overrides, {}).get("MetricBalancingThresholdsPerNodeType", {}),
            f"{where}.{overrides}.MetricBalancingThresholdsPerNodeType",
        )
        by_name[entry["Name"]] = entry
    return by_name


def _nodes(entries: list[dict], node_types: dict[str, dict]) -> list[Node]:
    nodes = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Nodes[{i}]"
        name = entry["NodeName"]
        _claim(seen, name, f"{where}.NodeName", f"NodeName {name!r}")
        type_name = entry.get("NodeType")
        if node_types and type_name is not None and type_name not in node_types:
            raise BadInput(f"{where}.NodeType: {type_name!r} is not among NodeTypes")
        node_type = node_types.get(type_name, {})  # pyright: ignore[reportCallIssue, reportArgumentType]  # None -> {}
        _check_properties(entry.get("PlacementProperties", {}), f"{where}.PlacementProperties")
        properties = node_type.get("PlacementProperties", {}) | entry.get("PlacementProperties", {})
        properties["NodeName"] = name
        if type_name is not None:
            properties["NodeType"] = type_name
        capacities = node_type.get("Capacities", {}) | entry.get("Capacities", {})
        upgrade_domain = str(entry["UpgradeDomain"])
        if not upgrade_domain:
            raise BadInput(f"{where}.UpgradeDomain: must not be empty")
        available = entry.get("AvailableResources")
        status = entry.get("NodeStatus", "Up")
        if "DeactivationIntent" in entry and status != "Disabled":
            raise BadInput(f"{where}.DeactivationIntent: only a Disabled node has one (NodeStatus {status})")
        nodes.append(
            Node(
                name=name,
                node_type=type_name,
                fault_domain=_fault_domain(entry["FaultDomain"], f"{where}.FaultDomain"),
                upgrade_domain=upgrade_domain,
                capacities={k: float(v) for k, v in capacities.items()},
                properties=properties,
                status=status,
                priority=entry.get("Priority", 0),
                available_resources=None if available is None else {k: float(v) for k, v in available.items()},
                deactivation_intent=entry.get("DeactivationIntent", "Pause") if status == "Disabled" else None,
            )
        )
    return nodes


def _services(entries: list[dict]) -> list[Service]:
    services = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Services[{i}]"
        name = entry["ServiceName"]
        _claim(seen, name, f"{where}.ServiceName", f"ServiceName {name!r}")
        stateful = entry["ServiceKind"] == "Stateful"
        kind = entry["ServiceKind"].lower()
        if stateful:
            target_key, other_key = "TargetReplicaSetSize", "InstanceCount"
        else:
            target_key, other_key = "InstanceCount", "TargetReplicaSetSize"
        if other_key in entry:
            raise BadInput(f"{where}.{other_key}: not used by a {kind} service (use {target_key})")
        if target_key not in entry:
            raise BadInput(f"{where}: a {kind} service needs {target_key}")
        target = entry[target_key]
        if not stateful and target == 0:
            raise BadInput(f"{where}.InstanceCount: 0; use at least 1, or -1 for one per node")
        for j, policy in enumerate(entry.get("PlacementPolicies", [])):
            policy_where = f"{where}.PlacementPolicies[{j}]"
            if policy["Type"] == "RequireDomainDistribution":
                continue
            if "DomainName" not in policy:
                raise BadInput(f"{policy_where}: {policy['Type']} needs DomainName")
            _fault_domain(policy["DomainName"], f"{policy_where}.DomainName")
        constraints = entry.get("PlacementConstraints", "").strip()
        try:
            parse_constraint(constraints)
        except BadInput as exc:
            raise BadInput(
                f"{where}.PlacementConstraints of service {name!r}: {str(exc).removeprefix('PlacementConstraints ')}"
            ) from None
        services.append(
            Service(
                name=name,
                type_name=entry.get("ServiceTypeName"),
                stateful=stateful,
                target=target,
                placement_constraints=constraints or None,
                metrics=_metrics(entry.get("Metrics"), stateful, target, where),
                default_move_cost=entry.get("DefaultMoveCost", DEFAULT_MOVE_COST),
                correlations=tuple(entry.get("Correlations", [])),
                placement_policies=tuple(entry.get("PlacementPolicies", [])),
                priority=entry.get("Priority", 0),
                balancing_enabled=entry.get("BalancingPolicy", "Enabled") == "Enabled",
                resource_governance=entry.get("ResourceGovernance"),
                application=entry.get("ApplicationName", _application_of(name)),
            )
        )
    _check_correlations(services)
    return services


def _application_of(service_name: str) -> str | None:
    """fabric:/App/Svc -> fabric:/App (SF's naming convention), else None."""
    prefix = "fabric:/"
    parts = service_name[len(prefix) :].split("/") if service_name.startswith(prefix) else []
    return prefix + parts[0] if len(parts) >= 2 and parts[0] else None


def _metrics(entries: list[dict] | None, stateful: bool, target: int, where: str) -> tuple[Metric, ...]:
    if not entries:
        entries = [{"Name": name, "Weight": weight} for name, weight in DEFAULT_METRICS]
    metrics = []
    seen: dict[str, str] = {}
    for j, entry in enumerate(entries):
        metric_where = f"{where}.Metrics[{j}]"
        name = entry["Name"]
        _claim(seen, name, f"{metric_where}.Name", f"metric {name!r}")
        given = [key for key in _LOAD_KEYS if key in entry]
        if name in BUILTIN_LOADS:
            if given:
                raise BadInput(
                    f"{metric_where}.{given[0]}: {name} is a built-in metric; SF derives its load from the replica role"
                )
            (primary, secondary), instance = BUILTIN_LOADS[name]
            if not stateful:
                primary = secondary = instance
        elif stateful:
            default = entry.get("DefaultLoad", 0)
            primary = entry.get("PrimaryDefaultLoad", default)
            secondary = entry.get("SecondaryDefaultLoad", default)
            if target == 1:  # ServiceDescription::AlignSinletonReplicaDefLoads
                secondary = primary
        else:  # SF's descriptions carry all three loads; an instance's is DefaultLoad
            primary = secondary = entry.get("DefaultLoad", 0)
        weight_name = entry.get("Weight", DEFAULT_METRIC_WEIGHT)
        metrics.append(Metric(name, METRIC_WEIGHTS[weight_name], weight_name, float(primary), float(secondary)))
    return tuple(metrics)


def _check_correlations(services: list[Service]) -> None:
    # SF's PLB keeps one affinitized (parent) service per service and rejects affinity chains
    # (LoadBalancing/ServiceDescription.h affinitizedService_; PlacementAndLoadBalancing::IsAffinityChain).
    position = {s.name: i for i, s in enumerate(services)}
    parent = {}
    for i, service in enumerate(services):
        where = f"Services[{i}].Correlations"
        if len(service.correlations) > 1:
            raise BadInput(f"{where}[1]: SF supports one correlation per service")
        for correlation in service.correlations:
            other = correlation["ServiceName"]
            if other not in position:
                raise BadInput(f"{where}[0].ServiceName: unknown service {other!r}")
            if other == service.name:
                raise BadInput(f"{where}[0].ServiceName: a service cannot be correlated with itself")
            parent[service.name] = other
    for child, other in parent.items():
        if other in parent:
            raise BadInput(
                f"Services[{position[child]}].Correlations[0].ServiceName: {other!r} is "
                f"itself correlated with {parent[other]!r}; SF does not support affinity chains"
            )


def _partitions(entries: list[dict], services: dict[str, Service], node_names: set[str]) -> list[Partition]:
    partitions = []
    seen_partitions: dict[tuple[str, str], str] = {}
    seen_replicas: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"Partitions[{i}]"
        service = services.get(entry["ServiceName"])
        if service is None:
            raise BadInput(f"{where}.ServiceName: unknown service {entry['ServiceName']!r}")
        pid = entry["PartitionId"]
        _claim(
            seen_partitions,
            (service.name, str(pid)),
            f"{where}.PartitionId",
            f"PartitionId {pid!r} of service {service.name!r}",
        )
        metric_names = [m.name for m in service.metrics]
        on_node: dict[str, str] = {}
        has_primary = False
        replicas = []
        for j, rep in enumerate(entry["Replicas"]):
            rep_where = f"{where}.Replicas[{j}]"
            rid, role, node = rep["ReplicaId"], rep["Role"], rep["NodeName"]
            _claim(seen_replicas, str(rid), f"{rep_where}.ReplicaId", f"ReplicaId {rid!r}")
            if service.stateful == (role == "Instance"):
                kind, roles = ("stateful", "Primary or Secondary") if service.stateful else ("stateless", "Instance")
                raise BadInput(f"{rep_where}.Role: {role!r} in {kind} service {service.name!r} (use {roles})")
            if role == "Primary":
                if has_primary:
                    raise BadInput(f"{rep_where}.Role: a second Primary in partition {pid!r}")
                has_primary = True
            if node is not None:
                if node not in node_names:
                    raise BadInput(f"{rep_where}.NodeName: unknown node {node!r}")
                if node in on_node:
                    raise BadInput(
                        f"{rep_where}.NodeName: {node!r} already holds a replica of partition {pid!r} ({on_node[node]})"
                    )
                on_node[node] = rep_where
            for metric in rep.get("Loads", {}):
                if metric not in metric_names:
                    raise BadInput(
                        f"{rep_where}.Loads.{metric}: service {service.name!r} has no "
                        f"metric {metric!r} (its metrics: {', '.join(metric_names)})"
                    )
                if metric in BUILTIN_LOADS:
                    raise BadInput(
                        f"{rep_where}.Loads.{metric}: built-in metric; SF derives its load from the replica role"
                    )
            replicas.append(
                Replica(
                    replica_id=rid,
                    role=role,
                    node=node,
                    loads={k: float(v) for k, v in rep.get("Loads", {}).items()},
                    move_cost=rep.get("MoveCost"),
                )
            )
        partitions.append(Partition(service.name, pid, tuple(replicas)))
    return partitions


def _upgrade(upgrade: dict | None, services: list[Service], nodes: list[Node], replica_ids: set[str]) -> dict | None:
    if upgrade is None:
        return None
    if upgrade["Scope"] == "Application":
        app = upgrade.get("ApplicationName")
        if app is None:
            raise BadInput("Upgrade.ApplicationName: required when Scope is 'Application'")
        if app not in {s.application for s in services}:
            raise BadInput(f"Upgrade.ApplicationName: no service belongs to {app!r}")
    domains = {n.upgrade_domain for n in nodes}
    done = [str(ud) for ud in upgrade.get("UpgradeDomainsDone", [])]
    for i, ud in enumerate(done):
        if ud not in domains:
            raise BadInput(f"Upgrade.UpgradeDomainsDone[{i}]: unknown upgrade domain {ud!r}")
    node_names = {n.name for n in nodes}
    for rid, node in upgrade.get("Snapshot", {}).items():
        if rid not in replica_ids:
            raise BadInput(f"Upgrade.Snapshot.{rid}: unknown ReplicaId {rid!r}")
        if node not in node_names:
            raise BadInput(f"Upgrade.Snapshot.{rid}: unknown node {node!r}")
    return upgrade | {"UpgradeDomainsDone": done} if "UpgradeDomainsDone" in upgrade else upgrade


def _block_list(entries: list[dict], services: list[Service], node_names: set[str]) -> tuple[dict, ...]:
    type_names = {s.type_name for s in services}
    for i, entry in enumerate(entries):
        if entry["NodeName"] not in node_names:
            raise BadInput(f"BlockList[{i}].NodeName: unknown node {entry['NodeName']!r}")
        if entry["ServiceTypeName"] not in type_names:
            raise BadInput(
                f"BlockList[{i}].ServiceTypeName: no service has ServiceTypeName {entry['ServiceTypeName']!r}"
            )
    return tuple(entries)


def _history(history: dict, replica_ids: set[str], node_names: set[str]) -> dict[str, tuple[str, ...]]:
    for rid, history_nodes in history.items():
        if rid not in replica_ids:
            raise BadInput(f"History.{rid}: unknown ReplicaId {rid!r}")
        for i, node in enumerate(history_nodes):
            if node not in node_names:
                raise BadInput(f"History.{rid}[{i}]: unknown node {node!r}")
    return {rid: tuple(history_nodes) for rid, history_nodes in history.items()}
