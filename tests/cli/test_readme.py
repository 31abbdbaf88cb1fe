"""README's Quick start shows what the command prints for that seed (regenerate the block with
`python scripts/readme_quick_start.py --write`)."""

from __future__ import annotations

import importlib.util

import pytest
from paths import ROOT

spec = importlib.util.spec_from_file_location("readme_quick_start", ROOT / "scripts" / "readme_quick_start.py")
assert spec and spec.loader
quick_start = importlib.util.module_from_spec(spec)
spec.loader.exec_module(quick_start)


@pytest.mark.slow
def test_the_readme_quick_start_is_what_the_command_prints():
    shown = quick_start.comparable(quick_start.in_readme())
    assert quick_start.comparable(quick_start.block(quick_start.printed())) == shown


def test_the_comparison_leaves_out_the_seconds_only():
    line = "plbjax: phases run: Balancing; 7 action(s); AvgStdDev 1.3848 -> 0.9789; 3.9 s"
    assert quick_start.comparable(line) == [
        "plbjax: phases run: Balancing; 7 action(s); AvgStdDev 1.3848 -> 0.9789; ... s"
    ]
    assert quick_start.in_readme().startswith(f"$ {quick_start.COMMAND}\n")
