"""SF's application groups in the search: incremental measures equal recomputation, hot chains
break no application rule that held (the independent checker agrees), and a cluster whose
applications limit nothing compiles the search it compiled before them."""

from __future__ import annotations

import functools
import json
import math
from collections import defaultdict

import jax
import jax.numpy as jnp
import pytest
from checker import app_group_violations, document_with, placement_of
from conftest import QUICK, cluster, model_check, searchable

from plbjax import anneal as A
from plbjax.sf import parse_state
from plbjax.sf._model import chain as S
from plbjax.sf._model.moves import DRAWS

pytestmark = pytest.mark.slow  # searches of random clusters


def _with_applications(doc: dict, slack: float = 1.0, reservation: float = 0.0) -> dict:
    """`doc` with its services in two applications, each limited to the nodes it occupies, and its
    capacity per node and in all to its load (times `slack`) in each metric."""
    doc = json.loads(json.dumps(doc))
    names = {}
    for i, svc in enumerate(doc["Services"]):
        svc["ApplicationName"] = names[svc["ServiceName"]] = f"fabric:/App{i % 2}"
    metrics = sorted({m["Name"] for s in doc["Services"] for m in s["Metrics"]})
    state = parse_state(doc | {"Applications": []})
    nodes: dict[str, set] = {a: set() for a in set(names.values())}
    per_node: dict[str, defaultdict] = {a: defaultdict(float) for a in nodes}
    total: dict[str, defaultdict] = {a: defaultdict(float) for a in nodes}
    for part in state.partitions:
        svc = state.service(part.service)
        for rep in (r for r in part.replicas if r.node is not None):
            app = names[part.service]
            nodes[app].add(rep.node)
            for m in svc.metrics:
                load = rep.loads.get(m.name, m.primary_load if rep.role == "Primary" else m.secondary_load)
                per_node[app][(rep.node, m.name)] += load
                total[app][m.name] += load
    apps = []
    for app in sorted(nodes):
        most = {m: max([v for (_, k), v in per_node[app].items() if k == m], default=0.0) for m in metrics}
        entries = []
        for m in metrics:
            cap = math.ceil(most[m] * slack) + 1
            entries.append(
                {
                    "Name": m,
                    "MaximumCapacity": cap,
                    "ReservationCapacity": min(reservation, cap),
                    "TotalApplicationCapacity": max(math.ceil(total[app][m] * slack) + 1, cap * len(nodes[app])),
                }
            )
        apps.append({"ApplicationName": app, "MaximumNodes": len(nodes[app]), "Metrics": entries})
    return doc | {"Applications": apps}


@pytest.fixture(scope="module")
def grouped() -> list[dict]:
    return [
        _with_applications(cluster(seed), slack, reservation)
        for seed, slack, reservation in ((0, 1.0, 0.0), (1, 1.3, 4.0))
    ]


@pytest.mark.parametrize("parallel", [False, True], ids=["first", "parallel"])
def test_the_model_check_passes_with_application_groups(grouped, parallel):
    """Incremental energy (the application groups' penalty changes included) and the applications'
    loads equal recomputation,
    a parallel step equals its kept moves one by one (an application's moves share a footprint)."""
    for doc in grouped:
        problem, _ = searchable(parse_state(doc), enforce=False)  # soft: the penalties change
        assert problem.cluster.features.applications
        config = A.KernelConfig(tries=16, parallel=True, room=16) if parallel else QUICK.kernel
        report = model_check(problem, config, ("node_of", "primary_of", "loads", "apps", "energy"))
        assert report.valid > 20 and report.kept >= 1


def test_hot_chains_break_no_application_rule_that_held(grouped):
    """Chains run hot (many moves accepted) never make an application group's violation worse, by
    the independent checker (tests/checker.py: app_group_violations)."""
    for doc in grouped:
        state = parse_state(doc)
        problem, index = searchable(state)
        keys = jax.random.split(jax.random.PRNGKey(0), 8)
        chains = A.hot_chains(S.model(), problem, QUICK.kernel, keys, 1500, 50.0)
        before = app_group_violations(state, placement_of(doc))
        moved = 0
        for c in range(8):
            node_of, primary_of = chains.state.node_of[c], chains.state.primary_of[c]
            after = app_group_violations(state, placement_of(document_with(state, index, node_of, primary_of)))
            assert all(after[k] <= before[k] + 1e-3 for k in after), (before, after)
            moved += int(jnp.sum(node_of != problem.scope.origin_node))
        assert moved > 0


@functools.cache
def _program(doc_json: str) -> str:
    """The jaxpr of one step's proposals on `doc`."""
    problem, _ = searchable(parse_state(json.loads(doc_json)))
    state = S.start(problem)
    words = jnp.zeros((4, DRAWS), jnp.uint32)
    return str(jax.make_jaxpr(functools.partial(S.propose, swap_probability=0.3))(problem, state, words))


def test_applications_that_limit_nothing_compile_the_same_search():
    """Absent Applications, or applications that limit nothing, the search is today's: the same
    program, no application arrays."""
    doc = cluster(0)
    idle = doc | {
        "Applications": [{"ApplicationName": "fabric:/App", "MinimumNodes": 0, "Metrics": [{"Name": "Metric0"}]}]
    }
    for given in (doc, idle):
        problem, _ = searchable(parse_state(given))
        assert not problem.cluster.features.applications and problem.cluster.apps is None
    assert _program(json.dumps(doc)) == _program(json.dumps(idle))
    assert _program(json.dumps(doc)) != _program(json.dumps(_with_applications(doc)))
