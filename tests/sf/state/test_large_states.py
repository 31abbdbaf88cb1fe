"""Reading and encoding large states fast (issue 23) changes nothing: the parsed `ClusterState` and the
encoded `Problem` and `Index` of a range of documents are pinned to what the replica-by-replica code
gave (digests recorded before the vectorised code replaced it), and the vectorised path agrees with
the general one wherever both apply."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from enum import Enum
from unittest import mock

import jax
import numpy as np
import pytest
import yaml
from paths import ROOT

from plbjax.errors import BadInput
from plbjax.sf import ClusterSpec, generate
from plbjax.sf._encoding.arrays import FLOORS
from plbjax.sf._encoding.encoder import encode
from plbjax.sf._encoding.problem import PRIORITY_SETTINGS, THRESHOLD_PRIORITY
from plbjax.sf._state.building import build_state
from plbjax.sf._state.cluster import (
    BlockEntry,
    CodePackage,
    Correlation,
    NodeType,
    PlacementPolicy,
    ResourceGovernance,
    Upgrade,
)
from plbjax.sf._state.columns import _PARTITIONS_SCHEMA, Columns
from plbjax.sf._state.governance import apply_resource_governance
from plbjax.sf._state.reading import _parse_columns, load_state, parse_state
from plbjax.sf._state.schema_check import plain_copy, state_schema

EXAMPLE = ROOT / "examples" / "small.yaml"


def _small() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def _optional(doc: dict) -> dict:
    """Every optional section: an application upgrade with a snapshot, history, thresholds, priorities,
    move costs in use, a node Down, float and integer ids."""
    doc["Settings"] = dict(doc["Settings"], UseMoveCostReports="true")
    doc["Nodes"][3].update(NodeStatus="Down", Priority=2, AvailableResources={"CpuCores": 8})
    doc["Nodes"][1].update(Priority=1, PlacementProperties={"Rack": 7})
    doc["Upgrade"] = {
        "InProgress": True,
        "Scope": "Application",
        "ApplicationName": "fabric:/Shop",
        "UpgradeDomainsDone": ["UD0", "UD1"],
        "Snapshot": {"100": "N0", "w0a": "N0", "111": "N1"},
    }
    doc["BlockList"] = [{"NodeName": "N2", "ServiceTypeName": "WebType"}]
    doc["History"] = {"101": ["N3", "N4"], "w1b": ["N2"]}
    doc["ResourceThresholds"] = {"CPU": 0.8}
    doc["GlobalMetricWeights"] = {"CPU": 2}
    doc["DefragmentationMetrics"] = {"Memory": True}
    doc["Partitions"][1]["Replicas"][0]["MoveCost"] = "High"
    doc["Partitions"][2]["Replicas"][1]["Loads"] = {"CPU": 3.5, "Memory": 100}
    doc["Partitions"][4]["Replicas"][1]["Loads"] = {"CPU": 7}
    return doc


def _policies(doc: dict) -> dict:
    """Correlations (to a one-partition parent and to a one-per-node parent), placement policies, a
    block list, replicas to create and unplaced ones, mixed id types."""
    doc["Services"] += [
        {
            "ServiceName": "fabric:/Shop/Cache",
            "ServiceTypeName": "CacheType",
            "ServiceKind": "Stateful",
            "TargetReplicaSetSize": 3,
            "Correlations": [{"ServiceName": "fabric:/Shop/Sessions", "Scheme": "AlignedAffinity"}],
            "PlacementPolicies": [
                {"Type": "RequireDomainDistribution"},
                {"Type": "PreferPrimaryDomain", "DomainName": "fd:/dc0/r1"},
            ],
            "Metrics": [
                {"Name": "CPU", "Weight": "Low", "PrimaryDefaultLoad": 2, "SecondaryDefaultLoad": 1},
                {"Name": "Disk", "Weight": "Zero", "DefaultLoad": 5},
            ],
            "DefaultMoveCost": "Zero",
            "Priority": 1,
        },
        {
            "ServiceName": "fabric:/Shop/Agent",
            "ServiceTypeName": "AgentType",
            "ServiceKind": "Stateless",
            "InstanceCount": -1,
            "PlacementPolicies": [{"Type": "InvalidDomain", "DomainName": "fd:/dc0/r2"}],
        },
        {
            "ServiceName": "fabric:/Shop/Probe",
            "ServiceTypeName": "ProbeType",
            "ServiceKind": "Stateless",
            "InstanceCount": 1,
            "Correlations": [{"ServiceName": "fabric:/Shop/Agent", "Scheme": "Affinity"}],
            "PlacementPolicies": [{"Type": "RequiredDomain", "DomainName": "fd:/dc0"}],
            "BalancingPolicy": "Disabled",
        },
        {
            "ServiceName": "fabric:/Shop/Idle",
            "ServiceKind": "Stateful",
            "TargetReplicaSetSize": 1,
            "Metrics": [{"Name": "Memory", "PrimaryDefaultLoad": 9}],
        },
    ]
    doc["Partitions"] += [
        {
            "ServiceName": "fabric:/Shop/Cache",
            "PartitionId": "c-1",
            "Replicas": [
                {"ReplicaId": "c1a", "Role": "Secondary", "NodeName": "N3", "Loads": {"Disk": 4}},
                {"ReplicaId": 901, "Role": "Secondary", "NodeName": None},
            ],
        },
        {
            "ServiceName": "fabric:/Shop/Cache",
            "PartitionId": "c-0",
            "Replicas": [{"ReplicaId": "c0a", "Role": "Primary", "NodeName": "N4", "Loads": {"CPU": 1, "Disk": 0}}],
        },
        {
            "ServiceName": "fabric:/Shop/Agent",
            "PartitionId": 0,
            "Replicas": [{"ReplicaId": "a0", "Role": "Instance", "NodeName": "N0"}],
        },
        {
            "ServiceName": "fabric:/Shop/Probe",
            "PartitionId": "p",
            "Replicas": [{"ReplicaId": "p0", "Role": "Instance", "NodeName": "N1"}],
        },
    ]
    doc["Partitions"][0]["Replicas"].pop()  # one to create
    doc["Partitions"][3]["Replicas"][2]["NodeName"] = None
    doc["BlockList"] = [{"NodeName": "N0", "ServiceTypeName": "CacheType"}]
    doc["NodeBufferPercentage"] = {"CPU": 0.25, "Memory": 0.1}
    return doc


def _generated(**changes) -> dict:
    spec = ClusterSpec(
        nodes=40,
        node_types=3,
        fault_domains=4,
        racks_per_fault_domain=2,
        upgrade_domains=5,
        metrics=3,
        services=12,
        partitions_per_service=7,
        replicas_per_partition=3,
        stateless_fraction=0.3,
        placement_constraint_fraction=0.4,
        skew=0.6,
    )
    return generate(changes.pop("seed", 3), dataclasses.replace(spec, **changes))


DOCUMENTS = {
    "small": _small,
    "small_optional": lambda: _optional(_small()),
    "small_policies": lambda: _policies(_small()),
    "generated": _generated,
    "generated_default_metrics": lambda: _generated(metrics=0, seed=4),
    "generated_float_loads": lambda: _generated(load_scale=2.0, skew=0.95, seed=5, replicas_per_partition=4),
    "generated_unlimited": lambda: _generated(capacity_headroom=0.0, node_types=1, seed=6),
}


def _digest(*values) -> str:
    """One hash of arrays (dtype, shape, bytes) and plain values (repr), in order."""
    h = hashlib.sha256()

    def add(value):
        if isinstance(value, (np.ndarray, jax.Array)):
            a = np.asarray(value)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        elif isinstance(value, (tuple, list)):
            h.update(f"[{len(value)}".encode())
            for item in value:
                add(item)
        elif isinstance(value, Enum):  # a role or status: its word, as the pins held it (issue 56)
            h.update(repr(value.value).encode())
        else:
            h.update(repr(value).encode())

    for value in values:
        add(value)
    return h.hexdigest()[:16]


# The padding floors the pins were recorded with (`arrays.FLOORS` since raised them, so that small
# clusters share a shape: the same arrays, more padding); None: exact
PINNED_FLOORS = {"N": 8, "R": 8, "P": 8, "M": 1, "S": 1, "K": 1, "Kc": 1, "Ms": None, "C": 4, "D": None}


def encoded_digest(state) -> str:
    """The digest of encode(apply_resource_governance(state)): every Problem leaf and Index field, in
    the pins' layout (`PINNED_FLOORS`; `PINNED_PROBLEM`: the fields a phase's scope holds now as the
    encoding left them, `_pinned_scope`; Index fields by their pinned names)."""
    governed, _ = apply_resource_governance(state)
    with mock.patch.dict(FLOORS, PINNED_FLOORS):
        problem, index = encode(governed)
    scoped = _pinned_scope(governed, problem)
    values = {f.name: getattr(problem, f.name) for f in dataclasses.fields(problem)} | scoped
    values["features"] = _PinnedFeatures(problem.features)
    leaves = [(name, values[name]) for name in PINNED_PROBLEM if name not in ADDED_SINCE | CHANGED_SINCE]
    fields = [
        (INDEX_RENAMED_SINCE.get(f.name, f.name), getattr(index, f.name))
        for f in dataclasses.fields(index)
        if f.compare and f.name not in INDEX_ADDED_SINCE
    ]
    return _digest(leaves, fields)


class _PinnedFeatures:
    """`Features` as the pins saw them: with the flag that is the scope's now (`SearchScope.history`),
    without the one added since (`compound`)."""

    def __init__(self, features):
        self.features = features

    def __repr__(self) -> str:
        return repr(self.features).split(", compound=")[0] + ", history=False)"


def _pinned_scope(state, problem) -> dict:
    """The fields the pinned `Problem` held for a phase's search (`SearchScope` holds them now), as
    the encoding left them: nothing movable, no movement limits, constraints enforced by priority."""
    r, p = problem.initial_node.shape[0], problem.initial_primary.shape[0]
    unlimited = np.asarray(np.iinfo(np.int32).max, np.int32)
    priorities = [int(state.settings.get(name, 0)) for name in PRIORITY_SETTINGS] + [THRESHOLD_PRIORITY]
    return dict(
        node_open=problem.node_up,
        movable=np.zeros(r, np.int32),
        n_movable=np.asarray(0, np.int32),
        swappable=np.zeros(p, np.int32),
        n_swappable=np.asarray(0, np.int32),
        enforce=np.asarray([x >= 0 for x in priorities] + [False]),
        move_penalty=np.asarray(0.0, np.float32),
        move_budget=unlimited,
        partition_budget=unlimited,
        start_node=None,
        start_primary=None,
        by_node=None,
        node_first=None,
        undo_share=None,
    )


_ENUM_REPR = re.compile(r"<(?:Role|NodeStatus|Intent)\.\w+: ('\w*')>")


def state_digest(state) -> str:
    """The digest of the parsed state (its repr covers every field but the document) and its document."""
    # NodeInfo.deactivation_intent came after the pins; none of their nodes is Disabled, so it is None
    # ClusterState.applications came after the pins too; none of them has Applications: ()
    text = repr(_as_pinned(state)).replace(", deactivation_intent=None", "").replace(", applications=()", "")
    text = _ENUM_REPR.sub(r"\1", text)  # roles and statuses as the pins held them: their words (issue 56)
    return _digest(text, json.dumps(state.document, sort_keys=True))


def _as_pinned(state):
    """`state` with its typed records (issue 46) as the pins held them: the document's own parts
    (UpgradeDomainsDone as text), each first checked to be what its record holds."""
    doc = state.document
    node_types = tuple(doc.get("NodeTypes", []))
    for record, entry in zip(state.node_types, node_types, strict=True):
        overrides = entry.get("PlacementAndLoadBalancingOverrides", {})
        assert record == NodeType(
            entry["Name"],
            {k: float(v) for k, v in entry.get("Capacities", {}).items()},
            entry.get("PlacementProperties", {}),
            {k: float(v) for k, v in overrides.get("MetricBalancingThresholdsPerNodeType", {}).items()},
            {k: float(v) for k, v in overrides.get("MetricActivityThresholdsPerNodeType", {}).items()},
        )
    services = []
    for service, entry in zip(state.services, doc["Services"], strict=True):
        correlations = tuple(entry.get("Correlations", []))
        policies = tuple(entry.get("PlacementPolicies", []))
        rg = entry.get("ResourceGovernance")
        assert service.correlations == tuple(Correlation(c["ServiceName"], c["Scheme"]) for c in correlations)
        assert service.placement_policies == tuple(PlacementPolicy(p["Type"], p.get("DomainName")) for p in policies)
        assert service.resource_governance == (
            None
            if rg is None
            else ResourceGovernance(
                rg.get("CpuCores"),
                tuple(
                    CodePackage(p["Name"], p.get("CpuShares", 0), p.get("MemoryInMB", 0))
                    for p in rg.get("CodePackages", [])
                ),
            )
        )
        services.append(
            dataclasses.replace(service, correlations=correlations, placement_policies=policies, resource_governance=rg)
        )
    block_list = tuple(doc.get("BlockList", []))
    assert state.block_list == tuple(BlockEntry(b["NodeName"], b["ServiceTypeName"]) for b in block_list)
    upgrade = doc.get("Upgrade")
    if upgrade is not None:
        done = [str(ud) for ud in upgrade.get("UpgradeDomainsDone", [])]
        assert state.upgrade == Upgrade(
            upgrade["InProgress"],
            upgrade["Scope"],
            upgrade.get("ApplicationName"),
            tuple(done),
            {str(k): v for k, v in upgrade.get("Snapshot", {}).items()},
        )
        upgrade = upgrade | {"UpgradeDomainsDone": done} if "UpgradeDomainsDone" in upgrade else upgrade
    else:
        assert state.upgrade is None
    return dataclasses.replace(
        state, node_types=node_types, services=tuple(services), block_list=block_list, upgrade=upgrade
    )


# Problem fields added after the pins were recorded (their own tests cover them).
ADDED_SINCE = {
    "children_of",
    "replica_upgraded",
    "node_upgraded",
    "fd_usable",
    "ud_usable",
    "replica_stays",
    "node_kept",
}
INDEX_ADDED_SINCE = {"node_intent"}  # Index fields added after the pins
INDEX_RENAMED_SINCE = {"initial_node": "node_of", "initial_primary": "primary_of"}  # one name for each placement
# The pinned Problem's fields in order: the cluster's and those a phase's scope holds now (`_pinned_scope`).
PINNED_PROBLEM = (
    "features node_up node_open node_kept capacity threshold_load metric_nodes metric_node_count metric_defrag "
    "fd_leaf_up ud_up fd_tree ud_tree replica_partition replica_service replica_parent replica_aligned children_of "
    "replica_home replica_upgraded replica_stays node_upgraded load_primary load_secondary move_cost "
    "node_move_factor partition_replicas partition_service service_class service_metrics service_nonpacking "
    "primary_preferred class_nodes class_node_count class_allowed fd_children ud_children fd_usable ud_usable "
    "global_weight local_weight initial_node initial_primary swap_cost movable n_movable swappable n_swappable "
    "enforce penalty move_penalty move_budget partition_budget history replica_count start_node start_primary "
    "by_node node_first undo_share"
).split()
# Problem fields whose meaning changed on purpose since: loads follow the role (SF's FailoverUnit;
# tests/sf/replay/test_fidelity.py), History at least HISTORY_WIDTH wide (tests/anneal/test_store.py's shapes).
CHANGED_SINCE = {"load_primary", "load_secondary", "history"}

# Recorded with the replica-by-replica code (before issue 23's vectorised reading and encoding);
# recomputed without CHANGED_SINCE by that commit's successor ab94e9b, which still matched them.
PINNED = {
    "generated": ("9b86f7fc361317fd", "2f57c6b245e7025c"),
    "generated_default_metrics": ("2d8ad2c84408c40c", "c31871600947b1c8"),
    "generated_float_loads": ("f523bc76c4056ab7", "86fb4ad16661020c"),
    "generated_unlimited": ("662b297460abca2d", "c0fbaa3de44c23ff"),
    "small": ("7fdd70e942f4de19", "433dc2b14bce9f38"),
    "small_optional": ("38a7ea50640ce7c5", "1e6a3fa30d0bc13a"),
    "small_policies": ("7b7cff141b09c895", "ce89c6ac21d53d5f"),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_encoding_is_pinned(name):
    state = parse_state(DOCUMENTS[name]())
    assert (state_digest(state), encoded_digest(state)) == PINNED[name]


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_files_read_as_documents_parse(name, tmp_path):
    doc = DOCUMENTS[name]()
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    assert (state_digest(load_state(path)), encoded_digest(load_state(path))) == PINNED[name]
    assert doc == json.loads(path.read_text())


# ------------------------------------------------------------------- the column-wise reading


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_documents_are_read_by_column_as_the_general_path_reads_them(name):
    doc = DOCUMENTS[name]()
    before = copy.deepcopy(doc)
    fast = _parse_columns(doc, owned=False)
    assert fast is not None  # the column-wise path took it
    general = build_state(plain_copy(doc, ""))
    assert fast == general and fast.document == general.document
    assert doc == before  # the input is not changed
    fast.document["Partitions"][0]["Replicas"][0]["NodeName"] = "elsewhere"
    if "Loads" in fast.document["Partitions"][0]["Replicas"][0]:
        fast.document["Partitions"][0]["Replicas"][0]["Loads"]["x"] = 1
    assert doc == before  # nor shared with the state's document


def _rep(d, **change):
    d["Partitions"][0]["Replicas"][0].update(change)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: _rep(d, ReplicaId=True),
        lambda d: _rep(d, ReplicaId=1.0),
        lambda d: _rep(d, ReplicaId=None),
        lambda d: _rep(d, Role="primary"),
        lambda d: _rep(d, Role=1),
        lambda d: _rep(d, NodeName=""),
        lambda d: _rep(d, NodeName=3),
        lambda d: _rep(d, Loads=None),
        lambda d: _rep(d, Loads=[1]),
        lambda d: _rep(d, Loads={"CPU": True}),
        lambda d: _rep(d, Loads={"CPU": -0.5}),
        lambda d: _rep(d, Loads={"": 1}),
        lambda d: _rep(d, Loads={"CPU": float("inf")}),
        lambda d: _rep(d, Loads={"CPU": 2e15}),
        lambda d: _rep(d, Loads={"CPU": 10**400}),
        lambda d: _rep(d, Loads={"CPU": "3"}),
        lambda d: _rep(d, Loads={1: 3}),
        lambda d: _rep(d, MoveCost=None),
        lambda d: _rep(d, MoveCost="Cheap"),
        lambda d: _rep(d, Extra=1),
        lambda d: d["Partitions"][0]["Replicas"][0].pop("Role"),
        lambda d: d["Partitions"][0]["Replicas"].append([]),
        lambda d: d["Partitions"][0].update(Replicas=(1,)),
        lambda d: d["Partitions"][0].update(PartitionId=None),
        lambda d: d["Partitions"][0].update(PartitionId=False),
        lambda d: d["Partitions"][0].update(ServiceName=""),
        lambda d: d["Partitions"][0].update(Note="x"),
        lambda d: d["Partitions"][0].pop("PartitionId"),
        lambda d: d["Partitions"].append("p"),
        lambda d: _rep(d, Role=["Primary"]),
        lambda d: _rep(d, MoveCost=["Low"]),
        lambda d: _rep(d, NodeName={"N0": 1}),
        lambda d: _rep(d, ReplicaId=[1]),
        lambda d: d["Partitions"][0].update(ServiceName=["x"]),
        lambda d: d["Partitions"][0].update(PartitionId=[0]),
    ],
)
def test_column_checks_refuse_what_the_schema_refuses(mutate):
    """Each breaks a schema or number rule inside Partitions: the column-wise reading does not take the
    document, and the general path names the problem."""
    doc = _small()
    mutate(doc)
    assert Columns.read(doc["Partitions"]) is None
    assert _parse_columns(doc, owned=False) is None
    with pytest.raises(BadInput):
        parse_state(doc)


def test_semantic_errors_go_to_the_general_path():
    doc = _small()
    doc["Partitions"][3]["Replicas"][1]["NodeName"] = "N9"
    assert Columns.read(doc["Partitions"]) is not None  # schema-valid
    assert _parse_columns(doc, owned=False) is None
    with pytest.raises(BadInput, match=r"Partitions\[3\]\.Replicas\[1\]\.NodeName: unknown node 'N9'"):
        parse_state(doc, "x.yaml")


def test_the_columns_check_the_schema_the_state_schema_states():
    """The column-wise reading implements this schema of Partitions; were it to change, the reading
    would step aside (and this test says so)."""
    assert state_schema()["properties"]["Partitions"] == _PARTITIONS_SCHEMA


def test_replica_order_within_partitions_does_not_change_the_encoding():
    doc = _generated(seed=8)
    shuffled = copy.deepcopy(doc)
    rng = np.random.default_rng(0)
    for part in shuffled["Partitions"]:
        rng.shuffle(part["Replicas"])
    assert encoded_digest(parse_state(shuffled)) == encoded_digest(parse_state(doc))
