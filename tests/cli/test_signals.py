"""Exit statuses on signals, in real processes: every console command exits 130 on SIGINT and 143 on
SIGTERM (128 + the signal's number), with one line and no traceback (`plbjax` after writing the best
plan found until then: tests/cli/test_cli.py, tests/cli/test_stops.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from paths import ROOT

ROOT = ROOT


def _command(entry: str, *args: str, cwd) -> subprocess.Popen:
    """A console script as pyproject's entry point runs it: sys.exit(entry()), started as a shell
    starts a background job, with SIGINT ignored (Python then keeps ignoring it unless told)."""
    code = f"import sys; from plbjax.console_scripts import {entry}; sys.exit({entry}())"
    ignoring = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"
    )
    return subprocess.Popen(
        [sys.executable, "-c", ignoring, sys.executable, "-c", code, *args],
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads Linux's /proc")
def test_threads_started_by_the_imports_leave_the_signals_to_the_main_thread():
    """jaxlib starts a thread at import; with SIGINT and SIGTERM blocked there, the kernel hands
    them to the main thread, which raises at once even blocked in a socket read (plbjax-dump)."""
    code = (
        "import os, plbjax.sf.live.reading.dump\n"
        "for t in sorted(os.listdir('/proc/self/task'), key=int)[1:]:\n"
        "    print(next(l for l in open(f'/proc/self/task/{t}/status') if l.startswith('SigBlk')).split()[1])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    masks = [int(m, 16) for m in done.stdout.split()]
    wanted = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    assert masks and all(m & wanted == wanted for m in masks), done.stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_plbjax_dump_with_128_plus_its_number(signum, tmp_path):
    """plbjax-dump waits on a cluster that accepts its connection and never answers: the signal comes
    while the command is at work, not while Python starts."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        connected = threading.Event()
        accepted: list[socket.socket] = []

        def accept() -> None:
            accepted.append(server.accept()[0])
            connected.set()

        threading.Thread(target=accept, daemon=True).start()
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        process = _command("plbjax_dump", "--endpoint", endpoint, "--insecure", "-o", "dump", cwd=tmp_path)
        assert connected.wait(120), process.communicate(timeout=60)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        for conn in accepted:
            conn.close()
    assert process.returncode == 128 + signum, stderr
    assert stderr.strip().splitlines()[-1] == f"plbjax-dump: {signal.Signals(signum).name}: exiting"
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_sigint_during_a_sweep_ends_it_with_130_after_its_summary(tmp_path):
    """Ctrl-C in a sweep's first job (a 60-second search): that job writes its best plan, the next is
    not run, the summary lists both, and the sweep exits 130."""
    import csv
    import time

    example = ROOT / "examples" / "small.yaml"
    sweep = tmp_path / "sweep"
    args = ["-m", f"state={example}", "search.seconds=60", "search.steps=null", "search.seed=0,1"]
    process = _command("plbjax", *args, f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    deadline = time.monotonic() + 300
    while not (sweep / "0" / ".hydra" / "overrides.yaml").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(10)  # into job 0's search (a warm or cold compile, then 60 s of search)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [r["status"] for r in rows] == ["interrupted", "not run: SIGINT stopped the sweep"]
    assert "Traceback" not in stderr and "sweep summary written to" in stdout
