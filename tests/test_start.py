"""Commands that search nothing start at once (issue 58): `--version`, `--help` and the runs of
`plbjax-import`, `plbjax-export`, `plbjax-dump`, `plbjax-apply` (its steps listed) and
`plbjax-generate` (a state) never import JAX, each checked in a fresh interpreter that runs the
command's entry point from plbjax.console_scripts. The public names of `plbjax` and `plbjax.sf`,
imported on first use, are those of the modules that define them. (How long each takes is measured
by scripts/bench_start.py, not here.)"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

DATA = ROOT / "tests" / "data"
RUN = """
import sys
sys.argv = [{prog!r}, *{args!r}]
from plbjax import console_scripts
try:
    code = console_scripts.{entry}()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print()
print("START", code or 0, "jax" in sys.modules, "jaxlib" in sys.modules)
"""


def _started(prog: str, *args: str) -> tuple[int, bool]:
    """(exit status, whether jax or jaxlib was imported) of `prog ARGS` run through its entry point."""
    code = RUN.format(prog=prog, args=list(args), entry=prog.replace("-", "_"))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )
    last = done.stdout.strip().splitlines()[-1].split() if done.stdout.strip() else []
    assert last[:1] == ["START"], done.stdout[-2000:] + done.stderr[-2000:]
    return int(last[1]), "True" in last[2:]


ARGPARSE_COMMANDS = ["plbjax-export", "plbjax-import", "plbjax-apply", "plbjax-dump", "plbjax-generate"]


@pytest.mark.parametrize("prog", ["plbjax", "plbjax-replay", *ARGPARSE_COMMANDS])
def test_version_imports_no_jax(prog):
    assert _started(prog, "--version") == (0, False)


@pytest.mark.parametrize(
    "prog",
    [
        *ARGPARSE_COMMANDS,
        "plbjax-roadef",
        "plbjax",
        "plbjax-replay",
    ],
)
def test_help_imports_no_jax(prog):
    assert _started(prog, "--help") == (0, False)


def test_import_export_and_generate_import_no_jax(tmp_path: Path):
    """A dump imported, a plan exported in each format, a state generated: no JAX."""
    state = tmp_path / "state.json"
    assert _started("plbjax-import", str(DATA / "sf-dump" / "small"), "-o", str(state)) == (0, False)
    assert state.is_file()
    for fmt in ("sfctl", "powershell", "rest"):
        script = tmp_path / f"plan-{fmt}"
        assert _started("plbjax-export", str(DATA / "pinned" / "example.json"), "--format", fmt, "-o", str(script)) == (
            0,
            False,
        )
        assert script.is_file()
    generated = tmp_path / "generated.yaml"
    assert _started("plbjax-generate", "--nodes", "5", "--services", "3", "-o", str(generated)) == (0, False)
    assert generated.is_file()


def test_dump_and_apply_import_no_jax(tmp_path: Path):
    """A simulated cluster dumped, a plan's steps listed (`plbjax-apply --dry-run`): no JAX."""
    from plbjax.sf.live.simulator import Simulator

    plan = tmp_path / "plan.json"
    plan.write_text((DATA / "pinned" / "example.json").read_text())
    assert _started("plbjax-apply", str(plan), "--dry-run") == (0, False)
    with Simulator.from_dump(DATA / "sf-dump" / "small").serve() as endpoint:
        dump = tmp_path / "dump"
        assert _started("plbjax-dump", "--endpoint", endpoint, "--insecure", "-o", str(dump)) == (0, False)
    assert (dump / "nodes.json").is_file()


def test_the_threads_an_import_starts_leave_signals_to_the_main_thread():
    """numpy's first import after plbjax's runs with SIGINT and SIGTERM blocked: every thread it
    starts holds both blocked (/proc: SigBlk), the main thread neither."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc")
    code = """
import os, plbjax, numpy
bits = (1 << 1) | (1 << 14)  # SIGINT (2), SIGTERM (15)
for task in os.listdir("/proc/self/task"):
    status = open(f"/proc/self/task/{task}/status").read()
    blocked = int(next(l for l in status.splitlines() if l.startswith("SigBlk:")).split()[1], 16)
    print("main" if int(task) == os.getpid() else "thread", blocked & bits == bits, blocked & bits == 0)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    rows = [line.split() for line in done.stdout.splitlines()]
    assert done.returncode == 0 and ["main", "False", "True"] in rows, done.stdout + done.stderr
    assert all(blocked == "True" for who, blocked, _ in rows if who == "thread"), rows


@pytest.mark.parametrize("face", ["plbjax", "plbjax.sf"])
def test_every_public_name_is_its_modules(face):
    """Each name of `__all__` resolves, on first use, to the object its home module defines."""
    module = importlib.import_module(face)
    homes = module._HOMES
    assert set(homes) == set(module.__all__)
    for name in module.__all__:
        home = homes[name] if face == "plbjax" else f"plbjax.sf.{homes[name]}"
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
