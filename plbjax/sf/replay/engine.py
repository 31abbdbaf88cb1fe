"""The replay's planner and probe: the same phases `plbjax` runs (`plbjax.sf.plan`, `findings`), one
PLB round at a time, on one `Session` they share: the cluster stays encoded between rounds and
each round's state updates it (loads reported, actions completed, History, throttles)."""

from __future__ import annotations

import dataclasses

from plbjax.sf import ClusterState, Phase, Plan, SearchConfig, Session
from plbjax.sf.replay.rounds.search import ADAPTIVE, round_search
from plbjax.sf.replay.types import FULL, Effort, Needs, PartitionKey, PlannedRound


def _ratio(max_load: float, min_load: float) -> float:
    return max_load / min_load if min_load > 0 else (float("inf") if max_load > 0 else 1.0)


def _cluster_ratios(balance) -> dict[str, float]:
    """Max/min node load per metric over the whole cluster (timeline.md §3), also when balance is
    per node type (SeparateBalancingStrategyPerNodeType): the largest maximum over the smallest
    minimum of the node types that count the metric."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for b in balance:
        spans.setdefault(b.metric, []).append((b.max_load, b.min_load))
    ratios = {}
    for metric, pairs in spans.items():
        counted = [p for p in pairs if p != (0.0, 0.0)] or pairs  # (0, 0): no node of that type counts it
        ratios[metric] = _ratio(max(hi for hi, _ in counted), min(lo for _, lo in counted))
    return ratios


@dataclasses.dataclass(frozen=True)
class EngineProbe:
    """What a state needs, from `plbjax.sf.findings`."""

    session: Session = dataclasses.field(default_factory=Session)

    def __call__(self, state: ClusterState, frozen: frozenset[PartitionKey]) -> Needs:
        found = self.session.findings(state, frozen)
        imbalanced = frozenset((b.metric, b.node_type) for b in found.balance if not b.balanced)
        return Needs(
            unplaced=found.unplaced,
            violations=found.violations,
            violations_by_kind=found.violations_by_kind,
            imbalanced=imbalanced,
            avg_std_dev=found.avg_std_dev,
            max_min_ratio=_cluster_ratios(found.balance),
            node_loads=found.node_loads,
        )


@dataclasses.dataclass(frozen=True)
class EnginePlanner:
    """One phase of `plbjax.sf.plan` with this search (its seed replaced by the round's), as long as
    the round's effort asks (`round_search`) unless `rounds` is "fixed". `documents`, when a list,
    receives every plan's document (rendered only then: `record.plans`)."""

    search: SearchConfig
    session: Session = dataclasses.field(default_factory=Session)
    rounds: str = ADAPTIVE
    documents: list[dict] | None = None

    def __call__(
        self,
        state: ClusterState,
        phase: Phase,
        node_type: str | None,
        seed: int,
        frozen: frozenset[PartitionKey],
        effort: Effort = FULL,
    ) -> PlannedRound:
        """The round's actions and History, from its plan."""
        plan = self.plan(state, phase, node_type, seed, frozen, effort)
        return PlannedRound(plan.actions, plan.history, plan.search.seconds)

    def plan(
        self,
        state: ClusterState,
        phase: Phase,
        node_type: str | None,
        seed: int,
        frozen: frozenset[PartitionKey],
        effort: Effort = FULL,
    ) -> Plan:
        """The round's plan (its document is rendered only by a caller that asks for it)."""
        search = dataclasses.replace(self.search, seed=seed)
        if self.rounds == ADAPTIVE:
            search = round_search(search, effort)
        plan = self.session.plan(state, search, phase=phase, node_type=node_type, frozen=frozen)
        if self.documents is not None:
            self.documents.append(plan.document())
        return plan


def engine(
    search: SearchConfig, session: Session | None = None, rounds: str = ADAPTIVE, documents: list[dict] | None = None
) -> tuple[EnginePlanner, EngineProbe]:
    """The planner and the probe of a replay, on one session (a fresh resident one by default);
    `documents`, when a list, receives every round's plan document."""
    session = session or Session()
    return EnginePlanner(search, session, rounds, documents), EngineProbe(session)
