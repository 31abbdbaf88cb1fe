"""The Partitions of a large state document, read and checked a column at a time (`Columns`).

The Partitions of a large state hold nearly all of it: a million replicas. The general path
(`schema_check`, `building`) checks and copies them one value at a time in Python (a minute at a
million replicas). For a document made of plain dicts and lists, `Columns` (through
`reading._parse_columns`) checks the same rules a column at a time: every replica's keys, the
types and ranges of its values, references, uniqueness. It only ever accepts what the general path
accepts, and builds the same state; anything it does not accept goes to the general path, which
names the problem as before.
"""

from __future__ import annotations

from functools import cache
from itertools import chain, islice, repeat
from operator import itemgetter

import numpy as np

from plbjax.errors import BadInput
from plbjax.sf._state.cluster import BUILTIN_LOADS, LARGEST, Node, Partition, Replica, Service
from plbjax.sf._state.schema_check import state_schema
from plbjax.sf._state.vocabulary import Role

_PARTITION_KEYS = frozenset(("ServiceName", "PartitionId", "Replicas"))
_REPLICA_REQUIRED = frozenset(("ReplicaId", "Role", "NodeName"))
_REPLICA_KEYS = _REPLICA_REQUIRED | {"Loads", "MoveCost"}
_ROLES = {role.value: code for code, role in enumerate(Role)}  # Primary 0, Secondary 1, Instance 2
_MOVE_COSTS = ("Zero", "Low", "Medium", "High", "VeryHigh")
_NO_LOADS: dict = {}  # never modified
# The (inlined) schema of Partitions that `Columns.read` checks, rule by rule.
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
def head_schema() -> dict:
    """The state schema for a document without its Partitions (which `Columns` checks)."""
    schema = dict(state_schema())
    schema["required"] = [k for k in schema["required"] if k != "Partitions"]
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "Partitions"}
    return schema


class Columns:
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
    def read(cls, parts: list) -> Columns | None:
        """The columns of `parts` if every partition and replica conforms to the schema (and the
        general path's number rules), else None."""
        if state_schema()["properties"]["Partitions"] != _PARTITIONS_SCHEMA or not set(map(type, parts)) <= {dict}:
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
        if (stateful == (role == _ROLES[Role.INSTANCE])).any():
            raise wrong
        if rep_part.size and np.bincount(rep_part[role == _ROLES[Role.PRIMARY]], minlength=1).max(initial=0) > 1:
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
        roles = [Role(word) for word in self.roles]
        replicas = iter(map(Replica, self.rids, roles, self.nodes, loads, self.costs))
        partitions = list(
            map(Partition, self.services, self.pids, [tuple(islice(replicas, count)) for count in self.counts.tolist()])
        )
        return partitions, replica_ids
