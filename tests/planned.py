"""Clusters planned by the installed plbjax CLI, for the live tests: a short search bound by steps,
not a clock, so the plan is the same on a loaded machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

from plbjax.sf.live import import_main

DUMPS = Path(__file__).parent / "data" / "sf-dump"


def plan_state(work: Path, steps: int = 2000) -> Path:
    """work/state.json planned into work/plan.json; the plan's path."""
    out, state = work / "plan.json", work / "state.json"
    command = ["plbjax", f"state={state}", f"out={out}", "search.seconds=null", f"search.steps={steps}"]
    subprocess.run([*command, f"hydra.run.dir={work / 'run'}"], check=True, capture_output=True, text=True, timeout=600)
    return out


def plan_dump(dump: str, work: Path) -> Path:
    """The bundled dump tests/data/sf-dump/`dump` imported into work/state.json and planned."""
    import_main([str(DUMPS / dump), "-o", str(work / "state.json")])
    return plan_state(work)
