"""A stand-in Service Fabric cluster on the loopback address, for rehearsing and testing a plan's moves.

``Simulator.from_dump(dir)`` / ``Simulator.from_state(doc)`` build it; ``with sim.serve() as url`` serves
SF's REST calls (the GETs ``plbjax-dump`` reads, Get Node Info, Get Partition Info, and the POSTs Move
Primary Replica, Move Secondary Replica, Move Instance) in SF's JSON shapes until the block ends. Time is
simulated: wall seconds x ``clock_rate``; the world advances lazily on every request and query.

What SF does, and where that was read:

- Shapes: the Service Fabric REST reference (learn.microsoft.com/rest/api/servicefabric: sfclient-api-
  getnodeinfo (204 when the node is not found), -getreplicainfolist, -getpartitioninfo, -moveprimaryreplica,
  -movesecondaryreplica, -moveinstance) and its swagger, Azure/azure-rest-api-specs
  specification/servicefabric/data-plane/Microsoft.ServiceFabric/stable/*/servicefabric.json (FabricError
  ``{"Error": {"Code", "Message"}}``, FabricErrorCodes, PagedReplicaInfoList, StatefulServiceReplicaInfo,
  StatelessServiceInstanceInfo, ReplicaRole, ReplicaStatus, NodeInfo); from a dump, the dump's own items.
- Move checks and codes: microsoft/service-fabric src/prod/src/Reliability/Failover/fm/QueryHelper.cpp
  (GetServiceNameAndCurrentPrimaryNode: unknown partition PartitionNotFound, stateless
  InvalidPartitionOperation; VerifyNodeExistsAndIsUp: an unknown or Down new node NodeNotFound; the FM
  retries PLBNotReady until the request's timeout) and src/prod/src/Reliability/LoadBalancing/
  PlacementAndLoadBalancing.cpp (TriggerSwapPrimaryHelper: target already primary AlreadyPrimaryReplica,
  target not a ready secondary REReplicaDoesNotExist, no replica there: a MovePrimary that builds one;
  TriggerMoveSecondary: a partition in transition or with a replica to place PLBNotReady;
  TriggerMoveSecondaryHelper: new node holds a secondary AlreadySecondaryReplica / the primary
  AlreadyPrimaryReplica, current node's replica not a secondary InvalidReplicaStateForReplicaOperation,
  none there REReplicaDoesNotExist). ErrorCodeValue -> FABRIC_E_* name: src/prod/src/Common/ErrorCodeValue.h
  and .cpp; FABRIC_E_* -> HTTP status: src/prod/src/Management/HttpTransport/HttpUtil.cpp
  (ErrorCodeToHttpStatus: 404 not-found codes, 409 PRIMARY/SECONDARY_ALREADY_EXISTS, 400 INVALID_*,
  504 TIMEOUT, 503 SERVICE_TOO_BUSY); messages: src/prod/src/data/statuscodes/SfStatus.mc.
- Move Instance (8.0) is newer than the open-sourced SF: it is checked as Move Secondary with the path's
  service (unknown: FABRIC_E_SERVICE_DOES_NOT_EXIST; a stateful partition: FABRIC_E_INVALID_PARTITION_OPERATION).

Health, upgrades, versions and loads: health.py (its docstring names the fault route). A day
(``sim.live_day()``, day.py): scheduled node faults, deactivations and upgrades kept in an EventStore
(``/EventsStore/{Cluster,Nodes,Applications,Services,Partitions}/Events``), diurnal loads per service,
SF's balancer moving; the ``Date`` header of every answer is the simulated clock's UTC time.

Simplifications: a move is answered at once (SF's call returns once the new replica is InBuild or the new
primary in place); a move on a reconfiguring partition (a build in progress, a Down replica the FM has not
replaced yet) waits, as SF's FM retries, up to the request's ``timeout`` (default 60 simulated seconds), then
FABRIC_E_TIMEOUT (504). A client's move does not check capacity or placement constraints (nor
IgnoreConstraints); the Failover Manager places within both, on Up nodes only.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

from plbjax.sf import HealthState, NodeStatus, ReplicaStatus, Role
from plbjax.sf.live.apply.steps import plan_read
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.reading.importer import import_dump
from plbjax.sf.live.simulator.cluster import (
    IDLE,
    PLAN_KINDS,
    PRIMARY,
    SECONDARY,
    Move,
    NodeDown,
    Options,
    Partition,
    Refusal,
    Upgrade,
)
from plbjax.sf.live.simulator.day import Day, Scheduled, seeded_schedule
from plbjax.sf.live.simulator.http import Gateway
from plbjax.sf.live.simulator.moves import MESSAGES
from plbjax.sf.live.simulator.records import StateNode, StatePartition, StateReplica, read_state
from plbjax.sf.live.simulator.seed import build, dress, read_dump, render, state_document
from plbjax.sf.live.simulator.served import Served

__all__ = ["Move", "Scheduled", "Simulator"]
ROLES = {
    PRIMARY: Role.PRIMARY,
    SECONDARY: Role.SECONDARY,
    IDLE: Role.SECONDARY,
    None: Role.INSTANCE,
}  # SF's -> plbjax's


class Simulator:
    """A simulated SF cluster: its REST gateway, clock, Failover Manager and injectable faults."""

    def __init__(self, served: Served, base: Json, keys: dict[str, tuple[str, object]]) -> None:
        self.served, self.cluster, self.base, self.keys = served, served.cluster, base, keys
        self.state = read_state(base)

    @classmethod
    def from_dump(cls, path: str | Path, **options: object) -> Simulator:
        """A cluster serving the dump at `path` (the dump layout of docs/contract.md)."""
        served = build(read_dump(path), Options(**options))  # pyright: ignore[reportArgumentType]
        base, _ = import_dump(str(path))
        names = served.service_names
        keys: dict[str, tuple[str, object]] = {
            pid: (names.get(p.service_id) or p.service_id, p.pid) for pid, p in served.cluster.partitions.items()
        }
        dress(served.cluster, read_state(base), keys)
        served.cluster.baseline = {n: served.cluster.node_loads(n) for n in served.cluster.nodes}
        return cls(served, base, keys)

    @classmethod
    def from_state(cls, source: Json | str | Path, **options: object) -> Simulator:
        """A cluster showing a plbjax state document (a dict, or a .json/.yaml path) as SF objects."""
        doc = state_document(source)
        files, keys, sids = render(read_state(doc))
        served = build(files, Options(**options))  # pyright: ignore[reportArgumentType]
        for part in served.cluster.partitions.values():
            for replica in part.replicas:
                replica.sid = sids.get(replica.rid, replica.sid)
        dress(served.cluster, read_state(doc), keys)
        return cls(served, doc, keys)

    @contextlib.contextmanager
    def serve(self, port: int = 0, cert: str | None = None, client_ca: str | None = None) -> Iterator[str]:
        """Serve on 127.0.0.1 (a free port unless given) while the block runs; yields the endpoint URL.
        `cert` (a PEM with its key): https, as a secured cluster's gateway; `client_ca`: clients must
        present a certificate it signed."""
        handler = type("Handler", (Gateway,), {"served": self.served})
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        server.daemon_threads = True
        if cert:
            server.socket = _tls(cert, client_ca).wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield f"{'https' if cert else 'http'}://127.0.0.1:{server.server_port}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join()

    # --- what the cluster looks like now ----------------------------------------------------

    def now(self) -> float:
        """Simulated seconds since start."""
        return self.cluster.now()

    def placement(self) -> dict[str, dict[str, str]]:
        """PartitionId -> {node: "Primary"/"Secondary"/"Instance"} of Ready replicas, "InBuild" for builds
        (auxiliary replicas left out, as a state document leaves them out)."""
        with self.cluster.lock:
            self.cluster.advance()
            return {
                part.pid: {
                    r.node: "InBuild" if r.status == ReplicaStatus.IN_BUILD else ROLES.get(r.role, Role.SECONDARY)
                    for r in part.replicas
                    if r.status in (ReplicaStatus.READY, ReplicaStatus.IN_BUILD) and "Auxiliary" not in str(r.role)
                }
                for part in self.cluster.partitions.values()
            }

    def state_document(self) -> Json:
        """The cluster now as a plbjax state document: the input's, with nodes' status and replicas where
        they are (a moved replica keeps its state ReplicaId and Loads; builds not yet done are left out)."""
        with self.cluster.lock:
            self.cluster.advance()
            parts = {self.keys[pid]: part for pid, part in self.cluster.partitions.items() if pid in self.keys}
            nodes = [{**n.raw, "NodeStatus": self._status(n)} for n in self.state.nodes]
            return {
                **self.base,
                "Nodes": nodes,
                "Partitions": [self._partition(p, parts) for p in self.state.partitions],
            }

    def node_loads(self, node: str) -> dict[str, float]:
        """Metric -> the node's load now (its placed replicas' loads)."""
        with self.cluster.lock:
            self.cluster.advance()
            return self.cluster.node_loads(node)

    def _status(self, node: StateNode) -> str:
        """A state node's status: Down when the simulator took it down."""
        return "Down" if self.cluster.nodes.get(node.name) == NodeStatus.DOWN else node.status

    def _partition(self, state: StatePartition, parts: dict[tuple[str, object], Partition]) -> Json:
        """A state partition with the simulator's replicas."""
        part = parts.get((state.service, state.pid)) or next((p for k, p in parts.items() if k[1] == state.pid), None)
        if part is None:
            return state.raw
        original = {str(r.rid): r for r in state.replicas}
        replicas, primary = [], False
        for r in part.replicas:
            if r.status not in (ReplicaStatus.READY, ReplicaStatus.DOWN) or r.role not in ROLES:
                continue
            role = ROLES[r.role] if not (r.role == PRIMARY and primary) else Role.SECONDARY
            primary = primary or role is Role.PRIMARY
            base = original.get(r.sid, StateReplica(r.sid))
            replicas.append({**base.raw, "ReplicaId": base.rid, "Role": role, "NodeName": r.node})
        return {**state.raw, "Replicas": replicas}

    @property
    def moves(self) -> list[Move]:
        """Every move the cluster accepted (the Failover Manager's own are in `failovers`)."""
        with self.cluster.lock:
            self.cluster.advance()
            return self.cluster.moves

    @property
    def failovers(self) -> list[Move]:
        """The Failover Manager's adds, drops and promotions."""
        with self.cluster.lock:
            self.cluster.advance()
            return self.cluster.failovers

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path with query) of every request, in order."""
        return self.cluster.requests

    def max_concurrent_per_node(self) -> int:
        """The most accepted moves in build at once into or out of one node."""
        with self.cluster.lock:
            self.cluster.advance()
            return self.cluster.max_concurrent(per_node=True)

    def max_concurrent(self) -> int:
        """The most accepted moves in build at once, cluster-wide."""
        with self.cluster.lock:
            self.cluster.advance()
            return self.cluster.max_concurrent(per_node=False)

    # --- the Failover Manager ----------------------------------------------------------------

    @property
    def failover_choice(self) -> Callable[[str, str, list[str]], str]:
        """callable(partition_id, kind "add"/"drop"/"promote", candidate nodes) -> the node the FM uses."""
        return self.cluster.failover_choice

    @failover_choice.setter
    def failover_choice(self, choice: Callable[[str, str, list[str]], str]) -> None:
        self.cluster.failover_choice = choice

    def follow_plan(self, plan: object) -> None:
        """The FM places, drops and promotes where the plan document's adds, drops and promotions say
        (BadInput if it is not a plan)."""
        guids = {key: pid for pid, key in self.keys.items()}
        names = {(str(name), str(pid)): guid for (name, pid), guid in guids.items()}
        by_pid = {str(pid): guid for (_, pid), guid in guids.items()}
        with self.cluster.lock:
            for act in plan_read(plan, "--follow-plan").actions:
                kind = PLAN_KINDS.get(act.kind)
                pid = str(act.partition)
                guid = names.get((act.service, pid)) or by_pid.get(pid) or pid.lower()
                node = act.source if kind == "drop" else act.target
                if kind and node:
                    self.cluster.plan.setdefault((guid, kind), []).append(node)

    # --- a day ---------------------------------------------------------------------------------

    def live_day(self, schedule: list[Scheduled] | None = None, seed: int = 0, **pace: float) -> Day:
        """From now the cluster lives a day (day.py): `schedule` (default: `seeded_schedule`'s day)
        happens and is kept in its EventStore, loads follow each service's diurnal curve, SF's balancer
        moves; `pace`: Day's amplitude, load_every, balance_every."""
        with self.cluster.lock:
            self.cluster.advance()
            if schedule is None:
                schedule = seeded_schedule(list(self.cluster.nodes), list(self.served.service_partitions), seed)
            moved = [Scheduled(s.at + self.cluster.clock, s.kind, s.name, s.intent, s.seconds) for s in schedule]
            day = Day(self.served, moved, seed, **pace)
            self.cluster.day = day
            return day

    # --- faults ------------------------------------------------------------------------------

    def refuse_next(
        self, partition_id: str | None = None, kind: str | None = None, code: str = "FABRIC_E_TIMEOUT", times: int = 1
    ) -> None:
        """The next `times` move POSTs matching partition/kind ("MovePrimary", "MoveSecondary",
        "MoveInstance") are refused with `code`."""
        message = MESSAGES.get(code, code)
        pid = partition_id.lower() if partition_id else None
        with self.cluster.lock:
            self.cluster.refusals.append(Refusal(pid, kind, code, message, times))

    def node_down(self, name: str, after_moves: int | None = None, at: float | None = None) -> None:
        """The node goes Down now, when the Nth accepted move starts, or at simulated time `at`."""
        with self.cluster.lock:
            self.cluster.advance()
            if after_moves is None and at is None:
                self.cluster.node_down(name)
            else:
                self.cluster.downs.append(NodeDown(name, after_moves, at))
                self.cluster.count_start()

    def health(self, kind: str, name: str, state: str = "Error", after_moves: int | None = None) -> None:
        """An entity's health goes to `state` (SF's word: Ok, Warning, Error, Unknown), now or when the
        Nth accepted move starts: kind "partition" (its id), "node" (its name), "application" or "service"
        (their ids, as in the REST paths)."""
        if kind not in ("partition", "node", "application", "service"):
            raise ValueError(f"no {kind!r} health: partition, node, application or service")
        health = HealthState.read(state)
        key = name.lower() if kind == "partition" else name
        self._when(after_moves, lambda: self.cluster.health.__setitem__((kind, key), health))

    def _when(self, after_moves: int | None, fault: Callable[[], object]) -> None:
        """Run `fault` now, or when the `after_moves`th accepted move starts (lock held then)."""
        with self.cluster.lock:
            self.cluster.advance()
            if after_moves is None or len(self.cluster.moves) >= after_moves:
                fault()
            else:
                self.cluster.pending.append((after_moves, fault))

    def upgrade(
        self,
        seconds: float = float("inf"),
        at: float | None = None,
        version: str = "10.1.2175.9590",
        application: str | None = None,
        after_moves: int | None = None,
    ) -> None:
        """A cluster upgrade (an application's: its id, as in /Applications/{id}) starts now, at simulated
        time `at`, or when the `after_moves`th accepted move starts, and rolls for `seconds`."""

        def start() -> None:
            begin = self.cluster.clock if at is None else at
            self.cluster.upgrades.append(Upgrade(begin, seconds, version, application))

        self._when(after_moves, start)

    def balancer_move(self, partition_id: str, source: str, target: str, after_moves: int | None = None) -> None:
        """SF's own balancer moves the partition's Ready replica on `source` to `target`, now or when the
        `after_moves`th accepted move starts (then skipped if no longer possible); see `failovers`."""
        if after_moves is None:
            with self.cluster.lock:
                self.cluster.advance()
                self.cluster.balancer_move(partition_id, source, target)
            return
        self._when(after_moves, lambda: _quietly(self.cluster.balancer_move, partition_id, source, target))

    def slow(self, partition_id: str, seconds: float) -> None:
        """The partition's later moves take `seconds` to build (inf: never finish)."""
        with self.cluster.lock:
            self.cluster.slow[partition_id.lower()] = float(seconds)

    def unavailable(self, times: int = 1) -> None:
        """The next `times` requests are answered 503 FABRIC_E_SERVICE_TOO_BUSY."""
        with self.cluster.lock:
            self.cluster.faults.unavailable += times

    def drop_connection(self, times: int = 1) -> None:
        """The next `times` requests: the connection is closed with no response."""
        with self.cluster.lock:
            self.cluster.faults.drop += times


def _quietly(call: Callable[..., object], *args: object) -> None:
    """A scheduled fault that no longer applies (the replica moved meanwhile) is skipped."""
    with contextlib.suppress(KeyError, ValueError, StopIteration):
        call(*args)


def _tls(cert: str, client_ca: str | None) -> ssl.SSLContext:
    """The gateway's TLS: its certificate, and the CA its clients' certificates must chain to."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context
