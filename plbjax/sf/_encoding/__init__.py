"""A `ClusterState` <-> dense padded arrays: the `Problem` every search reads and the host's `Index`.

    problem.py         Problem, Features, Index; the constraint kinds and SF's weights
    arrays.py          sizes rounded up to buckets, so similar clusters share one compiled program
    encoder.py         encode: the walk, stage after stage, into a Problem and its Index
    stages.py          the stages that do not depend on the replicas: entities, nodes, classes, weights
    energy_terms.py    the energy's settings, numbers the search reads at run time (Problem.energy_terms)
    rows.py            the replica rows, each partition's replicas in order
    replica_stages.py  the stages that read the rows: policies, upgrade homes, History, in transition
    app_groups.py      the application groups: scaleout counts, capacities, reservations (AppGroups)
    assembly.py        each stage's share of Problem on the device; Problem assembled in one place
    updates.py         the session's update path: what changed re-encoded, the rest kept
    decoding.py        a placement -> the minimal list of Failover Manager actions, and actions applied

Reads `_state`; `_model` reads it.
"""

from plbjax.sf._encoding.app_groups import NO_LIMIT_NODES, AppGroups
from plbjax.sf._encoding.arrays import on_device, pad
from plbjax.sf._encoding.decoding import apply_actions, apply_to_partition, diff, settle
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._encoding.energy_terms import COST, FDS, NODES, OFFSET, UDS, energy_unit
from plbjax.sf._encoding.problem import (
    AFFINITY,
    CAPACITY,
    CONSTRAINTS,
    FAULT_DOMAIN,
    PLACEMENT,
    PREFERRED,
    PRIORITY_SETTINGS,
    THRESHOLD,
    THRESHOLD_PRIORITY,
    UNPLACED,
    UPGRADE_DOMAIN,
    Index,
    Problem,
)
from plbjax.sf._encoding.updates import with_parent_hosts, with_partitions, without_dropped

__all__ = [
    "AFFINITY",
    "AppGroups",
    "NO_LIMIT_NODES",
    "CAPACITY",
    "CONSTRAINTS",
    "COST",
    "FDS",
    "NODES",
    "OFFSET",
    "UDS",
    "FAULT_DOMAIN",
    "Index",
    "PLACEMENT",
    "PREFERRED",
    "PRIORITY_SETTINGS",
    "Problem",
    "THRESHOLD",
    "THRESHOLD_PRIORITY",
    "UNPLACED",
    "UPGRADE_DOMAIN",
    "apply_actions",
    "apply_to_partition",
    "diff",
    "encode",
    "energy_unit",
    "on_device",
    "pad",
    "settle",
    "with_parent_hosts",
    "with_partitions",
    "without_dropped",
]
