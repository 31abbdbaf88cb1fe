"""The replica rows: each partition's replicas in order of str(ReplicaId), then the ones it lacks
(to create), column by column — their nodes, roles, move costs and loads (the load following the
role) — and the partition table over the rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from itertools import chain, repeat
from operator import attrgetter
from typing import NamedTuple, cast

import numpy as np

from plbjax.sf._encoding.arrays import padded
from plbjax.sf._encoding.stages import Entities, Nodes
from plbjax.sf._state import Role

MOVE_COST_VALUES = {"Zero": 0.0, "Low": 1.0, "Medium": 15.0, "High": 40.0, "VeryHigh": 200.0}  # SF's defaults
_ROLE_CODES = {role: code for code, role in enumerate(Role)}  # Primary 0, Secondary 1, Instance 2; else 3


@dataclasses.dataclass(frozen=True)
class Rows:
    """The replicas as encoded, partition by partition: each partition's replicas in order of
    str(ReplicaId), then the ones it lacks (to create). Arrays over replicas [n] or partitions [p]."""

    ids: list  # ReplicaId as given; None for a replica to create
    roles: list[Role]  # role in the input, or the role a new one gets
    partition: np.ndarray  # int32[n]
    slot: np.ndarray  # int[n] position within its partition
    service: np.ndarray  # int32[n]
    input_node: np.ndarray  # int32[n] node in the input (-1: none)
    initial_node: np.ndarray  # int32[n] node the plan starts it on (-1: unplaced, or its node neither Up nor kept)
    move_cost: np.ndarray  # float32[n]
    load_primary: np.ndarray  # float32[n, metrics]
    load_secondary: np.ndarray  # float32[n, metrics]
    sizes: np.ndarray  # int[p] replicas, those to create included
    everywhere: np.ndarray  # bool[p] of a service with one instance per node
    partition_service: np.ndarray  # int32[p]
    stateful: np.ndarray  # bool[p]
    initial_primary: np.ndarray  # int32[p] its (last) primary's row in the input, -1: none
    partition_rows: tuple  # replica rows of each partition
    n_replicas: int

    def named(self, by_id: dict) -> Iterator[tuple[int, object]]:
        """(row, ReplicaId) of the replicas whose str(ReplicaId) is a key of `by_id`, in row order."""
        if by_id:
            for row, rid in enumerate(self.ids):
                if rid is not None and str(rid) in by_id:
                    yield row, rid

    @property
    def R(self) -> int:  # the padded sizes, named as in Problem
        return padded("R", self.n_replicas)

    @property
    def P(self) -> int:
        return padded("P", self.sizes.size)


def _order_within(texts: list[str], part: np.ndarray) -> np.ndarray | None:
    """The stable order that sorts `texts` within each run of equal `part` (non-decreasing), as
    sorted() would; None when they already are."""
    if not texts:
        return None
    longest = max(map(len, texts))
    if longest <= 64 and "\0" not in "".join(texts):  # NumPy's strings compare as Python's but for NULs
        u = np.array(texts, dtype=f"<U{longest}")
        if not ((part[1:] == part[:-1]) & (u[1:] < u[:-1])).any():
            return None
        return np.lexsort((u, part))
    keys = list(zip(part.tolist(), texts))
    order = sorted(range(len(texts)), key=keys.__getitem__)
    return None if order == list(range(len(texts))) else np.array(order, np.int64)


class _Given(NamedTuple):
    """The replicas the input lists, partition after partition, each partition's in order of str(ReplicaId)."""

    replicas: list
    ids: list
    roles: list
    code: np.ndarray  # int8 role code (_ROLE_CODES)
    partition: np.ndarray  # int[given] its partition
    counts: np.ndarray  # int64[p] replicas listed per partition


class _Layout(NamedTuple):
    """The rows: each partition's given replicas, then the ones it lacks (to create)."""

    sizes: np.ndarray  # int64[p] replicas, those to create included
    starts: np.ndarray  # int64[p] first row of each partition
    given_rows: np.ndarray  # row of each given replica
    new_rows: np.ndarray  # row of each replica to create
    new_code: np.ndarray  # int8 role code of each replica to create
    n_rep: int


def replica_rows(cluster: Entities, allowed: list[np.ndarray], nodes: Nodes, use_costs: bool) -> Rows:
    """The replica rows of the partitions, column by column. `allowed[s]`: nodes service s may use.
    A replica stays on an Up node or on one deactivated with Pause or Restart (`nodes.kept`); a
    service with one instance per node has a row for each node it may use and for each of its
    running instances elsewhere (until dropped)."""
    services, n_part = cluster.services, len(cluster.partitions)
    part_service = np.fromiter(
        map(cluster.service_ix.__getitem__, map(attrgetter("service"), cluster.partitions)), np.int64, n_part
    )
    stateful_of = np.array([s.stateful for s in services] + [False], bool)
    target_of = np.array(
        [int(allowed[si].sum()) if s.target < 0 else s.target for si, s in enumerate(services)] + [0], np.int64
    )
    everywhere_of = np.array([s.target < 0 for s in services] + [False], bool)
    given = _given_replicas(cluster.partitions)
    given_node = _given_nodes(given, cluster.node_ix)
    usable = np.zeros((len(services) + 1, len(nodes.up) + 1), bool)  # [S+1, N+1]: the last, nowhere
    usable[: len(services), : len(nodes.up)] = allowed
    running = np.append(nodes.up | nodes.kept, False)[given_node]
    beyond = running & ~usable[part_service[given.partition], given_node]  # kept until dropped
    beyond &= everywhere_of[part_service[given.partition]]
    target = target_of[part_service] + np.bincount(given.partition[beyond], minlength=n_part)
    layout = _layout(given, target, stateful_of[part_service])
    code = np.empty(layout.n_rep, np.int8)
    code[layout.given_rows], code[layout.new_rows] = given.code, layout.new_code
    partition = np.repeat(np.arange(n_part), layout.sizes).astype(np.int32)
    service = part_service[partition].astype(np.int32)
    node = np.full(layout.n_rep, -1, np.int32)
    node[layout.given_rows] = given_node
    initial = np.where(np.append(nodes.up | nodes.kept, False)[node], node, -1).astype(np.int32)
    load_primary, load_secondary = _replica_loads(given, layout, code, service, cluster, initial >= 0)
    primaries = np.flatnonzero(code == 0)
    primary_of = np.full(n_part, -1, np.int64)
    np.maximum.at(primary_of, partition[primaries], primaries)
    names = tuple(Role)
    ends = layout.starts + layout.sizes
    return Rows(
        ids=_scatter(layout, given.ids, [None] * layout.new_rows.size),
        roles=_scatter(layout, given.roles, [names[c] for c in layout.new_code.tolist()]),
        partition=partition,
        slot=np.arange(layout.n_rep) - layout.starts[partition],
        service=service,
        input_node=node,
        initial_node=initial,
        move_cost=_move_costs(given, layout, cluster, (partition, service, code), use_costs),
        load_primary=load_primary,
        load_secondary=load_secondary,
        sizes=layout.sizes,
        everywhere=everywhere_of[part_service],
        partition_service=part_service.astype(np.int32),
        stateful=stateful_of[part_service],
        initial_primary=primary_of.astype(np.int32),
        partition_rows=tuple(map(tuple, map(range, layout.starts.tolist(), ends.tolist()))),
        n_replicas=layout.n_rep,
    )


def _given_replicas(partitions: list) -> _Given:
    n_part = len(partitions)
    lists = [p.replicas for p in partitions]
    counts = np.fromiter(map(len, lists), np.int64, n_part)
    given = list(chain.from_iterable(lists))
    given_part = np.repeat(np.arange(n_part), counts)
    ids = list(map(attrgetter("replica_id"), given))
    order = _order_within(list(map(str, ids)), given_part)
    if order is not None:
        given = list(map(given.__getitem__, order.tolist()))
        ids = list(map(attrgetter("replica_id"), given))
    roles = list(map(attrgetter("role"), given))
    code = np.fromiter(map(_ROLE_CODES.get, roles, repeat(3)), np.int8, len(given))
    return _Given(replicas=given, ids=ids, roles=roles, code=code, partition=given_part, counts=counts)


def _layout(given: _Given, target: np.ndarray, stateful: np.ndarray) -> _Layout:
    """Rows for the given replicas and for those each partition lacks of its `target` [p]. A new replica
    is an instance (stateless), else the primary if it is its partition's first new one and the
    partition has none, else a secondary."""
    counts, n_part = given.counts, len(given.counts)
    missing = np.maximum(target - counts, 0)
    sizes = counts + missing
    starts = np.cumsum(sizes) - sizes
    given_rows = starts[given.partition] + np.arange(len(given.ids)) - (np.cumsum(counts) - counts)[given.partition]
    new_part = np.repeat(np.arange(n_part), missing)
    new_k = np.arange(new_part.size) - (np.cumsum(missing) - missing)[new_part]
    has_primary = np.bincount(given.partition[given.code == 0], minlength=n_part) > 0
    new_code = np.where(~stateful[new_part], 2, np.where((new_k == 0) & ~has_primary[new_part], 0, 1)).astype(np.int8)
    return _Layout(
        sizes=sizes,
        starts=starts,
        given_rows=given_rows,
        new_rows=starts[new_part] + counts[new_part] + new_k,
        new_code=new_code,
        n_rep=int(sizes.sum()),
    )


def _scatter(layout: _Layout, given_values: list, new_values: list) -> list:
    """One list over the rows from the given replicas' values and the new ones'."""
    if not layout.new_rows.size:
        return given_values
    out = [None] * layout.n_rep
    for row, value in zip(layout.given_rows.tolist(), given_values):
        out[row] = value
    for row, value in zip(layout.new_rows.tolist(), new_values):
        out[row] = value
    return out


def _given_nodes(given: _Given, node_ix: dict[str, int]) -> np.ndarray:
    """Each given replica's node in the input (-1: none)."""
    position = cast("dict[str | None, int]", dict(node_ix))  # None: not placed
    position[None] = -1
    nodes = map(position.__getitem__, map(attrgetter("node"), given.replicas))
    return np.fromiter(nodes, np.int32, len(given.replicas))


def _move_costs(given: _Given, layout: _Layout, cluster: Entities, columns: tuple, use_costs: bool) -> np.ndarray:
    """Each row's move cost: its own MoveCost, else its service's default (1 unless UseMoveCostReports),
    valued as SF's MoveCost<Cost>Value settings say (FailoverUnit::GetMoveCostValue). Without
    UseSeparateSecondaryMoveCost a partition's secondaries share one (`_shared_secondary_costs`).
    `columns`: each row's partition, service and role code."""
    if not use_costs:
        return np.ones(layout.n_rep, np.float32)
    partition, service, code = columns
    values = MOVE_COST_VALUES | dict(cluster.move_costs)
    defaults = np.array([values[s.default_move_cost] for s in cluster.services] + [0.0])
    own = np.full(layout.n_rep, -1.0)
    own[layout.given_rows] = [values[c] if c else -1.0 for c in map(attrgetter("move_cost"), given.replicas)]
    if not cluster.separate_secondary_costs:
        own = _shared_secondary_costs(own, partition, code)
    return np.where(own >= 0, own, defaults[service]).astype(np.float32)


def _shared_secondary_costs(own: np.ndarray, partition: np.ndarray, code: np.ndarray) -> np.ndarray:
    """UseSeparateSecondaryMoveCost false: SF's FailoverUnit keeps one move cost for all of a
    partition's secondaries (FailoverUnit.cpp:412 `secondaryMoveCost_`; GetMoveCostValue gives every
    replica but the primary that one), set by the last secondary that reported one. A state holds
    each replica's report, not their order: every replica but the primary takes the highest its
    partition's secondaries report (`own` -1: none reported, the service's default)."""
    secondary = code != _ROLE_CODES[Role.PRIMARY]
    shared = np.full(int(partition.max(initial=-1)) + 1, -1.0)
    np.maximum.at(shared, partition[secondary], own[secondary])
    return np.where(secondary, shared[partition], own)


def _replica_loads(
    given: _Given, layout: _Layout, code: np.ndarray, service: np.ndarray, cluster: Entities, running: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Loads as primary and as secondary [rows, metrics]: the service's default loads, then the loads
    replicas report for the service's metrics, the load following the role (`_loads_follow_role`;
    `running` [rows]: on an Up node in the input), a new secondary or instance at the average of
    those reported (`_new_at_average`). An instance's load is both."""
    default_primary, default_secondary, has_metric = _default_loads(cluster)
    load_primary, load_secondary = default_primary[service], default_secondary[service]
    reported_at = np.zeros(load_primary.shape, bool)  # [rows, metrics] a load the replica reported
    loads = list(map(attrgetter("loads"), given.replicas))
    keys = list(chain.from_iterable(loads))
    if keys:
        values = list(chain.from_iterable(map(dict.values, loads)))
        row = np.repeat(layout.given_rows, np.fromiter(map(len, loads), np.int64, len(loads)))
        metric = np.fromiter(map(cluster.metric_ix.get, keys, repeat(-1)), np.int64, len(keys))
        reported = metric >= 0
        reported[reported] = has_metric[service[row[reported]], metric[reported]]
        if None in values:  # no load reported
            reported &= np.array([v is not None for v in values], bool)
            values = [0.0 if v is None else v for v in values]
        value = np.array(values, np.float64).reshape(-1)
        as_primary = reported & (code[row] != 1) & (code[row] != 3)
        as_secondary = reported & (code[row] == 1)
        load_primary[row[as_primary], metric[as_primary]] = value[as_primary]
        load_secondary[row[as_secondary], metric[as_secondary]] = value[as_secondary]
        reported_at[row[reported], metric[reported]] = True
    _loads_follow_role(layout, code, running, load_primary, load_secondary)
    everywhere = [cluster.service_ix[name] for name in cluster.everywhere]
    own_default = np.isin(service, everywhere) & cluster.default_load_everywhere
    _new_at_average(layout, code == 1, (code == 0) | (code == 1), ~own_default, reported_at, load_secondary)
    _new_at_average(layout, code == 2, code == 2, ~own_default, reported_at, load_primary)
    instance = code == 2
    load_secondary[instance] = load_primary[instance]
    shape = (layout.n_rep, cluster.n_metrics)
    return load_primary.reshape(shape), load_secondary.reshape(shape)


def _loads_follow_role(
    layout: _Layout, code: np.ndarray, running: np.ndarray, load_primary: np.ndarray, load_secondary: np.ndarray
) -> None:
    """The load follows the role (SF's FailoverUnit: one primary load per partition, whichever
    replica is primary; a primary handing its role over gets the average of the secondaries' loads,
    UpdateSecondaryLoadMap): each replica's load as primary is its primary's, a running primary's
    load as secondary the average of the partition's listed secondaries (in place). A primary lost
    with its node comes back as a new replica, with the defaults of new replicas."""
    n_part = layout.sizes.size
    partition = np.repeat(np.arange(n_part), layout.sizes)
    primary_row = np.full(n_part, -1, np.int64)
    primary_row[partition[code == 0]] = np.flatnonzero(code == 0)
    led = (code != 0) & (primary_row[partition] >= 0)
    load_primary[led] = load_primary[primary_row[partition[led]]]
    listed = np.zeros(code.shape[0], bool)
    listed[layout.given_rows] = True
    secondary = listed & (code == 1)
    count = np.bincount(partition[secondary], minlength=n_part)
    sums = np.zeros((n_part, load_secondary.shape[1]), np.float64)
    np.add.at(sums, partition[secondary], load_secondary[secondary])
    primary = (code == 0) & running & (count[partition] > 0)
    load_secondary[primary] = sums[partition[primary]] / count[partition[primary], None]


def _new_at_average(
    layout: _Layout,
    kind: np.ndarray,
    new_kind: np.ndarray,
    averaged: np.ndarray,
    reported_at: np.ndarray,
    load: np.ndarray,
) -> None:
    """New replicas of `new_kind` [rows] take, in each metric some listed replica of `kind`
    (secondaries, or instances) in the partition reported, the average load of those listed (SF's
    FailoverUnit::GetSecondaryLoad and PartitionEntry::GetReplicaEntry: a secondary without a
    per-node load gets the average of the partition's): a new stateful replica's load as a
    secondary, whichever role its row starts in (a partition without a primary promotes one of its
    secondaries and adds a secondary), a new instance's load. `averaged` [rows]: False where the
    service is on every node and UseDefaultLoadForServiceOnEveryNode keeps the default (in place)."""
    n_part = layout.sizes.size
    partition = np.repeat(np.arange(n_part), layout.sizes)
    listed = np.zeros(kind.shape[0], bool)
    listed[layout.given_rows] = True
    known = kind & listed
    sums = np.zeros((n_part, load.shape[1]), np.float64)
    np.add.at(sums, partition[known], load[known])
    any_reported = np.zeros((n_part, load.shape[1]), bool)
    np.logical_or.at(any_reported, partition[known], reported_at[known])
    count = np.maximum(np.bincount(partition[known], minlength=n_part), 1)[:, None]
    average = sums / count  # SF rounds to its integer loads; plbjax's loads are real numbers
    new = new_kind & ~listed & averaged
    at = any_reported[partition[new]]
    load[new] = np.where(at, average[partition[new]], load[new])


def _default_loads(cluster: Entities) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each service's default primary and secondary loads [S+1, metrics], and which metrics it has."""
    shape = (len(cluster.services) + 1, cluster.n_metrics)
    primary, secondary, has_metric = np.zeros(shape, np.float32), np.zeros(shape, np.float32), np.zeros(shape, bool)
    for si, svc in enumerate(cluster.services):
        for metric in svc.metrics:
            m = cluster.metric_ix[metric.name]
            primary[si, m], secondary[si, m] = metric.primary_load, metric.secondary_load
            has_metric[si, m] = True
    return primary, secondary, has_metric


def partition_table(rows: Rows, P: int) -> np.ndarray:
    """[P, K] the replica rows of each partition, -1 padded. Partitions placed on every node never
    move: they are left out."""
    on_every_node = rows.everywhere
    K = padded("K", int(rows.sizes[~on_every_node].max(initial=1)))
    table = np.full((P, K), -1, np.int32)
    listed = ~on_every_node[rows.partition]
    table[rows.partition[listed], rows.slot[listed]] = np.flatnonzero(listed)
    return table
