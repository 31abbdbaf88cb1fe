"""The replay with the real engine holds what each plan predicts (issue 31): a plan's LoadsAfter are
the node loads once its actions are applied, so a balanced cluster left steady stays put and the
bundled timelines replay without ping-pong."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from paths import ROOT

from plbjax import SearchConfig, load_state
from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.engine import EnginePlanner, EngineProbe
from plbjax.sf.replay.scenarios import diurnal
from plbjax.sf.replay.types import FULL

EXAMPLES = ROOT / "examples"
SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=500, seconds=None, block_steps=250)


@dataclasses.dataclass(frozen=True)
class Recording(EnginePlanner):
    """EnginePlanner keeping every plan it made."""

    plans: list = dataclasses.field(default_factory=list)

    def plan(self, state_doc, phase, node_type, seed, frozen, effort=FULL):
        plan = super().plan(state_doc, phase, node_type, seed, frozen, effort)
        self.plans.append(plan)
        return plan


def _play(timeline: dict):
    planner = Recording(SEARCH)
    probe = EngineProbe(planner.session)
    return replay(parse_timeline(timeline, EXAMPLES / "timelines"), planner, probe, seed=0), planner.plans


def ping_pong(record) -> list[tuple]:
    """Actions undoing an earlier one of the same partition (a move or swap back) with no timeline
    event in between: churn without a cause."""
    events = sorted({r.time for r in record.rows if r.trigger == "Event"})
    done: set[tuple] = set()
    back, seen = [], 0
    for a in record.actions:
        while seen < len(events) and events[seen] <= a["Time"]:
            done, seen = set(), seen + 1  # the cluster changed: a move back may be called for
        key = (a["ServiceName"], str(a["PartitionId"]), a["Action"][:4])
        if (*key, a["TargetNode"], a["SourceNode"]) in done:
            back.append((a["Time"], *key, a["SourceNode"], a["TargetNode"]))
        done.add((*key, a["SourceNode"], a["TargetNode"]))
    return back


@pytest.fixture(scope="module")
def steady():
    """small.yaml with the diurnal generator's first load reports (primaries heavier than their
    secondaries), then nothing for two minutes."""
    timeline = diurnal(load_state(EXAMPLES / "small.yaml").document)
    return _play(timeline | {"Events": [e for e in timeline["Events"] if e["Time"] == 0], "Duration": 120})


@pytest.mark.slow
def test_every_plan_predicts_the_loads_the_replay_then_holds(steady):
    """Each round's plan (its Nodes' LoadsAfter) against the probe's node loads once its actions are
    applied (ActionSeconds 0: at once): swaps included, the load follows the role."""
    record, plans = steady
    rounds = [r for r in record.rows if r.trigger != "Event"]
    assert len(rounds) == len(plans) and any(a["Action"] == "SwapPrimarySecondary" for a in record.actions)
    for row, plan in zip(rounds, plans):
        for node in plan.document()["Nodes"]:
            held = row.needs.node_loads[node["NodeName"]]
            assert node["LoadsAfter"] == pytest.approx({m: held[m] for m in node["LoadsAfter"]}, abs=1e-3), row.time


@pytest.mark.slow
def test_a_balanced_cluster_left_steady_sees_no_further_movement(steady):
    record, _ = steady
    first = min(a["Time"] for a in record.actions)
    assert {a["Time"] for a in record.actions} == {first} and not ping_pong(record)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small-diurnal.yaml", "small-fd-failure.yaml"])
def test_bundled_timelines_replay_without_ping_pong(name):
    record, _ = _play(yaml.safe_load((EXAMPLES / "timelines" / name).read_text()))
    assert record.actions and not ping_pong(record)


@pytest.mark.slow
def test_a_generated_diurnal_day_replays_without_ping_pong():
    """`plbjax-generate timeline diurnal --state examples/small.yaml` (every 15 minutes), its first hour."""
    timeline = diurnal(load_state(EXAMPLES / "small.yaml").document)
    record, _ = _play(timeline | {"Events": [e for e in timeline["Events"] if e["Time"] < 3600], "Duration": 3600})
    assert record.actions and not ping_pong(record)
