"""SF's balancing: the imbalanced service domains move, within the balancing throttles, kept when
AvgStdDev falls by more than ScoreImprovementThreshold and no enforced constraint gets worse."""

from __future__ import annotations

import dataclasses
from itertools import repeat

import jax.numpy as jnp
import numpy as np

from plbjax.anneal import STOP, AnnealResult, Model, Schedule
from plbjax.sf._encoding import Index, Problem
from plbjax.sf._model import Placement, Scope, local_loads, local_masks, model, movements, no_worse, pad_to
from plbjax.sf._phases.balance_rule import LocalLoads, MetricBalance, metric_balance, service_domains
from plbjax.sf._phases.on_every_node import everywhere
from plbjax.sf._phases.phase import (
    Phase,
    PhaseResult,
    Reached,
    Run,
    movement_budget,
    scoped_search,
    swappable,
    transient,
)
from plbjax.sf._phases.search_config import SearchConfig
from plbjax.sf._state import PLB_SETTINGS, ClusterState


def balances(state: ClusterState, problem: Problem, index: Index, now: Placement) -> list[MetricBalance]:
    """Balance of each metric at `now`, each service's own loads included when LocalBalancingThreshold is on."""
    m = len(index.metrics)
    weights = np.asarray(problem.global_weight)[:m]
    local = None
    if float(state.settings["LocalBalancingThreshold"]) > 0:
        loads = np.asarray(local_loads(problem, jnp.asarray(now.node_of), jnp.asarray(now.primary_of)))
        local = LocalLoads(
            tuple(index.services),
            loads,
            np.asarray(local_masks(problem)),
            np.asarray(problem.service_metrics),
            np.asarray(problem.local_weight),
        )
    return metric_balance(
        state,
        index.metrics,
        index.node_types,
        now.report.loads[:, :m],
        np.asarray(problem.metric_nodes)[:m],
        weights,
        local,
    )


def _balancing_scope(state: ClusterState, imbalanced: set[str]) -> tuple[set[str], str]:
    """Services a balancing run may move, and why (SF: whole imbalanced service domains). An
    application upgrade freezes its services' partitions (SF's PlacementCreator: a partition in
    upgrade is not movable); with AllowBalancingDuringApplicationUpgrade false it holds every
    service domain holding one of them (PLBScheduler::RefreshAction: no balancing of a domain
    while `HasPartitionInAppUpgrade`)."""
    upgrade = state.upgrade
    frozen: set[str] = set()
    if upgrade is not None and upgrade.in_progress:
        if upgrade.scope == "Cluster":
            return set(), "a cluster upgrade is in progress: balancing is off"
        frozen = {s.name for s in state.services if s.application == upgrade.application}
    if not imbalanced:
        return set(), "every metric is balanced"
    held = frozen if not state.settings["AllowBalancingDuringApplicationUpgrade"] else set()
    movable, domains = set(), []
    for domain in service_domains(state):
        metrics = sorted({m.name for name in domain for m in state.service(name).metrics} & imbalanced)
        if metrics and not domain & held:
            movable |= domain
            domains.append(f"[{', '.join(sorted(domain))}] for {', '.join(metrics)}")
    movable -= {s.name for s in state.services if not s.balancing_enabled} | frozen
    if not movable:
        return set(), "the imbalanced services may not move (upgrading or balancing disabled)"
    return movable, "service domains to balance or defragment: " + "; ".join(domains)


def _throttled_partitions(state: ClusterState, index: Index, problem: Problem) -> np.ndarray:
    """[P] partitions balancing may not move: as many recent balancing movements (their replicas'
    History entries) as MovementPerPartitionThrottleThreshold, or more (SF counts only partitions
    that moved, so 0 freezes every partition with a recent movement)."""
    counts = np.zeros(problem.partition_service.shape[0], int)
    if not state.history:
        return counts > 0
    n = index.n_replicas
    moved = np.fromiter(map(len, map(state.history.get, map(str, index.replica_ids), repeat(()))), np.int64, n)
    np.add.at(counts, np.asarray(problem.replica_partition)[:n], moved)
    return (counts > 0) & (counts >= state.settings["MovementPerPartitionThrottleThreshold"])


def balancing_model(state: ClusterState, search: SearchConfig) -> Model | None:
    """Balancing's search with the state's SwapPrimaryProbability (SF's Searcher: a primary swap with
    that probability, else a move) when its Settings give one other than SF's default; None: the
    search's `swap_probability`, which every other phase uses."""
    given = float(state.settings["SwapPrimaryProbability"])
    return None if given == PLB_SETTINGS["SwapPrimaryProbability"] else model(given)


def balancing_phase(run: Run, reached: Reached, schedule: Schedule) -> PhaseResult:
    """Balance the imbalanced service domains, within what the throttles leave once placement's
    movements count against them; kept when AvgStdDev falls by more than ScoreImprovementThreshold
    and no enforced constraint gets worse."""
    (state, _, problem, index), priorities, now = run.encoded, run.priorities, reached.now
    balance = balances(state, problem, index, now)
    over = now.report.violations.threshold[: index.n_nodes, : len(index.metrics)] > 0
    imbalanced = {b.metric for b in balance if not b.balanced} | {index.metrics[m] for m in np.flatnonzero(over.any(0))}
    services, reason = _balancing_scope(state, imbalanced)
    if services and state.settings.get("MaxPercentageToMove", 0.3) == 0:  # SF's scheduler skips balancing
        services, reason = set(), "MaxPercentageToMove is 0: balancing may move nothing"
    if not services:
        return PhaseResult(Phase.BALANCING, False, reason, now)
    what, on_types = _what(run, now, balance, services, reached.movements(index, Phase.PLACEMENT))
    reason += on_types
    balancing = dataclasses.replace(run, model=run.balancing_model or run.model)
    result, search = _fewer_movements(balancing, now, what, schedule, *scoped_search(balancing, now, what, schedule))
    gain = now.report.avg - result.report.avg
    if (
        search.energy < search.initial_energy
        and gain > 0
        and gain >= state.settings["ScoreImprovementThreshold"]
        and no_worse(now.report.violations, result.report.violations, priorities)
    ):
        return PhaseResult(Phase.BALANCING, True, reason, result, search)
    return PhaseResult(Phase.BALANCING, True, reason + "; no better placement was found", now, search)


TIGHTER_SHARE = 0.5  # the tighter search's steps, a share of the first's
FEWER_MOVEMENTS_UP_TO = 16  # searches that made more movements keep them: a tie to the last movement is a
# small cluster's (a tighter search cost 10,000 replicas' balancing a third more time, and found none)


def _fewer_movements(
    run: Run, now: Placement, what: Scope, schedule: Schedule, found: Placement, search: AnnealResult
) -> tuple[Placement, AnnealResult]:
    """`found`, or a placement as good with fewer movements: a second search from `now` allowed one
    movement less than `found` made, kept when SF's energy (AvgStdDev traded against the move costs)
    is no higher, so fewer but dearer movements do not win (SF's BalancingWithMoveCost). SF keeps
    the lowest energy of its searches (Searcher::SimulatedAnnealing over several
    SimulatedAnnealingSolutions, fewer movements breaking a tie), and its node-load heuristic walks
    straight from the most to the least loaded nodes; one chain of random moves can end a movement
    above the fewest (SF's BalancingBasicTest: three where the search found four, undoing any one of
    which loses the balance). Step-bounded searches that made 2 to `FEWER_MOVEMENTS_UP_TO` movements
    only."""
    made = movements(run.encoded.index, now.node_of, now.primary_of, found)
    if (
        schedule.seconds is not None
        or schedule.steps is None
        or not 2 <= made <= FEWER_MOVEMENTS_UP_TO
        or STOP.is_set()
    ):
        return found, search
    steps = max(
        run.kernel.block_steps, int(schedule.steps * TIGHTER_SHARE) // run.kernel.block_steps * run.kernel.block_steps
    )
    tighter, more = scoped_search(
        run, now, dataclasses.replace(what, budget=made - 1), dataclasses.replace(schedule, steps=steps)
    )
    fewer = more.energy <= search.energy + 1e-6 * abs(search.energy)  # SF's energy: the move costs count
    search = dataclasses.replace(
        search, seconds=search.seconds + more.seconds, compile_seconds=search.compile_seconds + more.compile_seconds
    )  # its steps are not the phase's `Steps` (the search's schedule), its seconds are
    if fewer and no_worse(found.report.violations, tighter.report.violations, run.priorities):
        return tighter, dataclasses.replace(search, energy=min(search.energy, more.energy))
    return found, search


def _what(run: Run, now: Placement, balance: list[MetricBalance], services: set[str], spent: int) -> tuple[Scope, str]:
    """What balancing may do: move the placed replicas of `services` outside the partitions at the
    per-partition throttle, only on the imbalanced node types' nodes where metrics balance per node
    type (the reason names them), within the throttles' movements less `spent`; swap their primaries."""
    state, _, problem, index = run.encoded
    open_nodes, on_types = None, ""
    if any(b.node_type is not None for b in balance) or run.node_type is not None:  # only these types move
        types = {b.node_type for b in balance if not b.balanced} if run.node_type is None else {run.node_type}
        open_nodes = pad_to(np.array([t in types for t in index.node_types]), problem.node_up.shape[0])
        on_types = " on node types " + ", ".join(sorted(str(t) for t in types))
    of_service = np.array(
        [index.partitions[p][0] in services for p in range(index.n_partitions)]
        + [False] * (now.primary_of.shape[0] - index.n_partitions)
    )
    of_service &= ~_throttled_partitions(state, index, problem)
    movable = of_service[np.asarray(problem.replica_partition)] & (now.node_of >= 0) & ~everywhere(state, index)
    movable[index.n_replicas :] = False
    if open_nodes is not None:
        movable &= open_nodes[np.maximum(now.node_of, 0)]
    budget = max(movement_budget(state, Phase.BALANCING, int((now.node_of >= 0).sum())) - spent, 0)
    what = Scope(
        movable,
        swappable(index, now, of_service),
        run.priorities >= 0,
        open_nodes=open_nodes,
        budget=budget,
        history=True,
        partition_budget=state.settings["MovementPerPartitionThrottleThreshold"] or None,
        violation_weight=0.0,
        transient=transient(state.settings),
    )
    return what, on_types
