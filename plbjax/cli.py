"""Command lines (Hydra apps): `plbjax state=PATH [out=FILE] [key=value ...]` plans a snapshot;
`plbjax-replay timeline=PATH [out=DIR] [key=value ...]` plays the PLB loop over a timeline; `-m` sweeps."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from plbjax import anneal, sweep
from plbjax.config import BalancingConfig, DeviceConfig, ReplayConfig, RunConfig, from_hydra, register
from plbjax.errors import BadInput, did_you_mean
from plbjax.files import discard_partial_files, write_text
from plbjax.help import keys as config_keys
from plbjax.help import register as register_help
from plbjax.sweep import FAILED
from plbjax.version import VERSION

if TYPE_CHECKING:
    from plbjax.sf import Plan

CONFIG_DIR = "pkg://plbjax.conf"  # the repository's conf/, shipped in the package (pyproject.toml)
register()
register_help()
_job_started = False
COMMAND: list[str] = []  # the command line as typed (the plan's Provenance.Command)
STOPPED: list[int] = []  # the signals that stopped a job: a sweep runs no more jobs, exits 128 + the first
REQUIRED = {"plbjax": "state", "plbjax-replay": "timeline"}  # the key a bare path on the command line names
_VALUE_FLAGS = (  # Hydra's flags that take the next word as their value
    *("-c", "--cfg", "-p", "--package", "-i", "--info", "--experimental-rerun"),
    *("-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir"),
)


class _Compilations:
    """Seconds JAX spent tracing, lowering and compiling what its persistent cache did not supply,
    from `jax.monitoring` events (a compile's cache hit comes before its duration, in one thread),
    so that a progress line can tell a search compiled now from one loaded from the cache."""

    FRESH = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
    BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

    def __init__(self):
        self.seconds, self.hit, self.hits, self.registered = 0.0, False, 0, False

    def event(self, event: str, **kwargs: str | int) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self.hit = True
            self.hits += 1

    def duration(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event in self.FRESH or (event == self.BACKEND_COMPILE and not self.hit):
            self.seconds += duration_secs
        if event == self.BACKEND_COMPILE:
            self.hit = False

    def register(self) -> None:
        if not self.registered:
            import jax

            jax.monitoring.register_event_listener(self.event)
            jax.monitoring.register_event_duration_secs_listener(self.duration)
            self.registered = True


_compilations = _Compilations()
COMPILED = 1.0  # seconds of tracing and compiling (not from the cache) that make a search 'compiled', not 'loaded'


class Progress:
    """Prints a line to stderr every couple of seconds once a search has run for a few seconds, and,
    when getting the compiled search takes more than `compile_quiet_for` seconds, that it is getting
    it ready, then which it was: compiled now (a cold run) or loaded from the cache. Each line names
    the phase searching (`phase_begins`)."""

    def __init__(self, quiet_for: float = 3.0, every: float = 2.0, compile_quiet_for: float = 1.0):
        self.quiet_for, self.every, self.last = quiet_for, every, 0.0
        self.compile_quiet_for, self.told = compile_quiet_for, threading.Event()
        self.timer: threading.Timer | None = None
        self.compiled_before, self.hits_before = 0.0, 0
        self.phase: str | None = None
        _compilations.register()

    def phase_begins(self, phase: str) -> None:
        """The plan's next phase (its lines name it)."""
        self.phase = phase

    def _say(self, text: str) -> None:
        named = f"{self.phase}: " if self.phase else ""
        print(f"plbjax: {named}{text}", file=sys.stderr, flush=True)

    def compiling(self, seconds: float | None) -> None:
        """Setting up and compiling (or loading) the search starts (None) or ended after `seconds`."""
        if seconds is None:  # a search starts: its lines come by its own clock
            self.told.clear()
            self.last = 0.0
            self.compiled_before, self.hits_before = _compilations.seconds, _compilations.hits
            self.timer = threading.Timer(self.compile_quiet_for, self._tell)
            self.timer.daemon = True
            self.timer.start()
            return
        if self.timer is not None:
            self.timer.cancel()
        if self.told.is_set():
            # from the cache: some program came from it, or little was traced and compiled (tracing
            # alone can take a second on a loaded machine, so a cache hit decides)
            hit = _compilations.hits > self.hits_before
            loaded = hit or _compilations.seconds - self.compiled_before < COMPILED
            done = f"loaded the compiled search in {seconds:.1f} s" if loaded else f"compiled in {seconds:.1f} s"
            self._say(f"{done}; searching")

    def _tell(self) -> None:
        self.told.set()
        self._say("getting the search for this cluster's shape ready (a cold run compiles it, a warm one loads it)")

    def __call__(self, done: int, total: int, elapsed: float, best_energy: float) -> None:
        if elapsed >= self.quiet_for and (elapsed - self.last >= self.every or done == total):
            self.last = elapsed
            self._say(f"search {done}/{total} blocks, {elapsed:.1f} s, best energy {best_energy:.6g}")


def configure_devices(device: DeviceConfig) -> None:
    """Device settings that must precede JAX's first use of a device: this job's share of GPU
    memory (parallel sweep jobs on one GPU) and joining a multi-host run."""
    import jax

    if device.memory_fraction is not None:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(device.memory_fraction)
    if device.distributed:
        jax.distributed.initialize()  # coordinator and process ids from SLURM / Open MPI / the environment
        print(
            f"plbjax: process {jax.process_index()} of {jax.process_count()}; the chains are split over "
            f"{jax.device_count()} devices in all ({jax.local_device_count()} here)",
            flush=True,
        )


def _check_writable(path: str | None, key: str) -> None:
    """Refuse an output path that cannot be written before any work is done."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise BadInput(f"{key}: {path} is a directory; name a file")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise BadInput(f"{key}: {path} cannot be written ({parent} is not writable)")


class _Signals:
    """SIGTERM (batch schedulers at a job's time limit) and SIGINT: the first ends the search at its
    next block (`anneal.STOP`) and the best plan found is written; the second exits at once with one
    line and status 128 + its number, leaving no output half-written and no run directory without
    its output. `received`: the signals, `at`: when the first came (time.monotonic)."""

    def __init__(self, prog: str, message: str, run_dir: Path | None):
        self.prog, self.message, self.run_dir = prog, message, run_dir
        self.received: list[int] = []
        self.at: float | None = None

    def __call__(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.received:
            print(f"{self.prog}: {name} again: exiting now", file=sys.stderr, flush=True)
            discard_partial_files()
            if self.run_dir is not None:
                _drop_run_dir(self.run_dir)
            os._exit(128 + signum)
        print(f"{self.prog}: {name}: {self.message}", file=sys.stderr, flush=True)
        self.received.append(signum)
        self.at = time.monotonic()
        anneal.STOP.set()


@contextmanager
def _stop_on_signals(prog: str, message: str, run_dir: Path | None = None):
    """`_Signals` handle SIGTERM and SIGINT in this block (in the main thread; elsewhere nothing
    is installed). Yields them."""
    signals = _Signals(prog, message, run_dir)
    anneal.STOP.clear()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    previous = {sig: signal.signal(sig, signals) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield signals
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        STOPPED.extend(signals.received[:1])


AFTER_STOP_WAIT = 3.0  # seconds a stopped run waits for its search to end before writing what it has


def _plan_in_worker(work: Callable[[Callable], Plan], signals: _Signals, wait: bool) -> tuple[Plan, bool]:
    """`work(unsearched)` (a plan) in a worker thread, so that the main thread takes signals at
    once even while the worker compiles, which cannot be interrupted: a stop the search has not
    answered within AFTER_STOP_WAIT seconds gets the plan of the prepared state, nothing searched
    (`unsearched`'s), unless the caller must `wait` (a sweep's job: the sweep goes on after it).
    Returns the plan and whether the worker is still running."""
    box: dict[str, Any] = {}
    fallback: list[Callable[[], Plan] | None] = [None]

    def target() -> None:
        try:
            box["plan"] = work(lambda build: fallback.__setitem__(0, build))
        except BaseException as exc:  # handed to the main thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="plbjax-plan", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
        build = fallback[0]
        if build and not wait and signals.at is not None and time.monotonic() - signals.at > AFTER_STOP_WAIT:
            return build(), worker.is_alive()
    if "error" in box:
        raise box["error"]
    return box["plan"], False


def _threshold_overrides(metrics, balancing: BalancingConfig) -> dict[str, dict[str, float]]:
    """{state document key: {metric: value}} for each threshold the config sets (what sweeps vary)."""
    given = (
        ("MetricBalancingThresholds", balancing.threshold),
        ("MetricActivityThresholds", balancing.activity_threshold),
    )
    return {key: dict.fromkeys(metrics, value) for key, value in given if value is not None}


def _with_thresholds(state, balancing: BalancingConfig):
    """`state` with every metric's balancing or activity threshold replaced, where the config sets one."""
    fields = {"MetricBalancingThresholds": "balancing_thresholds", "MetricActivityThresholds": "activity_thresholds"}
    changes = _threshold_overrides(state.metric_names(), balancing)
    return dataclasses.replace(state, **{fields[key]: values for key, values in changes.items()})


TABLE_ROWS = 5  # the largest actions the console summary lists


def _largest_actions(actions: list[dict]) -> list[str]:
    """The summary's table: the actions that fix or place first, then balancing's by share; each
    listed right after the plan's earlier actions on the same replica (a swap before its move)."""
    order = sorted(
        range(len(actions)),
        key=lambda i: (actions[i].get("Phase") == "Balancing", -(actions[i].get("EnergyShare") or 0), i),
    )

    def replica_of(i: int) -> tuple:
        return actions[i]["ServiceName"], str(actions[i]["PartitionId"]), actions[i]["ReplicaId"]

    listed: list[int] = []
    for i in order[:TABLE_ROWS]:
        earlier = [j for j in range(i) if replica_of(i)[2] is not None and replica_of(j) == replica_of(i)]
        listed += [j for j in [*earlier, i] if j not in listed]
    rows = [("Phase", "Action", "Replica", "From -> To", "Reason")]
    for a in (actions[i] for i in listed):
        replica = f"{a['ServiceName']}/{a['PartitionId']}/{a['ReplicaId'] if a['ReplicaId'] is not None else 'new'}"
        rows.append(
            (a.get("Phase", ""), a["Action"], replica, f"{a['SourceNode']} -> {a['TargetNode']}", a.get("Reason", ""))
        )
    widths = [max(len(str(r[k])) for r in rows) for k in range(4)]
    lines = ["  largest actions:"]
    lines += ["    " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows]
    if len(actions) > len(listed):
        lines.append(f"    ... and {len(actions) - len(listed)} more (the plan's Actions)")
    return lines


def summary(plan: dict, seconds: float) -> str:
    """The console summary of a plan: what ran and why, where each phase stopped, the largest
    actions, and what is left (metrics still imbalanced, violations by kind)."""
    ran = [p["Phase"] for p in plan["Phases"] if p["Ran"]]
    lines = [
        f"plbjax: phases run: {', '.join(ran) or 'none'}; {len(plan['Actions'])} action(s); "
        f"AvgStdDev {plan['Score']['Before']:.4f} -> {plan['Score']['After']:.4f}; {seconds:.1f} s"
    ]
    for phase in plan["Phases"]:
        lines.append(f"  {phase['Phase']}: {phase['Reason']}")
        if phase.get("Stopped"):
            lines.append(f"    -> {phase['Stopped']}")
    if plan["Actions"]:
        lines += _largest_actions(plan["Actions"])
    left = plan.get("Remaining", {})
    for metric in left.get("Imbalanced", []):
        ratio = "inf" if metric["Ratio"] is None else f"{metric['Ratio']:.2f}"
        where = f" on {metric['NodeType']}" if metric["NodeType"] else ""
        lines.append(
            f"  still imbalanced: {metric['Metric']}{where}, max/min {ratio} against threshold "
            f"{metric['BalancingThreshold']:g} ({metric['MostLoadedNode']} {metric['MaxLoad']:g}, "
            f"{metric['LeastLoadedNode']} {metric['MinLoad']:g})"
        )
        lines += [f"    - {cause}" for cause in metric["Causes"]]
    violations = left.get("Violations", [])
    counts = ", ".join(f"{v['Constraint']} {v['Count']} {v['Of'].lower()}" for v in violations)
    lines.append(f"  violations left: {counts or 'none'}")
    return "\n".join(lines)


def _load(cfg: RunConfig, settings: Mapping[str, Any]):
    """The state document with the command line's PLB settings (`+settings.NAME=VALUE`, checked as
    the document's own Settings are, by the same code as plbjax-replay's) and thresholds."""
    from plbjax.sf import load_state, parse_state
    from plbjax.sf.replay import with_settings

    state = load_state(cfg.state)
    if settings:
        state = parse_state(with_settings(state.document, settings), str(cfg.state))
    return _with_thresholds(state, cfg.balancing)


def _sweeping() -> bool:
    """Whether this job is one of a sweep's (`-m`)."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def run(
    cfg: RunConfig, run_dir: Path | None = None, settings: Mapping[str, Any] | None = None, resolved: dict | None = None
) -> dict:
    """Load, plan, write. `settings`: PLB settings replacing the state's; `resolved`: the whole
    configuration for the plan's Provenance (else `cfg`'s). Raises BadInput for bad input. A signal
    stops the search: the best plan found is written, then the process exits 128 + its number
    (a sweep's job just ends with its plan)."""
    import jax

    from plbjax.provenance import environment, provenance
    from plbjax.sf import plan as make_plan

    anneal.enable_compilation_cache()
    _check_writable(cfg.out, "out")
    _check_writable(cfg.plot, "plot")
    state = _load(cfg, settings or {})
    made = provenance(
        VERSION, environment(), cfg.state, resolved or dataclasses.asdict(cfg), COMMAND or ["plbjax"], cfg.search.seed
    )
    start = time.perf_counter()
    stopping = "stopping the search; writing the best plan found (a second signal exits at once)"
    with _stop_on_signals("plbjax", stopping, run_dir) as signals:
        progress = Progress() if cfg.progress and not _sweeping() else None
        found, running = _plan_in_worker(
            lambda unsearched: make_plan(
                state, cfg.search, progress, unsearched=unsearched, refresh=cfg.refresh, trace=cfg.record.trace
            ),
            signals,
            wait=run_dir is not None and _sweeping(),
        )
    plan = {**found.document(), "Provenance": made}
    text = json.dumps(plan, indent=2, allow_nan=False)
    targets = [p for p in (run_dir / "plan.json" if run_dir else None, cfg.out) if p]
    if jax.process_index() != 0:  # in a multi-host run one process writes
        targets = []
    for target in targets:
        write_text(target, text + "\n")
    if cfg.plot:
        from plbjax.plotting import plot_node_loads, plot_trace

        plot_node_loads(plan, cfg.plot)
        if cfg.record.trace:
            plot_trace(plan, trace_plot(cfg.plot))
    report = _report(plan, time.perf_counter() - start, state.notes, targets)
    if _sweeping() and run_dir is not None:  # one line a job; the whole report in the job's folder
        write_text(run_dir / "summary.txt", report + "\n")
        print(_job_line(plan, run_dir), flush=True)
    else:
        print(report)
    code = 128 + signals.received[0] if signals.received and not _sweeping() else 0
    if running:  # the search is still compiling: the process ends without waiting for it
        sys.stdout.flush()
        logging.shutdown()
        os._exit(code)
    if code:
        sys.exit(code)
    return plan


def trace_plot(plot: str) -> Path:
    """Where `plot=`'s trace goes with `record.trace=true`: `<plot stem>-trace.png` beside it."""
    path = Path(plot)
    return path.with_name(f"{path.stem}-trace.png")


def _report(plan: dict, seconds: float, notes: Sequence[str], targets: list) -> str:
    """The console report of a run: the plan's summary, the state's notes, how the run ended, where
    the plan went."""
    lines = [summary(plan, seconds)]
    if notes:
        more = f" (and {len(notes) - 3} more)" if len(notes) > 3 else ""
        lines.append("plbjax: note: " + "; ".join(notes[:3]) + more)
    if plan["Search"]["Interrupted"]:
        lines.append("plbjax: the run was interrupted; the plan is the best found until then (Search.Interrupted)")
    if not plan["Search"]["Minimal"]:
        lines.append("plbjax: the minimal-movement pass had no time to finish: some movements may be unneeded")
    if targets:
        lines.append("plan written to " + ", ".join(str(t) for t in targets))
    return "\n".join(lines)


def _job_line(plan: dict, run_dir: Path) -> str:
    """A sweep job's one console line: its number, what it ran with, the plan's outcome (the whole
    report is the job folder's summary.txt)."""
    overrides = " ".join(HydraConfig.get().overrides.task)
    interrupted = ", interrupted" if plan["Search"]["Interrupted"] else ""
    return (
        f"plbjax: job {run_dir.name} ({overrides}): {len(plan['Actions'])} action(s), AvgStdDev "
        f"{plan['Score']['Before']:.4f} -> {plan['Score']['After']:.4f}, {plan['Search']['Seconds']:.1f} s"
        f"{interrupted}"
    )


def _job(cfg: DictConfig, required: str, work: Callable[[Any, Path], float], prog: str) -> float:
    """One Hydra job: the config checked, the devices set up, `work(config, run_dir)` done. Bad input
    exits 2 with one line, or, in a sweep, is written to the job's directory and the sweep goes on; so
    is any other error in a sweep (its traceback in the job's log), and the sweep exits non-zero;
    outside a sweep any other error exits 1 with one line (`_internal_error`)."""
    global _job_started
    _job_started = True
    hydra_config = HydraConfig.get()
    run_dir = Path(hydra_config.runtime.output_dir)
    sweeping = hydra_config.mode == RunMode.MULTIRUN
    if STOPPED:
        write_text(run_dir / FAILED, f"not run: {signal.Signals(STOPPED[0]).name} stopped the sweep\n")
        return math.nan
    try:
        config = from_hydra(cfg, required)
        configure_devices(config.device)
        return work(config, run_dir)
    except BadInput as exc:
        print(f"{prog}: bad input: {exc}", file=sys.stderr)
        if not sweeping:
            _drop_run_dir(run_dir)
            sys.exit(2)
        write_text(run_dir / FAILED, f"bad input: {exc}\n")  # a sweep goes on; its summary lists the job
        return math.nan
    except Exception as exc:
        if not sweeping:
            _internal_error(prog, exc, run_dir)
        logging.getLogger(prog).exception("job %s failed", run_dir.name)  # the job's log keeps the traceback
        print(f"{prog}: job {run_dir.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        write_text(run_dir / FAILED, f"error: {type(exc).__name__}: {exc}\n")
        return math.nan


TRACEBACK = "traceback.txt"  # where an unexpected error's traceback goes, in the run directory


def _internal_error(prog: str, exc: Exception, run_dir: Path) -> NoReturn:
    """An unexpected error (a defect, not bad input): its traceback written to the run directory,
    one line on stderr naming it and the file, exit status 1."""
    path = run_dir / TRACEBACK
    write_text(path, traceback.format_exc())
    first = next(iter(str(exc).splitlines()), "")
    print(f"{prog}: internal error: {type(exc).__name__}: {first} (traceback in {path})", file=sys.stderr)
    sys.exit(1)


def _drop_run_dir(run_dir: Path) -> None:
    """A run that refused its input leaves no run directory: what Hydra wrote there (.hydra, the job's
    log) is removed, then the folders above it (outputs/DATE) that this leaves empty, inside the
    working directory."""
    if not run_dir.is_dir() or any(p.name != ".hydra" and p.suffix != ".log" for p in run_dir.iterdir()):
        return
    shutil.rmtree(run_dir)
    cwd = Path.cwd().resolve()
    for parent in run_dir.resolve().parents:
        if parent == cwd or cwd not in parent.parents or any(parent.iterdir()):
            break
        parent.rmdir()


def _with_overrides(timeline, cfg: ReplayConfig):
    """`timeline` with its initial state's Settings and metric thresholds replaced where the config
    sets them (`settings.<SF name>`, `balancing.*`: what sweeps vary); a bad setting exits 2 naming it."""
    from plbjax.sf import parse_state
    from plbjax.sf.replay import with_settings

    balancing = cfg.balancing
    if not cfg.settings and balancing.threshold is None and balancing.activity_threshold is None:
        return timeline
    doc = with_settings(timeline.state, cfg.settings) if cfg.settings else timeline.state
    metrics = parse_state(doc, "state").metric_names()
    return dataclasses.replace(timeline, state={**doc, **_threshold_overrides(metrics, balancing)})


def run_replay(cfg: ReplayConfig, run_dir: Path) -> dict:
    """Load the timeline, play it, write the record (to `cfg.out`, else the run directory); its summary.
    Progress goes to stderr every few seconds. A SIGINT or SIGTERM stops the simulated clock: the
    record up to there is written (summary `Interrupted`), then the run exits 128 + the signal's
    number (130, 143; a sweep's job just ends with its record)."""
    from plbjax.sf.replay import ReplayProgress, engine, load_timeline, replay, story, summary, write_outputs

    anneal.enable_compilation_cache()
    timeline = _with_overrides(load_timeline(cfg.timeline), cfg)
    outs = [Path(cfg.out)] if cfg.out else [run_dir]
    if cfg.out and HydraConfig.get().mode == RunMode.MULTIRUN:  # every job its own folder; the summary reads the jobs'
        outs = [run_dir, Path(cfg.out) / run_dir.name]
    stopping = "stopping the simulated clock; writing the record up to there (a second signal exits at once)"
    with _stop_on_signals("plbjax-replay", stopping, None if cfg.out else run_dir) as signals:
        plans: list[dict] | None = [] if cfg.record.plans else None
        record = replay(
            timeline,
            *engine(cfg.search, rounds=cfg.rounds, documents=plans),
            seed=cfg.search.seed,
            progress=ReplayProgress(timeline.duration),
            stop=anneal.STOP.is_set,
        )
    for out in outs:
        write_outputs(record, out, plans or ())
    result = summary(record)
    told = "plbjax-replay: " + "\n  ".join([*story(record), f"Written to {', '.join(map(str, outs))}."])
    if _sweeping():  # one line a job; the story in the job's folder
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
    if signals.received and not _sweeping():
        sys.exit(128 + signals.received[0])
    return result


def _plain(cfg: DictConfig) -> dict[str, Any]:
    """`cfg` as plain dicts, lists and values, interpolations resolved."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    return {str(key): value for key, value in plain.items()}


def _take_settings(cfg: DictConfig) -> dict[str, Any]:
    """`+settings.NAME=VALUE` taken out of `cfg` (plbjax's schema has no `settings`: they go into
    the state document's Settings, where they are checked)."""
    with open_dict(cfg):
        settings = cfg.pop("settings", None)
    return _plain(settings) if isinstance(settings, DictConfig) else {}


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="config")
def _app(cfg: DictConfig) -> float:
    resolved = _plain(cfg)
    settings = _take_settings(cfg)
    return _job(
        cfg, "state", lambda config, run_dir: run(config, run_dir, settings, resolved)["Score"]["After"], "plbjax"
    )


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="replay")
def _replay_app(cfg: DictConfig) -> float:
    return _job(
        cfg, "timeline", lambda config, run_dir: run_replay(config, run_dir)["TimeAveragedAvgStdDev"], "plbjax-replay"
    )


class _HeldStderr(io.TextIOBase):
    """stderr that holds what is written until the job starts (then passes everything through), so
    that a configuration error Hydra reports before it can be cut to one line."""

    def __init__(self, stream):
        self.stream, self.held = stream, []

    def write(self, text: str) -> int:
        if _job_started:
            if self.held:
                self.stream.write("".join(self.held))
                self.held = []
            return self.stream.write(text)
        self.held.append(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def one_line(self, prog: str) -> str:
        """What was held, as one line (and nothing held any more)."""
        text, self.held = "".join(self.held), []
        unknown = re.search(r"Could not override '([^']+)'", text)
        if unknown:
            if unknown[1].startswith("settings."):
                hint = f" (a PLB setting is added: +{unknown[1]}=VALUE)"
            else:
                hint = did_you_mean(unknown[1], config_keys(prog))
            return f"{unknown[1]}: unknown config key{hint}"
        group = re.search(r"Could not find '([\w/]+)/([^']+)'\n\nAvailable options in '[^']+':\n((?:\t.*\n)*)", text)
        if group:
            options = group[3].split()
            hint = did_you_mean(group[2], options)
            return f"{group[1]}={group[2]}: no such {group[1]}{hint} (one of: {', '.join(options)})"
        typed = re.search(r"Error merging override ([^=\s]+)=.*?\n(.+)", text)
        if typed:
            return f"{typed[1]}: {typed[2].strip()}"
        lines = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and "HYDRA_FULL_ERROR" not in line and not line.startswith("See https")
        ]
        return "; ".join(lines[:2]) if lines else "bad command line"


def _plain_forms(argv: list[str], required: str) -> list[str]:
    """`argv` with the forms a person tries first made Hydra's: a bare path (`plbjax STATE`) as
    `state=STATE`, `preset=NAME` as `+preset=NAME`; BadInput for a word that is neither."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith("preset="):
            arg = "+" + arg
        elif not (arg.startswith(("-", "+", "~")) or "=" in arg or (i and argv[i - 1] in _VALUE_FLAGS)):
            if any(a.startswith(f"{required}=") for a in out + argv):
                raise BadInput(f"{arg}: not key=value (the {required} is named once, as {required}=PATH)")
            arg = f"{required}={arg}"
        out.append(arg)
    return out


def _main(app: Callable[[], Any], prog: str) -> None:
    """A console entry point; configuration errors Hydra reports before the job starts exit with 2
    and one line; a signal outside the job's search exits at once with one line."""

    def quit_now(signum, frame) -> None:
        print(f"{prog}: {signal.Signals(signum).name}: exiting now", file=sys.stderr, flush=True)
        discard_partial_files()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, quit_now)
    if "--version" in sys.argv[1:]:
        print(f"{prog} {VERSION}")
        sys.exit(0)
    COMMAND[:] = [prog, *sys.argv[1:]]
    held = _HeldStderr(sys.stderr)
    multirun = any(arg in ("-m", "--multirun") for arg in sys.argv[1:])  # sweep workers inherit no redirect
    try:
        sys.argv[1:] = _plain_forms(sys.argv[1:], REQUIRED[prog])
    except BadInput as exc:
        print(f"{prog}: bad config: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        with redirect_stderr(sys.stderr if multirun else held):
            app()
        if multirun and STOPPED:
            sys.exit(128 + STOPPED[0])
        if multirun and sweep.FAILURES:
            print(f"{prog}: {len(sweep.FAILURES)} job(s) failed: {', '.join(sweep.FAILURES)}", file=sys.stderr)
            sys.exit(1)
    except SystemExit as exc:
        if exc.code not in (0, None) and not _job_started:
            print(f"{prog}: bad config: {held.one_line(prog)}", file=sys.stderr)
            sys.exit(2)
        raise
    finally:
        if held.held:
            sys.stderr.write("".join(held.held))


def main() -> None:
    """`plbjax`."""
    _main(_app, "plbjax")


def replay_main() -> None:
    """`plbjax-replay`."""
    _main(_replay_app, "plbjax-replay")


if __name__ == "__main__":
    main()
