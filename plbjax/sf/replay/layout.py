"""Where a state document's partitions and replicas are, kept across the Partitions lists the loop
derives from one another, so that a batch of load reports or completed actions costs what it
touches rather than a pass over the cluster.

A `Layout` holds the partitions' positions (by partition key and by service) and each partition's
replica slots (by str(ReplicaId) and by Role), read once per Replicas list; a `Census` the replica
ids and how many replicas are placed. Both are found by the Partitions list's identity: a list
handed to `layout_of` or `census_of`, or registered by `derived`, must not be changed in place
afterwards (the loop and the events replace lists, they never change them). A load-report batch
keeps both (`derived` with no positions); completed actions keep the positions (partition
identities do not change) and update the census for the partitions they touched.
"""

from __future__ import annotations

from collections.abc import Iterable, KeysView, Sequence
from dataclasses import dataclass

from plbjax.sf.replay.types import PartitionKey

_KEPT = 2  # Partitions lists remembered, the most recently used: the loop's current one and the last before


@dataclass(frozen=True)
class Slots:
    """One Replicas list's slots: by str(ReplicaId), by Role, and all of them."""

    ids: dict[str, tuple[int, ...]]
    roles: dict[str, tuple[int, ...]]
    every: tuple[int, ...]

    @staticmethod
    def of(replicas: Sequence[dict]) -> Slots:
        ids: dict[str, tuple[int, ...]] = {}
        roles: dict[str, tuple[int, ...]] = {}
        for n, r in enumerate(replicas):
            text, role = str(r["ReplicaId"]), r["Role"]
            ids[text] = (*ids.get(text, ()), n)
            roles[role] = (*roles.get(role, ()), n)
        return Slots(ids, roles, tuple(range(len(replicas))))


class Layout:
    """A Partitions list's positions by partition key (`at`) and by service (`of_service`), and
    its partitions' `Slots`, each read again when its partition's Replicas list is another one."""

    def __init__(self, parts: Sequence[dict]) -> None:
        self.at: dict[PartitionKey, list[int]] = {}
        self.of_service: dict[str, list[int]] = {}
        for k, p in enumerate(parts):
            self.at.setdefault((p["ServiceName"], str(p["PartitionId"])), []).append(k)
            self.of_service.setdefault(p["ServiceName"], []).append(k)
        self._slots: list[tuple[list, Slots] | None] = [None] * len(parts)

    def slots(self, k: int, replicas: list) -> Slots:
        """The slots of `replicas`, the Replicas list of the partition at `k`."""
        entry = self._slots[k]
        if entry is None or entry[0] is not replicas:
            entry = self._slots[k] = (replicas, Slots.of(replicas))
        return entry[1]

    def replaced(self, k: int, old: list, new: list) -> None:
        """The partition at `k` has `new` for Replicas, with the same replicas as `old` in the same slots."""
        entry = self._slots[k]
        if entry is not None and entry[0] is old:
            self._slots[k] = (new, entry[1])


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
        touched, counts = list(touched), dict(self.counts)
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
