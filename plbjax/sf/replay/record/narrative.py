"""The cluster's story (`types.Story`) as the record tells it: every event by time, load reports by
service (which ran hot, and when), and each stretch in which SF's scheduler held a phase back (the
setting and until when), in series.csv's words, summary.json's lists and the summary's sentences."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from plbjax.sf import Phase
from plbjax.sf.replay.types import TIME_EPS, Hold, LoadChange, Row, Story

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


def loads_json(story: Story) -> list[dict]:
    """summary.json's LoadReports: per service, its reports and times, and per metric when the
    load a report carried was highest (Hottest) and lowest (Coolest)."""
    out = []
    for service, changes in _by_service(story).items():
        metrics = sorted({m for c in changes for m in c.loads})
        per = [(c.time, _per_report(c)) for c in changes]
        extremes = {}
        for metric in metrics:
            seen = [(v[metric], t) for t, v in per if metric in v]
            (low, low_t), (high, high_t) = min(seen), max(seen, key=lambda s: (s[0], -s[1]))
            extremes[metric] = {
                "Hottest": {"Time": high_t, "PerReport": high},
                "Coolest": {"Time": low_t, "PerReport": low},
            }
        out.append(
            {
                "Service": service,
                "Reports": sum(c.reports for c in changes),
                "Times": len(changes),
                "From": changes[0].time,
                "To": changes[-1].time,
                "Metrics": extremes,
            }
        )
    return out


def _hot_sentence(entry: dict) -> str:
    """`fabric:/Shop/Orders: 96 reports at 12 times (0-79200 s), hottest at 21600 s (CPU 16.1 a
    report, 1.6x its coolest, at 64800 s)`: the metric that swung the most."""
    head = f"{entry['Service']}: {entry['Reports']} reports at {entry['Times']} time{'s' if entry['Times'] > 1 else ''}"
    span = f" ({entry['From']:g}-{entry['To']:g} s)" if entry["Times"] > 1 else f" ({entry['From']:g} s)"
    if not entry["Metrics"]:
        return head + span

    def swing(item):
        hot, cool = item[1]["Hottest"]["PerReport"], item[1]["Coolest"]["PerReport"]
        return hot / cool if cool > 0 else (math.inf if hot > 0 else 1.0)

    metric, m = max(entry["Metrics"].items(), key=swing)
    if entry["Times"] == 1:
        return f"{head}{span}, {metric} {m['Hottest']['PerReport']:.4g} a report"
    ratio = swing((metric, m))
    times = "inf" if math.isinf(ratio) else f"{ratio:.2g}"
    return (
        f"{head}{span}, hottest at {m['Hottest']['Time']:g} s ({metric} {m['Hottest']['PerReport']:.4g} a report, "
        f"{times}x its coolest, at {m['Coolest']['Time']:g} s)"
    )


def _need(hold: Hold, rows: Sequence[Row], times: list[float]) -> dict:
    """What the held phase had to do when the stretch began, as the last row by then says
    (summary.json's fields)."""
    at = bisect.bisect_right(times, hold.since + TIME_EPS) - 1
    if at < 0:
        return {}
    needs = rows[at].needs
    if hold.phase == Phase.BALANCING:
        return {"ImbalancedMetrics": sorted({m for m, _ in needs.imbalanced})}
    if hold.phase == Phase.CONSTRAINT_CHECK:
        return {"Violations": needs.violations, "ViolationsByKind": dict(sorted(needs.violations_by_kind.items()))}
    return {"Unplaced": needs.unplaced}


def holds_json(story: Story, rows: Sequence[Row]) -> list[dict]:
    """summary.json's Held: each stretch a phase with work was held back, its setting and why."""
    times = [r.time for r in rows]
    return [
        {
            "Phase": str(h.phase),
            "Since": h.since,
            "Until": h.until,
            "ToTheEnd": h.open,
            "Setting": h.setting,
            "Why": h.why,
            **_need(h, rows, times),
        }
        for h in story.holds
    ]


def held_at(story: Story, t: float) -> str:
    """series.csv's Held: the phases held back at `t`, by what and until when."""
    return "; ".join(
        f"{h.phase}: {h.setting} until {'the end' if h.open else f'{h.until:g} s'}"
        for h in story.holds
        if h.since <= t + TIME_EPS and (t < h.until - TIME_EPS or h.open)
    )


def _held_sentence(entries: list[dict]) -> str:
    """One sentence for the stretches held by the same setting for the same reason: their times (up
    to `SPANS`), what the phase had to do (the most it had), the setting and why."""
    first, need = entries[0], ""
    violations = max(e.get("Violations", 0) for e in entries)
    metrics = sorted({m for e in entries for m in e.get("ImbalancedMetrics", ())})
    unplaced = max(e.get("Unplaced", 0) for e in entries)
    if violations:
        kinds = ", ".join(sorted({k for e in entries for k in e.get("ViolationsByKind", {})})) or "a hard constraint"
        need = f" with {violations} replica{'s' if violations > 1 else ''} breaking {kinds}"
    elif metrics:
        need = f" with {', '.join(metrics)} imbalanced"
    elif unplaced:
        need = f" with {unplaced} replica{'s' if unplaced > 1 else ''} to place"
    spans = [f"{e['Since']:g}-{e['Until']:g} s{' to the end' if e['ToTheEnd'] else ''}" for e in entries]
    when = (
        spans[0]
        if len(spans) == 1
        else f"{len(spans)} times, {sum(e['Until'] - e['Since'] for e in entries):g} s in all ("
    )
    if len(spans) > 1:
        when += ", ".join(spans[:SPANS]) + (", ..." if len(spans) > SPANS else "") + ")"
    return f"{first['Phase']} held {when}{need}: {first['Setting']}: {first['Why']}."


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
    loads = loads_json(story)
    if loads:
        more = f"; and {len(loads) - TOLD} more services" if len(loads) > TOLD else ""
        lines.append(f"Load reports: {'; '.join(_hot_sentence(e) for e in loads[:TOLD])}{more}.")
    alike: dict[tuple, list[dict]] = {}  # the stretches held by one setting for one reason
    for entry in holds_json(story, rows):
        alike.setdefault((entry["Phase"], entry["Setting"], entry["Why"]), []).append(entry)
    lines += [_held_sentence(entries) for entries in list(alike.values())[:TOLD]]
    if len(alike) > TOLD:
        lines.append(f"And {len(alike) - TOLD} more reasons (summary.json's Held, series.csv's Held column).")
    return lines


def _named(subjects: list[str]) -> str:
    named = [s for s in subjects if s]
    extra = f" and {len(named) - NAMED} more" if len(named) > NAMED else ""
    return ", ".join(named[:NAMED]) + extra
