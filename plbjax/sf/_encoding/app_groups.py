"""Service Fabric's application groups as arrays: `AppGroups` (each replica's application and each
application's scaleout count, capacities and reservation), the stage that encodes them, and `None`
for a cluster whose applications limit nothing (`Features.applications` off: the search compiles
as without them).

SF's ApplicationEntry (LoadBalancing/ApplicationEntry.cpp:16) carries the same: the scaleout count
(MaximumNodes, 0: none), the application capacity (TotalApplicationCapacity), the per-node capacity
(MaximumCapacity) and the reservation (ReservationCapacity), each per metric.
"""

from __future__ import annotations

import equinox as eqx
import numpy as np
from jaxtyping import Array, Float, Int

from plbjax.sf._encoding.arrays import bucket, on_device, pad
from plbjax.sf._encoding.rows import Rows
from plbjax.sf._encoding.stages import Entities
from plbjax.sf._state import ClusterState

NO_LIMIT_NODES = np.iinfo(np.int32).max  # an application without a scaleout count


class AppGroups(eqx.Module):
    """The application groups on the device. A applications (padded), R replicas, M metrics."""

    replica_app: Int[Array, " R"]  # the replica's application (-1: none that limits anything)
    max_nodes: Int[Array, " A"]  # MaximumNodes: most nodes its replicas occupy (NO_LIMIT_NODES: none)
    node_capacity: Float[Array, "A M"]  # MaximumCapacity: its most load on one node (inf: none)
    total_capacity: Float[Array, "A M"]  # TotalApplicationCapacity: its most load in all (inf: none)
    reservation: Float[Array, "A M"]  # ReservationCapacity: held on each node it occupies (0: none)


def app_groups(state: ClusterState, cluster: Entities, rows: Rows) -> AppGroups | None:
    """The applications that limit something and have replicas here, encoded (None: there are none)."""
    used = {s.application for s in cluster.services}
    apps = [a for a in state.applications if a.limits and a.name in used]
    if not apps:
        return None
    A, M, R = bucket(len(apps), 2), cluster.M, rows.R
    app_ix = {a.name: i for i, a in enumerate(apps)}
    max_nodes = np.full(A, NO_LIMIT_NODES, np.int32)
    node_capacity = np.full((A, M), np.inf, np.float32)
    total_capacity = np.full((A, M), np.inf, np.float32)
    reservation = np.zeros((A, M), np.float32)
    for i, app in enumerate(apps):
        max_nodes[i] = NO_LIMIT_NODES if app.maximum_nodes is None else app.maximum_nodes
        for metric in (m for m in app.metrics if m.name in cluster.metric_ix):
            k = cluster.metric_ix[metric.name]
            node_capacity[i, k] = np.inf if metric.node_capacity is None else metric.node_capacity
            total_capacity[i, k] = np.inf if metric.total_capacity is None else metric.total_capacity
            reservation[i, k] = metric.reservation
    service_app = np.array([app_ix.get(s.application, -1) for s in cluster.services] + [-1], np.int32)
    return AppGroups(
        replica_app=on_device(pad(service_app[rows.service], (R,), -1)),
        max_nodes=on_device(max_nodes),
        node_capacity=on_device(node_capacity),
        total_capacity=on_device(total_capacity),
        reservation=on_device(reservation),
    )
