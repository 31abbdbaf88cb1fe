"""The cluster's story (`types.Story`) as the record tells it: every event by time, load reports by
service (which ran hot, and when), and each stretch in which SF's scheduler held a phase back (the
setting and until when), in series.csv's words, summary.json's lists and the summary's sentences."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from plbjax.sf import Phase
from plbjax.sf.replay.types import TIME_EPS, Hold, LoadChange, Needs, Row, Story

TOLD = 8  # the summary's sentences tell this many event times, services and held stretches; the files all
SPANS = 4  # stretches held for one reason that a sentence lists
NAMED = 12  # subjects of one kind at one time named in a sentence (the files name them all)


def _per_report(change: LoadChange) -> dict[str, float]:
    return {m: v / change.reports for m, v in sorted(change.loads.items())}


def _by_service(story: Story) -> dict[str, list[LoadChange]]:
    services: dict[str, list[LoadChange]] = {}
    for change in story.loads:
        services.setdefault(change.service, []).append(change)
    return services


def _grouped(story: Story) -> dict[float, dict[str, list[str]]]:
    """Subjects by event time and kind, in the order applied (load reports: by service)."""
    times: dict[float, dict[str, list[str]]] = {}
    for event in story.events:
        times.setdefault(event.time, {}).setdefault(event.kind, []).append(event.subject)
    for change in story.loads:
        times.setdefault(change.time, {}).setdefault("LoadReport", []).append(change.service)
    return dict(sorted(times.items()))


def event_texts(story: Story) -> dict[float, str]:
    """Each event time's events in words, every subject named: `NodeDown N0, N3`,
    `LoadReport fabric:/Shop/Orders 8 reports (CPU 14.2 +5%, Memory 290 -3% a report)`."""
    changes = {
        (c.time, c.service): (c, before)
        for loads in _by_service(story).values()
        for c, before in zip(loads, [None, *loads[:-1]])
    }
    texts = {}
    for time, kinds in _grouped(story).items():
        parts = []
        for kind, subjects in kinds.items():
            if kind == "LoadReport":
                parts += [f"LoadReport {_load_text(*changes[time, service])}" for service in subjects]
            else:
                parts.append(" ".join([kind, ", ".join(s for s in subjects if s)]).rstrip())
        texts[time] = "; ".join(parts)
    return texts


def _load_text(change: LoadChange, before: LoadChange | None) -> str:
    was = _per_report(before) if before is not None else {}
    values = []
    for metric, value in _per_report(change).items():
        delta = f" {100 * (value / was[metric] - 1):+.0f}%" if was.get(metric) else ""
        values.append(f"{metric} {value:.4g}{delta}")
    reports = f"{change.reports} report{'' if change.reports == 1 else 's'}"
    return f"{change.service} {reports} ({', '.join(values)} a report)"


def events_json(story: Story) -> list[dict]:
    """summary.json's ClusterEvents: {Time, Kind, Subjects} per event time and kind but load reports."""
    return [
        {"Time": round(time, 9), "Kind": kind, "Subjects": subjects}
        for time, kinds in _grouped(story).items()
        for kind, subjects in kinds.items()
        if kind != "LoadReport"
    ]


class Extreme(NamedTuple):
    """When the load a report carried was highest or lowest, and that load."""

    time: float
    per_report: float


class ServiceLoads(NamedTuple):
    """One service's load reports: how many, at how many times, from when to when, and per metric
    its (hottest, coolest) report."""

    service: str
    reports: int
    times: int
    since: float
    until: float
    metrics: dict[str, tuple[Extreme, Extreme]]

    def document(self) -> dict:
        """summary.json's entry."""
        extremes = {
            m: {
                "Hottest": {"Time": hot.time, "PerReport": hot.per_report},
                "Coolest": {"Time": cool.time, "PerReport": cool.per_report},
            }
            for m, (hot, cool) in self.metrics.items()
        }
        return {
            "Service": self.service,
            "Reports": self.reports,
            "Times": self.times,
            "From": self.since,
            "To": self.until,
            "Metrics": extremes,
        }


def service_loads(story: Story) -> list[ServiceLoads]:
    """Per service, its reports and times, and per metric when the load a report carried was
    highest and lowest."""
    out = []
    for service, changes in _by_service(story).items():
        metrics = sorted({m for c in changes for m in c.loads})
        per = [(c.time, _per_report(c)) for c in changes]
        extremes = {}
        for metric in metrics:
            seen = [(v[metric], t) for t, v in per if metric in v]
            (low, low_t), (high, high_t) = min(seen), max(seen, key=lambda s: (s[0], -s[1]))
            extremes[metric] = (Extreme(high_t, high), Extreme(low_t, low))
        reports = sum(c.reports for c in changes)
        out.append(ServiceLoads(service, reports, len(changes), changes[0].time, changes[-1].time, extremes))
    return out


def loads_json(story: Story) -> list[dict]:
    """summary.json's LoadReports (`service_loads`)."""
    return [entry.document() for entry in service_loads(story)]


def _swing(extremes: tuple[Extreme, Extreme]) -> float:
    hot, cool = extremes[0].per_report, extremes[1].per_report
    return hot / cool if cool > 0 else (math.inf if hot > 0 else 1.0)


def _hot_sentence(entry: ServiceLoads) -> str:
    """`fabric:/Shop/Orders: 96 reports at 12 times (0-79200 s), hottest at 21600 s (CPU 16.1 a
    report, 1.6x its coolest, at 64800 s)`: the metric that swung the most."""
    head = f"{entry.service}: {entry.reports} reports at {entry.times} time{'s' if entry.times > 1 else ''}"
    span = f" ({entry.since:g}-{entry.until:g} s)" if entry.times > 1 else f" ({entry.since:g} s)"
    if not entry.metrics:
        return head + span
    metric, (hot, cool) = max(entry.metrics.items(), key=lambda item: _swing(item[1]))
    if entry.times == 1:
        return f"{head}{span}, {metric} {hot.per_report:.4g} a report"
    ratio = _swing((hot, cool))
    times = "inf" if math.isinf(ratio) else f"{ratio:.2g}"
    return (
        f"{head}{span}, hottest at {hot.time:g} s ({metric} {hot.per_report:.4g} a report, "
        f"{times}x its coolest, at {cool.time:g} s)"
    )


class Held(NamedTuple):
    """A stretch a phase was held back, with the needs of the last row by its start (None: none yet)."""

    hold: Hold
    needs: Needs | None

    @property
    def metrics(self) -> list[str]:
        """The imbalanced metrics a held balancing had to balance."""
        imbalanced = self.needs.imbalanced if self.needs and self.hold.phase == Phase.BALANCING else ()
        return sorted({m for m, _ in imbalanced})

    @property
    def violations(self) -> int:
        """The replicas breaking a hard constraint a held constraint check had to fix."""
        return self.needs.violations if self.needs and self.hold.phase == Phase.CONSTRAINT_CHECK else 0

    @property
    def by_kind(self) -> Mapping[str, int]:
        """Those violations by constraint kind."""
        if self.needs is None or self.hold.phase != Phase.CONSTRAINT_CHECK:
            return {}
        return dict(sorted(self.needs.violations_by_kind.items()))

    @property
    def unplaced(self) -> int:
        """The replicas a held placement had to place."""
        return self.needs.unplaced if self.needs and self.hold.phase == Phase.PLACEMENT else 0

    def document(self) -> dict:
        """summary.json's entry: the stretch and what the phase had to do when it began."""
        h, need = self.hold, {}
        if self.needs is not None and h.phase == Phase.BALANCING:
            need = {"ImbalancedMetrics": self.metrics}
        elif self.needs is not None and h.phase == Phase.CONSTRAINT_CHECK:
            need = {"Violations": self.violations, "ViolationsByKind": self.by_kind}
        elif self.needs is not None:
            need = {"Unplaced": self.needs.unplaced}
        fields = {"Phase": str(h.phase), "Since": h.since, "Until": h.until, "ToTheEnd": h.open}
        return {**fields, "Setting": h.setting, "Why": h.why, **need}


def held(story: Story, rows: Sequence[Row]) -> list[Held]:
    """Each stretch a phase with work was held back, with what it had to do when the stretch began
    (as the last row by then says)."""
    times = [r.time for r in rows]
    out = []
    for h in story.holds:
        at = bisect.bisect_right(times, h.since + TIME_EPS) - 1
        out.append(Held(h, rows[at].needs if at >= 0 else None))
    return out


def holds_json(story: Story, rows: Sequence[Row]) -> list[dict]:
    """summary.json's Held: each stretch a phase with work was held back, its setting and why."""
    return [entry.document() for entry in held(story, rows)]


def held_at(story: Story, t: float) -> str:
    """series.csv's Held: the phases held back at `t`, by what and until when."""
    return "; ".join(
        f"{h.phase}: {h.setting} until {'the end' if h.open else f'{h.until:g} s'}"
        for h in story.holds
        if h.since <= t + TIME_EPS and (t < h.until - TIME_EPS or h.open)
    )


def _held_sentence(entries: list[Held]) -> str:
    """One sentence for the stretches held by the same setting for the same reason: their times (up
    to `SPANS`), what the phase had to do (the most it had), the setting and why."""
    first, need = entries[0].hold, ""
    violations = max(e.violations for e in entries)
    metrics = sorted({m for e in entries for m in e.metrics})
    unplaced = max(e.unplaced for e in entries)
    if violations:
        kinds = ", ".join(sorted({k for e in entries for k in e.by_kind})) or "a hard constraint"
        need = f" with {violations} replica{'s' if violations > 1 else ''} breaking {kinds}"
    elif metrics:
        need = f" with {', '.join(metrics)} imbalanced"
    elif unplaced:
        need = f" with {unplaced} replica{'s' if unplaced > 1 else ''} to place"
    stretches = [e.hold for e in entries]
    spans = [f"{h.since:g}-{h.until:g} s{' to the end' if h.open else ''}" for h in stretches]
    when = (
        spans[0] if len(spans) == 1 else f"{len(spans)} times, {sum(h.until - h.since for h in stretches):g} s in all ("
    )
    if len(spans) > 1:
        when += ", ".join(spans[:SPANS]) + (", ..." if len(spans) > SPANS else "") + ")"
    return f"{first.phase} held {when}{need}: {first.setting}: {first.why}."


def sentences(story: Story, rows: Sequence[Row]) -> list[str]:
    """The summary's sentences on the cluster: its events, its load reports, what held phases back."""
    lines = []
    grouped = [(t, k) for t, k in _grouped(story).items() if set(k) - {"LoadReport"}]
    if grouped:
        told = [
            f"{time:g} s "
            + ", ".join(
                f"{kind} {_named(subjects)}".rstrip() for kind, subjects in kinds.items() if kind != "LoadReport"
            )
            for time, kinds in grouped[:TOLD]
        ]
        more = f"; and {len(grouped) - TOLD} more event times" if len(grouped) > TOLD else ""
        lines.append(f"Cluster events: {'; '.join(told)}{more}.")
    loads = service_loads(story)
    if loads:
        more = f"; and {len(loads) - TOLD} more services" if len(loads) > TOLD else ""
        lines.append(f"Load reports: {'; '.join(_hot_sentence(e) for e in loads[:TOLD])}{more}.")
    alike: dict[tuple, list[Held]] = {}  # the stretches held by one setting for one reason
    for entry in held(story, rows):
        alike.setdefault((entry.hold.phase, entry.hold.setting, entry.hold.why), []).append(entry)
    lines += [_held_sentence(entries) for entries in list(alike.values())[:TOLD]]
    if len(alike) > TOLD:
        lines.append(f"And {len(alike) - TOLD} more reasons (summary.json's Held, series.csv's Held column).")
    return lines


def _named(subjects: list[str]) -> str:
    named = [s for s in subjects if s]
    extra = f" and {len(named) - NAMED} more" if len(named) > NAMED else ""
    return ", ".join(named[:NAMED]) + extra
