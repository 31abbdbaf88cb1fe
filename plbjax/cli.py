"""Command line: `plbjax state=PATH [out=FILE] [key=value ...]` (a Hydra app); `plbjax -m` sweeps."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from plbjax.annealer import enable_compilation_cache
from plbjax.config import RunConfig, from_hydra
from plbjax.errors import BadInput

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")  # the repository's conf/ (editable install)
_job_started = False


class Progress:
    """Prints a line to stderr every couple of seconds once a search has run for a few seconds."""

    def __init__(self, quiet_for: float = 3.0, every: float = 2.0):
        self.quiet_for, self.every, self.last = quiet_for, every, 0.0

    def __call__(self, done: int, total: int, elapsed: float, best_energy: float) -> None:
        if elapsed >= self.quiet_for and (elapsed - self.last >= self.every or done == total):
            self.last = elapsed
            print(f"plbjax: search {done}/{total} blocks, {elapsed:.1f} s, best energy {best_energy:.6g}",
                  file=sys.stderr, flush=True)


def configure_devices(cfg: RunConfig) -> None:
    """Device settings that must precede JAX's first use of a device: this job's share of GPU
    memory (parallel sweep jobs on one GPU) and joining a multi-host run."""
    import os

    import jax

    if cfg.memory_fraction is not None:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(cfg.memory_fraction)
    if cfg.distributed:
        jax.distributed.initialize()    # coordinator and process ids from SLURM / Open MPI / the environment


def run(cfg: RunConfig, run_dir: Path | None = None) -> dict:
    """Load, plan, write. Raises BadInput for bad input."""
    from plbjax.phases import plan as make_plan
    from plbjax.state import load_state

    enable_compilation_cache()
    state = load_state(cfg.state)
    if cfg.balancing_threshold is not None or cfg.activity_threshold is not None:
        metrics = state.metric_names()
        state = dataclasses.replace(
            state,
            balancing_thresholds={m: cfg.balancing_threshold for m in metrics}
            if cfg.balancing_threshold is not None else state.balancing_thresholds,
            activity_thresholds={m: cfg.activity_threshold for m in metrics}
            if cfg.activity_threshold is not None else state.activity_thresholds)
    start = time.perf_counter()
    plan = make_plan(state, cfg.anneal, Progress() if cfg.progress else None)
    text = json.dumps(plan, indent=2)
    import jax

    targets = [p for p in (run_dir / "plan.json" if run_dir else None, cfg.out) if p]
    if jax.process_index() != 0:        # in a multi-host run one process writes
        targets = []
    for target in targets:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(text + "\n")
    if cfg.plot:
        from plbjax.plotting import plot_node_loads

        plot_node_loads(plan, cfg.plot)
    ran = [p["Phase"] for p in plan["Phases"] if p["Ran"]]
    print(f"plbjax: phases run: {', '.join(ran) or 'none'}; {len(plan['Actions'])} action(s); "
          f"AvgStdDev {plan['Score']['Before']:.4f} -> {plan['Score']['After']:.4f}; "
          f"{time.perf_counter() - start:.1f} s")
    for phase in plan["Phases"]:
        print(f"  {phase['Phase']}: {phase['Reason']}")
    if targets:
        print("plan written to " + ", ".join(str(t) for t in targets))
    return plan


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="config")
def _app(cfg: DictConfig) -> float:
    global _job_started
    _job_started = True
    try:
        config = from_hydra(cfg)
        configure_devices(config)
        plan = run(config, Path(HydraConfig.get().runtime.output_dir))
    except BadInput as exc:
        print(f"plbjax: bad input: {exc}", file=sys.stderr)
        sys.exit(2)
    return plan["Score"]["After"]


def main() -> None:
    """Console entry point; configuration errors Hydra reports before the job starts exit with 2."""
    try:
        _app()
    except SystemExit as exc:
        if exc.code not in (0, None) and not _job_started:
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
