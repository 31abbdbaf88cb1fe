"""Actions in flight: issued by a round, applied when their ActionSeconds have passed, one after the
other per partition, as the Failover Manager completes them; one that no longer fits then is
cancelled."""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
from dataclasses import dataclass, field

from plbjax.sf import Action, ClusterState, NodeStatus, Partition, Replica, Role, completed
from plbjax.sf.replay.state.invariants import Corrupted, problem
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.types import TIME_EPS, PartitionKey, partition_of


@dataclass(frozen=True, order=True)
class _Flying:
    done: float
    seq: int
    action: Action = field(compare=False)


class InFlight:
    """The actions issued and not completed yet: by completion time, and per partition when its last
    one completes (`busy`: the partitions a search must not touch) and how many are flying."""

    def __init__(self) -> None:
        self.heap: list[_Flying] = []
        self.busy: dict[PartitionKey, float] = {}
        self.flying: dict[PartitionKey, int] = {}
        self.seq = 0  # actions issued so far: completions at the same time go in that order
        self.named = 0  # replicas named `replay-N` so far
        self.cancelled = 0  # actions that no longer fitted when they completed

    def frozen(self) -> frozenset[PartitionKey]:
        """The partitions with an action in flight."""
        return frozenset(self.busy)

    def next_done(self) -> float | None:
        """When the next action completes (None: none is in flight)."""
        return self.heap[0].done if self.heap else None

    def issue(self, action: Action, now: float, seconds: float) -> None:
        """`action` completes `seconds` after `now`, or after its partition's last one in flight."""
        key = partition_of(action)
        done = max(now + seconds, self.busy.get(key, -math.inf))
        self.busy[key] = done
        self.seq += 1
        heapq.heappush(self.heap, _Flying(done, self.seq, action))
        self.flying[key] = self.flying.get(key, 0) + 1

    def complete(self, state: ClusterState, places: Places, now: float) -> tuple[ClusterState, list[int], int]:
        """`state` with the actions due by `now` completed (one after the other: `_Completions`),
        the positions of the partitions they changed, and how many completed; the others are
        cancelled."""
        batch, applied = None, 0
        while self.heap and self.heap[0].done <= now + TIME_EPS:
            done = heapq.heappop(self.heap)
            key = partition_of(done.action)
            self.flying[key] -= 1
            if not self.flying[key]:
                del self.flying[key]
                if self.busy.get(key) == done.done:
                    del self.busy[key]
            batch = batch or _Completions(state, places, self)
            if batch.apply(done.action):
                applied += 1
            else:
                self.cancelled += 1
        if batch is None:
            return state, [], 0
        return batch.state(), sorted(batch.touched), applied

    def new_id(self, taken: set[str]) -> str:
        """The next `replay-N` not in `taken` (which it joins)."""
        self.named += 1
        while f"replay-{self.named}" in taken:
            self.named += 1
        taken.add(f"replay-{self.named}")
        return f"replay-{self.named}"


class _Completions:
    """Completed actions applied one after the other to a state's records: each action to its own
    partition (`completed`), found through the state's `places`, so a round's actions cost what
    they touch. An action that no longer fits (its target is not Up, its replica is gone, ...) is
    not applied; a replica an Add creates is named `replay-N` (unused in the state)."""

    def __init__(self, state: ClusterState, places: Places, flight: InFlight) -> None:
        self.base, self.places, self.flight = state, places, flight
        self.parts = list(state.partitions)
        self.status = {n.name: n.status for n in state.nodes}
        self.touched: set[int] = set()
        self.taken: set[str] | None = None

    def apply(self, action: Action) -> bool:
        if (action.kind.is_move or action.kind.is_add) and self.status.get(action.target or "") is not NodeStatus.UP:
            return False
        at = self.places.at.get(partition_of(action))
        if not at:
            return False
        k = at[-1]
        try:
            part = completed(self.parts[k], action)
        except ValueError:
            return False
        if action.kind.is_add and action.kind.role is Role.PRIMARY:
            part = _one_primary(part, action)
        if action.replica is None:
            part = Partition(part.service, part.partition_id, tuple(map(self._named, part.replicas)))
        self.parts[k] = part
        self.touched.add(k)
        found = problem(self.parts, (k,), self.status.keys())
        if found is not None:
            done = json.dumps(action.document(), default=str)
            raise Corrupted(f"completing {done} broke the replay's state: {found}")
        return True

    def _named(self, replica: Replica) -> Replica:
        if replica.replica_id is not None:
            return replica
        if self.taken is None:
            self.taken = set(self.places.census.after(self.base.partitions, self.parts, self.touched).ids)
        return dataclasses.replace(replica, replica_id=self.flight.new_id(self.taken))

    def state(self) -> ClusterState:
        return dataclasses.replace(self.base, partitions=tuple(self.parts))


def _one_primary(part: Partition, action: Action) -> Partition:
    """`part` after an AddPrimary, with one Primary: a plan that places a partition's unplaced
    Primary as a secondary and adds a new primary (the decoded plan's way) leaves two primaries
    when the secondary's add is cancelled (its target went down) and the primary's completes; the
    unplaced one is then a secondary still to place. An older primary that is placed keeps its
    role; the added replica is then a secondary (the Failover Manager builds it as one)."""
    replicas = part.replicas
    added = next((r for r in reversed(replicas) if r.node == action.target and r.role is Role.PRIMARY), None)
    others = [r for r in replicas if r.role is Role.PRIMARY and r is not added]
    if added is None or not others:
        return part
    if any(r.node is not None for r in others):
        demoted = (added,)
    else:
        demoted = tuple(others)
    fixed = tuple(dataclasses.replace(r, role=Role.SECONDARY) if any(r is d for d in demoted) else r for r in replicas)
    return Partition(part.service, part.partition_id, fixed)
