"""`plbjax`'s job: load the state (with the command line's settings and thresholds), plan it in a
worker thread that a signal can stop, write the plan, its plots and the report."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from plbjax import anneal
from plbjax.cli.outputs import check_writable, job_command, sweeping, trace_plot
from plbjax.cli.progress import Progress
from plbjax.cli.signals import plan_in_worker, stop_on_signals
from plbjax.cli.summary import job_line, report
from plbjax.config import BalancingConfig, RunConfig
from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.version import VERSION

COMMAND: list[str] = []  # the command line as typed (the plan's Provenance.Command)


def threshold_overrides(metrics, balancing: BalancingConfig) -> dict[str, dict[str, float]]:
    """{state document key: {metric: value}} for each threshold the config sets (what sweeps vary)."""
    given = (
        ("MetricBalancingThresholds", balancing.threshold),
        ("MetricActivityThresholds", balancing.activity_threshold),
    )
    return {key: dict.fromkeys(metrics, value) for key, value in given if value is not None}


def _with_thresholds(state, balancing: BalancingConfig):
    """`state` with every metric's balancing or activity threshold replaced, where the config sets one."""
    fields = {"MetricBalancingThresholds": "balancing_thresholds", "MetricActivityThresholds": "activity_thresholds"}
    changes = threshold_overrides(state.metric_names(), balancing)
    return dataclasses.replace(state, **{fields[key]: values for key, values in changes.items()})


def _load(cfg: RunConfig, settings: Mapping[str, Any]):
    """The state document with the command line's PLB settings (`+settings.NAME=VALUE`, checked as
    the document's own Settings are, by the same code as plbjax-replay's) and thresholds."""
    from plbjax.sf import load_state, parse_state

    state = load_state(cfg.state)
    if settings:
        from plbjax.sf.replay import with_settings  # the replay's face imports matplotlib: only when asked

        state = parse_state(with_settings(state.document, settings), str(cfg.state))
    return _with_thresholds(state, cfg.balancing)


ENGINES = {"plbjax": "parallel", "plbjax-baseline": "sequential"}  # the search each command plans with


def _planner(prog: str, state, cfg: RunConfig, progress: Progress | None) -> Callable[[Callable], Any]:
    """The work of `prog`'s engine: plan `state` (given the function that receives the unsearched
    plan's builder; the baseline has none)."""
    if ENGINES[prog] == "sequential":
        try:
            from plbjax.baseline import sequential_plan  # numba: only for the baseline
        except ModuleNotFoundError as exc:
            raise BadInput(f"{prog} needs {exc.name}: pip install 'plbjax[baseline]' installs it") from None
        return lambda unsearched: sequential_plan(state, cfg.search, VERSION)
    from plbjax.sf import plan as make_plan

    return lambda unsearched: make_plan(
        state, cfg.search, progress, unsearched=unsearched, refresh=cfg.refresh, trace=cfg.record.trace
    )


def run(
    cfg: RunConfig,
    run_dir: Path | None = None,
    settings: Mapping[str, Any] | None = None,
    resolved: dict | None = None,
    prog: str = "plbjax",
) -> dict:
    """Load, plan, write. `settings`: PLB settings replacing the state's; `resolved`: the whole
    configuration for the plan's Provenance (else `cfg`'s); `prog`: the command, whose engine plans
    (`ENGINES`: plbjax-baseline's is the sequential baseline, `plbjax.baseline.sequential_plan`).
    Raises BadInput for bad input. A signal stops the search: the best plan found is written, then
    the process exits 128 + its number (a sweep's job just ends with its plan; the baseline's
    chain is not stopped: the process exits once it ends)."""
    import jax

    from plbjax.provenance import environment, provenance

    anneal.enable_compilation_cache()
    check_writable(cfg.out, "out")
    check_writable(cfg.plot, "plot")
    state = _load(cfg, settings or {})
    config = resolved or dataclasses.asdict(cfg)
    made = provenance(VERSION, environment(), cfg.state, config, job_command(COMMAND, prog), cfg.search.seed)
    start = time.perf_counter()
    stopping = "stopping the search; writing the best plan found (a second signal exits at once)"
    with stop_on_signals("plbjax", stopping, run_dir) as signals:
        progress = Progress() if cfg.progress and not sweeping() else None
        found, running = plan_in_worker(
            _planner(prog, state, cfg, progress),
            signals,
            wait=run_dir is not None and sweeping(),
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
    told = report(plan, time.perf_counter() - start, state.notes, targets)
    if sweeping() and run_dir is not None:  # one line a job; the whole report in the job's folder
        write_text(run_dir / "summary.txt", told + "\n")
        print(job_line(plan, run_dir), flush=True)
    else:
        print(told)
    code = 128 + signals.received[0] if signals.received and not sweeping() else 0
    if running:  # the search is still compiling: the process ends without waiting for it
        sys.stdout.flush()
        logging.shutdown()
        os._exit(code)
    if code:
        sys.exit(code)
    return plan
