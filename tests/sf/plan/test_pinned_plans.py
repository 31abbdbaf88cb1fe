"""Plans pinned byte for byte: the bundled example and generated clusters, fixed seeds and step counts.

A change that alters a plan here alters what users get; regenerate the files only on purpose
(`PLBJAX_PIN=1 python3 -m pytest tests/sf/plan/test_pinned_plans.py`) and say why in the commit.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from conftest import cluster, packed_cluster
from paths import ROOT, TESTS

from plbjax import SearchConfig, load_state, parse_state, plan

PINNED = TESTS / "data" / "pinned"
EXAMPLE = ROOT / "examples" / "small.yaml"
ONE_DEEP_CHAIN = SearchConfig(chains=1, tries=256, parallel=True, steps=2000, seconds=None, seed=3)
FOUR_CHAINS = SearchConfig(chains=4, tries=8, parallel=False, steps=1500, seconds=None, block_steps=500, seed=5)
CASES = {
    "example": lambda: (load_state(EXAMPLE), ONE_DEEP_CHAIN),
    "cluster-0": lambda: (parse_state(cluster(0)), FOUR_CHAINS),
    "cluster-1": lambda: (parse_state(cluster(1)), dataclasses.replace(ONE_DEEP_CHAIN, steps=1000)),
    "packed-7": lambda: (parse_state(packed_cluster(7)), FOUR_CHAINS),
}


EXPLAINED = {"Phase", "Reason", "Constraint", "Metric", "EnergyShare"}  # action fields the pins predate
EXPLAINED_PHASE = {"Movements", "Throttle", "ViolationsBefore", "ViolationsAfter", "Stopped"}


def _canonical(document: dict) -> str:
    """The plan without its wall-clock seconds and version, as sorted JSON; the pins predate the explanations
    (the actions' Phase and Reason, the phases' Movements, Throttle, violations and Stopped, the
    plan's Remaining), which tests/sf/plan/test_explain.py checks."""
    clocks = ("Seconds", "CompileSeconds", "PhaseSeconds", "Version")  # and the release that made it
    newer = ("Budget", "Minimal", "Phases")  # Search fields the pins predate (tests/sf/phases/test_search_*.py)
    document = dict(document, Search={k: v for k, v in document["Search"].items() if k not in clocks + newer})
    document.pop("Remaining", None)
    document["Actions"] = [{k: v for k, v in a.items() if k not in EXPLAINED} for a in document["Actions"]]
    document["Phases"] = [{k: v for k, v in p.items() if k not in EXPLAINED_PHASE} for p in document["Phases"]]
    return json.dumps(document, sort_keys=True, indent=1) + "\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_is_pinned(name):
    state, config = CASES[name]()
    text = _canonical(plan(state, config).document())
    path = PINNED / f"{name}.json"
    if os.environ.get("PLBJAX_PIN"):
        path.write_text(text)
    assert text == path.read_text(), f"the plan for {name} changed"
