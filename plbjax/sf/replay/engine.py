"""The replay's planner and probe: the same phases `plbjax` runs (`plbjax.sf.plan`, `findings`), one
PLB round at a time.

Both are handed state documents the replay derived from the last one, and parsing a whole document
(`parse_state`) at tens of thousands of replicas costs more than the probe's findings. So the last
document parsed is kept with its state: a document whose top-level values are the same objects
except Partitions, History and Settings (load reports, completed actions, the throttle allowance)
has just those read again (`reparse`; of the Partitions, those that are other objects); one that
differs from it only in Settings has just its Settings resolved (the planner's view of the probe's
document); any other is parsed in full. The replay never changes a document in place, so the same
object is the same content.
"""

from __future__ import annotations

import copy
import dataclasses

from plbjax.sf import ClusterState, SearchConfig, findings, parse_state, plan
from plbjax.sf._settings import resolve_settings
from plbjax.sf._state import REREAD, reparse
from plbjax.sf.replay.loop import Needs, PartitionKey


def _ratio(max_load: float, min_load: float) -> float:
    return max_load / min_load if min_load > 0 else (float("inf") if max_load > 0 else 1.0)


class _LastParsed:
    """The last document parsed (kept, so that object identity stays meaningful) and its state."""

    doc: dict | None = None
    state: ClusterState | None = None


_LAST = _LastParsed()


def _same_except(doc: dict, last: dict, keys: tuple[str, ...]) -> bool:
    """Whether `doc` and `last` have the same top-level values (the same objects) but for `keys`."""
    return doc.keys() - set(keys) == last.keys() - set(keys) and all(doc[k] is last[k] for k in doc if k not in keys)


def parsed(state_doc: dict) -> ClusterState:
    """`parse_state(state_doc)`, reading again only what differs from the last document parsed."""
    last, state = _LAST.doc, _LAST.state
    if last is None or state is None or not _same_except(state_doc, last, REREAD):
        state = parse_state(state_doc, "state")
    elif _same_except(state_doc, last, ("Settings",)):
        settings = state_doc.get("Settings")
        if settings is last.get("Settings") or settings == last.get("Settings"):
            return state
        document = {**state.document, "Settings": copy.deepcopy(settings)}
        if settings is None:
            document.pop("Settings")
        return dataclasses.replace(state, settings=resolve_settings(settings), document=document)
    else:
        state = reparse(state, state_doc, last.get("Partitions"))
    _LAST.doc, _LAST.state = state_doc, state
    return state


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

    def __call__(self, state_doc: dict, frozen: frozenset[PartitionKey]) -> Needs:
        found = findings(parsed(state_doc), frozen)
        imbalanced = frozenset((b.metric, b.node_type) for b in found.balance if not b.balanced)
        ratios = _cluster_ratios(found.balance)
        return Needs(
            unplaced=found.unplaced,
            violations=found.violations,
            imbalanced=imbalanced,
            avg_std_dev=found.avg_std_dev,
            max_min_ratio=ratios,
            node_loads=found.node_loads,
        )


@dataclasses.dataclass(frozen=True)
class EnginePlanner:
    """One phase of `plbjax.sf.plan` with this search (its seed replaced by the round's)."""

    search: SearchConfig

    def __call__(
        self, state_doc: dict, phase: str, node_type: str | None, seed: int, frozen: frozenset[PartitionKey]
    ) -> dict:
        search = dataclasses.replace(self.search, seed=seed)
        return plan(parsed(state_doc), search, phase=phase, node_type=node_type, frozen=frozen)
