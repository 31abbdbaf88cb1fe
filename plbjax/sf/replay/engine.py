"""The replay's planner and probe: the same phases `plbjax` runs (`plbjax.sf.plan`, `findings`), one
PLB round at a time.

Both parse the state document they are given (`parse_state`), which at tens of thousands of
replicas costs more than the probe's findings. The replay hands the planner the document the probe
last saw with only its Settings changed (the throttle allowance, `loop.with_settings`), and the
probe the same document again when only the frozen partitions changed: the last document parsed
is kept, and a document whose every other top-level value is the same object is not parsed again
(its Settings, when they differ, are resolved on their own, as parsing would resolve them). The
replay never changes a document in place, so the same object is the same content.
"""

from __future__ import annotations

import copy
import dataclasses

from plbjax.sf import ClusterState, SearchConfig, findings, parse_state, plan
from plbjax.sf._settings import resolve_settings
from plbjax.sf.replay.loop import Needs, PartitionKey


def _ratio(max_load: float, min_load: float) -> float:
    return max_load / min_load if min_load > 0 else (float("inf") if max_load > 0 else 1.0)


class _LastParsed:
    """The last document parsed (kept, so that object identity stays meaningful) and its state."""

    doc: dict | None = None
    state: ClusterState | None = None


_LAST = _LastParsed()


def parsed(state_doc: dict) -> ClusterState:
    """`parse_state(state_doc)`, reusing the last parse when `state_doc` differs from that
    document at most in its Settings (every other top-level value the same object)."""
    last = _LAST.doc
    if (
        last is not None
        and _LAST.state is not None
        and (
            state_doc is last
            or (
                state_doc.keys() - {"Settings"} == last.keys() - {"Settings"}
                and all(state_doc[k] is last[k] for k in state_doc if k != "Settings")
            )
        )
    ):
        settings = state_doc.get("Settings")
        if settings is last.get("Settings") or settings == last.get("Settings"):
            return _LAST.state
        document = {**_LAST.state.document, "Settings": copy.deepcopy(settings)}
        if settings is None:
            document.pop("Settings")
        return dataclasses.replace(_LAST.state, settings=resolve_settings(settings), document=document)
    state = parse_state(state_doc, "state")
    _LAST.doc, _LAST.state = state_doc, state
    return state


@dataclasses.dataclass(frozen=True)
class EngineProbe:
    """What a state needs, from `plbjax.sf.findings`."""

    def __call__(self, state_doc: dict, frozen: frozenset[PartitionKey]) -> Needs:
        found = findings(parsed(state_doc), frozen)
        imbalanced = frozenset((b.metric, b.node_type) for b in found.balance if not b.balanced)
        ratios = {b.metric: _ratio(b.max_load, b.min_load) for b in found.balance if b.node_type is None}
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
