"""What the plan could not do, the way SF operators read it: health reports and, for replicas that
cannot be placed, the constraint elimination sequence (each constraint in checker order, the nodes
it eliminated and how many remain)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.sf._encoding import Index, Problem
from plbjax.sf._model import Assessment, affinity_violated, partition_domain_violations, partition_nodes
from plbjax.sf._state import NodeStatus

SOURCE = "System.PLB"


@eqx.filter_jit
def _placement_checks(problem: Problem, node_of: jax.Array, primary_of: jax.Array, r: jax.Array):
    """[N] each: affinity broken, fault- and upgrade-domain measure change, if replica r went there."""
    p = problem.replica_partition[r]
    s = problem.replica_service[r]
    before = partition_nodes(problem, node_of, p)
    was = partition_domain_violations(problem, before, s)

    def on(node):
        after = jnp.where(problem.partition_replicas[p] == r, node, before)
        change = partition_domain_violations(problem, after, s) - was
        return affinity_violated(problem, node_of, primary_of, r, node, primary_of[p] == r), change[0], change[1]

    return jax.vmap(on)(jnp.arange(problem.node_up.shape[0]))


def elimination_sequence(
    index: Index, problem: Problem, node_of: np.ndarray, primary_of: np.ndarray, loads: np.ndarray, r: int
) -> list[dict]:
    """SF's constraint elimination sequence for unplaced replica r in placement `node_of`."""
    n = index.n_nodes
    p = int(problem.replica_partition[r])
    cls = int(problem.service_class[problem.replica_service[r]])
    load = np.asarray(problem.load_primary[r] if primary_of[p] == r else problem.load_secondary[r])
    affinity, fd, ud = (
        np.asarray(x)[:n]
        for x in _placement_checks(problem, jnp.asarray(node_of), jnp.asarray(primary_of), jnp.asarray(r))
    )
    taken = {int(node_of[q]) for q in index.partition_rows[p] if node_of[q] >= 0}
    capacity = np.asarray(problem.capacity)[:n]
    fits = np.all((load <= 0) | (loads[:n] + load <= capacity), axis=1)
    checks = [  # SF's checker order; Affinity comes last
        ("ReplicaExclusionStatic", np.array([i not in taken for i in range(n)])),
        ("PlacementConstraint", np.asarray(problem.class_allowed[cls])[:n]),
        ("FaultDomain", fd <= 0),
        ("UpgradeDomain", ud <= 0),
        ("NodeCapacity", fits),
        ("Affinity", ~affinity),
    ]
    remaining = np.array([s is NodeStatus.UP for s in index.node_status])  # candidates: the Up nodes
    out = []
    for name, ok in checks:
        eliminated = remaining & ~ok
        remaining &= ok
        out.append(
            {
                "Constraint": name,
                "Eliminated": [index.nodes[i] for i in np.flatnonzero(eliminated)],
                "Remaining": int(remaining.sum()),
            }
        )
    return out


def _report(prop: str, entity: str, description: str, state: str = "Warning") -> dict:
    return {"SourceId": SOURCE, "Property": prop, "HealthState": state, "Entity": entity, "Description": description}


def health_reports(index: Index, problem: Problem, node_of: np.ndarray, report: Assessment[np.ndarray]) -> list[dict]:
    """SF-style reports for the violations a placement still has."""
    v = report.violations
    out = []
    capacity = np.asarray(problem.capacity)
    reserved = np.zeros_like(v.capacity) if v.apps is None else np.asarray(v.apps.reserved)
    for n, m in zip(*np.nonzero((v.capacity + reserved)[: index.n_nodes, : len(index.metrics)] > 0)):
        held = ", with what the applications on it reserve," if reserved[n, m] > 0 else ""
        out.append(
            _report(
                "NodeCapacityViolation",
                index.nodes[n],
                f"Node {index.nodes[n]} is over capacity for metric {index.metrics[m]}: load "
                f"{float(report.loads[n, m]):g}{held} exceeds capacity {float(capacity[n, m]):g}.",
            )
        )
    threshold = np.asarray(problem.threshold_load)
    for n, m in zip(*np.nonzero(v.threshold[: index.n_nodes, : len(index.metrics)] > 0)):
        out.append(
            _report(
                "ResourceThresholdExceeded",
                index.nodes[n],
                f"Node {index.nodes[n]} stays above the resource threshold for metric {index.metrics[m]}: "
                f"load {float(report.loads[n, m]):g} exceeds {float(threshold[n, m]):g}; the cluster "
                "has no room elsewhere to bring it under.",
            )
        )
    replica_partition = np.asarray(problem.replica_partition)

    def replica_report(r: int, constraint: str) -> dict:
        p = int(replica_partition[r])
        service, pid = index.partitions[p]
        return _report(
            f"ReplicaConstraintViolation_{constraint}",
            f"{service}/{pid}/{index.replica_ids[r]}",
            f"The Load Balancer has detected a Constraint Violation for this Replica: {service} "
            f"Partition {pid} Replica {index.replica_ids[r]} is violating the Constraint: {constraint} "
            f"Details: Replica on NodeName -- {index.nodes[node_of[r]]}",
        )

    kinds = [(v.placement, "PlacementConstraint"), (v.affinity, "Affinity")]
    if v.apps is not None:  # SF's constraint names (IConstraint::Enum)
        kinds += [(v.apps.scaleout_replicas, "ScaleoutCount"), (v.apps.capacity_replicas, "ApplicationCapacity")]
    for replicas, constraint in kinds:
        for r in np.flatnonzero(replicas[: index.n_replicas]):
            out.append(replica_report(int(r), constraint))
    trees = (
        (v.fault_domain, "FaultDomain", np.asarray(problem.fd_tree)),
        (v.upgrade_domain, "UpgradeDomain", np.asarray(problem.ud_tree)),
    )
    for partitions, constraint, tree in trees:
        for p in np.flatnonzero(partitions[: index.n_partitions]):
            placed = [r for r in index.partition_rows[p] if node_of[r] >= 0]
            leaf = [int(tree[node_of[r], -1]) for r in placed]
            for r, d in zip(placed, leaf):  # replicas sharing their domain with another
                if leaf.count(d) > 1:
                    out.append(replica_report(int(r), constraint))
    for r in np.flatnonzero(v.unplaced[: index.n_replicas]):
        p = int(replica_partition[r])
        service, pid = index.partitions[p]
        out.append(
            _report(
                "ReplicaUnplaced",
                f"{service}/{pid}",
                f"Service {service} partition {pid} has a replica that cannot be placed; see Unplaced "
                "for the constraint elimination sequence.",
                "Error",
            )
        )
    return out


def unpromoted_reports(index: Index, partitions: np.ndarray) -> list[dict]:
    """SF's Error report on each of the `partitions` [P] left without a primary (no secondary may
    be promoted): below its quorum of writable replicas, the Failover Manager's PartitionHealth."""
    out = []
    for p in np.flatnonzero(partitions[: index.n_partitions]).tolist():
        service, pid = index.partitions[p]
        out.append(
            _report(
                "PrimaryReplicaUnplaced",
                f"{service}/{pid}",
                f"Service {service} partition {pid} has no primary replica and none of its secondaries can "
                "be promoted; see Unplaced for the constraint elimination sequence.",
                "Error",
            )
        )
    return out
