"""``plbjax-record --endpoint URL --every 5m --for 24h -o day/``: a live cluster's day, recorded.

At the start and then every period it writes the cluster as ``plbjax-dump`` does (its loads and its
placement: nodes, replicas, node and partition loads) into ``periods/NNNNNN/`` with ``period.json``
(``{"Time"}``: the cluster's UTC time, from its answers' ``Date`` header), and the events SF's
EventStore kept since the period before (``GET /EventsStore/{Cluster,Nodes,Applications,Services,
Partitions}/Events``, api-version 6.4, StartTimeUtc/EndTimeUtc) into ``events/NNNNNN.json``
(``{"From", "To", "Events"}``: SF's events as it answers them). ``recording.json`` says how it was
recorded. A period is written whole or not at all; SIGINT/SIGTERM keep the periods recorded, and a
rerun with the same ``-o`` continues (a period missed meanwhile is a gap the import reports). A cluster
without EventStore (an HTTP error from it) gives a warning and a recording of loads and placement.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import ssl
import sys
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf.live.reading.dump import add_connection_flags, connect, dump_cluster
from plbjax.sf.live.reading.dumpdir import Dump
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.rest import Client, HttpError
from plbjax.sf.live.utc import iso, parse_utc
from plbjax.version import add_flag as add_version_flag

FAMILIES = ("Cluster", "Nodes", "Applications", "Services", "Partitions")
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
RECORDING = "recording.json"


def seconds(text: str) -> float:
    """'5m', '24h', '90s', '1d' or a number of seconds; BadInput naming it otherwise."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smhd]?)\s*", text)
    if not found or float(found[1]) <= 0:
        raise BadInput(f"{text!r}: not a duration (e.g. 5m, 24h, 90s, 1d)")
    return float(found[1]) * UNITS.get(found[2], 1.0)


class Paced(Client):
    """A client that sends at most `rate` requests a second (0: unbounded)."""

    rate = 0.0
    last = 0.0

    def _request(self, method: str, url: str) -> object:
        if self.rate > 0:
            time.sleep(max(0.0, self.last + 1.0 / self.rate - time.monotonic()))
            self.last = time.monotonic()
        return super()._request(method, url)


class ClusterClock:
    """The cluster's UTC time: its Date header when synced, then wall seconds times `rate`."""

    def __init__(self, client: Client, rate: float) -> None:
        self.client, self.rate = client, rate
        self.base, self.wall = time.time(), time.monotonic()

    def sync(self) -> None:
        """Read the cluster's time from the latest answer's Date header (the local clock without one)."""
        date = self.client.date
        self.base = parsedate_to_datetime(date).timestamp() if date else time.time()
        self.wall = time.monotonic()

    def now(self) -> float:
        return self.base + (time.monotonic() - self.wall) * self.rate

    def wait_until(self, moment: float) -> None:
        time.sleep(max(0.0, (moment - self.now()) / self.rate))


@dataclass(frozen=True)
class Plan:
    """How the recording is made: its start (UTC seconds), period and length in the cluster's seconds."""

    start: float
    every: float
    length: float

    @property
    def periods(self) -> int:
        return int(math.floor(self.length / self.every + 1e-9))


def record(client: Client, out: Path, plan: Plan, clock: ClusterClock, replica_loads: bool) -> int:
    """Record periods until the plan's end: the number of periods recorded now."""
    store = bool(_recording(out).get("EventStore", True))
    last = max(recorded(out), default=None)
    since = _period_time(out, last) if last is not None else plan.start
    count = 0
    for index in range(0 if last is None else last + 1, plan.periods + 1):
        due = plan.start + index * plan.every
        if clock.now() > due + plan.every:  # resumed late: this period is missed (a gap)
            continue
        clock.wait_until(due)
        at = clock.now()
        if store and index > 0:  # the events first: a period recorded has its window's events
            store = _events(client, out, index, since, at)
        _period(client, out, index, at, replica_loads)
        _write_recording(out, plan, client.endpoint, clock.rate, store)
        since, count = at, count + 1
        print(f"plbjax-record: period {index}/{plan.periods} at {iso(at)}", file=sys.stderr, flush=True)
    return count


def recorded(out: Path) -> list[int]:
    """The indexes of the periods recorded whole in `out`."""
    folder = out / "periods"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit() and (p / "period.json").is_file())


def _recording(out: Path) -> Json:
    """recording.json of a recording begun ({} for a new one); BadInput if it is not JSON."""
    return Dump(out).object(RECORDING) if (out / RECORDING).is_file() else {}


def _period_time(out: Path, index: int) -> float:
    rel = f"periods/{index:06d}/period.json"
    try:
        return parse_utc(str(Dump(out).object(rel).get("Time")))
    except ValueError:
        raise BadInput(f"{out / rel}: Time is not an ISO 8601 time") from None


def _period(client: Client, out: Path, index: int, at: float, replica_loads: bool) -> None:
    """The cluster now, as plbjax-dump writes it, in periods/NNNNNN/ (whole or not at all)."""
    final = out / "periods" / f"{index:06d}"
    partial = out / "periods" / f".partial-{index:06d}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        dump_cluster(client, partial, replica_loads, indent=None)
        write_text(partial / "period.json", json.dumps({"Time": iso(at)}) + "\n")
        partial.rename(final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _events(client: Client, out: Path, index: int, since: float, until: float) -> bool:
    """The EventStore's events of (since, until] into events/NNNNNN.json; False (a warning) without one."""
    window = {"StartTimeUtc": iso(since), "EndTimeUtc": iso(until)}
    events: list = []
    try:
        for family in FAMILIES:
            answer = client.get(f"/EventsStore/{family}/Events", "6.4", **window)
            events += answer if isinstance(answer, list) else []
    except HttpError as exc:
        print(f"plbjax-record: warning: no EventStore ({exc}); recording loads and placement only", file=sys.stderr)
        return False
    doc = {"From": window["StartTimeUtc"], "To": window["EndTimeUtc"], "Events": events}
    write_text(out / "events" / f"{index:06d}.json", json.dumps(doc) + "\n")
    return True


def _write_recording(out: Path, plan: Plan, endpoint: str, rate: float, store: bool) -> None:
    doc = {
        "Start": iso(plan.start),
        "Every": plan.every,
        "For": plan.length,
        "Endpoint": endpoint,
        "ClockRate": rate,
        "EventStore": store,
    }
    write_text(out / RECORDING, json.dumps(doc, indent=2) + "\n")


def _plan(out: Path, every: float, length: float, clock: ClusterClock) -> Plan:
    """The plan: a new recording's from now; a resumed one's as it was (BadInput if --every differs)."""
    path, doc = out / RECORDING, _recording(out)
    if not doc:
        return Plan(clock.now(), every, length)
    try:
        before, start = float(doc.get("Every") or 0), parse_utc(str(doc.get("Start")))
    except ValueError:
        raise BadInput(f"{path}: its Every or Start is not as plbjax-record writes them") from None
    if abs(before - every) > 1e-6:
        raise BadInput(f"{path}: recorded every {before:g} s, not {every:g} s; use the same --every")
    return Plan(start, every, length)


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None  # the module's docstring
    parser = argparse.ArgumentParser(
        prog="plbjax-record",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 recorded to the end; 2 bad input or a call that failed (one line naming it); 130\n"
        "after Ctrl-C (SIGINT), 143 after SIGTERM (the periods recorded are kept: rerun to continue)\n\n"
        "examples:\n"
        "  plbjax-record --endpoint https://mycluster:19080 --cert client.pem --every 5m --for 24h -o day/\n"
        "  plbjax-record --endpoint http://127.0.0.1:19080 --insecure --every 1h --for 24h --clock-rate 3600 -o day/\n"
        "  plbjax-record --endpoint https://mycluster:19080 --cert client.pem --every 15m --for 2h --max-rate 5 -o d/\n"
        "then: plbjax-import day/ -o timeline.json; plbjax-replay timeline=timeline.json (docs/live-cluster.md)",
    )
    add_version_flag(parser)
    add_connection_flags(parser, "the recording's directory (a rerun with it continues)")
    parser.add_argument("--every", default="5m", help="the period: 5m, 1h, 90s ... (default 5m)")
    parser.add_argument("--for", dest="length", default="24h", help="how long to record (default 24h)")
    parser.add_argument(
        "--max-rate", type=float, default=20.0, help="requests a second at most (default 20; 0: no bound)"
    )
    parser.add_argument(
        "--clock-rate", type=float, default=1.0, help="the cluster's seconds per wall second (a simulator's; default 1)"
    )
    args = parser.parse_args(argv)
    out = Path(args.output)
    try:
        every, length = seconds(args.every), seconds(args.length)
        if args.clock_rate <= 0:
            raise BadInput(f"--clock-rate {args.clock_rate:g}: must be positive")
        client = connect(args, Paced)
        client.rate, client.retries = args.max_rate, 3  # a busy gateway or a dropped connection: tried again
        clock = ClusterClock(client, args.clock_rate)
        client.get("/$/GetClusterVersion", "6.4")
        clock.sync()
        count = record(client, out, _plan(out, every, length, clock), clock, args.replica_loads)
    except (BadInput, ssl.SSLError) as exc:
        print(f"plbjax-record: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print(
            f"plbjax-record: stopped; {len(recorded(out))} periods kept in {out} (rerun to continue)", file=sys.stderr
        )
        raise
    print(f"plbjax-record: {count} periods recorded to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
