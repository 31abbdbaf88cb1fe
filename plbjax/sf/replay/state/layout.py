"""Where a state document's partitions and replicas are, kept across the Partitions lists the loop
derives from one another, so that a batch of load reports or completed actions costs what it
touches rather than a pass over the cluster.

A `Layout` holds the partitions' positions (by partition key and by service); a `Census` the
replica ids and how many replicas are placed. Both are found by the Partitions list's identity,
for the list used last only (an older one is not kept alive): a list handed to `layout_of` or
`census_of`, or registered by `derived`, must not be changed in place afterwards (the loop and the
events replace lists, they never change them). A load-report batch keeps both (`derived` with no
positions); completed actions keep the positions (partition identities do not change) and update
the census for the partitions they touched.
"""

from __future__ import annotations

from collections.abc import Iterable, KeysView, Sequence
from dataclasses import dataclass

from plbjax.sf.replay.types import PartitionKey

_KEPT = 1  # Partitions lists remembered: the loop's current one (an older one would stay alive for nothing)


class Layout:
    """A Partitions list's positions by partition key (`at`) and by service (`of_service`)."""

    def __init__(self, parts: Sequence[dict]) -> None:
        at: dict[PartitionKey, list[int]] = {}
        of_service: dict[str, list[int]] = {}
        for k, p in enumerate(parts):
            at.setdefault((p["ServiceName"], str(p["PartitionId"])), []).append(k)
            of_service.setdefault(p["ServiceName"], []).append(k)
        # tuples: the garbage collector stops following them
        self.at = {key: tuple(ks) for key, ks in at.items()}
        self.of_service = {name: tuple(ks) for name, ks in of_service.items()}


@dataclass(frozen=True)
class Census:
    """A Partitions list's replicas: how many have each str(ReplicaId), and how many are placed."""

    counts: dict[str, int]
    placed: int

    @property
    def ids(self) -> KeysView[str]:
        """Every str(ReplicaId)."""
        return self.counts.keys()

    @staticmethod
    def of(parts: Iterable[dict]) -> Census:
        counts: dict[str, int] = {}
        placed = _count(parts, counts, 1)
        return Census(counts, placed)

    def after(self, old: Sequence[dict], new: Sequence[dict], touched: Iterable[int]) -> Census:
        """The census of `new`, which is `old` (this census's list) with the partitions at `touched` changed."""
        touched = list(touched)
        if not touched:
            return self
        counts = dict(self.counts)
        placed = self.placed - _count((old[k] for k in touched), counts, -1)
        return Census(counts, placed + _count((new[k] for k in touched), counts, 1))


def _count(parts: Iterable[dict], counts: dict[str, int], sign: int) -> int:
    """Add `sign` to `counts` for every replica of `parts` (an id counted 0 times leaves it); how
    many of them are placed."""
    placed = 0
    for p in parts:
        for r in p["Replicas"]:
            text = str(r["ReplicaId"])
            count = counts.get(text, 0) + sign
            if count:
                counts[text] = count
            else:
                del counts[text]
            placed += r.get("NodeName") is not None
    return placed


# id(Partitions list) -> (the list, its layout, its census if read)
_known: dict[int, tuple[list, Layout, Census | None]] = {}


def _entry(parts: list) -> tuple[list, Layout, Census | None]:
    """`parts`'s entry, remembered as the most recently used."""
    entry = _known.get(id(parts))
    if entry is None or entry[0] is not parts:
        entry = (parts, Layout(parts), None)
    _remember(entry)
    return entry


def _remember(entry: tuple[list, Layout, Census | None]) -> None:
    _known.pop(id(entry[0]), None)
    _known[id(entry[0])] = entry
    while len(_known) > _KEPT:
        _known.pop(next(iter(_known)), None)


def layout_of(parts: list) -> Layout:
    """The layout of the Partitions list `parts`."""
    return _entry(parts)[1]


def census_of(parts: list) -> Census:
    """The census of the Partitions list `parts`."""
    _, layout, census = _entry(parts)
    if census is None:
        census = Census.of(parts)
        _remember((parts, layout, census))
    return census


def derived(new: list, old: list, touched: Iterable[int] | None = None) -> None:
    """`new` is `old` with only replica loads changed (`touched` None), or with the partitions at
    `touched` changed otherwise (their replicas added, dropped, moved, their roles changed)."""
    _, layout, census = _entry(old)
    if census is not None and touched is not None:
        census = census.after(old, new, touched)
    _remember((new, layout, census))
