"""A recorded day (``plbjax-record``'s folder, or a folder of periodic ``plbjax-dump`` folders) -> the
replay's timeline (docs/contract.md): the first period's state, SF's events mapped to the timeline's
kinds (events.py), a LoadReport per partition and role whose loads changed at each period, and what the
periods' node lists show that no event said (a node enabled again: SF has no event for it). Beside
it, SF's observed day: each period's state as SF placed and loaded it (`observed`), what
``plbjax-replay observed=`` sets the replay beside.

Nothing is silently dropped: what the timeline cannot hold, a period missing (a gap of more than
half a period) or cut short, goes into the report. A bad recording is one BadInput line naming the
file and key: periods not in time order, an events file whose window goes back in time or an event
outside its window, an event for a node or service no period holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.sf.live.reading.dumpdir import DUMP_FILES, Dump
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.record.events import WHY_NOT, Kind, SfEvent, read_event
from plbjax.sf.live.utc import iso, parse_utc


@dataclass(frozen=True)
class Period:
    """One period's dump folder and its time (Unix seconds)."""

    folder: Path
    time: float


@dataclass
class Import:
    """What the import built and what it reports."""

    start: float
    events: list[Json] = field(default_factory=list)
    report: list[str] = field(default_factory=list)
    carried: Counter = field(default_factory=Counter)
    left: Counter = field(default_factory=Counter)
    inferred: Counter = field(default_factory=Counter)
    moved: int = 0  # replicas SF placed between periods on a node its partition was not on

    def add(self, at: float, kind: Kind, **fields: object) -> None:
        self.events.append({"Time": round(max(at - self.start, 0.0), 3), "Kind": kind.value, **fields})
        self.carried[kind.value] += 1


def is_recording(root: str | Path) -> bool:
    """Whether `root` is a recording or a folder of periodic dumps (rather than one dump)."""
    path = Path(root)
    if (path / "periods").is_dir():
        return True
    dumps = (d for d in path.iterdir() if d.is_dir()) if path.is_dir() else iter(())
    return not _holds_dump(path) and any(_holds_dump(d) for d in dumps)


def _holds_dump(folder: Path) -> bool:
    return any((folder / f).exists() for f in DUMP_FILES)


def import_recording(
    root: str | Path, import_dump: Callable[[str], tuple[Json, object]]
) -> tuple[Json, Json, list[str]]:
    """The timeline of the recording at `root`, SF's observed day (`observed`) and the import report's
    lines; `import_dump`: the dump's importer (plbjax-import's, which calls this), each period's state."""
    periods, report = _periods(Path(root))
    states = [import_dump(str(p.folder))[0] for p in periods]
    work = Import(periods[0].time, report=report)
    events = _read_events(Path(root), periods)
    _check_subjects(events, states)
    for i, period in enumerate(periods[1:], 1):
        window = [e for e in events if periods[i - 1].time < e.time <= period.time]
        carried = _carry(work, window, states[i - 1], states[i])
        _inferred(work, states[i - 1], states[i], period.time, carried)
        _services(work, states[i - 1], states[i], period.time, set(carried))
        _loads(work, states[i - 1], states[i], period.time)
        work.moved += _moved(states[i - 1], states[i])
    work.events.sort(key=lambda e: e["Time"])
    duration = round(periods[-1].time - periods[0].time, 3)
    doc = {"SchemaVersion": 1, "State": states[0], "Duration": duration, "Events": work.events}
    return doc, observed(periods, states), _summary(work, periods, len(events))


def observed(periods: list[Period], states: list[Json]) -> Json:
    """SF's observed day (docs/contract.md): each period's time on the timeline's clock (seconds from
    the first period), its UTC time and SF's state then, as the timeline's State is built."""
    start = periods[0].time
    return {
        "SchemaVersion": 1,
        "Periods": [
            {"Time": round(p.time - start, 3), "Utc": iso(p.time), "State": state} for p, state in zip(periods, states)
        ],
    }


def _periods(root: Path) -> tuple[list[Period], list[str]]:
    """The recorded periods in order, and the report's lines on gaps and periods cut short."""
    base = root / "periods" if (root / "periods").is_dir() else root
    report = [f"{base}/{p.name}: a period cut short, not carried" for p in sorted(base.glob(".partial-*"))]
    folders = sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    periods = [Period(f, _period_time(f)) for f in folders if _is_dump(f, report)]
    if len(periods) < 2:
        raise BadInput(f"{root}: {len(periods)} recorded period(s); a timeline needs two at least")
    for a, b in zip(periods, periods[1:], strict=False):
        if b.time <= a.time:
            raise BadInput(f"{b.folder}: its time {iso(b.time)} is not after {a.folder.name}'s {iso(a.time)}")
    every = _every(root, periods)
    for a, b in zip(periods, periods[1:], strict=False):
        missing = round((b.time - a.time) / every) - 1
        if missing > 0:
            report.append(f"gap: {missing} period(s) missing between {iso(a.time)} and {iso(b.time)}")
    return periods, report


def _is_dump(folder: Path, report: list[str]) -> bool:
    """Whether `folder` holds a whole period (a dump; a recorder's also its period.json)."""
    whole = _holds_dump(folder)
    if not whole or (folder.parent.name == "periods" and not (folder / "period.json").is_file()):
        report.append(f"{folder}: not a whole period (no dump, or no period.json), not carried")
        return False
    return True


def _period_time(folder: Path) -> float:
    """A period's time: its period.json's Time, else its folder's name as an ISO 8601 time (cron's dumps)."""
    path = folder / "period.json"
    try:
        text = Dump(folder).object("period.json").get("Time") if path.is_file() else folder.name
        return parse_utc(str(text))
    except ValueError:
        where = f"{path}: Time" if path.is_file() else f"{folder}: the folder's name"
        raise BadInput(f"{where} is not an ISO 8601 time (e.g. 2026-01-01T05:00:00Z)") from None


def _every(root: Path, periods: list[Period]) -> float:
    """The period: the recording's Every, else the shortest gap between periods."""
    path = root / "recording.json"
    if path.is_file():
        return float(Dump(root).object("recording.json").get("Every") or 0) or _shortest(periods)
    return _shortest(periods)


def _shortest(periods: list[Period]) -> float:
    return min(b.time - a.time for a, b in zip(periods, periods[1:], strict=False))


def _read_events(root: Path, periods: list[Period]) -> list[SfEvent]:
    """Every event of events/*.json once (by EventInstanceId), in time order."""
    files = sorted((root / "events").glob("*.json")) if (root / "events").is_dir() else []
    events: dict[str, SfEvent] = {}
    last = None
    for path in files:
        doc = Dump(path.parent).object(path.name)
        low, high = parse_utc(str(doc.get("From"))), parse_utc(str(doc.get("To")))
        if last is not None and low < last - 1e-3:
            raise BadInput(f"{path}: From {doc['From']} goes back before the previous window's end {iso(last)}")
        for i, item in enumerate(doc.get("Events") or []):
            event = read_event(item, f"{path}: Events[{i}]")
            if not low - 1e-3 <= event.time <= high + 1e-3:
                raise BadInput(
                    f"{event.where}.TimeStamp: {iso(event.time)} is outside the window {doc['From']}..{doc['To']}"
                )
            events.setdefault(event.instance, event)
        last = high
    return sorted(events.values(), key=lambda e: e.time)


def _check_subjects(events: list[SfEvent], states: list[Json]) -> None:
    """Every carried event's node and service is one some period holds."""
    nodes = {n["NodeName"] for s in states for n in s["Nodes"]}
    services = {v["ServiceName"] for s in states for v in s["Services"]}
    for event in events:
        if event.node and event.carried and event.node not in nodes:
            raise BadInput(f"{event.where}.NodeName: {event.node!r} is not a node of any recorded period")
        if event.service and event.carried and event.service not in services | _deleted(events):
            raise BadInput(f"{event.where}.ServiceId: {event.service!r} is not a service of any recorded period")


def _deleted(events: list[SfEvent]) -> set[str]:
    """Services the events delete (one created and deleted between two periods is in no period)."""
    return {e.service for e in events if e.carried is Kind.SERVICE_DELETED}


def _carry(work: Import, window: list[SfEvent], before: Json, after: Json) -> list[tuple[Kind, str]]:
    """The window's events into the timeline; (kind, subject) of each carried."""
    done = []
    alive = {s["ServiceName"] for s in before["Services"]}
    domains = sorted({str(n.get("UpgradeDomain")) for n in after["Nodes"] if n.get("UpgradeDomain") is not None})
    for event in window:
        kind = event.carried
        if kind is None:
            work.left[f"{event.kind} ({WHY_NOT.get(event.kind, 'the timeline has no such kind')})"] += 1
            continue
        fields = _fields(kind, event, after, domains)
        if kind is Kind.SERVICE_DELETED and event.service not in alive:
            fields = None
        alive = alive | {event.service} if kind is Kind.SERVICE_CREATED and fields is not None else alive
        if fields is None:
            work.left[f"{event.kind} of {event.node or event.service} (no period shows it)"] += 1
            continue
        work.add(event.time, kind, **fields)
        done.append((kind, event.node or event.service))
    return done


def _fields(kind: Kind, event: SfEvent, after: Json, domains: list[str]) -> Json | None:
    """The timeline event's fields (besides Time and Kind); None when the state after cannot give them."""
    if kind is Kind.NODE_ADDED:
        return next(({"Node": n} for n in after["Nodes"] if n["NodeName"] == event.node), None)
    if kind is Kind.NODE_DISABLED:
        return {"NodeName": event.node, "Intent": event.intent.value}
    if event.node:
        return {"NodeName": event.node}
    if kind is Kind.UPGRADE_STARTED:
        scope = {"Scope": "Application", "ApplicationName": event.application} if event.application else {}
        return {"Scope": "Cluster", "UpgradeDomains": domains} | scope
    if kind is Kind.UPGRADE_DOMAIN_COMPLETED:
        return {"UpgradeDomain": event.domain} if event.domain in domains else None
    if kind is Kind.SERVICE_CREATED:
        return _created(event.service, after)
    if kind is Kind.SERVICE_DELETED:
        return {"ServiceName": event.service}
    return {}


def _created(service: str, after: Json) -> Json | None:
    """A created service as the period after shows it, its partitions without replicas: the replay's
    placement places them (SF's placement did, in the cluster)."""
    found = next((s for s in after["Services"] if s["ServiceName"] == service), None)
    parts = [
        {"PartitionId": p["PartitionId"], "Replicas": []} for p in after["Partitions"] if p["ServiceName"] == service
    ]
    return None if found is None else {"Service": found, "Partitions": parts}


def _services(work: Import, before: Json, after: Json, at: float, seen: set[tuple[Kind, str]]) -> None:
    """Services the periods show created or deleted that no event said."""
    old, new = ({s["ServiceName"] for s in state["Services"]} for state in (before, after))
    for name in sorted(new - old):
        if (Kind.SERVICE_CREATED, name) not in seen and (fields := _created(name, after)) is not None:
            work.add(at, Kind.SERVICE_CREATED, **fields)
            work.inferred[Kind.SERVICE_CREATED.value] += 1
    for name in sorted(old - new):
        if (Kind.SERVICE_DELETED, name) not in seen:
            work.add(at, Kind.SERVICE_DELETED, ServiceName=name)
            work.inferred[Kind.SERVICE_DELETED.value] += 1


STATUS_AFTER = {Kind.NODE_DOWN: "Down", Kind.NODE_UP: "Up", Kind.NODE_DISABLED: "Disabled", Kind.NODE_ENABLED: "Up"}


def _inferred(work: Import, before: Json, after: Json, at: float, carried: list[tuple[Kind, str]]) -> None:
    """What the node lists show changed that the window's events do not say (SF has no event for a
    node enabled again): NodeDown/Up, NodeDisabled/Enabled at the period's time."""
    said = {n["NodeName"]: str(n.get("NodeStatus", "Up")) for n in before["Nodes"]}
    for kind, name in carried:
        said[name] = STATUS_AFTER.get(kind, said.get(name, "Up"))
    for node in after["Nodes"]:
        kind = _change(said.get(node["NodeName"]), str(node.get("NodeStatus", "Up")))
        if kind is not None:
            intent = (
                {"Intent": node["DeactivationIntent"]}
                if kind is Kind.NODE_DISABLED and "DeactivationIntent" in node
                else {}
            )
            work.add(at, kind, NodeName=node["NodeName"], **intent)
            work.inferred[kind.value] += 1


def _change(old: str | None, new: str) -> Kind | None:
    """The timeline kind a node's status change is."""
    if old is None or old == new:
        return None
    if new == "Down":
        return Kind.NODE_DOWN
    if new == "Disabled":
        return Kind.NODE_DISABLED
    return Kind.NODE_ENABLED if old == "Disabled" else Kind.NODE_UP


def _loads(work: Import, before: Json, after: Json, at: float) -> None:
    """A LoadReport for each partition and role whose reported loads changed since the period before."""
    old = _role_loads(before)
    for key, loads in sorted(_role_loads(after).items()):
        if loads and loads != old.get(key):
            service, pid, role = key
            work.add(at, Kind.LOAD_REPORT, ServiceName=service, PartitionId=pid, Role=role, Loads=loads)


def _role_loads(state: Json) -> dict[tuple[str, str, str], dict[str, float]]:
    """(service, partition, role) -> the loads of its first replica of that role."""
    out: dict[tuple[str, str, str], dict[str, float]] = {}
    for part in state["Partitions"]:
        for replica in part["Replicas"]:
            key = (part["ServiceName"], str(part["PartitionId"]), str(replica["Role"]))
            out.setdefault(key, dict(replica.get("Loads") or {}))
    return out


def _moved(before: Json, after: Json) -> int:
    """Replicas on a node their partition had none on the period before (SF's moves and builds)."""
    old = {
        (p["ServiceName"], str(p["PartitionId"])): {r["NodeName"] for r in p["Replicas"]} for p in before["Partitions"]
    }
    return sum(
        len({r["NodeName"] for r in p["Replicas"]} - old[(p["ServiceName"], str(p["PartitionId"]))])
        for p in after["Partitions"]
        if (p["ServiceName"], str(p["PartitionId"])) in old
    )


def _summary(work: Import, periods: list[Period], read: int) -> list[str]:
    """The import report: the recording, what was carried, what was not, the gaps."""
    carried = ", ".join(f"{k} {n}" for k, n in sorted(work.carried.items()))
    lines = [
        f"recording: {len(periods)} periods from {iso(periods[0].time)} to {iso(periods[-1].time)}",
        f"events: {read} read from the EventStore; timeline: {len(work.events)} events ({carried})",
        f"SF's placement: {work.moved} replicas on a node their partition was not on the period before",
    ]
    if work.inferred:
        said = ", ".join(f"{k} {n}" for k, n in sorted(work.inferred.items()))
        lines.append(f"inferred from the periods (no event said it): {said}")
    lines += [f"not carried: {why}: {n}" for why, n in sorted(work.left.items())]
    return lines + work.report
