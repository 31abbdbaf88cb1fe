"""Every console script teaches itself: --help with examples; plbjax-generate lists its timeline
kinds; plbjax-roadef says where its time limit went."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from paths import ROOT

ROOT = ROOT
ROADEF = ROOT / "tests" / "data" / "roadef"
MARGINS = 2.5  # plbjax-roadef's MARGIN and SEARCH_MARGIN, and the time to print
SCRIPTS = {  # console script -> the module whose main() it runs
    "plbjax-generate": "plbjax.generate_cli",
    "plbjax-roadef": "plbjax.roadef.cli",
    "plbjax-import": "plbjax.sf.live.reading.importer",
    "plbjax-dump": "plbjax.sf.live.reading.dump",
    "plbjax-export": "plbjax.sf.live.export",
    "plbjax-apply": "plbjax.sf.live.apply",
    "plbjax-compare": "plbjax.compare",
}


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    code = f"import sys; from {module} import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_argparse_script_help_gives_three_examples(script):
    done = _run(SCRIPTS[script], "--help")
    assert done.returncode == 0, done.stderr
    examples = done.stdout.split("examples:\n", 1)[1].splitlines()
    assert sum(line.startswith(f"  {script} ") for line in examples) == 3, done.stdout


def test_generate_help_lists_the_timeline_kinds_with_their_options():
    from plbjax.sf.replay.generate import KINDS, options

    done = _run("plbjax.generate_cli", "--help")
    for kind in KINDS:
        line = next(line for line in done.stdout.splitlines() if line.startswith(f"  {kind}: "))
        assert all(f"{name}=" in line for name in options(kind)), line


def test_roadef_reports_where_the_time_limit_went(tmp_path):
    """Start-up, compilation and search, and their total within the limit; the search has what
    start-up and compilation leave, less the margins kept for writing and exiting. On a machine so
    slow that start-up and compilation take most of the limit, the search is still running at the
    limit and the line says so (no assertion on how long anything took)."""
    limit = 20
    done = _run(
        "plbjax.roadef.cli",
        *("-t", str(limit), "-p", str(ROADEF / "model_example.txt")),
        *("-i", str(ROADEF / "initial_solution_example.txt"), "-o", str(tmp_path / "new.txt")),
    )
    assert done.returncode == 0, done.stderr
    split = re.search(
        r"time: start-up ([\d.]+) s, compilation ([\d.]+) s, search ([\d.]+ s|still running at the limit); "
        rf"total ([\d.]+) s of the {limit} s limit",
        done.stderr,
    )
    assert split, done.stderr
    start, compiled, total = float(split[1]), float(split[2]), float(split[4])
    assert total <= limit, done.stderr  # the command's own clock: it ends within its limit
    if split[3].endswith(" s"):
        searched = float(split[3][:-2])
        assert start + compiled + searched <= total + 0.5, done.stderr
        assert searched >= total - start - compiled - MARGINS, done.stderr  # the rest of the limit searched
    else:
        assert start + compiled >= limit / 2, done.stderr  # only a slow start leaves the search running


def test_generate_help_gives_every_option_a_meaning():
    """Issue 38: --skew, --capacity-headroom, --load-scale (and every other cluster option) say what
    they mean, not only their default."""
    from plbjax.generate_cli import _parser

    for action in _parser()._actions:
        if action.option_strings and action.dest != "help":
            meaning = (action.help or "").split("(default:")[0].strip()
            assert len(meaning.split()) >= 2, (action.option_strings, action.help)
