"""Requests to one Service Fabric cluster's HTTP gateway (its REST API), standard library only.

GETs may be retried: a busy gateway (HTTP 503) and a connection that fails are tried again with a
growing pause. A POST is never retried here: whether it reached the cluster is for the caller to find
out (`Unanswered`). SF's refusal comes as an HTTP error whose body is ``{"Error": {"Code":
"FABRIC_E_...", "Message": "..."}}``: `HttpError` carries that code and message.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import quote, urlencode, urlsplit

from plbjax.errors import BadInput
from plbjax.sf import Action, ActionKind, HealthState
from plbjax.sf.live.apply.expectations import Holding, holdings
from plbjax.sf.live.reading.fields import Json

PAGED_MAX_RESULTS = ("/Nodes", "/Applications", "/$/GetServices")  # calls that take MaxResults
BUSY = 503  # SF's gateway: too busy now, try again


ROLLING = ("rollingforwardpending", "rollingforwardinprogress", "rollingbackinprogress", "rollingbackpending")


def rolling(word: object) -> str:
    """SF's UpgradeState word when it says an upgrade rolls (RollingForwardInProgress, ...), else ''."""
    return str(word) if str(word or "").lower() in ROLLING else ""


class HttpError(BadInput):
    """The cluster answered with an HTTP error status (`code`, `detail`: SF's error, when it gave one)."""

    def __init__(self, message: str, status: int = 0, code: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.detail = status, code, detail


class Unanswered(BadInput):
    """The request got no answer: the connection could not be made, or dropped before the answer."""


class Client:
    """GET and POST requests to one cluster's HTTP gateway."""

    def __init__(
        self,
        endpoint: str,
        cert: str | None = None,
        key: str | None = None,
        insecure: bool = False,
        max_results: int = 0,
        timeout: float = 60.0,
        ca: str | None = None,
        token: str | None = None,
        retries: int = 0,
        backoff: float = 0.25,
        token_over_http: bool = False,
    ) -> None:
        """BadInput at once for an endpoint that is not an http(s) URL, plain http without `insecure`,
        and a token over plain http without `token_over_http` (--allow-token-over-http)."""
        check_endpoint(endpoint, insecure, bool(token), token_over_http)
        self.endpoint = endpoint.rstrip("/")
        self.max_results, self.timeout, self.retries, self.backoff = max_results, timeout, retries, backoff
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.date: str | None = None  # the Date header of the latest answer: the cluster's clock
        self.context = None
        if self.endpoint.lower().startswith("https:"):
            self.context = _tls(ca, cert, key, insecure)

    def url(self, path: str, version: str, **query: str) -> str:
        return f"{self.endpoint}{path}?{urlencode({'api-version': version} | query)}"

    def get(self, path: str, version: str, **query: str) -> object:
        """The JSON body of GET path?api-version=version&query, retried `retries` times when the gateway
        is busy or the connection fails; BadInput (HttpError, Unanswered) on any failure."""
        for attempt in range(self.retries + 1):
            try:
                return self._request("GET", self.url(path, version, **query))
            except (HttpError, Unanswered) as exc:
                if attempt == self.retries or (isinstance(exc, HttpError) and exc.status != BUSY):
                    raise
                time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")

    def post(self, path: str, version: str, **query: str) -> object:
        """POST path?api-version=version&query with an empty body, once; its JSON body (None if empty)."""
        return self._request("POST", self.url(path, version, **query))

    def _request(self, method: str, url: str) -> object:
        data = b"" if method == "POST" else None
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                body = response.read()
                self.date = response.headers.get("Date") or self.date
        except urllib.error.HTTPError as exc:
            raise _http_error(method, url, exc) from None
        except (urllib.error.URLError, OSError) as exc:
            raise Unanswered(f"{method} {url}: {getattr(exc, 'reason', None) or exc or type(exc).__name__}") from None
        if not body.strip():
            return None
        try:
            return json.loads(body.decode("utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadInput(f"{method} {url}: the response is not JSON: {getattr(exc, 'msg', exc)}") from None

    def pages(self, path: str, version: str) -> list[Json]:
        """Every page of a paged list, following ContinuationToken until it is empty."""
        pages, token, seen = [], "", set()
        while True:
            query = {"ContinuationToken": token} if token else {}
            if self.max_results and path.endswith(PAGED_MAX_RESULTS):
                query["MaxResults"] = str(self.max_results)
            page = self.get(path, version, **query)
            if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
                raise BadInput(f"GET {path}: expected a paged list, got {str(page)[:80]}")
            pages.append(page)
            token = page.get("ContinuationToken") or ""
            if not token:
                return pages
            if token in seen:
                raise BadInput(f"GET {path}: ContinuationToken {token!r} came back twice")
            seen.add(token)


def check_endpoint(endpoint: str, insecure: bool, token: bool, token_over_http: bool) -> None:
    """The rules every command that connects follows: an http(s) URL with a host (no retrying a URL
    that can never connect), https unless --insecure, and a bearer token never sent in clear text
    unless --allow-token-over-http; BadInput naming the risk."""
    parts = urlsplit(endpoint)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        fix = (
            "write https:// or http:// and the host"
            if "//" in endpoint
            else f"write the scheme, e.g. https://{endpoint}"
        )
        raise BadInput(f"--endpoint: {endpoint} is not an http(s) URL; {fix}")
    if scheme == "http" and not insecure:
        raise BadInput(f"--endpoint: {endpoint} is not https; add --insecure to use plain http")
    if scheme == "http" and token and not token_over_http:
        raise BadInput(
            f"--endpoint: {endpoint} is plain http: the bearer token would be sent in clear text, readable by "
            "anyone on the path; use https, or add --allow-token-over-http to take that risk"
        )


def add_token_over_http_flag(parser: argparse.ArgumentParser) -> None:
    """The flag that lets a command send its bearer token over plain http (its risk in its name)."""
    parser.add_argument(
        "--allow-token-over-http",
        action="store_true",
        help="send the bearer token over plain http (in clear text: anyone on the path can read and reuse it)",
    )


@contextlib.contextmanager
def quiet_on_broken_pipe() -> Iterator[None]:
    """A command's door: output closed early (`| head`) ends it quietly with the shell's status for
    SIGPIPE (141), the rest of its output dropped, no traceback."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's last flush of stdout goes nowhere
        raise SystemExit(128 + signal.SIGPIPE) from None


def _tls(ca: str | None, cert: str | None, key: str | None, insecure: bool) -> ssl.SSLContext:
    """The client's TLS: the CA bundle to verify the cluster with (the system's by default; none with
    `insecure`) and the client certificate; BadInput naming the option whose file will not load."""
    try:
        context = ssl.create_default_context(cafile=ca)
    except OSError as exc:  # ssl.SSLError too
        raise BadInput(f"--ca: {ca}: {exc.strerror or exc}") from None
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        if cert:
            context.load_cert_chain(cert, key)
    except OSError as exc:
        raise BadInput(f"--cert: {cert}{f' / --key: {key}' if key else ''}: {exc.strerror or exc}") from None
    return context


def service_id(service_name: str) -> str:
    """SF's service id: the name without 'fabric:/' and with '~' for '/' (fabric:/A/B -> A~B)."""
    return service_name.removeprefix("fabric:").lstrip("/").replace("/", "~")


def move_request(action: Action) -> tuple[str, str, dict[str, str]]:
    """(path, api-version, query) of the POST that carries out a movement action (REST reference: Move
    Primary Replica, Move Secondary Replica, Move Instance; never IgnoreConstraints)."""
    kind, pid = action.kind, quote(str(action.partition))
    src, dst = action.source or "", action.target or ""
    if kind in (ActionKind.MOVE_PRIMARY, ActionKind.SWAP_PRIMARY_SECONDARY):  # onto a secondary's node SF swaps
        return f"/Partitions/{pid}/$/MovePrimaryReplica", "6.5", {"NodeName": dst}
    if kind is ActionKind.MOVE_SECONDARY:
        return f"/Partitions/{pid}/$/MoveSecondaryReplica", "6.5", {"CurrentNodeName": src, "NewNodeName": dst}
    if kind is ActionKind.MOVE_INSTANCE:
        service = quote(service_id(action.service), safe="~")
        return (
            f"/Services/{service}/$/GetPartitions/{pid}/$/MoveInstance",
            "8.0",
            {"CurrentNodeName": src, "NewNodeName": dst},
        )
    raise ValueError(f"{kind}: no command; the Failover Manager makes it")


def _field(answer: object, key: str) -> object:
    return answer.get(key) if isinstance(answer, dict) else None


def application_id(service_name: str) -> str:
    """The id of the application a service is in (fabric:/A/B -> A; '' for SF's own, fabric:/System)."""
    parts = service_name.removeprefix("fabric:").lstrip("/").split("/")
    return "" if len(parts) < 2 or parts[0] == "System" else parts[0]


def items(pages: list[Json]) -> list[Json]:
    return [item for page in pages for item in page["Items"]]


def _http_error(method: str, url: str, exc: urllib.error.HTTPError) -> HttpError:
    """The HTTP error with SF's error code and message when its body gives them."""
    try:
        error = json.loads(exc.read().decode("utf-8-sig")).get("Error") or {}
        code, detail = str(error.get("Code") or ""), str(error.get("Message") or "")
    except (OSError, ValueError, AttributeError):
        code = detail = ""
    said = f": {code}" + (f": {detail}" if detail else "") if code else ""
    return HttpError(f"{method} {url}: HTTP {exc.code} {exc.reason}{said}", exc.code, code, detail)


class Cluster:
    """The calls plbjax-apply makes: a partition's replicas, the nodes' status (read at most once per
    `poll` seconds), and the move that carries out a plan's action (never IgnoreConstraints)."""

    def __init__(self, client: Client, poll: float) -> None:
        self.client, self.poll = client, poll
        self.lock, self.read_at, self.status = threading.Lock(), -math.inf, {}

    def replicas(self, partition_id: str) -> dict[str, Holding]:
        """Node -> what it holds of the partition (every page of Get Replica Info List)."""
        return holdings(self.client.pages(f"/Partitions/{quote(partition_id)}/$/GetReplicas", "6.0"))

    def nodes(self) -> dict[str, str]:
        """Node -> its NodeStatus (Up, Down, Disabled, ...), as read at most `poll` seconds ago."""
        with self.lock:
            if time.monotonic() - self.read_at >= self.poll:
                nodes = items(self.client.pages("/Nodes", "6.3"))
                self.status = {str(n.get("Name")): str(n.get("NodeStatus")) for n in nodes}
                self.read_at = time.monotonic()
            return self.status

    def cluster_health(self) -> HealthState:
        """GetClusterHealth's aggregated state (one cluster read)."""
        return HealthState.from_sf(_field(self.client.get("/$/GetClusterHealth", "6.0"), "AggregatedHealthState"))

    def node_health(self, node: str) -> HealthState:
        return HealthState.from_sf(
            _field(self.client.get(f"/Nodes/{quote(node)}/$/GetHealth", "6.0"), "AggregatedHealthState")
        )

    def partition_health(self, partition_id: str) -> HealthState:
        path = f"/Partitions/{quote(partition_id)}/$/GetHealth"
        return HealthState.from_sf(_field(self.client.get(path, "6.0"), "AggregatedHealthState"))

    def upgrade(self, application: str = "") -> str:
        """The cluster's (the application's: its id, as in /Applications/{id}) upgrade state in SF's words
        while it rolls (RollingForwardInProgress, ...), '' when none rolls."""
        path = (
            f"/Applications/{quote(application, safe='~')}/$/GetUpgradeProgress"
            if application
            else "/$/GetUpgradeProgress"
        )
        return rolling(_field(self.client.get(path, "6.0"), "UpgradeState"))

    def move(self, action: Action) -> None:
        """Send the request that carries out a movement action; HttpError (SF's refusal) or Unanswered."""
        path, version, query = move_request(action)
        self.client.post(path, version, **query)
