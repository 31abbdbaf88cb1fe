"""SF's three kinds of work, in its order: placement, constraint check, balancing -> a plan document."""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax import energy as E
from plbjax.annealer import AnnealConfig, anneal
from plbjax.balance import MetricBalance, metric_balance, service_domains
from plbjax.constraints import violations
from plbjax.decoding import diff, settle
from plbjax.encoding import Index, Problem, encode
from plbjax.state import ClusterState

SCHEMA_VERSION = 1


@eqx.filter_jit
def _assess(problem: Problem, node_of, primary_of):
    """Everything the plan reports about one placement, in one compiled call."""
    loads = E.node_loads(problem, node_of, primary_of)
    return dict(avg=E.avg_std_dev(problem, node_of, primary_of), loads=loads,
                deviations=E.metric_deviations(problem, node_of, primary_of),
                violations=violations(problem, node_of, primary_of, loads))


def _host(tree):
    return jax.tree.map(np.asarray, tree)


def _unplaced(state: ClusterState) -> list[dict]:
    """Replicas the input lacks or holds on nodes that are not Up: placement's work."""
    status = {n.name: n.status for n in state.nodes}
    up = sum(s == "Up" for s in status.values())
    out = []
    for part in sorted(state.partitions, key=lambda p: (p.service, str(p.partition_id))):
        svc = state.service(part.service)
        live = [r for r in part.replicas if r.node is not None and status[r.node] == "Up"]
        target = svc.target if svc.target >= 0 else up
        roles = [r.role for r in live]
        missing = max(target - len(live), 0)
        for i in range(missing):
            role = "Instance" if not svc.stateful else (
                "Primary" if "Primary" not in roles and i == 0 else "Secondary")
            out.append({"ServiceName": part.service, "PartitionId": part.partition_id, "Role": role,
                        "ConstraintEliminationSequence": []})
    return out


def _health(index: Index, problem: Problem, report: dict) -> list[dict]:
    """SF-style warnings for the constraint violations a placement still has."""
    out = []
    excess = report["violations"]["capacity"]
    for n, m in zip(*np.nonzero(excess[: index.n_nodes, : len(index.metrics)] > 1e-6)):
        out.append({"SourceId": "System.PLB", "Property": "NodeCapacityViolation", "HealthState": "Warning",
                    "Entity": index.nodes[n],
                    "Description": f"Node {index.nodes[n]} is over capacity for metric {index.metrics[m]}: "
                                   f"load {float(report['loads'][n, m]):g} exceeds capacity "
                                   f"{float(problem.capacity[n, m]):g}."})
    for key, constraint in (("fault_domain", "FaultDomain"), ("upgrade_domain", "UpgradeDomain"),
                            ("exclusion", "ReplicaExclusionStatic")):
        for p in np.flatnonzero(report["violations"][key][: index.n_partitions]):
            service, pid = index.partitions[p]
            out.append({"SourceId": "System.PLB", "Property": f"ReplicaConstraintViolation_{constraint}",
                        "HealthState": "Warning", "Entity": f"{service}/{pid}",
                        "Description": f"Partition {pid} of {service} violates the {constraint} constraint."})
    return out


def _no_worse(before: dict, after: dict) -> bool:
    """No constraint measure grew anywhere (a plan never breaks what held, nor worsens what did not)."""
    return all(bool(np.all(after[k] <= before[k] + 1e-6)) for k in before)


def _balance_entries(before: list[MetricBalance], after: list[MetricBalance]) -> list[dict]:
    return [{"Metric": b.metric, "NodeType": None, "MaxLoad": b.max_load, "MinLoad": b.min_load,
             "BalancingThreshold": b.threshold, "ActivityThreshold": b.activity,
             "IsBalancedBefore": b.balanced, "IsBalancedAfter": a.balanced,
             "DeviationBefore": b.deviation, "DeviationAfter": a.deviation} for b, a in zip(before, after)]


def _balances(state: ClusterState, problem: Problem, index: Index, report: dict) -> list[MetricBalance]:
    m = len(index.metrics)
    weights = np.asarray(problem.global_weight)[:m]
    return metric_balance(state, index.metrics, report["loads"][:, :m],
                          np.asarray(problem.metric_nodes)[:m], weights, report["deviations"][:m])


def _balancing_scope(state: ClusterState, imbalanced: set[str]) -> tuple[set[str], str]:
    """Services a balancing run may move, and why (SF: whole imbalanced service domains)."""
    upgrade = state.upgrade or {}
    frozen: set[str] = set()
    if upgrade.get("InProgress"):
        if upgrade.get("Scope", "Cluster") == "Cluster":
            return set(), "a cluster upgrade is in progress: balancing is off"
        frozen = {s.name for s in state.services if s.application == upgrade.get("ApplicationName")}
    movable = set()
    for domain in service_domains(state):
        if any(metric.name in imbalanced for name in domain for metric in state.service(name).metrics):
            movable |= domain
    movable -= frozen
    if not imbalanced:
        return set(), "every metric is balanced"
    if not movable:
        return set(), "the imbalanced services are being upgraded"
    return movable, "imbalanced metrics: " + ", ".join(sorted(imbalanced))


def plan(state: ClusterState, config: AnnealConfig,
         progress: Callable[[int, int, float, float], None] | None = None) -> dict:
    """Run the phases on `state` and return the plan document."""
    problem, index = encode(state)
    initial_node, initial_primary = problem.initial_node, problem.initial_primary
    before = _host(_assess(problem, initial_node, initial_primary))
    balance_before = _balances(state, problem, index, before)

    unplaced = _unplaced(state)
    phases = [{"Phase": "Placement", "Ran": False,
               "Reason": "no replica is missing" if not unplaced else
               f"{len(unplaced)} replica(s) need placement; they are listed in Unplaced"}]
    v = before["violations"]
    n_violations = int((v["capacity"] > 1e-6).any(axis=1).sum() + (v["fault_domain"] > 0).sum()
                       + (v["upgrade_domain"] > 0).sum() + (v["exclusion"] > 0).sum())
    phases.append({"Phase": "ConstraintCheck", "Ran": False,
                   "Reason": "no constraint violation" if not n_violations else
                   f"{n_violations} violation(s) found; they are reported in Health"})

    imbalanced = {b.metric for b in balance_before if not b.balanced}
    movable, reason = _balancing_scope(state, imbalanced)
    actions: list[dict] = []
    search = {"Backend": jax.default_backend(), "Chains": 0, "Steps": 0, "Seconds": 0.0, "Seed": config.seed}
    node_of, primary_of = np.asarray(initial_node), np.asarray(initial_primary)
    after = before
    if movable:
        scoped, _ = encode(state, movable_services=movable)
        result = anneal(scoped, config, progress)
        search.update(Chains=result.chains, Steps=result.steps, Seconds=round(result.seconds, 3))
        best_node_of = settle(index, result.node_of)
        candidate = _host(_assess(problem, jnp.asarray(best_node_of), jnp.asarray(result.primary_of)))
        if (result.energy < result.initial_energy and candidate["avg"] < before["avg"]
                and _no_worse(before["violations"], candidate["violations"])):
            node_of, primary_of, after = best_node_of, result.primary_of, candidate
            actions = diff(index, node_of, primary_of)
        else:
            reason += "; no better placement was found"
    phases.append({"Phase": "Balancing", "Ran": bool(movable), "Reason": reason})

    history = {k: list(v) for k, v in state.history.items()}
    for act in actions:
        if act["Action"] != "SwapPrimarySecondary":
            history.setdefault(str(act["ReplicaId"]), []).append(act["SourceNode"])

    metrics = index.metrics
    capacity = np.asarray(problem.capacity)
    nodes = [{"NodeName": name,
              "Capacities": {m: float(capacity[n, k]) for k, m in enumerate(metrics) if np.isfinite(capacity[n, k])},
              "LoadsBefore": {m: float(before["loads"][n, k]) for k, m in enumerate(metrics)},
              "LoadsAfter": {m: float(after["loads"][n, k]) for k, m in enumerate(metrics)}}
             for n, name in enumerate(index.nodes)]
    return {
        "SchemaVersion": SCHEMA_VERSION,
        "Phases": phases,
        "Balance": _balance_entries(balance_before, _balances(state, problem, index, after)),
        "Score": {"Before": float(before["avg"]), "After": float(after["avg"])},
        "Actions": actions,
        "Nodes": nodes,
        "Health": _health(index, problem, after),
        "Unplaced": unplaced,
        "History": history,
        "Search": search,
    }
