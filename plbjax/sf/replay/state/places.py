"""Where the resident state's partitions and replicas are, kept across the partition tuples the
loop derives from one another, so that a batch of load reports or completed actions costs what it
touches rather than a pass over the cluster.

`Places` holds the partitions' positions (by partition key and by service) and a census of the
replicas (how many have each str(ReplicaId), how many are placed). Load reports keep both
(positions and replicas are the same); completed actions keep the positions and update the census
for the partitions they touched; an event that re-reads the cluster (a node, a service) reads them
again.
"""

from __future__ import annotations

from collections.abc import Iterable, KeysView, Sequence
from dataclasses import dataclass

from plbjax.sf import Partition
from plbjax.sf.replay.types import PartitionKey


@dataclass(frozen=True)
class Census:
    """The replicas: how many have each str(ReplicaId), and how many are placed."""

    counts: dict[str, int]
    placed: int

    @property
    def ids(self) -> KeysView[str]:
        """Every str(ReplicaId)."""
        return self.counts.keys()

    @staticmethod
    def of(partitions: Iterable[Partition]) -> Census:
        counts: dict[str, int] = {}
        return Census(counts, _count(partitions, counts, 1))

    def after(self, old: Sequence[Partition], new: Sequence[Partition], touched: Iterable[int]) -> Census:
        """The census of `new`, which is `old` (this census's) with the partitions at `touched` changed."""
        touched = list(touched)
        if not touched:
            return self
        counts = dict(self.counts)
        placed = self.placed - _count((old[k] for k in touched), counts, -1)
        return Census(counts, placed + _count((new[k] for k in touched), counts, 1))


def _count(partitions: Iterable[Partition], counts: dict[str, int], sign: int) -> int:
    """Add `sign` to `counts` for every replica of `partitions` (an id counted 0 times leaves it);
    how many of them are placed."""
    placed = 0
    for p in partitions:
        for r in p.replicas:
            text = str(r.replica_id)
            count = counts.get(text, 0) + sign
            if count:
                counts[text] = count
            else:
                del counts[text]
            placed += r.node is not None
    return placed


@dataclass(frozen=True)
class Places:
    """Positions of a partitions tuple by partition key (`at`) and by service (`of_service`), and
    its replicas' census."""

    at: dict[PartitionKey, tuple[int, ...]]
    of_service: dict[str, tuple[int, ...]]
    census: Census

    @staticmethod
    def of(partitions: Sequence[Partition]) -> Places:
        at: dict[PartitionKey, list[int]] = {}
        of_service: dict[str, list[int]] = {}
        for k, p in enumerate(partitions):
            at.setdefault((p.service, str(p.partition_id)), []).append(k)
            of_service.setdefault(p.service, []).append(k)
        return Places(
            {key: tuple(ks) for key, ks in at.items()},
            {name: tuple(ks) for name, ks in of_service.items()},
            Census.of(partitions),
        )

    def after(self, old: Sequence[Partition], new: Sequence[Partition], touched: Iterable[int]) -> Places:
        """The places of `new`, `old` with the partitions at `touched` changed (same keys, same order)."""
        return Places(self.at, self.of_service, self.census.after(old, new, touched))
