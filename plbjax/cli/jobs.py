"""One Hydra job and how it ends: the config checked and the devices set up, then bad input exits 2
with one line, an unexpected error exits 1 with one line and its traceback in a file; in a sweep
both are written to the job's folder and the sweep goes on."""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from plbjax.cli.outputs import drop_run_dir
from plbjax.cli.signals import STOPPED
from plbjax.config import DeviceConfig, from_hydra
from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sweep import FAILED

JOB_STARTED = threading.Event()  # Hydra has started a job: what goes to stderr since is the job's
TRACEBACK = "traceback.txt"  # where an unexpected error's traceback goes, in the run directory


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


def job(cfg: DictConfig, required: str, work: Callable[[Any, Path], float], prog: str) -> float:
    """One Hydra job: the config checked, the devices set up, `work(config, run_dir)` done. Bad input
    exits 2 with one line, or, in a sweep, is written to the job's directory and the sweep goes on; so
    is any other error in a sweep (its traceback in the job's log), and the sweep exits non-zero;
    outside a sweep any other error exits 1 with one line (`internal_error`)."""
    JOB_STARTED.set()
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
            drop_run_dir(run_dir)
            sys.exit(2)
        write_text(run_dir / FAILED, f"bad input: {exc}\n")  # a sweep goes on; its summary lists the job
        return math.nan
    except Exception as exc:
        if not sweeping:
            internal_error(prog, exc, run_dir)
        logging.getLogger(prog).exception("job %s failed", run_dir.name)  # the job's log keeps the traceback
        print(f"{prog}: job {run_dir.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        write_text(run_dir / FAILED, f"error: {type(exc).__name__}: {exc}\n")
        return math.nan


def internal_error(prog: str, exc: Exception, run_dir: Path) -> NoReturn:
    """An unexpected error (a defect, not bad input): its traceback written to the run directory,
    one line on stderr naming it and the file, exit status 1."""
    path = run_dir / TRACEBACK
    write_text(path, traceback.format_exc())
    first = next(iter(str(exc).splitlines()), "")
    print(f"{prog}: internal error: {type(exc).__name__}: {first} (traceback in {path})", file=sys.stderr)
    sys.exit(1)
