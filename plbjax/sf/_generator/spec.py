"""The shape of a synthetic cluster (`ClusterSpec`, checked by `validate`) and what `generate`
draws from it before placing anything: the node layout, the services, the loads, the capacities."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from plbjax.errors import BadInput

_PRIMARY_FACTOR = 1.5  # PrimaryDefaultLoad / SecondaryDefaultLoad


@dataclass(frozen=True)
class ClusterSpec:
    """The shape of a synthetic cluster; `generate` draws one for a seed."""

    nodes: int = 20
    node_types: int = 1
    fault_domains: int = 5  # top-level FDs
    racks_per_fault_domain: int = 1  # >1 gives hierarchical FDs "fd:/dcK/rJ"
    upgrade_domains: int = 5
    metrics: int = 2  # custom metrics "Metric0".. ; 0 => SF default metrics
    services: int = 5
    partitions_per_service: int = 4
    replicas_per_partition: int = 3  # TargetReplicaSetSize (stateful) / InstanceCount (stateless)
    stateless_fraction: float = 0.2
    skew: float = 0.5  # 0 = uniform spread, 1 = piled on few nodes
    load_scale: float = 10.0  # typical load per replica
    capacity_headroom: float = 2.0  # capacity = headroom * total load / nodes; 0 = no capacities
    placement_constraint_fraction: float = 0.0  # services with a NodeType constraint

    @property
    def total_replicas(self) -> int:
        return self.services * self.partitions_per_service * self.replicas_per_partition


# --------------------------------------------------------------------------------------------
# validation


def validate(seed: int, spec: ClusterSpec) -> None:
    def whole(v, least: int) -> bool | np.bool_:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= least

    def need(ok: bool | np.bool_, field: str, what: str) -> None:
        if not ok:
            raise BadInput(f"ClusterSpec.{field} = {getattr(spec, field)!r}: {what}")

    if not whole(seed, 0):
        raise BadInput(f"seed = {seed!r}: must be an integer >= 0")
    for f in (
        "nodes",
        "node_types",
        "fault_domains",
        "racks_per_fault_domain",
        "upgrade_domains",
        "partitions_per_service",
        "replicas_per_partition",
    ):
        need(whole(getattr(spec, f), 1), f, "must be an integer >= 1")
    for f in ("metrics", "services"):
        need(whole(getattr(spec, f), 0), f, "must be an integer >= 0")
    for f in ("stateless_fraction", "skew", "placement_constraint_fraction"):
        v = getattr(spec, f)
        need(isinstance(v, (int, float)) and 0.0 <= v <= 1.0, f, "must be in [0, 1]")
    need(
        isinstance(spec.load_scale, (int, float)) and spec.load_scale > 0 and math.isfinite(spec.load_scale),
        "load_scale",
        "must be a positive number",
    )
    need(
        isinstance(spec.capacity_headroom, (int, float))
        and spec.capacity_headroom >= 0
        and math.isfinite(spec.capacity_headroom),
        "capacity_headroom",
        "must be >= 0",
    )
    need(spec.node_types <= spec.nodes, "node_types", f"more node types than nodes ({spec.nodes})")
    leaves = spec.fault_domains * spec.racks_per_fault_domain
    need(
        leaves <= spec.nodes,
        "fault_domains",
        f"fault_domains * racks_per_fault_domain = {leaves} > nodes = {spec.nodes} (every domain must have a node)",
    )
    need(spec.upgrade_domains <= spec.nodes, "upgrade_domains", f"more upgrade domains than nodes ({spec.nodes})")
    need(
        spec.replicas_per_partition <= spec.nodes,
        "replicas_per_partition",
        f"more replicas per partition than nodes ({spec.nodes}): no two replicas of a partition may share a node",
    )


# --------------------------------------------------------------------------------------------
# what generate draws before placing


class NodeLayout(NamedTuple):
    """Each node's top-level fault domain, rack, upgrade domain and node type (round-robin domains,
    contiguous blocks of node types), and its name."""

    fd: np.ndarray
    rack: np.ndarray
    ud: np.ndarray
    type: np.ndarray
    names: list[str]


def node_layout(spec: ClusterSpec) -> NodeLayout:
    N = int(spec.nodes)
    idx = np.arange(N)
    width = max(3, len(str(N - 1)))
    F = int(spec.fault_domains)
    return NodeLayout(
        fd=idx % F,
        rack=(idx // F) % int(spec.racks_per_fault_domain),
        ud=idx % int(spec.upgrade_domains),
        type=idx * int(spec.node_types) // N,
        names=[f"Node{i:0{width}d}" for i in range(N)],
    )


class DrawnServices(NamedTuple):
    """Which services are stateless, and the node type each is constrained to (-1: none)."""

    stateless: np.ndarray
    constraint: np.ndarray


def draw_services(rng: np.random.Generator, spec: ClusterSpec) -> DrawnServices:
    S, T = int(spec.services), int(spec.node_types)
    n_stateless = int(round(spec.stateless_fraction * S))
    stateless = np.zeros(S, dtype=bool)
    if n_stateless:
        stateless[rng.choice(S, size=n_stateless, replace=False)] = True
    constraint = np.full(S, -1)
    if T > 1 and spec.placement_constraint_fraction > 0:
        n_con = int(round(spec.placement_constraint_fraction * S))
        if n_con:
            which = rng.choice(S, size=n_con, replace=False)
            constraint[which] = rng.integers(0, T, size=n_con)
    return DrawnServices(stateless=stateless, constraint=constraint)


class DrawnLoads(NamedTuple):
    """Loads in integer units (1, or 0.1 for float loads) so that capacity bookkeeping is exact. The
    arrays are None without custom metrics."""

    as_int: bool  # loads and capacities are integers (load_scale >= 5)
    unit: float  # units per load
    primary: np.ndarray | None  # (S, M) default loads of stateful services
    secondary: np.ndarray | None
    instance: np.ndarray | None  # (S, M) default loads of stateless services
    replicas: np.ndarray | None  # (P, R, M) each replica's load; slot 0 is the primary

    def number(self, x) -> int | float:
        """A load or capacity in the document's terms."""
        return int(x) if self.as_int else round(float(x) / self.unit, 1)


def draw_loads(rng: np.random.Generator, spec: ClusterSpec, services: DrawnServices) -> DrawnLoads:
    """Default loads log-normal around load_scale (primaries heavier); replica loads log-normal
    around their default, per partition and per replica."""
    as_int = spec.load_scale >= 5
    unit = 1.0 if as_int else 10.0
    S, M, R = int(spec.services), int(spec.metrics), int(spec.replicas_per_partition)
    if not M:
        return DrawnLoads(as_int, unit, None, None, None, None)

    def rnd(x):
        return np.maximum(np.rint(x * unit), 1.0)

    base = spec.load_scale * rng.lognormal(0.0, 0.5, size=(S, M))
    secondary = rnd(base)
    primary = np.maximum(rnd(_PRIMARY_FACTOR * base), secondary + 1.0)
    instance = rnd(base)
    svc_of_part = np.repeat(np.arange(S), int(spec.partitions_per_service))
    part_f = rng.lognormal(0.0, 0.3, size=(len(svc_of_part), 1, M))
    noise = rng.lognormal(0.0, 0.1, size=(len(svc_of_part), R, M))
    sl = services.stateless[svc_of_part]
    role_default = np.where(
        sl[:, None, None], instance[svc_of_part][:, None, :], secondary[svc_of_part][:, None, :]
    ).repeat(R, axis=1)
    role_default[~sl, 0, :] = primary[svc_of_part[~sl]]
    replicas = np.maximum(np.rint(role_default * part_f * noise), 1.0)
    return DrawnLoads(as_int, unit, primary, secondary, instance, replicas)


def node_capacity(spec: ClusterSpec, loads: DrawnLoads) -> np.ndarray | None:
    """Every node's capacity per metric (units): headroom x the mean node load, but never below
    headroom x the largest replica (a sparse cluster, fewer replicas than nodes, would otherwise fit
    no replica at all). None without custom metrics or with capacity_headroom 0."""
    if loads.replicas is None or spec.capacity_headroom <= 0:
        return None
    N = int(spec.nodes)
    total = loads.replicas.sum(axis=(0, 1))
    largest = (
        loads.replicas.max(axis=(0, 1))
        if loads.replicas.shape[0]
        else np.full(int(spec.metrics), spec.load_scale * loads.unit)
    )
    cap = np.ceil(spec.capacity_headroom * np.maximum(total / N, largest))
    if (cap * N < total).any():
        raise BadInput(
            f"ClusterSpec.capacity_headroom = {spec.capacity_headroom}: total node "
            "capacity is below the total load (use >= 1, or 0 for no capacities)"
        )
    return cap
