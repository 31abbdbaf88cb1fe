"""SF's observed day (``plbjax-import``'s ``*.sf-day.json``, docs/contract.md), read at the door, and
SF's own series from it: each period's state measured by the replay's probe (the same definitions
as the replay's series), and the movements SF made since the period before.

A movement is what the replay counts as one: a replica on another node than the period before (a
partition's replicas that arrived on a node, paired with those that left one: a replica only built
or only dropped is none), or a swap (the primary now on a node that held another replica of its
partition the period before).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.sf import ClusterState, Role, parse_state
from plbjax.sf.replay.types import Needs, Probe

KEY = "observed"  # plbjax-replay's key naming the file


@dataclass(frozen=True)
class Period:
    """One observed period: its time on the timeline's clock, its UTC time, SF's state then."""

    time: float
    utc: str
    state: ClusterState


@dataclass(frozen=True)
class SfRow:
    """SF's state at one period, as the probe measures it, and what SF moved since the period before."""

    time: float
    utc: str
    needs: Needs
    moves: int  # replicas on another node than the period before
    swaps: int  # primaries on a node that held another replica of their partition the period before
    cumulative_movements: int


def load_observed(path: str | Path, parse: Callable[[dict, str], ClusterState] = parse_state) -> tuple[Period, ...]:
    """The periods of the observed day at `path`, each state built by `parse` (the replay's settings
    put in: the same yardstick); BadInput naming `observed` and the file for anything wrong."""
    where = f"{KEY}: {path}"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{where}: cannot read SF's observed day: {exc}") from None
    periods = doc.get("Periods") if isinstance(doc, dict) else None
    if not isinstance(periods, list) or not periods:
        raise BadInput(f"{where}: Periods: required, a list of {{Time, Utc, State}} (plbjax-import writes it)")
    out: list[Period] = []
    for i, item in enumerate(periods):
        at = f"{where}: Periods[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("State"), dict):
            raise BadInput(f"{at}.State: required, a state document")
        time = item.get("Time")
        if isinstance(time, bool) or not isinstance(time, int | float) or time < 0:
            raise BadInput(f"{at}.Time: {time!r} is not seconds from the timeline's start (a number >= 0)")
        if out and time <= out[-1].time:
            raise BadInput(f"{at}.Time: {time} is not after the period before's {out[-1].time:g}")
        try:
            state = parse(item["State"], f"{at}.State")
        except BadInput as exc:
            raise BadInput(f"{at}.State: {exc}") from None
        out.append(Period(float(time), str(item.get("Utc", "")), state))
    return tuple(out)


def sf_series(periods: tuple[Period, ...], probe: Probe) -> tuple[SfRow, ...]:
    """SF's series: each period measured by `probe` (nothing frozen), its movements since the one before."""
    rows: list[SfRow] = []
    for k, period in enumerate(periods):
        moves, swaps = movements(periods[k - 1].state, period.state) if k else (0, 0)
        total = (rows[-1].cumulative_movements if rows else 0) + moves + swaps
        rows.append(SfRow(period.time, period.utc, probe(period.state, frozenset()), moves, swaps, total))
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
