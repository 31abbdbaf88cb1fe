"""SF's PLB unit-test vocabulary in the contract's terms, for the translated cases of issue 48
(tests/sf/plan/test_sf_affinity_cases.py, test_sf_domain_cases.py).

SF's helpers, as translated: CreateNodeDescription(i, fd, ud) is node Ni in fault domain fd:/<fd>
and upgrade domain <ud> (by default its own, UDi); CreateServiceDescription(WithAffinity) is a
stateful service with SF's default metrics (or `metrics`), aligned affinity to its parent; a
FailoverUnit of CreateGuid(i) is partition "i"; ActionMatch("1 move secondary 3|4=>1") is an
action of partition 1 of that kind from one of the sources to one of the targets (`count`).
"""

from __future__ import annotations

import dataclasses

from checker import checked_plan
from sf_cases import DEFAULT

# SF's "PrimaryCount/0.0/0/0,ReplicaCount/0.0/0/0,Count/0.0/0/0": the default metrics at weight 0
ZERO_METRICS = [{"Name": name, "Weight": "Zero"} for name in ("PrimaryCount", "ReplicaCount", "Count")]
ONES = {"PrimaryCount": 1.0, "ReplicaCount": 1.0, "Count": 1.0}  # GlobalMetricWeights of 1.0 each


def node(i: int, fd: str | None = None, ud: str | None = None, **extra) -> dict:
    """SF's CreateNodeDescription(i, fd, ud)."""
    fd = f"dc{i}" if fd is None else fd
    return {"NodeName": f"N{i}", "FaultDomain": f"fd:/{fd}", "UpgradeDomain": f"UD{i}" if ud is None else ud} | extra


def nodes(n: int) -> list[dict]:
    return [node(i) for i in range(n)]


def stateful(name: str, target: int, parent: str | None = None, aligned: bool = True, **extra) -> dict:
    """SF's CreateServiceDescription(WithAffinity): stateful, SF's default metrics unless given."""
    svc = {"ServiceName": name, "ServiceTypeName": "TestType", "ServiceKind": "Stateful"}
    svc["TargetReplicaSetSize"] = target
    if parent:
        scheme = "AlignedAffinity" if aligned else "NonAlignedAffinity"
        svc["Correlations"] = [{"ServiceName": parent, "Scheme": scheme}]
    return svc | extra


def stateless(name: str, count: int, parent: str | None = None, **extra) -> dict:
    svc = {"ServiceName": name, "ServiceTypeName": "TestType", "ServiceKind": "Stateless", "InstanceCount": count}
    if parent:
        svc["Correlations"] = [{"ServiceName": parent, "Scheme": "NonAlignedAffinity"}]
    return svc | extra


def fu(svc: str, i: int, replicas: str = "") -> dict:
    """SF's FailoverUnitDescription(CreateGuid(i), svc, CreateReplicas("P/0, S/1")): partition "i"."""
    roles = {"P": "Primary", "S": "Secondary", "I": "Instance"}
    placed = [spec.strip().split("/") for spec in replicas.split(",") if spec.strip()]
    return {
        "ServiceName": svc,
        "PartitionId": str(i),
        "Replicas": [
            {"ReplicaId": f"{i}.{k}", "Role": roles[role], "NodeName": f"N{where}"}
            for k, (role, where, *_) in enumerate(placed)
        ],
    }


def document(services: list[dict], partitions: list[dict], node_list: list[dict], **extra) -> dict:
    return {"SchemaVersion": 1, "Nodes": node_list, "Services": services, "Partitions": partitions} | extra


def refresh(doc: dict, seed: int = 0, one: bool = True) -> dict:
    """One SF refresh of `doc` (`refresh=True`; `one` false: the whole plan), checked."""
    return checked_plan(doc, dataclasses.replace(DEFAULT, seed=seed), refresh=one)[0]


_KINDS = {
    ("move", "primary"): ("MovePrimary",),
    ("move", "secondary"): ("MoveSecondary",),
    ("move", "instance"): ("MoveInstance",),
    ("move", "*"): ("MovePrimary", "MoveSecondary", "MoveInstance"),
    ("swap", "primary"): ("SwapPrimarySecondary",),
    ("add", "primary"): ("AddPrimary",),
    ("add", "secondary"): ("AddSecondary",),
    ("add", "instance"): ("AddInstance",),
    ("add", "*"): ("AddPrimary", "AddSecondary", "AddInstance"),
    ("drop", "primary"): ("DropPrimary",),
    ("drop", "secondary"): ("DropSecondary",),
    ("drop", "instance"): ("DropInstance",),
    ("drop", "*"): ("DropPrimary", "DropSecondary", "DropInstance"),
    ("promote", "secondary"): ("PromoteSecondary",),
}


def _nodes_of(spec: str) -> set[str] | None:
    return None if spec == "*" else {f"N{n}" for n in spec.split("|")}


def matches(action: dict, pattern: str) -> bool:
    """SF's ActionMatch: "<partition|*> <move|swap|add|drop|promote> <role|*> <where>", where is
    "a|b=>c|d" (moves), "a<=>b" (swaps), or the node (adds: the target, drops: the source)."""
    pid, kind, role, *where = pattern.split()
    if pid != "*" and action["PartitionId"] not in pid.split("|"):
        return False
    if action["Action"] not in _KINDS[(kind, role)]:
        return False
    where = where[0] if where else "*"
    if "=>" in where:
        sources, targets = (_nodes_of(w.strip("<")) for w in where.split("=>"))
    elif kind == "drop":
        sources, targets = _nodes_of(where), None
    else:
        sources, targets = None, _nodes_of(where)
    return (sources is None or action["SourceNode"] in sources) and (targets is None or action["TargetNode"] in targets)


def count(result: dict, pattern: str) -> int:
    """SF's CountIf(actionList, ActionMatch(pattern))."""
    return sum(matches(a, pattern) for a in result["Actions"])


def shown(result: dict) -> list[str]:
    """The actions in SF's words, for assertion messages."""
    return [f"{a['PartitionId']} {a['Action']} {a['SourceNode']}=>{a['TargetNode']}" for a in result["Actions"]]
