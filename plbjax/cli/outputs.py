"""Run directories and outputs: paths checked before any work, a refused run's directory removed,
where a trace plot goes, and whether this job is a sweep's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from plbjax.errors import BadInput


def check_writable(path: str | None, key: str) -> None:
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


def trace_plot(plot: str) -> Path:
    """Where `plot=`'s trace goes with `record.trace=true`: `<plot stem>-trace.png` beside it."""
    path = Path(plot)
    return path.with_name(f"{path.stem}-trace.png")


def drop_run_dir(run_dir: Path) -> None:
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


def sweeping() -> bool:
    """Whether this job is one of a sweep's (`-m`)."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def job_command(command: list[str], prog: str) -> list[str]:
    """The command line a record names: as typed (`command`), or in a sweep the job's own, the
    program and the job's overrides (not the whole sweep's)."""
    if sweeping():
        return [prog, *HydraConfig.get().overrides.task]
    return command or [prog]
