"""What bounds a search (`Search.Budget`: a `search.seconds` given is the budget, the defaults are
step-bound) and which plbjax made an output (`--version`, the plan's `Search.Version`)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import yaml
from paths import ROOT

from plbjax.sf import SearchConfig
from plbjax.version import VERSION

ROOT = ROOT


def test_the_defaults_are_bound_by_steps():
    search = SearchConfig().resolved("cpu", 100)
    assert search.seconds is None and search.steps == 10 * search.block_steps and search.budget == "steps"


@pytest.mark.parametrize(
    ("replicas", "chains", "block_steps", "blocks"),
    [(22, 8, 256, 10), (100, 8, 256, 10), (1_000, 2, 512, 40), (10_000, 1, 1_000, 20), (100_000, 1, 1_000, 196)],
)
def test_a_cpu_block_holds_proposals_in_proportion_to_the_cluster(replicas, chains, block_steps, blocks):
    """A block (one temperature) is 64 proposals a replica on a CPU, in power-of-two steps from 256
    to 1,000; the steps are as many as before (20 a replica up to 20,000, 10 blocks at least), so
    shorter blocks are more of them."""
    search = SearchConfig().resolved("cpu", replicas)
    assert (search.chains, search.block_steps, search.steps // search.block_steps) == (chains, block_steps, blocks)


def test_patience_spans_half_a_step_bound_search_and_sweeps_of_the_moves():
    """A search stops early only after half its blocks (a tiny cluster's chains freeze before they
    are cold), or more where `patience` sweeps of every replica-to-node move take more blocks."""
    search = SearchConfig().resolved("cpu", 22)
    assert search.schedule_for(22, 6).patience == 5  # 10 blocks
    assert search.schedule_for(22, 6_000).patience == math.ceil(2 * 22 * 6_000 / (32 * 256))
    assert SearchConfig(seconds=5).resolved("cpu", 22).schedule_for(22, 6).patience == 2  # no planned blocks
    assert SearchConfig(patience=None).resolved("cpu", 22).schedule_for(22, 6).patience is None


def test_seconds_given_are_the_budget_and_auto_steps_no_longer_bind():
    search = SearchConfig(seconds=20).resolved("cpu", 480)
    assert search.steps is None and search.budget == "seconds"
    assert SearchConfig(seconds=20, steps=None).budget == "seconds"


def test_seconds_and_steps_given_bound_it_whichever_comes_first():
    search = SearchConfig(seconds=20, steps=3_000).resolved("gpu", 480)
    assert (search.seconds, search.steps, search.budget) == (20, 3_000, "steps or seconds")


def test_the_presets_leave_the_budget_to_the_rule():
    """A preset sets the search's shape; what bounds it stays the default (steps) or the seconds given."""
    for preset in ("cpu", "gpu"):
        keys = yaml.safe_load((ROOT / "conf" / "preset" / f"{preset}.yaml").read_text())["search"]
        assert "steps" not in keys and "seconds" not in keys


def test_steps_null_without_seconds_is_refused():
    from plbjax.errors import BadInput

    with pytest.raises(BadInput, match="search.steps: null needs search.seconds"):
        SearchConfig(steps=None)


@pytest.mark.parametrize(
    "module, prog",
    [
        ("plbjax.generate_cli", "plbjax-generate"),
        ("plbjax.roadef.cli", "plbjax-roadef"),
        ("plbjax.sf.live.reading.dump", "plbjax-dump"),
        ("plbjax.sf.live.export", "plbjax-export"),
        ("plbjax.sf.live.reading.importer", "plbjax-import"),
    ],
)
def test_every_argparse_command_prints_plbjax_version(module, prog, capsys):
    import importlib

    with pytest.raises(SystemExit) as exit:
        importlib.import_module(module).main(["--version"])
    assert exit.value.code == 0 and capsys.readouterr().out == f"{prog} {VERSION}\n"


@pytest.mark.parametrize("entry, prog", [("main", "plbjax"), ("replay_main", "plbjax-replay")])
def test_the_hydra_commands_print_plbjax_version_not_hydras(entry, prog, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", f"from plbjax.cli import {entry}; {entry}()", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout == f"{prog} {VERSION}\n", done.stderr
    assert VERSION != "unknown"  # the package is installed (its metadata gives the version)
