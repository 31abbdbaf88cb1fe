"""Why a plan does what it does, and where it stopped: each action's phase and reason, the throttle
that bound a phase, the violations and imbalances left and what keeps them.

Computed on the host from what the phases hand on (their `PhaseResult`s, in a `Reached`): each
one's placement and its assessment, and SF's throttle settings. A balancing action's share is its part
of the phase's gain in AvgStdDev's global term (weighted load deviation per metric): how much that
term would rise were this action alone undone, over the same for all the phase's actions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from plbjax.sf._encoding import AFFINITY, CAPACITY, FAULT_DOMAIN, PLACEMENT, PREFERRED, UPGRADE_DOMAIN, Index, Problem
from plbjax.sf._model import Assessment, Placement
from plbjax.sf._phases import PHASES, Drop, MetricBalance, Phase, PhaseResult, Reached, throttle_limits
from plbjax.sf._state import Action, ActionKind, ClusterState, Intent, NodeStatus

SWAP, PROMOTE = ActionKind.SWAP_PRIMARY_SECONDARY, ActionKind.PROMOTE_SECONDARY

# ---------------------------------------------------------------------------------------------
# throttles


def movements_entry(limits: dict[str, int], spent: int, used: int) -> dict:
    """A phase's `Movements` {Allowed (null: unlimited), Used} and, when a throttle bound it, its
    `Throttle` {Setting, Limit, Allowed, Used}; `spent`: movements an earlier phase counted against
    the same throttles."""
    if not limits:
        return {"Movements": {"Allowed": None, "Used": used}}
    setting = min(limits, key=lambda k: (limits[k], k))
    allowed = max(limits[setting] - spent, 0)
    out: dict = {"Movements": {"Allowed": allowed, "Used": used}}
    if used >= allowed:
        out["Throttle"] = {"Setting": setting, "Limit": limits[setting], "Allowed": allowed, "Used": used}
    return out


# ---------------------------------------------------------------------------------------------
# violations


def violation_counts(index: Index, report: Assessment[np.ndarray], priorities: np.ndarray) -> list[dict]:
    """The enforced violations of a placement by constraint kind: `{Constraint, Count, Of}` with
    Of the unit counted (Nodes over capacity or threshold, Partitions with a domain rule broken or
    two replicas on a node, Replicas otherwise: of an application group in violation too)."""
    v = report.violations
    n, p, r, m = index.n_nodes, index.n_partitions, index.n_replicas, len(index.metrics)
    preferred = v.away[:r].sum() + v.preferred[:p].sum()
    capacity = v.capacity[:n, :m] + (0 if v.apps is None else v.apps.reserved[:n, :m])
    kinds = [
        ("ReplicaUnplaced", v.unplaced[:r].sum(), "Replicas", True),
        ("ReplicaExclusion", (v.exclusion[:p] > 0).sum(), "Partitions", True),
        ("NodeCapacity", (capacity > 0).any(1).sum(), "Nodes", priorities[CAPACITY] >= 0),
        ("PlacementConstraint", v.placement[:r].sum(), "Replicas", priorities[PLACEMENT] >= 0),
        ("FaultDomain", (v.fault_domain[:p] > 0).sum(), "Partitions", priorities[FAULT_DOMAIN] >= 0),
        ("UpgradeDomain", (v.upgrade_domain[:p] > 0).sum(), "Partitions", priorities[UPGRADE_DOMAIN] >= 0),
        ("Affinity", v.affinity[:r].sum(), "Replicas", priorities[AFFINITY] >= 0),
        ("PreferredLocation", preferred, "Replicas", priorities[PREFERRED] >= 0),
        ("ResourceThreshold", (v.threshold[:n, :m] > 0).any(1).sum(), "Nodes", True),
    ]
    if v.apps is not None:
        kinds += [
            ("ScaleoutCount", v.apps.scaleout_replicas[:r].sum(), "Replicas", priorities[PLACEMENT] >= 0),
            ("ApplicationCapacity", v.apps.capacity_replicas[:r].sum(), "Replicas", priorities[CAPACITY] >= 0),
        ]
    return [{"Constraint": k, "Count": int(c), "Of": of} for k, c, of, on in kinds if on and c]


def counts_text(counts: list[dict]) -> str:
    return ", ".join(f"{c['Constraint']} {c['Count']} {c['Of'].lower()}" for c in counts) or "none"


def _replica_violations(
    index: Index, report: Assessment[np.ndarray], r: int, p: int, node: int, primary: bool
) -> list[str]:
    """The violations replica r of partition p (on `node`, the node it leaves) takes part in, as `Kind on Node`."""
    v = report.violations
    name = index.nodes[node] if node >= 0 else "no node"
    out = []
    capacity = np.asarray(v.capacity) + (0 if v.apps is None else np.asarray(v.apps.reserved))
    over = np.flatnonzero(capacity[node, : len(index.metrics)] > 0) if node >= 0 else []
    if len(over):
        out.append(f"NodeCapacity ({', '.join(index.metrics[m] for m in over)}) on {name}")
    kinds = [(v.placement, "PlacementConstraint"), (v.affinity, "Affinity"), (v.away, "PreferredLocation")]
    if v.apps is not None:
        kinds += [(v.apps.scaleout_replicas, "ScaleoutCount"), (v.apps.capacity_replicas, "ApplicationCapacity")]
    for replicas, kind in kinds:
        if replicas[r]:
            out.append(f"{kind} on {name}")
    if primary and v.preferred[p]:
        out.append(f"PreferredLocation (primary domain) on {name}")
    for partitions, kind in ((v.fault_domain, "FaultDomain"), (v.upgrade_domain, "UpgradeDomain")):
        if partitions[p] > 0:
            out.append(f"{kind} of its partition (a replica on {name})")
    return out


# ---------------------------------------------------------------------------------------------
# actions


def _first_change(stages: list[np.ndarray]) -> np.ndarray:
    """Index (0 placement, 1 check, 2 balancing) of the first phase that changed each entry; 2 if none."""
    base, out = stages[0], np.full(stages[0].shape, 2)
    for k in (2, 1, 0):
        out = np.where(stages[k + 1] != base, k, out)
    return out


def _global_terms(problem: Problem, total: np.ndarray, squares: np.ndarray, count: np.ndarray) -> np.ndarray:
    """[..., M] each metric's weighted term of AvgStdDev's global domain from its node loads' sum
    and sum of squares over the `count` nodes it counts."""
    m = total.shape[-1]
    mean = total / count
    spread = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
    dev = np.where(mean > 0, spread / np.where(mean > 0, mean, 1.0), 0.0)
    dev = np.where(np.asarray(problem.metric_defrag)[:m], 1.0 - dev, dev)
    return np.asarray(problem.global_weight)[:m] * dev


def undo_gains(problem: Problem, loads: np.ndarray, gain: tuple, lose: tuple) -> np.ndarray:
    """[K, M] how much each metric's global term would rise were each of K actions undone: undoing
    one adds `gain` = (nodes [K], loads [K, M]) to one node and `lose` to another."""
    m = loads.shape[1]
    counted = np.asarray(problem.metric_nodes)[:m].T.astype(np.float64)  # [N, M]
    count = np.maximum(counted.sum(0), 1.0)
    total, squares = (counted * loads).sum(0), (counted * loads**2).sum(0)
    new_total, new_squares = total.copy(), squares.copy()
    for nodes, delta in (gain, lose):
        new_total = new_total + counted[nodes] * delta
        new_squares = new_squares + counted[nodes] * ((loads[nodes] + delta) ** 2 - loads[nodes] ** 2)
    now = _global_terms(problem, total, squares, count)
    return _global_terms(problem, new_total, new_squares, count) - now


class Explainer:
    """Phase and reason of each action `decoding.diff` builds (its `why` hook)."""

    def __init__(self, index: Index, problem: Problem, reached: Reached, balance_before: list[MetricBalance]):
        self.index, self.problem, self.reached = index, problem, reached
        self.partition_of = np.asarray(problem.replica_partition)
        initial, self.placed = reached.initial, reached.result(Phase.PLACEMENT).placement
        stages = [initial, *(reached.result(phase).placement for phase in PHASES)]
        self.row_phase = _first_change([stage.node_of for stage in stages])
        self.part_phase = _first_change([stage.primary_of for stage in stages])
        primaries = [stage.primary_of for stage in stages[1:]]  # placement's, the check's, balancing's
        self.promoted_in = np.where(primaries[2] != primaries[1], 2, np.where(primaries[1] != primaries[0], 1, 0))
        self.ratio = {b.metric: (b.max_load, b.min_load, b.threshold) for b in balance_before if not b.balanced}
        self.added_to = set(self.placed.node_of[(initial.node_of < 0) & (self.placed.node_of >= 0)].tolist())
        self.gains = self._gains()
        self.total = sum(float(g.sum()) for g in self.gains.values())

    def _gains(self) -> dict[tuple[str, int], np.ndarray]:
        """{("move", r) or ("swap", p): [M] per-metric gain} for balancing's movements."""
        index, problem, final, initial = self.index, self.problem, self.reached.now, self.reached.initial
        m = len(index.metrics)
        primary, secondary = (np.asarray(x, np.float64)[:, :m] for x in (problem.load_primary, problem.load_secondary))
        moved = (
            (final.node_of != initial.node_of) & (initial.node_of >= 0) & (final.node_of >= 0) & (self.row_phase == 2)
        )
        rows = np.flatnonzero(moved[: index.n_replicas])
        is_primary = final.primary_of[np.asarray(problem.replica_partition)[rows]] == rows
        load = np.where(is_primary[:, None], primary[rows], secondary[rows])
        swapped = (final.primary_of != initial.primary_of) & (initial.primary_of >= 0) & (self.part_phase == 2)
        parts = np.flatnonzero(swapped[: index.n_partitions])
        new, old = final.primary_of[parts], initial.primary_of[parts]
        ok = (new >= 0) & (final.node_of[np.maximum(new, 0)] >= 0) & (final.node_of[old] >= 0)
        parts, new, old = parts[ok], new[ok], old[ok]
        extra = primary - secondary  # what a primary carries beyond a secondary
        gains = undo_gains(
            problem,
            np.asarray(final.report.loads, np.float64)[:, :m],
            (np.concatenate([initial.node_of[rows], final.node_of[old]]), np.concatenate([load, extra[old]])),
            (np.concatenate([final.node_of[rows], final.node_of[new]]), -np.concatenate([load, extra[new]])),
        )
        keys = [("move", int(r)) for r in rows] + [("swap", int(p)) for p in parts]
        return dict(zip(keys, gains))

    def share(self, gain: np.ndarray) -> float | None:
        return round(float(gain.sum()) / self.total, 4) if self.total > 0 else None

    def __call__(self, r: int, kind: ActionKind, source: int, target: int) -> dict:
        p = int(self.partition_of[r])
        swap = kind in (SWAP, PROMOTE)
        phase = PHASES[int(self.part_phase[p] if swap else self.row_phase[r])]
        if kind.is_add or self._leaves_deactivated(kind, source) or (kind is PROMOTE and self.promoted_in[p] == 0):
            phase = Phase.PLACEMENT  # a promotion in preparation too (`elect_primaries`): placement's
        if kind is PROMOTE and phase is not Phase.PLACEMENT:
            phase = PHASES[int(self.promoted_in[p])]
            made = "the constraint check" if phase is Phase.CONSTRAINT_CHECK else "balancing"
            room = f"the partition's primary is gone: the secondary on {self.index.nodes[target]} takes over"
            return {"Phase": phase, "Reason": f"{room}, once {made} made room for it"}
        explain = {
            Phase.PLACEMENT: self._placement,
            Phase.CONSTRAINT_CHECK: self._check,
            Phase.BALANCING: self._balancing,
        }
        return {"Phase": phase, **explain[phase](r, kind, source, target)}

    def _leaves_deactivated(self, kind: ActionKind, source: int) -> bool:
        """A primary swapped out of a node deactivated with Restart (`elect_primaries`), or a replica
        leaving one deactivated with RemoveData or RemoveNode (placed elsewhere)."""
        intent = self.index.node_intent[source] if source >= 0 else None
        swap = kind is SWAP
        removed = intent is not None and not intent.keeps_replicas  # RemoveData, RemoveNode: built elsewhere
        return (swap and intent is Intent.RESTART) or ((swap or kind.is_move) and removed)

    def _placement(self, r: int, kind: ActionKind, source: int, target: int) -> dict:
        index = self.index
        if self._leaves_deactivated(kind, source):
            what = "swaps the primary out of" if kind is SWAP else "moves the replica off"
            return {"Reason": f"{what} {index.nodes[source]}, deactivated with Intent {index.node_intent[source]}"}
        given = int(index.input_node[r])
        if kind.is_add:
            lost = given >= 0 and index.node_status[given] is NodeStatus.DOWN
            lost_on = f", in place of the one lost with Down node {index.nodes[given]}" if lost else ""
            return {"Reason": f"places a missing replica on {index.nodes[target]}{lost_on}"}
        if kind is PROMOTE:
            return {"Reason": f"the partition's primary is gone: the secondary on {index.nodes[target]} takes over"}
        if source in self.added_to:
            return {"Reason": f"makes room on {index.nodes[source]} for a replica placed there"}
        return {"Reason": "moved by placement to make room (MoveExistingReplicaForPlacement)"}

    def _check(self, r: int, kind: ActionKind, source: int, target: int) -> dict:
        p = int(self.partition_of[r])
        primary = kind is SWAP or self.placed.primary_of[p] == r
        fixes = _replica_violations(self.index, self.placed.report, r, p, source, primary)
        if not fixes:
            return {"Reason": f"makes room for a replica in violation (leaves {self.index.nodes[source]})"}
        return {"Reason": "fixes " + "; ".join(fixes), "Constraint": fixes[0].split(" ")[0]}

    def _balancing(self, r: int, kind: ActionKind, source: int, target: int) -> dict:
        p = int(self.partition_of[r])
        gain = self.gains.get(("swap", p) if kind is SWAP else ("move", r))
        if gain is None:
            return {"Reason": "part of the balancing move set"}
        candidates = [k for k, name in enumerate(self.index.metrics) if name in self.ratio] or list(range(len(gain)))
        m = max(candidates, key=lambda k: gain[k])
        metric = self.index.metrics[m]
        share = self.share(gain)
        text = f"reduces {metric}'s imbalance"
        if metric in self.ratio:
            hi, lo, threshold = self.ratio[metric]
            text += f" (max/min {ratio_text(hi, lo)} > {threshold:g} before)"
        if share is not None:
            text += f"; {share:.0%} of balancing's gain"
        return {"Reason": text, "Metric": metric, "EnergyShare": share}


def ratio_text(hi: float, lo: float) -> str:
    return f"{hi / lo:.2f}" if lo > 0 else "inf"


def drop_reasons(state: ClusterState, drops: list[Drop]) -> list[Action]:
    """The surplus drops' actions (and a one-per-node service's instances where it may not go) with
    their phase (the plan reports them under Placement) and reason."""
    targets = {s.name: s.target for s in state.services}
    out = []
    for drop in drops:
        where = f"on {drop.node}" if drop.node else "that has no node"
        if targets[drop.service] < 0:
            reason = f"drops the instance {where}: its service, on every node it may use, may not use that node"
        else:
            target = targets[drop.service]
            reason = f"drops a surplus replica {where}: the partition holds more than its target {target}"
        out.append(drop.action({"Phase": Phase.PLACEMENT, "Reason": reason}))
    return out


# ---------------------------------------------------------------------------------------------
# what is left


def _phase_causes(balancing: PhaseResult, throttle: dict | None) -> list[str]:
    """What in the balancing phase kept a metric imbalanced: it did not run, or a throttle stopped it
    (`throttle`: its entry's `Throttle`)."""
    causes = [] if balancing.ran else [f"balancing did not run: {balancing.reason}"]
    if throttle:
        t = throttle
        causes.append(f"balancing stopped at {t['Setting']} ({t['Used']} of {t['Allowed']} movements allowed)")
    return causes


def _load_causes(index: Index, problem: Problem, final: Placement, metric: int, hi_n: int, lo_n: int) -> list[str]:
    """What in the loads keeps a metric's most loaded node `hi_n` apart from its least loaded `lo_n`:
    nothing at all on `lo_n`, load placement constraints keep off it, replicas too large to move."""
    loads = np.asarray(final.report.loads)[:, metric]
    hi, lo, name, high, low = (
        float(loads[hi_n]),
        float(loads[lo_n]),
        index.metrics[metric],
        index.nodes[hi_n],
        index.nodes[lo_n],
    )
    r = np.arange(index.n_replicas)
    primary, secondary = np.asarray(problem.load_primary)[r, metric], np.asarray(problem.load_secondary)[r, metric]
    classes = np.asarray(problem.service_class)[np.asarray(problem.replica_service)[r]]
    reaches = np.asarray(problem.class_allowed)[classes, lo_n]  # [R] replicas that may go to lo_n
    on = np.flatnonzero(final.node_of[r] == hi_n)
    load = np.where(final.primary_of[np.asarray(problem.replica_partition)[on]] == on, primary[on], secondary[on])
    causes = []
    if lo <= 0:
        unreachable = not (reaches & ((primary > 0) | (secondary > 0))).any()
        causes.append(
            f"{low} carries no {name}, so max/min is infinite"
            + (f": no replica carrying {name} may be placed there" if unreachable else "")
        )
    confined = float(load[~reaches[on]].sum())
    if confined > 0 and confined >= (hi - lo) / 2:
        causes.append(
            f"{confined:g} of {high}'s {hi:g} {name} is on replicas whose placement constraints keep them off {low}"
        )
    movable = load[(load > 0) & reaches[on]]
    if movable.size and movable.min() >= hi - lo:
        causes.append(
            f"every replica on {high} that may go to {low} carries at least {movable.min():g} {name}: "
            f"no single move narrows the gap of {hi - lo:g}"
        )
    return causes


def _metric_causes(
    index: Index, problem: Problem, final: Placement, metric: int, members: np.ndarray, phase_causes: list[str]
) -> tuple[dict, list[str]]:
    """(the most and least loaded node, what keeps one metric imbalanced) as far as the engine can
    tell; `phase_causes`: what in the balancing phase kept it so (`_phase_causes`)."""
    loads = np.asarray(final.report.loads)[: index.n_nodes, metric]
    nodes = np.flatnonzero(np.asarray(problem.metric_nodes)[metric, : index.n_nodes] & members)
    hi_n, lo_n = int(nodes[np.argmax(loads[nodes])]), int(nodes[np.argmin(loads[nodes])])
    causes = phase_causes + _load_causes(index, problem, final, metric, hi_n, lo_n)
    if not causes:
        causes.append("the search found no placement that balances it further within the constraints and throttles")
    return {"MostLoadedNode": index.nodes[hi_n], "LeastLoadedNode": index.nodes[lo_n]}, causes


def imbalanced_after(
    index: Index, problem: Problem, final: Placement, after: list[MetricBalance], phase_causes: list[str]
) -> list[dict]:
    """Every metric (and node type) still imbalanced after the plan: its ratio against its threshold
    (Ratio null: infinite) and what keeps it so."""
    out = []
    types = np.array(index.node_types, dtype=object)
    for b in after:
        if b.balanced:
            continue
        members = np.ones(index.n_nodes, bool) if b.node_type is None else types == b.node_type
        m = index.metrics.index(b.metric)
        where, causes = _metric_causes(index, problem, final, m, members, phase_causes)
        if 0 < b.threshold <= 1 and not np.asarray(problem.metric_defrag)[m]:
            causes.append(f"its BalancingThreshold {b.threshold:g} holds only where max - min <= 1 (SF's rule)")
        out.append(
            {
                "Metric": b.metric,
                "NodeType": b.node_type,
                "MaxLoad": b.max_load,
                "MinLoad": b.min_load,
                "Ratio": b.max_load / b.min_load if b.min_load > 0 else None,
                "BalancingThreshold": b.threshold,
                **where,
                "Causes": causes,
            }
        )
    return out


def _stopped(entry: dict, used: int, idle: str, done: str) -> str:
    """Why a phase that ran stopped: its throttle, what it did, or why it moved nothing."""
    t = entry.get("Throttle")
    if t:
        earlier = f"; earlier phases used {t['Limit'] - t['Allowed']}" if t["Limit"] > t["Allowed"] else ""
        return f"stopped at the throttle {t['Setting']}: {t['Used']} of {t['Allowed']} movement(s) allowed{earlier}"
    return done if used else f"moved nothing: {idle}"


def _entry(result: PhaseResult) -> dict:
    """A phase's entry in the plan's `Phases`: whether it ran and why."""
    return {"Phase": result.phase, "Ran": result.ran, "Reason": result.reason}


def _handed_over(index: Index, reached: Reached, entry: dict) -> dict:
    """Placement's entry when it searched nothing, but primaries changed hands before it (swapped
    out of nodes deactivated with Restart, or promoted where the primary is gone: `elect_primaries`,
    what SF's Failover Manager does); their actions are placement's, so it ran."""
    n = index.n_partitions
    handed = int((reached.initial.primary_of[:n] != index.initial_primary[:n]).sum())
    if not handed:
        return entry
    done = f"{handed} primary(ies) handed over as SF's Failover Manager does (a node deactivated with Restart, or none)"
    return dict(entry, Ran=True, Reason=f"{entry['Reason']}; {done}")


def _placement_entry(state: ClusterState, index: Index, reached: Reached, placeable: int) -> dict:
    """Placement's entry; once it ran, its `Movements`, the `Throttle` that bound it (only while
    replicas are left unplaced) and why it `Stopped`. `placeable`: replicas its throttles count."""
    entry = _entry(reached.result(Phase.PLACEMENT))
    if not entry["Ran"]:
        return _handed_over(index, reached, entry)
    initial, placed = reached.initial, reached.result(Phase.PLACEMENT).placement
    used = reached.movements(index, Phase.PLACEMENT)
    added = int(((initial.node_of < 0) & (placed.node_of >= 0))[: index.n_replicas].sum())
    left = int(np.asarray(placed.report.violations.unplaced)[: index.n_replicas].sum())
    entry.update(movements_entry(throttle_limits(state.settings, Phase.PLACEMENT, placeable), 0, used))
    if not left:
        entry.pop("Throttle", None)
    done = f"{added} replica(s) placed, {used} movement(s)" + (f"; {left} left unplaced" if left else "")
    if used + added or left:
        entry["Stopped"] = _stopped(entry, used + added, f"{left} replica(s) fit no node (see Unplaced)", done)
    return entry


def _check_entry(index: Index, reached: Reached, priorities: np.ndarray) -> dict:
    """The constraint check's entry; once it ran, its `Movements`, the violations before and after
    by kind and why it `Stopped`."""
    result = reached.result(Phase.CONSTRAINT_CHECK)
    entry = _entry(result)
    if not entry["Ran"]:
        return entry
    before = violation_counts(index, reached.before(Phase.CONSTRAINT_CHECK).report, priorities)
    after = violation_counts(index, result.placement.report, priorities)
    used = reached.movements(index, Phase.CONSTRAINT_CHECK)
    entry.update(movements_entry({}, 0, used), ViolationsBefore=before, ViolationsAfter=after)
    idle = f"no movement found that reduces the violations ({counts_text(before)})"
    done = f"{used} movement(s); violations {counts_text(before)} -> left: {counts_text(after)}"
    entry["Stopped"] = _stopped(entry, used, idle, done)
    return entry


def _balancing_entry(state: ClusterState, index: Index, reached: Reached, imbalanced: list[str]) -> dict:
    """Balancing's entry; once it ran, its `Movements` (placement's count against the same
    throttles), the `Throttle` that bound it and why it `Stopped`."""
    entry = _entry(reached.result(Phase.BALANCING))
    if not entry["Ran"]:
        return entry
    placed = int((reached.before(Phase.BALANCING).node_of >= 0).sum())
    used = reached.movements(index, Phase.BALANCING)
    limits = throttle_limits(state.settings, Phase.BALANCING, placed)
    entry.update(movements_entry(limits, reached.movements(index, Phase.PLACEMENT), used))
    still = ", ".join(sorted(set(imbalanced)))
    done = f"{used} movement(s); " + (f"still imbalanced: {still}" if still else "every metric balanced")
    idle = (
        "no placement found that lowers AvgStdDev by more than ScoreImprovementThreshold "
        f"({state.settings['ScoreImprovementThreshold']:g}) without worsening a constraint"
    )
    entry["Stopped"] = _stopped(entry, used, idle, done)
    return entry


class Told(NamedTuple):
    """The plan's explained parts: `Phases` and `Remaining` (`Explainer` gives each action its phase and reason)."""

    phases: list[dict]
    remaining: dict


def explain(
    state: ClusterState,
    index: Index,
    problem: Problem,
    reached: Reached,
    after: list[MetricBalance],
    priorities: np.ndarray,
    placeable: int,
) -> Told:
    """The plan's `Phases`, from each phase's result and where it started (`placeable`: replicas
    placement's throttles count), and its `Remaining`: the metrics still imbalanced after the plan
    (`after`) and what keeps them so, and the violations left by kind."""
    still = [b.metric for b in after if not b.balanced]
    balancing = _balancing_entry(state, index, reached, still)
    phases = [_placement_entry(state, index, reached, placeable), _check_entry(index, reached, priorities), balancing]
    causes = _phase_causes(reached.result(Phase.BALANCING), balancing.get("Throttle"))
    remaining = {
        "Imbalanced": imbalanced_after(index, problem, reached.now, after, causes),
        "Violations": violation_counts(index, reached.now.report, priorities),
    }
    return Told(phases, remaining)
