"""History bounded as SF bounds its per-partition movement counters.

History (`{ReplicaId: [nodes it left]}`) remembers balancing movements so that a replica does not
return where it came from, and counts each partition's recent balancing movements for
MovementPerPartitionThrottleThreshold. SF keeps those counts per partition in timed counters that
forget a movement MovementPerPartitionThrottleCountingInterval after it, and drops a partition's
counter once it is empty (PLBScheduler::RefreshTimedCounters, PLBScheduler::UpdateMovements). The
replay does the same with History: a replica's entry goes once its partition's last balancing
movement is that old, so History holds only the movements of the counting window and a round's
cost does not grow through the day. The initial state's History counts as moved at the start.
"""

from __future__ import annotations

from collections.abc import Mapping

from plbjax.sf import Action, ClusterState
from plbjax.sf.replay.types import TIME_EPS, PartitionKey, partition_of


class HistoryAge:
    """When each partition with a History entry last moved by balancing, and each History replica's
    partition."""

    def __init__(self, state: ClusterState) -> None:
        history = state.history
        self.partition_of: dict[str, PartitionKey] = {}
        if history:
            for p in state.partitions:
                for r in p.replicas:
                    if str(r.replica_id) in history:
                        self.partition_of[str(r.replica_id)] = p.service, str(p.partition_id)
        self.last_moved: dict[PartitionKey, float] = dict.fromkeys(self.partition_of.values(), 0.0)

    def moved(self, action: Action, now: float) -> None:
        """A balancing movement (a move or a swap) issued at `now`."""
        self.last_moved[partition_of(action)] = now
        if action.replica is not None:
            self.partition_of[str(action.replica)] = partition_of(action)

    def expired(self, history: Mapping[str, object], now: float, interval: float) -> set[str]:
        """The History replicas whose partition has no balancing movement within `interval` of `now`
        (a replica of unknown partition: none); those partitions are forgotten."""
        gone = {k for k, t in self.last_moved.items() if now - t >= interval - TIME_EPS}
        if gone:
            self.last_moved = {k: t for k, t in self.last_moved.items() if k not in gone}
            self.partition_of = {rid: k for rid, k in self.partition_of.items() if k not in gone}
        return {rid for rid in history if self.partition_of.get(rid) not in self.last_moved}
