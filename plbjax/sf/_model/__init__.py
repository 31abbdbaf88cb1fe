"""Service Fabric as an `anneal.Model`: the rules a placement is scored by, and the moves.

    search_scope.py what one search decides (Scope) apart from the cluster it searches (Search)
    violation_record.py  the violations record, one field per constraint kind
    constraints.py  the hard rules measured: exclusion, capacity, fault and upgrade domains
    energy.py       SF's balancing score and energy, in full and per move
    moves.py        random neighbour moves, SF's way: move, or swap a primary with a secondary; exchange
    app_groups.py   a move's change of SF's application groups' measures (scaleout, capacities, reservation)
    compound_moves.py  SF's compound move where a partition fills its domains evenly
    proposals.py    a step's proposals: the kinds' shares, one drawn kind, a batch
    chain.py        model: one chain's state and energy, updated by moves
    assessment.py   one placement on the host: its score, loads, violations and movements

Reads `_encoding`; `_phases` reads it.
"""

from plbjax.sf._model.assessment import (
    Assessment,
    Placement,
    assessed,
    headless,
    movements,
    no_worse,
    pad_to,
    violating,
    violating_by_kind,
    violation_rank,
)
from plbjax.sf._model.chain import model
from plbjax.sf._model.constraints import affinity_violated, partition_domain_violations, partition_nodes, violations
from plbjax.sf._model.energy import local_loads, local_masks, node_loads
from plbjax.sf._model.search_scope import UNLIMITED, Scope, Search, full_scope, scope
from plbjax.sf._model.violation_record import Violations

__all__ = [
    "Assessment",
    "Placement",
    "Scope",
    "Search",
    "UNLIMITED",
    "Violations",
    "affinity_violated",
    "assessed",
    "full_scope",
    "headless",
    "local_loads",
    "local_masks",
    "node_loads",
    "model",
    "movements",
    "no_worse",
    "pad_to",
    "partition_domain_violations",
    "partition_nodes",
    "scope",
    "violating",
    "violating_by_kind",
    "violation_rank",
    "violations",
]
