"""The simulated cluster: nodes, partitions and replicas, the clock, moves in build, the Failover
Manager and the faults a test injects. Thread-safe: every public method holds the lock and first
advances the world to the simulated now."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from plbjax.sf import (
    IDLE_SECONDARY,
    ActionKind,
    HealthState,
    NodeStatus,
    ReplicaStatus,
    Role,
    parse_placement_constraint,
)

PRIMARY, SECONDARY, IDLE = Role.PRIMARY.sf(), Role.SECONDARY.sf(), IDLE_SECONDARY  # SF's ReplicaRole words
LIVE = (ReplicaStatus.READY, ReplicaStatus.IN_BUILD)
NODE_HOLDS = (NodeStatus.UP, NodeStatus.DISABLED)  # a Disabled node keeps its replicas; the FM adds none there
ADD_KINDS = {ActionKind.add(role): "add" for role in Role}
PLAN_KINDS = {
    **ADD_KINDS,
    ActionKind.DROP_SECONDARY: "drop",
    ActionKind.DROP_INSTANCE: "drop",
    ActionKind.PROMOTE_SECONDARY: "promote",
}


@dataclass
class Replica:
    """One replica or instance as SF lists it; `sid` is its ReplicaId in the state document it came from."""

    rid: str
    node: str
    role: str | None  # SF's ReplicaRole; None for a stateless instance
    status: ReplicaStatus = ReplicaStatus.READY
    sid: str = ""
    raw: dict = field(default_factory=dict)
    loads: dict[str, float] = field(default_factory=dict)


@dataclass
class Partition:
    """A partition: its service, kind, target replica count (-1: one instance per Up node it may use) and
    replicas; its service's placement constraints and the loads of a replica the FM adds."""

    pid: str
    service_id: str
    stateful: bool
    target: int
    replicas: list[Replica]
    constraints: str = ""
    new_loads: dict[str, float] = field(default_factory=dict)


def replica_role(part: Partition) -> Role:
    """The role of a replica the Failover Manager adds or drops: a secondary, or an instance."""
    return Role.SECONDARY if part.stateful else Role.INSTANCE


@dataclass
class Move:
    """A move the cluster accepted, in simulated seconds; outcome "in build", "done" or "failed"."""

    kind: str
    partition_id: str
    source: str | None
    target: str | None
    started: float
    finished: float | None = None
    outcome: str = "in build"


@dataclass
class Refusal:
    """An injected refusal: the next `times` move POSTs of the partition and kind (None: any) refused."""

    pid: str | None
    kind: str | None
    code: str
    message: str
    times: int


@dataclass(frozen=True)
class NodeDown:
    """An injected node going Down when the `after`th accepted move starts, or at simulated time `at`."""

    node: str
    after: int | None
    at: float | None


@dataclass
class Faults:
    """The next requests answered 503 (`unavailable`) or dropped without an answer (`drop`)."""

    unavailable: int = 0
    drop: int = 0


@dataclass
class Upgrade:
    """A cluster upgrade (or, `application` set, that application's) rolling from simulated time
    `started` for `seconds` (inf: until the simulator stops)."""

    started: float
    seconds: float
    code_version: str
    application: str | None = None


@dataclass
class _Job:
    """A move (or a Failover Manager build) in progress: `finish` runs when it is `due`."""

    move: Move
    due: float
    finish: Callable[[], None]
    cancel: Callable[[], None]


class Refused(Exception):
    """A move SF refuses: its FabricErrorCodes name (the HTTP status follows from it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class Clocked(Protocol):
    """Something that acts on the simulated clock (the simulator's day): when next, and what then."""

    def due(self) -> float | None: ...

    def fire(self) -> None: ...


@dataclass(frozen=True)
class Options:
    """The simulated world's pace: simulated seconds a build, a swap (default: a quarter build) and the
    Failover Manager's pass (default: a build) take, simulated seconds per wall second, the seed
    of new replica ids, and the UTC instant (Unix seconds) of simulated time 0 (default: the start)."""

    build_seconds: float = 2.0
    swap_seconds: float | None = None
    failover_seconds: float | None = None
    clock_rate: float = 1.0
    seed: int = 0
    epoch: float | None = None


class Cluster:
    """The world behind the simulator's REST answers."""

    def __init__(self, nodes: dict[str, NodeStatus], partitions: dict[str, Partition], options: Options) -> None:
        self.nodes, self.partitions = nodes, partitions  # node -> Up/Down/Disabled; pid -> Partition
        self.properties: dict[str, dict[str, object]] = {}  # node -> placement properties (NodeName, NodeType...)
        self.capacities: dict[str, dict[str, float]] = {}  # node -> metric -> capacity
        self.baseline: dict[str, dict[str, float]] = {}  # node -> its loads when a dump's were stored
        self.health: dict[tuple[str, str], HealthState] = {}  # ("node"/"partition"/..., name) -> injected state
        self.upgrades: list[Upgrade] = []
        self.pending: list[tuple[int, Callable[[], object]]] = []  # (after N accepted moves, the fault)
        self.build_seconds = float(options.build_seconds)
        swap = options.swap_seconds
        self.swap_seconds = self.build_seconds / 4 if swap is None else float(swap)
        failover = options.failover_seconds
        self.failover_seconds = self.build_seconds if failover is None else float(failover)
        self.clock_rate = float(options.clock_rate)
        self.lock = threading.RLock()
        self.started = time.monotonic()
        self.epoch = time.time() if options.epoch is None else float(options.epoch)
        self.clock = 0.0
        self.day: Clocked | None = None  # the simulator's day (day.py), once one is lived
        self.ids = itertools.count(int(options.seed) * 10**9 + 134000000000000001)
        self.moves: list[Move] = []
        self.failovers: list[Move] = []
        self.requests: list[tuple[str, str]] = []
        self.jobs: list[_Job] = []
        self.slow: dict[str, float] = {}
        self.refusals: list[Refusal] = []
        self.downs: list[NodeDown] = []
        self.faults = Faults()
        self.plan: dict[tuple[str, str], list[str]] = {}
        self.failover_choice: Callable[[str, str, list[str]], str] = self.default_choice
        self.next_failover = self.failover_seconds

    # --- time -------------------------------------------------------------------------------

    def now(self) -> float:
        """Simulated seconds since start, the world advanced to it."""
        with self.lock:
            self.advance()
            return self.clock

    def advance(self) -> None:
        """Run every event due up to the simulated now, in time order (lock held)."""
        now = (time.monotonic() - self.started) * self.clock_rate
        while True:
            due = self._next_event()
            if due is None or due[0] > now:
                break
            self.clock = max(self.clock, due[0])
            due[1]()
        self.clock = max(self.clock, now)

    def _next_event(self) -> tuple[float, Callable[[], None]] | None:
        """(time, action) of the earliest pending event: a build done, a node down at its time, an FM pass."""
        events: list[tuple[float, int, Callable[[], None]]] = []
        for i, job in enumerate(self.jobs):
            events.append((job.due, i, lambda job=job: self._finish(job)))
        for down in self.downs:
            if down.at is not None:
                events.append((down.at, 0, lambda down=down: self._fire_down(down)))
        if self.failover_seconds > 0 and math.isfinite(self.failover_seconds):
            events.append((self.next_failover, 1 << 30, self._failover_pass))
        due = self.day.due() if self.day is not None else None
        if self.day is not None and due is not None:
            events.append((due, 2, self.day.fire))
        if not events:
            return None
        when, _, action = min(events, key=lambda e: (e[0], e[1]))
        return when, action

    def _finish(self, job: _Job) -> None:
        self.jobs.remove(job)
        job.finish()
        job.move.finished, job.move.outcome = self.clock, "done"

    def _fail(self, job: _Job) -> None:
        self.jobs.remove(job)
        job.cancel()
        job.move.finished, job.move.outcome = self.clock, "failed"

    # --- moves ------------------------------------------------------------------------------

    def new_id(self) -> str:
        return str(next(self.ids))

    def busy(self, pid: str) -> bool:
        """Whether the partition is reconfiguring (a move or a build of it in progress)."""
        return any(job.move.partition_id == pid for job in self.jobs)

    def start(self, move: Move, seconds: float, finish: Callable[[], None], cancel: Callable[[], None]) -> None:
        """Accept `move`: it finishes after `seconds` (the partition's slow() time instead, if set)."""
        seconds = self.slow.get(move.partition_id.lower(), seconds)
        self.jobs.append(_Job(move, self.clock + seconds, finish, cancel))
        (self.failovers if move.kind in PLAN_KINDS else self.moves).append(move)
        if move.kind not in PLAN_KINDS:
            self.count_start()

    def count_start(self) -> None:
        """Node-down and other faults waiting for the Nth accepted move fire when it starts."""
        for down in list(self.downs):
            if down.after is not None and len(self.moves) >= down.after:
                self._fire_down(down)
        for pending in list(self.pending):
            if len(self.moves) >= pending[0]:
                self.pending.remove(pending)
                pending[1]()

    def refusal(self, pid: str, kind: str) -> Refused | None:
        """The injected refusal matching this move, consumed; None if none matches."""
        for fault in self.refusals:
            if fault.pid in (None, pid.lower()) and fault.kind in (None, kind):
                fault.times -= 1
                if fault.times <= 0:
                    self.refusals.remove(fault)
                return Refused(fault.code, fault.message)
        return None

    # --- nodes going down ---------------------------------------------------------------------

    def _fire_down(self, down: NodeDown) -> None:
        self.downs.remove(down)
        self.node_down(down.node)

    def node_down(self, name: str) -> None:
        """The node goes Down: its replicas Down, the builds touching it fail."""
        self.nodes[name] = NodeStatus.DOWN
        for part in self.partitions.values():
            for replica in part.replicas:
                if replica.node == name and replica.status != ReplicaStatus.DROPPED:
                    replica.status = ReplicaStatus.DOWN
        for job in list(self.jobs):
            if name in (job.move.source, job.move.target):
                self._fail(job)

    def node_up(self, name: str) -> None:
        """The node is Up again: the replicas it held that the FM has not replaced are dropped (SF
        restarts them; the FM builds what is still short)."""
        self.nodes[name] = NodeStatus.UP
        for part in self.partitions.values():
            part.replicas = [r for r in part.replicas if not (r.node == name and r.status == ReplicaStatus.DOWN)]

    def resume_builds(self) -> None:
        """Replicas shown being built when the cluster was seeded finish building, as the FM's own do."""
        for part in self.partitions.values():
            for replica in [r for r in part.replicas if r.status == ReplicaStatus.IN_BUILD]:
                role = replica.role if replica.role == PRIMARY else (SECONDARY if part.stateful else None)
                kind = ActionKind.add(replica_role(part))
                move = Move(kind, part.pid, None, replica.node, self.clock)
                ready = lambda r=replica, role=role: _ready(r, role)
                self.start(move, self.build_seconds, ready, lambda r=replica, p=part: p.replicas.remove(r))

    # --- the Failover Manager ------------------------------------------------------------------

    def default_choice(self, pid: str, kind: str, candidates: list[str]) -> str:
        """SF-like and deterministic: add where the cluster has fewest replicas, drop/promote where most."""
        counts = self.replica_counts()
        if kind == "add":
            return min(candidates, key=lambda n: (counts.get(n, 0), n))
        return max(candidates, key=lambda n: (counts.get(n, 0), n))

    def replica_counts(self) -> dict[str, int]:
        """Live replicas per node."""
        counts: dict[str, int] = {}
        for part in self.partitions.values():
            for replica in part.replicas:
                if replica.status in LIVE:
                    counts[replica.node] = counts.get(replica.node, 0) + 1
        return counts

    def choose(self, pid: str, kind: str, candidates: list[str]) -> str | None:
        """The FM's choice among candidates: the plan's (follow_plan) first, then failover_choice."""
        if not candidates:
            return None
        queue = self.plan.get((pid.lower(), kind), [])
        for node in queue:
            if node in candidates:
                queue.remove(node)
                return node
        choice = self.failover_choice(pid, kind, sorted(candidates))
        return choice if choice in candidates else None

    def _failover_pass(self) -> None:
        self.next_failover += self.failover_seconds
        for part in self.partitions.values():
            if not self.busy(part.pid):
                self._restore(part)

    def allowed(self, part: Partition, node: str) -> bool:
        """Whether the FM may place a replica of `part` on `node`: Up (not Down, not Disabled), its
        placement constraints met by the node's properties."""
        if self.nodes.get(node) != NodeStatus.UP:
            return False
        return parse_placement_constraint(part.constraints).matches(self.properties.get(node) or {"NodeName": node})  # type: ignore[arg-type]

    def node_loads(self, node: str) -> dict[str, float]:
        """Metric -> the load of the replicas placed on `node` (Ready, InBuild or Down there)."""
        loads: dict[str, float] = {}
        for part in self.partitions.values():
            for replica in part.replicas:
                if replica.node == node and replica.status.placed:
                    for metric, value in replica.loads.items():
                        loads[metric] = loads.get(metric, 0.0) + value
        return loads

    def fits(self, node: str, loads: dict[str, float]) -> bool:
        """Whether `loads` fit in the node's remaining capacity (a metric without capacity: unlimited)."""
        capacity, have = self.capacities.get(node, {}), self.node_loads(node)
        return all(have.get(m, 0.0) + v <= capacity[m] for m, v in loads.items() if m in capacity)

    def _up(self, replica: Replica) -> bool:
        """A replica of the partition's count: live on an Up or Disabled node, not auxiliary (SF counts those apart)."""
        auxiliary = "auxiliary" in str(replica.role).lower()
        return replica.status in LIVE and self.nodes.get(replica.node) in NODE_HOLDS and not auxiliary

    def _target(self, part: Partition) -> int:
        """The replica count the FM keeps: TargetReplicaSetSize / InstanceCount (-1: every Up node it may use)."""
        return sum(self.allowed(part, n) for n in self.nodes) if part.target < 0 else part.target

    def short(self, part: Partition) -> bool:
        """Whether the partition has a replica to place (fewer than its target live on Up nodes)."""
        return sum(self._up(r) for r in part.replicas) < self._target(part)

    def _restore(self, part: Partition) -> None:
        """Promote a primary where none is up, then build or drop replicas toward the target count."""
        live = [r for r in part.replicas if self._up(r)]
        if part.stateful and live and not any(r.role == PRIMARY for r in live):
            self._promote(part, [r for r in live if r.role == SECONDARY and r.status == ReplicaStatus.READY])
        target = self._target(part)
        if len(live) < target:
            self._add(part)
        elif len(live) > target:
            self._drop(part, [r for r in live if r.role != PRIMARY and r.status == ReplicaStatus.READY])

    def _promote(self, part: Partition, secondaries: list[Replica]) -> None:
        node = self.choose(part.pid, "promote", [r.node for r in secondaries])
        if node is not None:
            next(r for r in secondaries if r.node == node).role = PRIMARY
            self.failovers.append(
                Move(ActionKind.PROMOTE_SECONDARY, part.pid, None, node, self.clock, self.clock, "done")
            )

    def _add(self, part: Partition) -> None:
        held = {r.node for r in part.replicas if r.status != ReplicaStatus.DROPPED} - {
            r.node for r in part.replicas if r.status == ReplicaStatus.DOWN
        }
        gone = next(
            (r for r in part.replicas if r.status == ReplicaStatus.DOWN or self.nodes.get(r.node) == NodeStatus.DOWN),
            None,
        )
        loads = dict(part.new_loads) if gone is None or not gone.loads else dict(gone.loads)
        free = [n for n in self.nodes if n not in held and self.allowed(part, n) and self.fits(n, loads)]
        node = self.choose(part.pid, "add", free)
        if node is None:
            return
        if gone is not None:
            part.replicas.remove(gone)
        role = (IDLE if part.stateful else None, SECONDARY if part.stateful else None)
        replica = Replica(self.new_id(), node, role[0], ReplicaStatus.IN_BUILD, gone.sid if gone else "", loads=loads)
        replica.sid = replica.sid or replica.rid
        part.replicas.append(replica)
        move = Move(ActionKind.add(replica_role(part)), part.pid, None, node, self.clock)
        self.start(move, self.build_seconds, lambda: _ready(replica, role[1]), lambda: part.replicas.remove(replica))

    def _drop(self, part: Partition, candidates: list[Replica]) -> None:
        node = self.choose(part.pid, "drop", [r.node for r in candidates])
        if node is not None:
            part.replicas.remove(next(r for r in candidates if r.node == node))
            self.failovers.append(
                Move(ActionKind.drop(replica_role(part)), part.pid, node, None, self.clock, self.clock, "done")
            )

    # --- SF's balancer, health and upgrades (injected) -------------------------------------------

    def balancer_move(self, pid: str, source: str, target: str) -> Move:
        """SF's own balancer moves the partition's replica on `source` to `target` at once (a new
        ReplicaId there, same role and loads); recorded in `failovers`. KeyError/ValueError if impossible."""
        part = self.partitions[pid.lower()]
        old = next(r for r in part.replicas if r.node == source and r.status == ReplicaStatus.READY)
        if any(r.node == target and r.status.placed for r in part.replicas) or target not in self.nodes:
            raise ValueError(f"{target} already holds a replica of {pid}, or is no node")
        fresh = Replica(self.new_id(), target, old.role, ReplicaStatus.READY, old.sid, dict(old.raw), dict(old.loads))
        part.replicas[part.replicas.index(old)] = fresh
        kind = ActionKind.MOVE_PRIMARY if old.role == PRIMARY else ActionKind.move(replica_role(part))
        move = Move(kind, part.pid, source, target, self.clock, self.clock, "done")
        self.failovers.append(move)
        return move

    def health_of(self, kind: str, name: str) -> HealthState:
        """The entity's own (injected) health; a Down node is Error."""
        if kind == "node" and self.nodes.get(name) == NodeStatus.DOWN:
            return HealthState.ERROR
        return self.health.get((kind, name), HealthState.OK)

    def upgrade(self, application: str | None = None) -> Upgrade | None:
        """The cluster upgrade (the application's, given its id) rolling now, if any."""
        rolling = (u for u in self.upgrades if u.started <= self.clock < u.started + u.seconds)
        return next((u for u in rolling if u.application == application), None)

    def upgraded(self, application: str | None = None) -> list[Upgrade]:
        """The cluster's (the application's) upgrades done by now, in order."""
        return [u for u in self.upgrades if u.application == application and u.started + u.seconds <= self.clock]

    # --- statistics ---------------------------------------------------------------------------

    def max_concurrent(self, per_node: bool) -> int:
        """The most client moves in build at once, cluster-wide or into/out of one node."""
        points = [
            (t, step, m)
            for m in self.moves
            for t, step in ((m.started, 1), (m.finished if m.finished is not None else math.inf, -1))
        ]
        best, open_moves = 0, []
        for _, step, move in sorted(points, key=lambda p: (p[0], p[1])):
            if step > 0:
                open_moves.append(move)
            else:
                open_moves.remove(move)
            best = max(best, _widest(open_moves) if per_node else len(open_moves))
        return best


def _ready(replica: Replica, role: str | None) -> None:
    """A built replica becomes Ready in its final role."""
    replica.status, replica.role = ReplicaStatus.READY, role


def _widest(moves: list[Move]) -> int:
    """The most of `moves` touching one node."""
    counts: dict[str, int] = {}
    for move in moves:
        for node in {move.source, move.target} - {None}:
            counts[node] = counts.get(node, 0) + 1  # type: ignore[index]
    return max(counts.values(), default=0)
