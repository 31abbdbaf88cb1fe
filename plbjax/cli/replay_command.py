"""`plbjax-replay`'s job: the timeline (with the command line's settings and thresholds) played on
the replay's face, the record written (with SF's observed day beside it when `observed` names one),
its story or a sweep job's one line printed."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hydra.core.hydra_config import HydraConfig

from plbjax import anneal
from plbjax.cli.outputs import job_command, sweeping
from plbjax.cli.plan_command import COMMAND, threshold_overrides
from plbjax.cli.signals import stop_on_signals
from plbjax.config import ReplayConfig
from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.version import VERSION

if TYPE_CHECKING:
    from plbjax.sf import ClusterState


def with_overrides(timeline, cfg: ReplayConfig):
    """`timeline` with its initial state's Settings and metric thresholds replaced where the config
    sets them (`settings.<SF name>`, `balancing.*`: what sweeps vary); a bad setting exits 2 naming it."""
    if not _overrides(cfg):
        return timeline
    return dataclasses.replace(timeline, state=overridden(timeline.state.document, cfg))


def _overrides(cfg: ReplayConfig) -> bool:
    balancing = cfg.balancing
    return bool(cfg.settings) or balancing.threshold is not None or balancing.activity_threshold is not None


def overridden(given: dict, cfg: ReplayConfig, source: str = "state") -> ClusterState:
    """The state document `given` parsed, with the config's settings and thresholds put in."""
    from plbjax.sf import parse_state
    from plbjax.sf.replay import with_settings

    if not _overrides(cfg):
        return parse_state(given, source)
    doc = with_settings(given, cfg.settings) if cfg.settings else given
    metrics = parse_state(doc, source).metric_names()
    return parse_state({**doc, **threshold_overrides(metrics, cfg.balancing)}, source)


def load_observed(cfg: ReplayConfig) -> tuple[tuple[float, str, ClusterState], ...]:
    """SF's observed day `cfg.observed` (plbjax-import's ``*.sf-day.json``, docs/contract.md): each
    period's (Time, Utc, State), its state with the config's settings and thresholds put in (the
    replay's yardstick); () without one. BadInput naming `observed`, the file and the key."""
    if cfg.observed is None:
        return ()
    where = f"observed: {cfg.observed}"
    try:
        doc = json.loads(Path(cfg.observed).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{where}: cannot read SF's observed day: {exc}") from None
    periods = doc.get("Periods") if isinstance(doc, dict) else None
    if not isinstance(periods, list) or not periods:
        raise BadInput(f"{where}: Periods: required, a list of {{Time, Utc, State}} (plbjax-import writes it)")
    out: list[tuple[float, str, ClusterState]] = []
    for i, item in enumerate(periods):
        at = f"{where}: Periods[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("State"), dict):
            raise BadInput(f"{at}.State: required, a state document")
        time = item.get("Time")
        if isinstance(time, bool) or not isinstance(time, int | float) or time < 0:
            raise BadInput(f"{at}.Time: {time!r} is not seconds from the timeline's start (a number >= 0)")
        if out and time <= out[-1][0]:
            raise BadInput(f"{at}.Time: {time} is not after the period before's {out[-1][0]:g}")
        try:
            out.append((float(time), str(item.get("Utc", "")), overridden(item["State"], cfg, f"{at}.State")))
        except BadInput as exc:
            raise BadInput(f"{at}.State: {exc}") from None
    return tuple(out)


def run_replay(cfg: ReplayConfig, run_dir: Path) -> dict:
    """Load the timeline, play it, write the record (to `cfg.out`, else the run directory); its summary.
    Progress goes to stderr every few seconds. A SIGINT or SIGTERM stops the simulated clock: the
    record up to there is written (summary `Interrupted`), then the run exits 128 + the signal's
    number (130, 143; a sweep's job just ends with its record)."""
    from plbjax.provenance import environment, provenance
    from plbjax.sf.replay import ReplayProgress, engine, load_timeline, replay, story, summary, write_outputs

    anneal.enable_compilation_cache()
    command = job_command(COMMAND, "plbjax-replay")
    made = provenance(VERSION, environment(), cfg.timeline, dataclasses.asdict(cfg), command, cfg.search.seed)
    timeline = with_overrides(load_timeline(cfg.timeline), cfg)
    observed = load_observed(cfg)
    beside = (observed, engine(cfg.search)[1]) if observed else None  # a probe on a session of its own
    outs = [Path(cfg.out)] if cfg.out else [run_dir]
    if cfg.out and sweeping():  # every job its own folder; the summary reads the jobs'
        outs = [run_dir, Path(cfg.out) / run_dir.name]
    stopping = "stopping the simulated clock; writing the record up to there (a second signal exits at once)"
    with stop_on_signals("plbjax-replay", stopping, None if cfg.out else run_dir) as signals:
        plans: list[dict] | None = [] if cfg.record.plans else None
        record = replay(
            timeline,
            *engine(cfg.search, rounds=cfg.rounds, documents=plans),
            seed=cfg.search.seed,
            progress=ReplayProgress(timeline.duration),
            stop=anneal.STOP.is_set,
        )
    for out in outs:
        write_outputs(record, out, plans or (), made, beside)
    result = summary(record)
    told = "plbjax-replay: " + "\n  ".join([*story(record, beside), f"Written to {', '.join(map(str, outs))}."])
    if sweeping():  # one line a job; the story in the job's folder
        write_text(run_dir / "summary.txt", told + "\n")
        overrides = " ".join(HydraConfig.get().overrides.task)
        print(
            f"plbjax-replay: job {run_dir.name} ({overrides}): time-averaged AvgStdDev "
            f"{result['TimeAveragedAvgStdDev']:.4f}, {result['CumulativeMovements']} movement(s), "
            f"{result['Seconds']:.1f} s" + (", interrupted" if result.get("Interrupted") else ""),
            flush=True,
        )
    else:
        print(told)
    if signals.received and not sweeping():
        sys.exit(128 + signals.received[0])
    return result
