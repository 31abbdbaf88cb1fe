"""Tests for plbjax.sf.generate and plbjax-generate (plbjax.generate_cli): shape, determinism, hard rules of the initial placement, CLI."""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import time

import numpy as np
import pytest
import yaml

from plbjax.generate_cli import main
from plbjax.generators import Generator, InstanceT, SpecT
from plbjax.roadef._generator import InstanceSpec
from plbjax.roadef._generator import generate as roadef_generate
from plbjax.sf import ClusterSpec, generate

# ---------------------------------------------------------------------------------------------
# an independent checker of the state document against the spec and SF's hard rules


def _top_fd(fd: str) -> str:
    assert fd.startswith("fd:/"), fd
    return fd[len("fd:/") :].split("/")[0]


def _eligible(service: dict, nodes: list[dict]) -> list[dict]:
    expr = service.get("PlacementConstraints")
    if not expr:
        return nodes
    m = re.fullmatch(r"\s*NodeType\s*==\s*(\S+)\s*", expr)
    assert m, f"unexpected constraint {expr!r}"
    return [n for n in nodes if n.get("NodeType") == m.group(1)]


def _even(counts: dict, domains: set) -> bool:
    """Per-domain replica counts over the eligible domains differ by at most one."""
    full = [counts.get(d, 0) for d in domains]
    return set(counts) <= domains and max(full) - min(full) <= 1


def check_document(doc: dict, spec: ClusterSpec) -> None:
    json.dumps(doc)  # plain JSON types only
    assert doc["SchemaVersion"] == 1
    N, S, P, R = (spec.nodes, spec.services, spec.services * spec.partitions_per_service, spec.replicas_per_partition)

    # nodes
    nodes = doc["Nodes"]
    assert len(nodes) == N
    names = [n["NodeName"] for n in nodes]
    assert len(set(names)) == N
    assert all(re.fullmatch(r"Node\d{3,}", x) for x in names)
    assert names == sorted(names)
    assert [t["Name"] for t in doc["NodeTypes"]] == [f"NodeType{t}" for t in range(spec.node_types)]
    types = [int(n["NodeType"][len("NodeType") :]) for n in nodes]
    assert types == sorted(types) and set(types) == set(range(spec.node_types))  # blocks
    by_name = {n["NodeName"]: n for n in nodes}
    pat = r"fd:/dc\d+/r\d+" if spec.racks_per_fault_domain > 1 else r"fd:/dc\d+"
    assert all(re.fullmatch(pat, n["FaultDomain"]) for n in nodes)
    assert len({n["FaultDomain"] for n in nodes}) == spec.fault_domains * spec.racks_per_fault_domain
    assert len({_top_fd(n["FaultDomain"]) for n in nodes}) == spec.fault_domains
    assert {n["UpgradeDomain"] for n in nodes} == {f"UD{k}" for k in range(spec.upgrade_domains)}
    metrics = [f"Metric{j}" for j in range(spec.metrics)]
    with_caps = spec.metrics > 0 and spec.capacity_headroom > 0
    for n in nodes:
        assert ("Capacities" in n) == with_caps
        if with_caps:
            assert set(n["Capacities"]) == set(metrics)

    # services
    services = doc["Services"]
    assert len(services) == S
    svc = {s["ServiceName"]: s for s in services}
    assert list(svc) == [f"fabric:/App/Svc{i}" for i in range(S)]
    kinds = collections.Counter(s["ServiceKind"] for s in services)
    assert kinds["Stateless"] == round(spec.stateless_fraction * S)
    n_con = sum("PlacementConstraints" in s for s in services)
    if spec.node_types > 1:
        assert n_con == round(spec.placement_constraint_fraction * S)
    else:
        assert n_con == 0
    for s in services:
        if s["ServiceKind"] == "Stateful":
            assert s["TargetReplicaSetSize"] == R and "InstanceCount" not in s
        else:
            assert s["InstanceCount"] == R and "TargetReplicaSetSize" not in s
        if spec.metrics == 0:
            assert "Metrics" not in s
            continue
        assert [m["Name"] for m in s["Metrics"]] == metrics
        assert [m["Weight"] for m in s["Metrics"]] == [("High", "Medium", "Low")[j % 3] for j in range(spec.metrics)]
        for m in s["Metrics"]:
            if s["ServiceKind"] == "Stateful":
                assert m["PrimaryDefaultLoad"] > m["SecondaryDefaultLoad"] > 0
            else:
                assert m["DefaultLoad"] > 0

    # partitions and the hard rules
    parts = doc["Partitions"]
    assert len(parts) == P
    assert len({p["PartitionId"] for p in parts}) == P
    rids = [r["ReplicaId"] for p in parts for r in p["Replicas"]]
    assert len(rids) == P * R == spec.total_replicas and len(set(rids)) == len(rids)
    load = collections.defaultdict(lambda: collections.defaultdict(float))
    domains = {}  # service -> (eligible node names, eligible top-level FDs, eligible UDs)
    for name, s in svc.items():
        elig = _eligible(s, nodes)
        domains[name] = (
            {n["NodeName"] for n in elig},
            {_top_fd(n["FaultDomain"]) for n in elig},
            {n["UpgradeDomain"] for n in elig},
        )
    for p in parts:
        s = svc[p["ServiceName"]]
        reps = p["Replicas"]
        assert len(reps) == R
        roles = collections.Counter(r["Role"] for r in reps)
        if s["ServiceKind"] == "Stateful":
            assert roles == {"Primary": 1, "Secondary": R - 1} if R > 1 else {"Primary": 1}
        else:
            assert roles == {"Instance": R}
        placed = [r["NodeName"] for r in reps]
        assert all(x in by_name for x in placed)  # all placed
        assert len(set(placed)) == R  # one per node
        elig_names, elig_fds, elig_uds = domains[p["ServiceName"]]
        assert set(placed) <= elig_names  # constraints
        fds = collections.Counter(_top_fd(by_name[x]["FaultDomain"]) for x in placed)
        assert _even(fds, elig_fds), (p["PartitionId"], fds)  # fault domains
        if R <= len(elig_fds):
            assert len(fds) == R
        uds = collections.Counter(by_name[x]["UpgradeDomain"] for x in placed)
        assert _even(uds, elig_uds), (p["PartitionId"], uds)  # upgrade domains
        for r in reps:
            if spec.metrics == 0:
                assert "Loads" not in r
                continue
            assert set(r["Loads"]) == set(metrics)
            for m, v in r["Loads"].items():
                assert v > 0
                if spec.load_scale >= 5:
                    assert isinstance(v, int)
                else:
                    assert round(v, 1) == v
                load[r["NodeName"]][m] += v
    if with_caps:  # capacities
        for name, per in load.items():
            for m, v in per.items():
                assert v <= by_name[name]["Capacities"][m] + 1e-6, (name, m, v)


# ---------------------------------------------------------------------------------------------

SEEDED_SPECS = [  # (seed, spec)
    (0, ClusterSpec()),
    (7, ClusterSpec(skew=1.0)),
    (3, ClusterSpec(skew=0.0, metrics=0)),
    (
        11,
        ClusterSpec(
            nodes=30, fault_domains=3, racks_per_fault_domain=2, upgrade_domains=4, replicas_per_partition=5, services=8
        ),
    ),  # replicas > fault domains
    (
        5,
        ClusterSpec(
            nodes=40,
            node_types=3,
            placement_constraint_fraction=0.5,
            services=12,
            metrics=3,
            stateless_fraction=0.4,
            skew=0.8,
        ),
    ),
    (
        2,
        ClusterSpec(
            nodes=12,
            fault_domains=4,
            upgrade_domains=3,
            replicas_per_partition=4,
            load_scale=1.5,
            capacity_headroom=1.3,
            services=6,
        ),
    ),
    (
        4,
        ClusterSpec(
            nodes=7,
            fault_domains=7,
            upgrade_domains=7,
            replicas_per_partition=7,
            services=3,
            partitions_per_service=2,
            capacity_headroom=0.0,
        ),
    ),
    (
        9,
        ClusterSpec(
            nodes=25,
            fault_domains=5,
            racks_per_fault_domain=5,
            upgrade_domains=10,
            metrics=4,
            skew=0.95,
            capacity_headroom=1.2,
            services=10,
            partitions_per_service=10,
        ),
    ),
    (1, ClusterSpec(nodes=9, replicas_per_partition=1, services=4, stateless_fraction=1.0)),
    (0, ClusterSpec(services=0)),  # nodes only
    (0, ClusterSpec(nodes=40, services=2, partitions_per_service=1)),  # fewer replicas than nodes
]


SEEDED_IDS = [f"seed{seed}-n{spec.nodes}" for seed, spec in SEEDED_SPECS]


@pytest.mark.parametrize("seed, spec", SEEDED_SPECS, ids=SEEDED_IDS)
def test_hard_rules_and_counts(seed, spec):
    check_document(generate(seed, spec), spec)


@pytest.mark.parametrize("seed", range(6))
def test_hard_rules_random_specs(seed):
    g = np.random.default_rng(1000 + seed)
    fds = int(g.integers(1, 6))
    racks = int(g.integers(1, 3))
    nodes = int(g.integers(fds * racks, 40)) + 3
    spec = ClusterSpec(
        nodes=nodes,
        node_types=int(g.integers(1, 3)),
        fault_domains=fds,
        racks_per_fault_domain=racks,
        upgrade_domains=int(g.integers(1, min(nodes, 6) + 1)),
        metrics=int(g.integers(0, 4)),
        services=int(g.integers(1, 10)),
        partitions_per_service=int(g.integers(1, 6)),
        replicas_per_partition=int(g.integers(1, 4)),
        stateless_fraction=float(g.random()),
        skew=float(g.random()),
        load_scale=float(g.choice([1.0, 10.0, 100.0])),
        capacity_headroom=float(g.choice([0.0, 1.5, 2.0, 3.0])),
        placement_constraint_fraction=float(g.random() * 0.5),
    )
    check_document(generate(seed, spec), spec)


def test_deterministic():
    spec = ClusterSpec(nodes=30, node_types=2, placement_constraint_fraction=0.5)
    a, b = generate(42, spec), generate(42, spec)
    assert json.dumps(a) == json.dumps(b)
    c = generate(43, spec)
    assert json.dumps(a) != json.dumps(c)


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_bad_seed_raises(seed):
    with pytest.raises(ValueError, match="seed"):
        generate(seed, ClusterSpec())


def test_both_generators_share_one_interface():
    def twice(generator: Generator[SpecT, InstanceT], spec: SpecT) -> tuple[InstanceT, InstanceT]:
        return generator(3, spec), generator(3, spec)

    a, b = twice(generate, ClusterSpec())
    assert json.dumps(a) == json.dumps(b)
    (instance, original), (again, original_again) = twice(roadef_generate, InstanceSpec())
    assert np.array_equal(original, original_again)
    assert all(np.array_equal(getattr(instance, f.name), getattr(again, f.name)) for f in dataclasses.fields(instance))


def test_names_and_layout():
    spec = ClusterSpec(nodes=12, node_types=3, fault_domains=2, racks_per_fault_domain=3, upgrade_domains=4)
    doc = generate(0, spec)
    nodes = doc["Nodes"]
    assert nodes[0]["NodeName"] == "Node000" and nodes[11]["NodeName"] == "Node011"
    assert [n["NodeType"] for n in nodes] == ["NodeType0"] * 4 + ["NodeType1"] * 4 + ["NodeType2"] * 4
    assert [n["FaultDomain"] for n in nodes[:6]] == [
        "fd:/dc0/r0",
        "fd:/dc1/r0",
        "fd:/dc0/r1",
        "fd:/dc1/r1",
        "fd:/dc0/r2",
        "fd:/dc1/r2",
    ]
    assert [n["UpgradeDomain"] for n in nodes[:5]] == ["UD0", "UD1", "UD2", "UD3", "UD0"]
    assert all("NodeColor" in n["PlacementProperties"] for n in nodes)
    flat = generate(0, ClusterSpec(nodes=10, fault_domains=5))
    assert [n["FaultDomain"] for n in flat["Nodes"][:6]] == [
        "fd:/dc0",
        "fd:/dc1",
        "fd:/dc2",
        "fd:/dc3",
        "fd:/dc4",
        "fd:/dc0",
    ]
    assert doc["Services"][0]["ServiceName"] == "fabric:/App/Svc0"
    assert all(isinstance(p["PartitionId"], str) for p in doc["Partitions"])


def test_primaries_heavier():
    doc = generate(
        0, ClusterSpec(nodes=30, services=10, partitions_per_service=20, stateless_fraction=0.0, load_scale=100.0)
    )
    pri, sec = [], []
    for p in doc["Partitions"]:
        for r in p["Replicas"]:
            (pri if r["Role"] == "Primary" else sec).append(r["Loads"]["Metric0"])
    assert sum(pri) / len(pri) > 1.2 * sum(sec) / len(sec)


def _node_counts(doc):
    c = collections.Counter(r["NodeName"] for p in doc["Partitions"] for r in p["Replicas"])
    return [c.get(n["NodeName"], 0) for n in doc["Nodes"]]


def test_skew_concentrates():
    kw = dict(nodes=50, services=20, partitions_per_service=10, capacity_headroom=0.0)
    flat = _node_counts(generate(0, ClusterSpec(skew=0.0, **kw)))
    piled = _node_counts(generate(0, ClusterSpec(skew=1.0, **kw)))

    def top_share(c):
        return sum(sorted(c, reverse=True)[:10]) / sum(c)

    assert top_share(piled) > top_share(flat) + 0.2
    assert top_share(flat) < 0.4


def test_skew_respects_capacity():
    spec = ClusterSpec(nodes=50, services=20, partitions_per_service=10, skew=1.0, capacity_headroom=1.5)
    check_document(generate(0, spec), spec)


@pytest.mark.parametrize(
    "kw",
    [
        dict(nodes=2, fault_domains=1, upgrade_domains=1, replicas_per_partition=3),
        dict(nodes=3, fault_domains=5),
        dict(capacity_headroom=0.5),
        dict(nodes=10, node_types=5, placement_constraint_fraction=1.0, replicas_per_partition=3),
        dict(skew=1.5),
        dict(nodes=0),
    ],
)
def test_impossible_specs_raise(kw):
    with pytest.raises(ValueError):
        generate(0, ClusterSpec(**kw))


def test_large_cluster_is_fast():
    """100,000 replicas in under 10 s of this process's CPU time (1.6 s on a 2-core EPYC; CPU time,
    not wall time, so that other processes' load does not count)."""
    spec = ClusterSpec(
        nodes=1000, services=50, partitions_per_service=667, replicas_per_partition=3, metrics=2, skew=0.7
    )
    t = time.process_time()
    doc = generate(3, spec)
    elapsed = time.process_time() - t
    assert spec.total_replicas >= 100_000
    assert sum(len(p["Replicas"]) for p in doc["Partitions"]) == spec.total_replicas
    assert len(doc["Nodes"]) == 1000
    assert elapsed < 10.0, f"{elapsed:.1f} s"
    check_document(doc, spec)


# ---------------------------------------------------------------------------------------------
# command line


def test_cli_json_and_yaml(tmp_path):
    args = [
        "--nodes",
        "12",
        "--services",
        "3",
        "--fault-domains",
        "3",
        "--racks-per-fault-domain",
        "2",
        "--skew",
        "0.9",
        "--seed",
        "5",
    ]
    spec = ClusterSpec(nodes=12, services=3, fault_domains=3, racks_per_fault_domain=2, skew=0.9)
    js, ym = tmp_path / "c.json", tmp_path / "c.yaml"
    assert main(args + ["-o", str(js)]) == 0
    assert main(args + ["--out", str(ym)]) == 0
    a = json.loads(js.read_text())
    b = yaml.safe_load(ym.read_text())
    assert a == b == generate(5, spec)
    check_document(a, spec)


def test_cli_stdout(capsys):
    assert (
        main(["--nodes", "6", "--fault-domains", "3", "--upgrade-domains", "3", "--services", "2", "--metrics", "0"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["Nodes"]) == 6 and "Metrics" not in doc["Services"][0]


def test_cli_bad_input(tmp_path, capsys):
    assert main(["--nodes", "2", "--replicas-per-partition", "3"]) == 2
    assert "ClusterSpec." in capsys.readouterr().err
    assert main(["-o", str(tmp_path / "x.txt")]) == 2


# ---------------------------------------------------------------------------------------------
# the documents pass the project's own state validation (plbjax/state.py, when present)


@pytest.mark.parametrize("seed, spec", SEEDED_SPECS, ids=SEEDED_IDS)
def test_parse_state_accepts(seed, spec):
    state = pytest.importorskip("plbjax.sf._state.reading")
    state.parse_state(generate(seed, spec))
