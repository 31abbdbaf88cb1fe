"""SF's own series from its observed day (``plbjax-import``'s ``*.sf-day.json``, docs/contract.md,
read by ``plbjax-replay``'s door): each period's state measured by the replay's probe (the same
definitions as the replay's series), and the movements SF made since the period before.

A movement is what the replay counts as one: a replica on another node than the period before (a
partition's replicas that arrived on a node, paired with those that left one: a replica only built
or only dropped is none), or a swap (the primary now on a node that held another replica of its
partition the period before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plbjax.sf import ClusterState, Role
from plbjax.sf.replay.types import Needs, Probe

Observed = Sequence[tuple[float, str, ClusterState]]  # each period's time (the timeline's clock), UTC time, state
Beside = tuple[Observed, Probe]  # SF's observed day and the probe that measures it (not the replay's session)


@dataclass(frozen=True)
class SfRow:
    """SF's state at one period, as the probe measures it, and what SF moved since the period before."""

    time: float
    utc: str
    needs: Needs
    moves: int  # replicas on another node than the period before
    swaps: int  # primaries on a node that held another replica of their partition the period before
    cumulative_movements: int


def sf_series(periods: Observed, probe: Probe) -> tuple[SfRow, ...]:
    """SF's series: each period measured by `probe` (nothing frozen), its movements since the one before."""
    rows: list[SfRow] = []
    for k, (time, utc, state) in enumerate(periods):
        moves, swaps = movements(periods[k - 1][2], state) if k else (0, 0)
        total = (rows[-1].cumulative_movements if rows else 0) + moves + swaps
        rows.append(SfRow(time, utc, probe(state, frozenset()), moves, swaps, total))
    return tuple(rows)


def movements(before: ClusterState, after: ClusterState) -> tuple[int, int]:
    """(moves, swaps) SF made between two states, over the partitions both hold."""
    old = _placements(before)
    moves = swaps = 0
    for key, (nodes, primary) in _placements(after).items():
        if key not in old:
            continue
        was, was_primary = old[key]
        moves += min(len(nodes - was), len(was - nodes))
        swaps += primary is not None and primary != was_primary and primary in was
    return moves, swaps


def _placements(state: ClusterState) -> dict[tuple[str, str], tuple[frozenset[str], str | None]]:
    """(service, partition) -> the nodes of its placed replicas and its primary's node."""
    out = {}
    for p in state.partitions:
        placed = [r for r in p.replicas if r.node is not None]
        primary = next((r.node for r in placed if r.role is Role.PRIMARY), None)
        out[(p.service, str(p.partition_id))] = (frozenset(str(r.node) for r in placed), primary)
    return out
