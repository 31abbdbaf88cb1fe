"""The violations record: a placement's constraint violations in full, one field per measure.

The first `CONSTRAINTS` fields are the constraint kinds in their measured order (field k is kind
k: `CAPACITY` .. `UNPLACED`), so a kind's measure is read by its index and no table maps names to
kinds; the fields after them count with a kind (`by_kind`) or are reported only. A NamedTuple of
arrays: it crosses `jit` (`Violations[jax.Array]`), and `assess` hands it back as numpy arrays
(`Violations[np.ndarray]`).
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

import equinox as eqx
import jax
import numpy as np

from plbjax.sf._encoding import CAPACITY, CONSTRAINTS, PLACEMENT, PREFERRED, UNPLACED

A = TypeVar("A", jax.Array, np.ndarray)  # the arrays: JAX's on the device, numpy's on the host


class AppViolations(eqx.Module, Generic[A]):
    """The application groups' violations in full: the nodes beyond MaximumNodes `scaleout` [A];
    the relative excess over MaximumCapacity `node` [A, N, M] and over TotalApplicationCapacity
    `total` [A, M]; the capacity excess the reservations add `reserved` [N, M]; and the replicas of
    an application in scaleout violation `scaleout_replicas` [R], or over a capacity (its own on
    their node or in all) `capacity_replicas` [R]."""

    scaleout: A
    node: A
    total: A
    reserved: A
    scaleout_replicas: A
    capacity_replicas: A


class Violations(NamedTuple, Generic[A]):
    """A placement's violations: per node [N, M], per replica [R] or per partition [P]."""

    capacity: A  # [N, M] float: load over capacity, relative to it
    placement: A  # [R] bool: on a node its placement constraint excludes
    fault_domain: A  # [P] int: how far from an even fault-domain spread
    upgrade_domain: A  # [P] int: how far from an even upgrade-domain spread
    affinity: A  # [R] bool: not beside its affinity parent's replica
    preferred: A  # [P] bool: primary outside its preferred primary domain
    threshold: A  # [N, M] float: load over ResourceThresholds, relative to it
    unplaced: A  # [R] bool: a real replica without a node
    away: A  # [R] bool: off its home node (upgrade snapshot): counts as preferred
    headless: A  # [P] bool: a primary without a node: counts as one more unplaced
    exclusion: A  # [P] int: pairs of the partition's replicas on one node (reported only)
    apps: AppViolations[A] | None = None  # the application groups' (None: the cluster has none)

    def by_kind(self) -> tuple[tuple[A, ...], ...]:
        """The arrays each constraint kind measures, in the kinds' order: its own field, with
        PreferredLocation also the replicas away from home and unplaced the headless partitions;
        capacity also the application capacities' and the reservations', placement also the
        scaleout counts'."""
        kinds: list[tuple[A, ...]] = [(x,) for x in self[:CONSTRAINTS]]
        kinds[PREFERRED] += (self.away,)
        kinds[UNPLACED] += (self.headless,)
        if self.apps is not None:
            kinds[CAPACITY] += (self.apps.node, self.apps.total, self.apps.reserved)
            kinds[PLACEMENT] += (self.apps.scaleout,)
        return tuple(kinds)
