"""The replay's planner and probe: the same phases `plbjax` runs (`plbjax.sf.plan`, `findings`), one
PLB round at a time."""

from __future__ import annotations

import dataclasses

from plbjax.sf import SearchConfig, findings, parse_state, plan
from plbjax.sf.replay.loop import Needs, PartitionKey


def _ratio(max_load: float, min_load: float) -> float:
    return max_load / min_load if min_load > 0 else (float("inf") if max_load > 0 else 1.0)


@dataclasses.dataclass(frozen=True)
class EngineProbe:
    """What a state needs, from `plbjax.sf.findings`."""

    def __call__(self, state_doc: dict, frozen: frozenset[PartitionKey]) -> Needs:
        found = findings(parse_state(state_doc, "state"), frozen)
        imbalanced = frozenset((b.metric, b.node_type) for b in found.balance if not b.balanced)
        ratios = {b.metric: _ratio(b.max_load, b.min_load) for b in found.balance if b.node_type is None}
        return Needs(unplaced=found.unplaced, violations=found.violations, imbalanced=imbalanced,
                     avg_std_dev=found.avg_std_dev, max_min_ratio=ratios, node_loads=found.node_loads)


@dataclasses.dataclass(frozen=True)
class EnginePlanner:
    """One phase of `plbjax.sf.plan` with this search (its seed replaced by the round's)."""

    search: SearchConfig

    def __call__(self, state_doc: dict, phase: str, node_type: str | None, seed: int,
                 frozen: frozenset[PartitionKey]) -> dict:
        search = dataclasses.replace(self.search, seed=seed)
        return plan(parse_state(state_doc, "state"), search, phase=phase, node_type=node_type, frozen=frozen)
