"""One encoding per plan, updated in place after surplus drops and for one-per-node parents' hosts,
and promotions tried in batches: the same plans as re-encoding and trying one promotion at a time."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from conftest import QUICK, cluster
from paths import ROOT

from plbjax.sf import load_state, parse_state
from plbjax.sf._encoding.assembly import (
    ClassArrays,
    NodeArrays,
    ReplicaArrays,
    Shares,
    WeightArrays,
    class_arrays,
    node_arrays,
    problem_of,
    shares_of,
    weight_arrays,
)
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._encoding.problem import Problem
from plbjax.sf._model import assessment as _assessment
from plbjax.sf._model.assessment import Placement, assess, no_worse
from plbjax.sf._phases import preparation as _preparation
from plbjax.sf._phases import primaries as _primaries
from plbjax.sf._phases.preparation import governed_encoding, prepare, priorities_of
from plbjax.sf._phases.primaries import elect_primaries
from plbjax.sf._plan.planning import plan

EXAMPLE = ROOT / "examples" / "small.yaml"


def _with_surplus(seed: int) -> dict:
    """A test cluster whose first two services' targets dropped to 2 (a surplus replica in each of
    their partitions) and whose first primary's node is Down."""
    doc = cluster(seed)
    for svc in doc["Services"][:2]:
        svc["TargetReplicaSetSize" if "TargetReplicaSetSize" in svc else "InstanceCount"] = 2
    _down(doc, 1)
    return doc


def _with_everywhere_parent(seed: int) -> dict:
    """A test cluster with a one-per-node service (instances on half the nodes) that two services
    have affinity to; one of them also has an aligned-affinity child."""
    doc = cluster(seed)
    names = [n["NodeName"] for n in doc["Nodes"]]
    metric = doc["Services"][0]["Metrics"][0]["Name"]
    doc["Services"].append(
        {
            "ServiceName": "fabric:/App/Host",
            "ServiceKind": "Stateless",
            "InstanceCount": -1,
            "PlacementConstraints": "NodeColor == Blue",
            "Metrics": [{"Name": metric, "Weight": "Low", "PrimaryDefaultLoad": 1, "SecondaryDefaultLoad": 1}],
        }
    )
    doc["Partitions"].append(
        {
            "ServiceName": "fabric:/App/Host",
            "PartitionId": "host",
            "Replicas": [{"ReplicaId": f"h{k}", "Role": "Instance", "NodeName": n} for k, n in enumerate(names[::2])],
        }
    )
    for svc in doc["Services"][:2]:
        svc["Correlations"] = [{"ServiceName": "fabric:/App/Host", "Scheme": "Affinity"}]
    _down(doc, 1)
    return doc


def _with_everywhere_child(seed: int) -> dict:
    """`_with_everywhere_parent` with a one-per-node child of the one-per-node parent as well (its
    instance count follows the parent's hosts)."""
    doc = _with_everywhere_parent(seed)
    doc["Services"].append(
        dict(
            doc["Services"][-1],
            ServiceName="fabric:/App/Sidecar",
            Correlations=[{"ServiceName": "fabric:/App/Host", "Scheme": "Affinity"}],
        )
    )
    doc["Partitions"].append({"ServiceName": "fabric:/App/Sidecar", "PartitionId": "sidecar", "Replicas": []})
    return doc


def _down(doc: dict, count: int) -> None:
    """Mark Down the nodes of the first `count` primaries."""
    primaries = [r["NodeName"] for p in doc["Partitions"] for r in p["Replicas"] if r["Role"] == "Primary"]
    for node in doc["Nodes"]:
        if node["NodeName"] in primaries[:count]:
            node["NodeStatus"] = "Down"


def _old_encodings(monkeypatch) -> None:
    """The encoding path before updates: encode again after drops and for parent hosts."""
    monkeypatch.setattr(_preparation, "without_dropped", lambda state, index: encode(state))
    monkeypatch.setattr(_preparation, "with_parent_hosts", lambda state, problem, index, hosts: encode(state, hosts))


def _same_prepared(a, b) -> None:
    leaves_a, tree_a = jax.tree.flatten(a.encoded.problem)
    leaves_b, tree_b = jax.tree.flatten(b.encoded.problem)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert x.shape == y.shape and x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y))
    for field in dataclasses.fields(a.encoded.index):
        if field.compare:
            x, y = getattr(a.encoded.index, field.name), getattr(b.encoded.index, field.name)
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, field.name
    assert a.drops == b.drops
    for field in ("node_of", "primary_of"):
        assert np.array_equal(getattr(a.initial, field), getattr(b.initial, field))


def _without_timings(document: dict) -> str:
    return json.dumps({k: v for k, v in document.items() if k != "Search"}, sort_keys=True, default=str)


def test_the_shares_hold_every_field_of_problem_once_and_give_it_back():
    """`Problem` is assembled in one place from its stages' shares: together they name each of its
    fields once, and an encoded problem's shares assemble it again."""
    names = [name for share in (NodeArrays, ClassArrays, WeightArrays, ReplicaArrays) for name in share._fields]
    problem_fields = [f.name for f in dataclasses.fields(Problem) if f.name != "features"]
    assert len(names) == len(set(names)) and sorted(names) == sorted(problem_fields)
    problem, index = encode(parse_state(cluster(0)))
    assert index.stages is not None
    again = problem_of(problem.features, shares_of(problem))
    assert all(x is y for x, y in zip(jax.tree.leaves(again), jax.tree.leaves(problem), strict=True))
    fresh = Shares(
        node_arrays(index.stages.nodes, index.stages.cluster),
        class_arrays(index.stages.classes, index.stages.cluster.N),
        weight_arrays(index.stages.weights),
        shares_of(problem).replicas,
    )
    assert all(
        np.array_equal(x, y) and x.dtype == y.dtype
        for x, y in zip(jax.tree.leaves(fresh), jax.tree.leaves(shares_of(problem)), strict=True)
    )


@pytest.mark.parametrize("build", [_with_surplus, _with_everywhere_parent, _with_everywhere_child])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_updated_encoding_equals_encoding_again(build, seed, monkeypatch):
    state = parse_state(build(seed))
    priorities = priorities_of(state)
    updated = prepare(governed_encoding(state), priorities)
    _old_encodings(monkeypatch)
    _same_prepared(updated, prepare(governed_encoding(state), priorities))


@pytest.mark.parametrize("build", [_with_surplus, _with_everywhere_parent])
def test_plans_with_updated_encoding_equal_those_of_encoding_again(build, monkeypatch):
    state = parse_state(build(3))
    search = dataclasses.replace(QUICK, steps=1000, chains=4)
    updated = plan(state, search).document()
    _old_encodings(monkeypatch)
    assert _without_timings(updated) == _without_timings(plan(state, search).document())


def _one_at_a_time(problem, index, now: Placement, priorities: np.ndarray) -> Placement:
    """The promotion rule as it ran before batches: one assessment per candidate."""
    hard = np.where(priorities == 0, 0, -1)
    for p in range(index.n_partitions):
        primary = int(now.primary_of[p])
        if not index.stateful[p] or (primary >= 0 and now.node_of[primary] >= 0):
            continue
        placed = [r for r in index.partition_rows[p] if r != primary and now.node_of[r] >= 0]
        for r in sorted(placed, key=lambda r: (now.report.loads[now.node_of[r]].sum(), r)):
            primary_of = now.primary_of.copy()
            primary_of[p] = r
            trial = Placement(now.node_of, primary_of, assess(problem, now.node_of, primary_of))
            if no_worse(now.report.violations, trial.report.violations, hard):
                now = trial
                break
    return now


def _headless(seed: int, down: int, **changes) -> tuple:
    """A test cluster whose nodes holding the first `down` primaries are Down, encoded, as placement
    starts (the lost replicas unplaced)."""
    doc = cluster(seed, **changes)
    _down(doc, down)
    if seed % 2:  # loads that make capacity decide between candidates
        for node in doc["Nodes"]:
            node["Capacities"] = {m: v * 0.45 for m, v in node["Capacities"].items()}
    state = parse_state(doc)
    problem, index = encode(state)
    start = Placement(
        index.initial_node, index.initial_primary, assess(problem, index.initial_node, index.initial_primary)
    )
    return problem, index, start, priorities_of(state)


@pytest.mark.parametrize("seed", range(6))
def test_batched_promotions_equal_one_at_a_time(seed):
    problem, index, start, priorities = _headless(seed, down=6)
    batched = elect_primaries(problem, index, start, priorities)
    single = _one_at_a_time(problem, index, start, priorities)
    assert (start.primary_of != single.primary_of).any()
    assert np.array_equal(batched.primary_of, single.primary_of)
    for key in ("capacity", "affinity", "preferred"):
        assert np.array_equal(getattr(batched.report.violations, key), getattr(single.report.violations, key))


def _counting(monkeypatch, module, *names: str, calls: list[str] | None = None) -> list[str]:
    """Calls of the `names` functions of `module`, by name, as they happen (added to `calls`)."""
    calls = [] if calls is None else calls
    for name in names:
        original = getattr(module, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize(
    "document",
    [
        lambda: load_state(EXAMPLE),
        lambda: parse_state(_with_surplus(4)),
        lambda: parse_state(_with_everywhere_parent(4)),
    ],
    ids=["example", "surplus", "everywhere-parent"],
)
def test_a_plan_encodes_once(document, monkeypatch):
    calls = _counting(monkeypatch, _preparation, "encode")
    plan(document(), dataclasses.replace(QUICK, steps=500, chains=4))
    assert len(calls) == 1


@pytest.mark.parametrize("down", [1, 8])
def test_promotion_assessments_do_not_grow_with_the_partitions_to_promote(down, monkeypatch):
    """Promoting in 1 or in 7 partitions takes a few calls: a round (one batch of trials, one
    assessment) per chain of partitions whose candidates share a node, not one per candidate."""
    problem, index, start, priorities = _headless(0, down=down)
    calls = _counting(monkeypatch, _primaries, "_worse", calls=_counting(monkeypatch, _assessment, "assess"))
    free = np.zeros(start.node_of.shape[0], bool)  # no replica barred from leading
    waiting = sum(bool(_primaries._candidates(index, start, p, free)) for p in range(index.n_partitions))
    elect_primaries(problem, index, start, priorities)
    assert waiting >= min(down, 7) and len(calls) <= 6, (waiting, calls)
