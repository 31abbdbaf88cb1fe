"""The arrays the baseline's kernels work on: the encoded `Problem` as numpy (`Arrays`, read) and a
chain's state (`State`, written), with the baseline's own order of the constraint terms."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from plbjax.sf import Search

# The constraint indices of `SearchScope.enforce` / `Problem.penalty`: the one private import, read to map
# plbjax's order onto the baseline's own (below) by name.
from plbjax.sf._encoding import CAPACITY as SF_CAPACITY
from plbjax.sf._encoding import FAULT_DOMAIN as SF_FAULT_DOMAIN
from plbjax.sf._encoding import PLACEMENT as SF_PLACEMENT
from plbjax.sf._encoding import UNPLACED as SF_UNPLACED
from plbjax.sf._encoding import UPGRADE_DOMAIN as SF_UPGRADE_DOMAIN

# The Problem's fields as numpy arrays: floats as float64, ints as int64, masks as bool.
Arrays = namedtuple(
    "Arrays",
    [
        "node_up",
        "capacity",
        "metric_nodes",
        "metric_node_count",
        "fd_tree",
        "ud_tree",
        "replica_partition",
        "replica_service",
        "load_primary",
        "load_secondary",
        "move_cost",
        "partition_replicas",
        "partition_service",
        "service_class",
        "service_metrics",
        "class_nodes",
        "class_node_count",
        "class_allowed",
        "fd_children",
        "ud_children",
        "fd_usable",
        "ud_usable",
        "global_weight",
        "local_weight",
        "initial_node",
        "initial_primary",
        "swap_cost",
        "movable",
        "n_movable",
        "swappable",
        "n_swappable",
        "enforce",
        "penalty",
        "replica_count",
        "move_penalty",
        "move_budget",
        "service_nonpacking",
        "domain_quorum",
        "quorum_level",
        "node_move_factor",
    ],
)
# The baseline's own order of the constraint terms it implements (problem_arrays maps plbjax's
# `enforce` / `penalty` entries onto it by name, so the compiled kernels never depend on plbjax's order).
CAPACITY, PLACEMENT, FAULT_DOMAIN, UPGRADE_DOMAIN, UNPLACED = range(5)
_FROM_SF = (SF_CAPACITY, SF_PLACEMENT, SF_FAULT_DOMAIN, SF_UPGRADE_DOMAIN, SF_UNPLACED)  # in that order

_SCALARS_F = ("swap_cost", "replica_count", "move_penalty")
_SCALARS_I = ("n_movable", "n_swappable", "move_budget")  # move_budget: the throttles' most movements


def _unsupported(search: Search) -> list[str]:
    """Energy terms or rules of `search` that the baseline does not implement (in use)."""
    problem, within = search.cluster, search.scope
    features = ("affinity", "defrag", "thresholds", "preferred", "applications")
    out = [f"feature {name}" for name in features if getattr(problem.features, name)]
    if within.history:
        out.append("feature history")
    if not np.array_equal(np.asarray(within.node_open), np.asarray(problem.node_up)):
        out.append("closed nodes (node_open)")
    if int(within.partition_budget) < 2**31 - 1:
        out.append("throttle partition_budget")
    if np.any(np.asarray(problem.replica_parent) >= 0):
        out.append("affinity")
    if not np.all(np.asarray(problem.primary_preferred)):
        out.append("preferred primary domain")
    if not np.array_equal(np.asarray(problem.energy_terms[:2]), [1.0, 1000.0]):
        out.append("IgnoreCostInScoring or MoveCostOffset")
    return out


def problem_arrays(search: Search) -> Arrays:
    """The search's cluster and scope as numpy arrays for numba (done once per search); the scope's
    origin is the baseline's `initial_node` / `initial_primary`, where it starts and counts from.

    Raises NotImplementedError for a problem that uses rules the baseline lacks (affinity,
    preferred primary domains, defragmentation, resource thresholds, history, closed nodes, the
    per-partition throttle): the benchmark's generated clusters use none of them. The movement
    throttles' budget (`move_budget`) it honours.
    """
    missing = _unsupported(search)
    if missing:
        raise NotImplementedError("the numba baseline does not implement: " + ", ".join(missing))
    within = search.scope
    origin = {"initial_node": within.origin_node, "initial_primary": within.origin_primary}
    out = {}
    for name in Arrays._fields:
        source = within if hasattr(within, name) else search.cluster
        a = np.asarray(origin[name] if name in origin else getattr(source, name))
        if name in ("enforce", "penalty"):  # in the baseline's order CAPACITY .. UNPLACED
            a = a[list(_FROM_SF)]
        if name in _SCALARS_F:
            out[name] = float(a)
        elif name in _SCALARS_I:
            out[name] = int(a)
        elif a.dtype == np.bool_:
            out[name] = np.ascontiguousarray(a)
        elif np.issubdtype(a.dtype, np.integer):
            out[name] = np.ascontiguousarray(a, dtype=np.int64)
        else:
            out[name] = np.ascontiguousarray(a, dtype=np.float64)
    return Arrays(**out)


# Chain state. Scalars live in `sc`: [local_score, cost, energy, best_energy, accepted, log_len,
# log_mode (1: best = current + undo log, 0: best = the explicit best arrays), penalty, movements
# from the origin (as SF's throttles count them: moved placed replicas and swapped primaries)].
State = namedtuple(
    "State",
    [
        "node_of",
        "primary_of",
        "loads",
        "local",
        "g_total",
        "g_sq",
        "g_centre",
        "l_total",
        "l_sq",
        "l_centre",
        "sc",
        "best_node_of",
        "best_primary_of",
        "log_kind",
        "log_index",
        "log_value",
    ],
)
LS, COST, E, BEST, ACC, LOGN, LOGMODE, PEN, MOVES = range(9)
