"""The simulator's HTTP gateway: SF's REST routes, its JSON shapes, paging, errors and the injected faults."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, unquote, urlsplit

from plbjax.sf import ActionKind, NodeStatus, ReplicaStatus
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.simulator import health, moves
from plbjax.sf.live.simulator.cluster import Cluster, Refused, Replica
from plbjax.sf.live.simulator.day import FAMILIES, Day
from plbjax.sf.live.simulator.records import REPLICA, ListedReplica, take
from plbjax.sf.live.simulator.served import Served

STATUS = {  # ErrorCode -> HTTP status: HttpUtil::ErrorCodeToHttpStatus (src/prod/src/Management/HttpTransport)
    **dict.fromkeys(("FABRIC_E_PRIMARY_ALREADY_EXISTS", "FABRIC_E_SECONDARY_ALREADY_EXISTS"), 409),
    **dict.fromkeys(
        (
            "E_INVALIDARG",
            "FABRIC_E_INVALID_REPLICA_STATE",
            "FABRIC_E_INVALID_PARTITION_OPERATION",
            "FABRIC_E_NODE_IS_DOWN",
            "FABRIC_E_CONSTRAINT_NOT_SATISFIED",
        ),
        400,
    ),
    **dict.fromkeys(
        (
            "FABRIC_E_NODE_NOT_FOUND",
            "FABRIC_E_SERVICE_DOES_NOT_EXIST",
            "FABRIC_E_PARTITION_NOT_FOUND",
            "FABRIC_E_REPLICA_DOES_NOT_EXIST",
            "FABRIC_E_APPLICATION_NOT_FOUND",
        ),
        404,
    ),
    "FABRIC_E_INVALID_ADDRESS": 404,  # a route the simulator does not serve (its choice: SF's 404 for a path)
    "FABRIC_E_TIMEOUT": 504,
    **dict.fromkeys(("FABRIC_E_SERVICE_TOO_BUSY", "FABRIC_E_NOT_READY", "FABRIC_E_RECONFIGURATION_PENDING"), 503),
}
TOKEN = "sim-page-"  # the simulator's ContinuationTokens: this and an index (clients treat them as opaque)
MANIFEST = "cluster-manifest.json"  # the stored Get Cluster Manifest answer
MAX_RESULTS = ("Nodes", "Applications", "GetServices")  # the list calls that take MaxResults
MOVE_CALLS = {  # SF's REST move calls: the kind of move each makes and the api-version it needs
    "MovePrimaryReplica": (ActionKind.MOVE_PRIMARY, 6.5),
    "MoveSecondaryReplica": (ActionKind.MOVE_SECONDARY, 6.5),
    ActionKind.MOVE_INSTANCE.value: (ActionKind.MOVE_INSTANCE, 8.0),  # the call has the kind's name
}


@dataclass(frozen=True)
class Query:
    """A request's query parameters (names matched without case)."""

    api_version: str | None = None
    timeout: str | None = None
    node: str | None = None
    current: str = ""
    new: str | None = None
    continuation: str | None = None
    max_results: str | None = None
    start: str | None = None
    end: str | None = None


QUERY = {
    "api_version": "api-version",
    "timeout": "timeout",
    "node": "nodename",
    "current": "currentnodename",
    "new": "newnodename",
    "continuation": "continuationtoken",
    "max_results": "maxresults",
    "start": "starttimeutc",
    "end": "endtimeutc",
}


class NotFound(Exception):
    """A route the gateway does not have: 404 with SF's error JSON (FABRIC_E_INVALID_ADDRESS)."""


def replica_item(part_stateful: bool, replica: Replica) -> Json:
    """A replica as Get Replica Info List shows it (StatefulServiceReplicaInfo / StatelessServiceInstanceInfo):
    its stored row, if any, with its live node, status and id (the row's Address following them)."""
    ids = ("ReplicaRole", "ReplicaId") if part_stateful else ("InstanceId",)
    raw = replica.raw or {"ServiceKind": "Stateful" if part_stateful else "Stateless"}
    item = {k: v for k, v in raw.items() if k not in ids} | {"ReplicaStatus": replica.status, "NodeName": replica.node}
    if "HealthState" not in item:
        item |= {"HealthState": "Ok"}
    old = take(ListedReplica, REPLICA, replica.raw) if replica.raw else None
    if old is not None and isinstance(old.address, str) and old.node and old.any_id():
        item |= {"Address": old.address.replace(str(old.node), replica.node).replace(str(old.any_id()), replica.rid)}
    if part_stateful:
        return item | {"ReplicaRole": replica.role, "ReplicaId": replica.rid}
    return item | {"InstanceId": replica.rid}


class Gateway(BaseHTTPRequestHandler):
    """Answers SF's REST calls from `served` (set on a subclass per simulator)."""

    served: Served

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the simulator records requests in `requests` instead."""

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header: the simulated clock's UTC time (a recorder reads the cluster's time from it)."""
        c = self.served.cluster
        return formatdate(c.epoch + c.clock if timestamp is None else timestamp, usegmt=True)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._body_then("POST")

    def do_PUT(self) -> None:
        self._body_then("PUT")

    def do_DELETE(self) -> None:
        self._body_then("DELETE")

    def do_PATCH(self) -> None:
        self._body_then("PATCH")

    def _body_then(self, method: str) -> None:
        """Read (and ignore) the request's body, then answer it."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._handle(method)

    def _handle(self, method: str) -> None:
        """Record, apply the faults, route and answer one request."""
        c = self.served.cluster
        with c.lock:
            c.requests.append((method, self.path))
            c.advance()
            fault = _fault(c)
        if fault == "drop":
            self.close_connection = True
            return
        if fault == "busy":
            self._error(moves.refuse("FABRIC_E_SERVICE_TOO_BUSY"))
            return
        parts = urlsplit(self.path)
        words = [unquote(w) for w in parts.path.strip("/").split("/") if w not in ("$", "")]
        query = take(Query, QUERY, {k.lower(): v for k, v in parse_qsl(parts.query)})
        try:
            route = {"GET": self._get, "POST": self._post}.get(method, _unserved)
            status, body = route(words, query)
        except Refused as exc:
            self._error(exc)
        except NotFound:
            message = f"The simulator does not serve {method} {parts.path}."
            self._error(Refused("FABRIC_E_INVALID_ADDRESS", message))
        else:
            self._send(status, b"" if body is None else json.dumps(body).encode())

    def _error(self, exc: Refused) -> None:
        """SF's FabricError body with the HTTP status SF gives the code."""
        body = {"Error": {"Code": exc.code, "Message": exc.message}}
        self._send(STATUS.get(exc.code, 500), json.dumps(body).encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _get(self, words: list[str], query: Query) -> tuple[int, object]:
        """GET routes: (HTTP status, body)."""
        if not words:
            return 200, None  # the gateway's root (sfctl cluster select checks it answers)
        _version(query, 6.0)
        with self.served.cluster.lock:
            self.served.cluster.advance()
            return _read(self.served, words, query)

    def _post(self, words: list[str], query: Query) -> tuple[int, object]:
        """The move routes: 200 with no body when accepted; the simulator's fault route."""
        if words == [health.FAULT_ROUTE]:
            with self.served.cluster.lock:
                self.served.cluster.advance()
                health.inject(self.served.cluster, dict(parse_qsl(urlsplit(self.path).query)))
            return 200, None
        if not words or words[-1] not in MOVE_CALLS:
            raise NotFound()
        _version(query, MOVE_CALLS[words[-1]][1])
        deadline = None
        while True:
            try:
                with self.served.cluster.lock:
                    self.served.cluster.advance()
                    _move(self.served.cluster, words, query)
                return 200, None
            except moves.Unstable:  # SF's FM retries until the request's timeout (default 60 s)
                c = self.served.cluster
                now = c.now()
                deadline = deadline if deadline is not None else now + float(query.timeout or 60)
                if now >= deadline:
                    raise
                time.sleep(min(0.02, max(0.001, 0.1 / c.clock_rate)))


def _unserved(words: list[str], query: Query) -> tuple[int, object]:
    """A method the simulator serves no route for (PUT, DELETE, PATCH)."""
    raise NotFound()


def _fault(c: Cluster) -> str | None:
    """The injected fault this request meets, consumed."""
    if c.faults.drop > 0:
        c.faults.drop -= 1
        return "drop"
    if c.faults.unavailable > 0:
        c.faults.unavailable -= 1
        return "busy"
    return None


def _version(query: Query, least: float) -> None:
    """SF's gateway needs api-version, at least the call's own."""
    try:
        ok = query.api_version is not None and float(query.api_version.split("-")[0]) >= least
    except ValueError:
        ok = False
    if not ok:
        raise Refused("E_INVALIDARG", f"Invalid or missing api-version (this call needs {least} or later).")


def _move(c: Cluster, words: list[str], query: Query) -> None:
    """Dispatch a move POST (lock held)."""
    call, pid = words[-1], words[-2]
    kind = MOVE_CALLS[call][0]
    if kind is ActionKind.MOVE_INSTANCE and (len(words) != 5 or words[0] != "Services"):
        raise NotFound()
    if kind is not ActionKind.MOVE_INSTANCE and (len(words) != 3 or words[0] != "Partitions"):
        raise NotFound()
    fault = c.refusal(pid, kind)
    if fault is not None:
        raise fault
    if kind is ActionKind.MOVE_PRIMARY:
        moves.move_primary(c, pid, query.node)
    else:
        service = words[1] if kind is ActionKind.MOVE_INSTANCE else None
        moves.move_secondary(c, pid, query.current, query.new, service)


def _read(s: Served, words: list[str], query: Query) -> tuple[int, object]:
    """The GET answer for the route `words` (lock held)."""
    head, last, n = words[0], words[-1], len(words)
    if words == ["GetClusterManifest"]:
        return 200, s.files[MANIFEST]
    if n == 1 and head in health.CLUSTER_ROUTES:
        return 200, health.CLUSTER_ROUTES[head](s)
    if head == "Nodes":
        return _node_route(s, words, query)
    if words == ["Applications"]:
        return 200, _page(s.items("applications.json"), query, "Applications")
    if head == "Applications" and n == 2:
        return _item([a for a in s.items("applications.json") if a.get("Id") == words[1]])
    if head == "Applications" and n == 3 and last == "GetHealth":
        return 200, health.application(s, words[1])
    if head == "Applications" and n == 3 and last == "GetLoadInformation":
        return 200, _application_load(s, words[1])
    if head == "Applications" and n == 3 and last == "GetUpgradeProgress":
        return 200, health.application_upgrade(s, words[1])
    if head == "Services" and n == 3 and last == "GetHealth":
        return 200, health.service(s, words[1])
    if head == "Applications" and n == 4 and words[2] == "GetServices":
        found = _stored(s, f"services/{words[1]}.json", "FABRIC_E_APPLICATION_NOT_FOUND")
        return _item([i for i in found if i.get("Id") == last])
    if head == "Applications" and n == 3 and last == "GetServices":
        return 200, _page(_stored(s, f"services/{words[1]}.json", "FABRIC_E_APPLICATION_NOT_FOUND"), query, last)
    if head == "Services" and n == 3 and last == "GetDescription":
        return 200, _file(s, f"service-descriptions/{words[1]}.json", "FABRIC_E_SERVICE_DOES_NOT_EXIST")
    if head == "Services" and n == 3 and last == "GetPartitions":
        pids = s.service_partitions.get(words[1])
        if pids is None:
            raise moves.refuse("FABRIC_E_SERVICE_DOES_NOT_EXIST")
        return 200, _page([_partition_item(s, p) for p in pids], query, last)
    if head == "Partitions":
        return _partition_route(s, words, query)
    day = s.cluster.day
    if head == "EventsStore" and n == 3 and last == "Events" and words[1] in FAMILIES and isinstance(day, Day):
        _version(query, 6.4)
        return 200, day.answer(words[1], query.start, query.end)
    raise NotFound()


def _node_route(s: Served, words: list[str], query: Query) -> tuple[int, object]:
    """/Nodes, /Nodes/{node}, its load and a replica's detail on it."""
    c = s.cluster
    if len(words) == 1:
        return 200, _page([_node_item(s, n) for n in s.node_items], query, "Nodes")
    node = words[1]
    if node not in s.node_items:
        if len(words) == 2:
            return 204, None  # Get Node Info: an empty response when the node is not found
        raise moves.refuse("FABRIC_E_NODE_NOT_FOUND")
    if len(words) == 2:
        return 200, _node_item(s, node)
    if words[2:] == ["GetLoadInformation"]:
        return 200, health.node_load(s, node)
    if words[2:] == ["GetHealth"]:
        return 200, health.node(s, node)
    if len(words) == 7 and words[2] == "GetPartitions" and words[4] == "GetReplicas" and words[6] == "GetDetail":
        part = c.partitions.get(words[3].lower())
        here = [r for r in part.replicas if r.node == node and r.rid == words[5]] if part else []
        if not part or not here or c.nodes.get(node) == NodeStatus.DOWN:
            raise moves.refuse("FABRIC_E_REPLICA_DOES_NOT_EXIST")
        stored = s.files.get(f"replica-load/{words[3]}/{words[5]}.json")
        return 200, stored or health.replica_detail(s, part, here[0])
    raise NotFound()


def _partition_route(s: Served, words: list[str], query: Query) -> tuple[int, object]:
    """/Partitions/{pid}, its replicas and its load."""
    part = s.cluster.partitions.get(words[1].lower()) if len(words) > 1 else None
    if len(words) == 2:
        return (200, _partition_item(s, part.pid)) if part else (204, None)  # Get Partition Info: 204 if none
    if part is None:
        raise moves.refuse("FABRIC_E_PARTITION_NOT_FOUND")
    if words[2:] == ["GetHealth"]:
        return 200, health.partition(s, part)
    if len(words) == 5 and words[2] == "GetReplicas" and words[4] == "GetHealth":
        found = [r for r in part.replicas if r.rid == words[3] and r.status != ReplicaStatus.DROPPED]
        if not found:
            raise moves.refuse("FABRIC_E_REPLICA_DOES_NOT_EXIST")
        return 200, health.replica(s, part, found[0])
    if len(words) == 4 and words[2] == "GetReplicas":
        return _item([replica_item(part.stateful, r) for r in part.replicas if r.rid == words[3]])
    if words[2:] == ["GetReplicas"]:
        shown = [r for r in part.replicas if r.status != ReplicaStatus.DROPPED]
        return 200, _page([replica_item(part.stateful, r) for r in shown], query, "GetReplicas")
    if words[2:] == ["GetLoadInformation"] and isinstance(s.cluster.day, Day):
        return 200, s.cluster.day.partition_load(part)
    if words[2:] == ["GetLoadInformation"]:
        empty = {"PartitionId": part.pid, "PrimaryLoadMetricReports": [], "SecondaryLoadMetricReports": []}
        return 200, s.files.get(f"partition-load/{part.pid}.json") or empty
    raise NotFound()


def _partition_item(s: Served, pid: str) -> Json:
    """ServicePartitionInfo, its HealthState the injected one's aggregate where a fault was injected."""
    item = s.partition_items[pid]
    part = s.cluster.partitions.get(pid.lower())
    if part is None or ("partition", pid.lower()) not in s.cluster.health:
        return item
    return {**item, "HealthState": health.partition_state(s.cluster, part).value}


def _node_item(s: Served, name: str) -> Json:
    """NodeInfo with the node's live status."""
    listed = s.node_items[name]
    item = dict(listed.raw)
    status = s.cluster.nodes[name]
    if listed.status != status or ("node", name) in s.cluster.health:
        item.update(NodeStatus=status, HealthState=health.node_state(s.cluster, name).value)
    deactivation = s.cluster.day.deactivation(name) if isinstance(s.cluster.day, Day) else None
    if deactivation is not None:
        item["NodeDeactivationInfo"] = deactivation
    return item


def _application_load(s: Served, app_id: str) -> object:
    """Get Application Load Info: the stored answer, else SF's for an application without application
    capacity (zeros, no metric)."""
    if f"application-load/{app_id}.json" in s.files:
        return s.files[f"application-load/{app_id}.json"]
    if not any(a.get("Id") == app_id for a in s.items("applications.json")):
        raise moves.refuse("FABRIC_E_APPLICATION_NOT_FOUND")
    zero = {"MinimumNodes": "0", "MaximumNodes": "0", "NodeCount": "0", "ApplicationLoadMetricInformation": []}
    return {"Id": app_id} | zero


def _item(found: list) -> tuple[int, object]:
    """A Get ... Info answer: the item, or 204 with no body when there is none (as SF answers)."""
    return (200, found[0]) if found else (204, None)


def _stored(s: Served, rel: str, code: str) -> list:
    try:
        return s.items(rel)
    except KeyError:
        raise moves.refuse(code) from None


def _file(s: Served, rel: str, code: str) -> object:
    if rel not in s.files:
        raise moves.refuse(code)
    return s.files[rel]


def _page(items: list, query: Query, call: str) -> Json:
    """One page of a list: from ContinuationToken (an opaque string to the client; here TOKEN and an
    index), MaxResults items where the call takes it. A token the simulator did not give, or a MaxResults
    that is not a number: 400 E_INVALIDARG with SF's error JSON."""
    token = query.continuation or ""
    index = token.removeprefix(TOKEN)
    if token and (not token.startswith(TOKEN) or not index.isdigit() or int(index) > len(items)):
        raise Refused("E_INVALIDARG", f"Invalid ContinuationToken {token!r}.")
    start = int(index or 0)
    try:
        size = int(query.max_results or 0) if call in MAX_RESULTS else 0
    except ValueError:
        raise Refused("E_INVALIDARG", f"Invalid MaxResults {query.max_results!r}.") from None
    end = start + size if size > 0 else len(items)
    return {"ContinuationToken": f"{TOKEN}{end}" if end < len(items) else "", "Items": items[start:end]}
