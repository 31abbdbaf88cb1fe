"""SF's phases and the minimal-movement pass, each a search of the model (a `PhaseSearch`) from where
the plan stands (`Reached`) to the `PhaseResult` it hands on.

    search_config.py     the `search` settings (the Hydra group's schema) and their defaults
    preparation.py       the state as the phases see it: governed, encoded, surplus dropped
    drops.py             surplus replicas: which a partition holding too many drops first (`Drop`)
    primaries.py         primaries elected where a partition's primary has no node
    domain_replicas.py   SF's domain rule per replica: which to move, where a new one may go
    new_replica_targets.py  new replicas held to SF's per-replica targets after placement's search
    on_every_node.py     services with an instance on every node, placed without search
    balance_rule.py      when to balance: SF's per-metric trigger, and the service domains
    phase.py             what every phase shares: Phase (its name), Run, Reached, PhaseResult, throttles, the search
    placement.py         placement: the missing replicas placed, lost primaries promoted
    constraint_check.py  the constraint check: replicas in violation moved
    balancing.py         balancing: the imbalanced service domains moved
    fewest_movements.py  the last pass: movements undone that the plan does not need

Reads `_model`, `_encoding`, `_state`; `_plan` reads it.

The names import on first use (PEP 562): `SearchConfig`, the `search` group's schema, needs no JAX,
so a command's `--help` composes its configuration without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for pyright; at run time `__getattr__` imports them
    from plbjax.sf._phases.balance_rule import MetricBalance
    from plbjax.sf._phases.balancing import balances, balancing_model, balancing_phase
    from plbjax.sf._phases.constraint_check import constraint_phase
    from plbjax.sf._phases.drops import Drop
    from plbjax.sf._phases.fewest_movements import fewest_movements_phase, tidy_blocks
    from plbjax.sf._phases.on_every_node import everywhere
    from plbjax.sf._phases.phase import (
        PHASES,
        QUENCH_BLOCKS,
        Phase,
        PhaseResult,
        PhaseSearch,
        Reached,
        Run,
        interrupted,
        movement_budget,
        throttle_limits,
    )
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
    from plbjax.sf._phases.primaries import elect_primaries, held_for_promotion, promotion_eliminations, unpromoted
    from plbjax.sf._phases.search_config import SearchConfig

# each public name -> (the module that defines it, its name there)
_HOMES = {
    "MetricBalance": ("balance_rule", "MetricBalance"),
    "balances": ("balancing", "balances"),
    "balancing_model": ("balancing", "balancing_model"),
    "balancing_phase": ("balancing", "balancing_phase"),
    "constraint_phase": ("constraint_check", "constraint_phase"),
    "Drop": ("drops", "Drop"),
    "fewest_movements_phase": ("fewest_movements", "fewest_movements_phase"),
    "tidy_blocks": ("fewest_movements", "tidy_blocks"),
    "everywhere": ("on_every_node", "everywhere"),
    "PHASES": ("phase", "PHASES"),
    "QUENCH_BLOCKS": ("phase", "QUENCH_BLOCKS"),
    "Phase": ("phase", "Phase"),
    "PhaseResult": ("phase", "PhaseResult"),
    "PhaseSearch": ("phase", "PhaseSearch"),
    "Reached": ("phase", "Reached"),
    "Run": ("phase", "Run"),
    "interrupted": ("phase", "interrupted"),
    "movement_budget": ("phase", "movement_budget"),
    "throttle_limits": ("phase", "throttle_limits"),
    "placement_phase": ("placement", "placement_phase"),
    "Encoded": ("preparation", "Encoded"),
    "Prepared": ("preparation", "Prepared"),
    "frozen_masks": ("preparation", "frozen_masks"),
    "governed_encoding": ("preparation", "governed_encoding"),
    "prepare": ("preparation", "prepare"),
    "priorities_of": ("preparation", "priorities_of"),
    "surplus_replicas": ("preparation", "surplus_replicas"),
    "elect_primaries": ("primaries", "elect_primaries"),
    "held_for_promotion": ("primaries", "held_for_promotion"),
    "promotion_eliminations": ("primaries", "promotion_eliminations"),
    "unpromoted": ("primaries", "unpromoted"),
    "SearchConfig": ("search_config", "SearchConfig"),
}

__all__ = [
    "Drop",
    "Encoded",
    "MetricBalance",
    "PHASES",
    "Phase",
    "PhaseResult",
    "PhaseSearch",
    "Prepared",
    "Reached",
    "QUENCH_BLOCKS",
    "Run",
    "SearchConfig",
    "balances",
    "balancing_model",
    "balancing_phase",
    "constraint_phase",
    "elect_primaries",
    "everywhere",
    "fewest_movements_phase",
    "frozen_masks",
    "governed_encoding",
    "held_for_promotion",
    "interrupted",
    "movement_budget",
    "placement_phase",
    "prepare",
    "priorities_of",
    "promotion_eliminations",
    "surplus_replicas",
    "throttle_limits",
    "tidy_blocks",
    "unpromoted",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _HOMES[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
