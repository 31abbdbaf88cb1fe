"""Primaries elected where a partition's primary has no node or must leave a node deactivated with
Restart (SF's Failover Manager promotes a placed secondary), and secondaries undone where no
primary could be had (a partition is built from its primary)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from plbjax.sf._encoding import AFFINITY, CAPACITY, PREFERRED, THRESHOLD, Index, Problem
from plbjax.sf._model import Placement, assessed, headless, node_loads, violations
from plbjax.sf._state import Intent


def elect_primaries(
    problem: Problem, index: Index, now: Placement, priorities: np.ndarray, barred: np.ndarray | None = None
) -> Placement:
    """`now` with a placed secondary promoted in every stateful partition whose primary has no node
    (SF's Failover Manager promotes rather than builds a new primary), or is on a node deactivated
    with Intent Restart (swapped out, as SF's Failover Manager does before the restart): the one on
    the least loaded node that has room for the primary's load and breaks no hard constraint that
    held; none if none can, and none of the `barred` [R] replicas.

    Partitions are decided in order, as one at a time, but in rounds: every candidate of a round is
    tried in one batch (`_promotion_trials`) from the round's placement, and a partition whose
    reading (its candidates' node loads, its own and its affinity relatives' primaries) an earlier
    partition of the round may have changed waits for the next round."""
    enforced = tuple(k for k in _PROMOTION_KINDS if priorities[k] == 0)
    primary = now.primary_of[: index.n_partitions]
    node = np.where(primary >= 0, now.node_of[primary], -1)
    restart = np.array([intent is Intent.RESTART for intent in index.node_intent] + [False])  # [-1]: no node
    due = index.stateful[: index.n_partitions] & ((node < 0) | restart[node])
    barred = np.zeros(now.node_of.shape[0], bool) if barred is None else barred
    waiting = [p for p in np.flatnonzero(due).tolist() if _candidates(index, now, p, barred)]
    while waiting:
        order = {p: _candidates(index, now, p, barred) for p in waiting}
        worse = _promotion_trials(problem, now, [(p, r) for p in waiting for r in order[p]], enforced)
        primary_of, later = now.primary_of.copy(), []
        busy_nodes: set[int] = set()
        busy_partitions: set[int] = set()
        for p in waiting:
            nodes, relatives = {int(now.node_of[r]) for r in order[p]}, _relatives(problem, index, p)
            if nodes & busy_nodes or p in busy_partitions:
                later.append(p)
                busy_nodes |= nodes
                busy_partitions |= relatives
                continue
            chosen = next((r for r in order[p] if not worse[p, r].any()), None)
            if chosen is not None:
                primary_of[p] = chosen
                busy_nodes.add(int(now.node_of[chosen]))
                busy_partitions |= relatives
        if not np.array_equal(primary_of, now.primary_of):
            now = assessed(problem, now.node_of, primary_of)
        waiting = later
    return now


def built_from_primaries(problem: Problem, index: Index, start: Placement, now: Placement) -> Placement:
    """`now` without the replicas placed since `start` in stateful partitions left with no primary
    (none fits, none can be promoted): SF's Failover Manager builds a partition from its primary
    and places no secondary without one. They stay unplaced and are listed in `Unplaced`."""
    partition = np.asarray(problem.replica_partition)
    undo = (start.node_of < 0) & (now.node_of >= 0) & headless(index, now)[partition]
    if not undo.any():
        return now
    node_of = np.where(undo, -1, now.node_of)
    return assessed(problem, node_of, now.primary_of)


_PROMOTION_KINDS = (CAPACITY, AFFINITY, PREFERRED, THRESHOLD)  # the constraints a role change can alter
_KIND_NAMES = {
    CAPACITY: "NodeCapacity",
    AFFINITY: "Affinity",
    PREFERRED: "PreferredLocation",
    THRESHOLD: "ResourceThreshold",
}
RESTART = "NodeDeactivation"  # a node deactivated with Intent Restart hands its primaries over, takes none


def promotions(index: Index, now: Placement) -> int:
    """Stateful partitions whose input primary is gone (none, or not running) and whose primary in
    `now` is a running replica of the input: the secondaries promoted."""
    n = index.n_partitions
    head, primary = index.initial_primary[:n], now.primary_of[:n]
    lost = (head < 0) | (index.initial_node[np.maximum(head, 0)] < 0)
    running = (primary >= 0) & (index.initial_node[np.maximum(primary, 0)] >= 0)
    running &= now.node_of[np.maximum(primary, 0)] >= 0
    return int((index.stateful[:n] & lost & running & (primary != head)).sum())


def unpromoted(index: Index, now: Placement) -> np.ndarray:
    """[P] stateful partitions with running replicas but no running primary: none of their
    secondaries could be promoted (`elect_primaries`)."""
    without = headless(index, now)[: index.n_partitions]
    out = np.zeros(now.primary_of.shape[0], bool)
    for p in np.flatnonzero(without).tolist():
        out[p] = any(now.node_of[r] >= 0 for r in index.partition_rows[p])
    return out


def held_for_promotion(problem: Problem, index: Index, now: Placement) -> np.ndarray:
    """[R] the replicas of the partitions `unpromoted` leaves: the constraint check and balancing
    leave them where they are, so a later promotion stays as possible as it is now."""
    return unpromoted(index, now)[np.asarray(problem.replica_partition)]


def promotion_eliminations(
    problem: Problem, index: Index, now: Placement, priorities: np.ndarray, p: int
) -> list[dict]:
    """SF's constraint elimination sequence for partition p's primary, over the nodes of its running
    secondaries (the Failover Manager promotes one of them): those deactivated with Intent Restart
    first, then each constraint a promotion may break, in `_PROMOTION_KINDS` order (enforced ones)."""
    rows = [r for r in index.partition_rows[p] if now.node_of[r] >= 0]
    enforced = tuple(k for k in _PROMOTION_KINDS if priorities[k] == 0)
    restart = [r for r in rows if index.node_intent[now.node_of[r]] is Intent.RESTART]
    rest = [r for r in rows if r not in restart]
    worse = _promotion_trials(problem, now, [(p, r) for r in rest], enforced)
    remaining, out = list(rest), []
    for name, bad in [(RESTART, restart)] + [
        (_KIND_NAMES[k], [r for r in rest if worse[p, r][i]]) for i, k in enumerate(enforced)
    ]:
        eliminated = bad if name == RESTART else [r for r in bad if r in remaining]
        remaining = [r for r in remaining if r not in eliminated]
        nodes = sorted({index.nodes[now.node_of[r]] for r in eliminated})
        out.append({"Constraint": name, "Eliminated": nodes, "Remaining": len(remaining)})
    return out


def _candidates(index: Index, now: Placement, p: int, barred: np.ndarray) -> list[int]:
    """The placed secondaries that may take over partition p's primary, least loaded node first,
    those on a node deactivated with Pause last (it keeps its replicas in their roles while another
    can lead), none on one deactivated with Restart; none when p needs no promotion."""
    primary = int(now.primary_of[p])
    intent = lambda r: index.node_intent[now.node_of[r]] if now.node_of[r] >= 0 else None
    if not index.stateful[p] or (primary >= 0 and now.node_of[primary] >= 0 and intent(primary) is not Intent.RESTART):
        return []
    placed = [
        r
        for r in index.partition_rows[p]
        if r != primary and now.node_of[r] >= 0 and intent(r) is not Intent.RESTART and not barred[r]
    ]
    return sorted(placed, key=lambda r: (intent(r) is Intent.PAUSE, now.report.loads[now.node_of[r]].sum(), r))


def _relatives(problem: Problem, index: Index, p: int) -> set[int]:
    """Partition p, its affinity parent and its children: those whose affinity reads p's primary."""
    parents = np.asarray(problem.replica_parent)[list(index.partition_rows[p])]
    children = np.asarray(problem.children_of)[p]
    children = np.asarray(problem.replica_partition)[children[children >= 0]]
    return {p, *parents[parents >= 0].tolist(), *children.tolist()}


TRIAL_BATCH = 64  # promotion trials per compiled call (one size per problem shape: one compilation)
TRIAL_ROWS = 1 << 22  # replica rows one batch of promotion trials may cover


def _promotion_trials(
    problem: Problem, now: Placement, trials: list[tuple[int, int]], kinds: tuple[int, ...]
) -> dict[tuple[int, int], np.ndarray]:
    """{(partition, replica): [K] whether promoting the replica from `now` makes each of the
    constraint `kinds` worse somewhere}, as `assess` and `no_worse` would find, in batches of one
    compiled call."""
    if not trials or not kinds:
        return {t: np.zeros(len(kinds), bool) for t in trials}
    rows = problem.load_primary.shape[0]
    batch = min(TRIAL_BATCH, max(TRIAL_ROWS // rows, 1))
    padded = np.array(trials + trials[:1] * (-len(trials) % batch), np.int32)
    before = tuple(now.report.violations.by_kind()[k] for k in kinds)
    worse = [
        np.asarray(_worse(problem, now.node_of, now.primary_of, kinds, before, padded[i : i + batch]))
        for i in range(0, len(padded), batch)
    ]
    return dict(zip(trials, np.concatenate(worse)[: len(trials)]))


@eqx.filter_jit
def _worse(problem: Problem, node_of, primary_of, kinds: tuple[int, ...], before: tuple, trials):
    """[B, K] whether each (partition, replica) promotion in `trials` [B, 2] makes each of the
    constraint `kinds` worse than `before` (each kind's whole measure, `Violations.by_kind`: capacity
    with the application capacities, placement with the scaleout counts)."""

    def one(trial):
        promoted = primary_of.at[trial[0]].set(trial[1])
        after = violations(problem, node_of, promoted, node_loads(problem, node_of, promoted)).by_kind()
        worse = [
            jnp.any(jnp.stack([jnp.any(~(a <= b + 1e-6)) for a, b in zip(after[k], v)])) for k, v in zip(kinds, before)
        ]
        return jnp.stack(worse)

    return jax.vmap(one)(trials)
