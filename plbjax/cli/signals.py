"""Stopping on a signal: SIGTERM or SIGINT ends the search at its next block and the best found is
written; a second signal exits at once. The plan is made in a worker thread so signals come at once."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plbjax import anneal
from plbjax.cli.outputs import drop_run_dir
from plbjax.files import discard_partial_files

if TYPE_CHECKING:
    from plbjax.sf import Plan

STOPPED: list[int] = []  # the signals that stopped a job: a sweep runs no more jobs, exits 128 + the first
AFTER_STOP_WAIT = 3.0  # seconds a stopped run waits for its search to end before writing what it has


class Signals:
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
                drop_run_dir(self.run_dir)
            os._exit(128 + signum)
        print(f"{self.prog}: {name}: {self.message}", file=sys.stderr, flush=True)
        self.received.append(signum)
        self.at = time.monotonic()
        anneal.STOP.set()


@contextmanager
def stop_on_signals(prog: str, message: str, run_dir: Path | None = None):
    """`Signals` handle SIGTERM and SIGINT in this block (in the main thread; elsewhere nothing
    is installed). Yields them."""
    signals = Signals(prog, message, run_dir)
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


def plan_in_worker(work: Callable[[Callable], Plan], signals: Signals, wait: bool) -> tuple[Plan, bool]:
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
