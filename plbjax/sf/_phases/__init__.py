"""SF's phases, each a search of the model that hands on a `PhaseResult`.

    search_config.py     the `search` settings (the Hydra group's schema) and their defaults
    preparation.py       the state as the phases see it: governed, encoded, surplus dropped
    drops.py             surplus replicas: which a partition holding too many drops first
    primaries.py         primaries elected where a partition's primary has no node
    on_every_node.py     services with an instance on every node, placed without search
    balance_rule.py      when to balance: SF's per-metric trigger, and the service domains
    phase.py             what every phase shares: Run, PhaseResult, throttles, the search loop
    placement.py         placement: the missing replicas placed
    constraint_check.py  the constraint check: replicas in violation moved
    balancing.py         balancing: the imbalanced service domains moved
    fewest_movements.py  the final pass: movements undone that the plan does not need

Reads `_model`, `_encoding`, `_state`; `_plan` reads it.
"""

from plbjax.sf._phases.balance_rule import MetricBalance
from plbjax.sf._phases.balancing import balances, balancing_model, balancing_phase
from plbjax.sf._phases.constraint_check import constraint_phase
from plbjax.sf._phases.fewest_movements import tidy
from plbjax.sf._phases.on_every_node import everywhere
from plbjax.sf._phases.phase import QUENCH_BLOCKS, PhaseResult, Run, interrupted, movement_budget, throttle_limits
from plbjax.sf._phases.placement import placement_phase
from plbjax.sf._phases.preparation import (
    Encoded,
    Prepared,
    frozen_masks,
    governed_encoding,
    prepare,
    priorities_of,
    surplus_replicas,
)
from plbjax.sf._phases.primaries import built_from_primaries, elect_primaries
from plbjax.sf._phases.search_config import SearchConfig

__all__ = [
    "Encoded",
    "MetricBalance",
    "PhaseResult",
    "Prepared",
    "QUENCH_BLOCKS",
    "Run",
    "SearchConfig",
    "balances",
    "balancing_model",
    "balancing_phase",
    "built_from_primaries",
    "constraint_phase",
    "elect_primaries",
    "everywhere",
    "frozen_masks",
    "governed_encoding",
    "interrupted",
    "movement_budget",
    "placement_phase",
    "prepare",
    "priorities_of",
    "surplus_replicas",
    "throttle_limits",
    "tidy",
]
