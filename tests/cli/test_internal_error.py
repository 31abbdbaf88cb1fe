"""An unexpected error outside a sweep (a defect, not bad input): one line naming it and where its
traceback went, the traceback in the run directory, exit status 1; no traceback on the console."""

from __future__ import annotations

import signal
import sys
import threading

import pytest
from paths import ROOT

from plbjax import cli
from plbjax.cli import jobs
from plbjax.sf._plan import planning

EXAMPLE = ROOT / "examples" / "small.yaml"


def test_an_unexpected_error_is_one_line_and_its_traceback_a_file(tmp_path, monkeypatch, capsys):
    def broken(state):
        raise RuntimeError("deep down\nand more")

    monkeypatch.setattr(planning, "governed_encoding", broken)
    monkeypatch.setattr(jobs, "JOB_STARTED", threading.Event())
    monkeypatch.setattr(sys, "argv", ["plbjax", str(EXAMPLE), f"hydra.run.dir={tmp_path / 'run'}"])
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # main() sets its own
    try:
        with pytest.raises(SystemExit) as exited:
            cli.main()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert exited.value.code == 1
    err = capsys.readouterr().err
    path = tmp_path / "run" / jobs.TRACEBACK
    assert err.splitlines() == [f"plbjax: internal error: RuntimeError: deep down (traceback in {path})"]
    written = path.read_text()
    assert written.startswith("Traceback (most recent call last):") and "in broken" in written
    assert written.rstrip().endswith("RuntimeError: deep down\nand more")
