"""Random replays with node and service events (issue 57): the replay's state stays sound (its
invariants are checked after every event and completion: `Replay.fault`), and no Placement round
makes a partition's fault- or upgrade-domain spread worse while a node that keeps it has room.

The clusters have 26 nodes in 5 fault and 5 upgrade domains and services of 5 replicas: one node
down leaves 25, where SF's quorum-based auto-switch (T divisible by both domain counts, no more of
the service's nodes than their product) held when it counted only Up nodes, and placement put a
replica beside another in its upgrade domain that the constraint check moved once the node was back."""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Mapping

import pytest
from replay_fakes import as_doc, random_timeline

from plbjax import SearchConfig
from plbjax.sf import ClusterSpec, Phase, Role, apply_actions, generate
from plbjax.sf.replay import parse_timeline, replay
from plbjax.sf.replay.engine import engine

SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=500, seconds=None, block_steps=250)
SPEC = ClusterSpec(
    nodes=26, services=3, partitions_per_service=3, replicas_per_partition=5, stateless_fraction=0.0, skew=0.0
)


@dataclasses.dataclass
class Recording:
    """The engine's planner, keeping each round's (phase, view, actions)."""

    planner: object
    probe: object
    rounds: list = dataclasses.field(default_factory=list)

    def __call__(self, state, phase, node_type, seed, frozen, effort=None):
        planned = self.planner(state, phase, node_type, seed, frozen, effort)  # type: ignore[operator]
        self.rounds.append((phase, state, planned.actions))
        return planned


def spread_made_worse(doc: dict, actions, node_loads: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Each replica a round added into a fault or upgrade domain already holding one of its
    partition's replicas while an Up node of a domain holding none had room for it (its largest
    default load plus a fifth of the node's capacity, on every metric with a capacity)."""
    after = apply_actions(doc, actions)
    nodes = {n["NodeName"]: n for n in doc["Nodes"]}
    services = {s["ServiceName"]: s for s in doc["Services"]}
    up = [n for n, x in nodes.items() if x.get("NodeStatus", "Up") == "Up"]
    parts = {(p["ServiceName"], str(p["PartitionId"])): p for p in after["Partitions"]}
    found = []
    for a in actions:
        if not a.kind.is_add or services[a.service].get("ServiceKind") != "Stateful":
            continue
        part, service = parts[(a.service, str(a.partition))], services[a.service]
        held = {r["NodeName"] for r in part["Replicas"] if r["NodeName"] is not None}
        need = {
            m["Name"]: max(m.get("PrimaryDefaultLoad", 0), m.get("SecondaryDefaultLoad", 0))
            for m in service.get("Metrics", [])
        }

        def room(node: str) -> bool:
            caps = nodes[node].get("Capacities", {})
            loads = node_loads.get(node, {})
            return all(loads.get(m, 0) + need.get(m, 0) + cap / 5 <= cap for m, cap in caps.items())

        for key in ("FaultDomain", "UpgradeDomain"):
            count = collections.Counter(nodes[n][key] for n in held)
            if count[nodes[a.target][key]] < 2:
                continue
            keeps = [n for n in up if n not in held and not count[nodes[n][key]] and room(n)]
            if keeps:
                found.append(f"{a.document()}: {key} {nodes[a.target][key]} held one; {keeps[0]} had room")
    return found


def play(seed: int, timeline: dict | None = None):
    state = generate(seed, SPEC)
    timeline = timeline or random_timeline(state, random.Random(seed))
    planner, probe = engine(SEARCH)
    recording = Recording(planner, probe)
    result = replay(parse_timeline(timeline), recording, probe, seed=seed)
    assert result.fault is None, result.fault
    bad = []
    for phase, state, actions in recording.rounds:
        if phase == "Placement" and actions:
            bad += spread_made_worse(as_doc(state), actions, probe(state, frozenset()).node_loads)
    return result, bad


def test_placement_after_a_node_down_keeps_the_upgrade_domain_spread():
    """The reported case: a node down at 8 s; placement replaces its replicas in their own domains."""
    state = generate(1, SPEC)
    down = state["Nodes"][4]["NodeName"]
    timeline = {"State": state, "Events": [{"Time": 8, "Kind": "NodeDown", "NodeName": down}], "Duration": 20}
    result, bad = play(1, timeline)
    assert result.rounds.get(Phase.PLACEMENT) and not bad, bad


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_random_replays_keep_their_state_and_domain_spreads(seed):
    result, bad = play(seed)
    assert not bad, bad
    assert not result.interrupted
    roles = [sum(r["Role"] == Role.PRIMARY for r in p["Replicas"]) for p in result.final_state["Partitions"]]
    assert max(roles) <= 1
