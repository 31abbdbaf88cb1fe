"""The plan document, rendered from what the phases left (`Parts`) only when asked for: `Phases`
explained, `Balance`, `Score`, `Nodes`, `Health`, `Unplaced`, `Remaining` and `Search`; the
`Actions` and `History` it carries are the plan's own."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from plbjax.sf._encoding import Index, Problem
from plbjax.sf._model import Placement, headless
from plbjax.sf._phases import (
    Drop,
    MetricBalance,
    Phase,
    Prepared,
    Reached,
    Run,
    balances,
    everywhere,
    promotion_eliminations,
    unpromoted,
)
from plbjax.sf._plan.diagnostics import elimination_sequence, health_reports, unpromoted_reports
from plbjax.sf._plan.explain import explain
from plbjax.sf._state import Action, ClusterState, Role

SCHEMA_VERSION = 1


class Outcome(NamedTuple):
    """Where the phases left the plan: each one's result, in SF's order, then the minimal-movement
    pass's; the metrics' balance before balancing; and, when asked for, each phase's blocks
    (`Search.Phases[].Trace`)."""

    reached: Reached
    balance_before: list[MetricBalance]
    traces: Mapping[Phase, tuple[dict, ...]] = MappingProxyType({})

    @property
    def final(self) -> Placement:
        """The placement the plan leaves."""
        return self.reached.now


class Parts(NamedTuple):
    """What the plan document is rendered from: the run, the prepared state, the phases' outcome."""

    run: Run
    ready: Prepared
    out: Outcome


@dataclasses.dataclass(frozen=True)
class SearchSummary:
    """The plan's `Search`: how the searches ran and where the time went."""

    version: str
    backend: str
    chains: int
    steps: int
    seconds: float
    seed: int
    budget: str
    interrupted: bool
    minimal: bool
    movements_removed: int
    compile_seconds: float
    phase_seconds: Mapping[str, float]
    device_memory: str | None = None  # why the search ran smaller than asked, if it did
    phases: tuple[dict, ...] = ()  # each phase's search (`Search.Phases`)

    def entry(self) -> dict:
        """The plan's `Search` entry."""
        entry = {
            "Version": self.version,
            "Backend": self.backend,
            "Chains": self.chains,
            "Steps": self.steps,
            "Seconds": self.seconds,
            "Seed": self.seed,
            "Budget": self.budget,
            "Interrupted": self.interrupted,
            "Minimal": self.minimal,
            "MovementsRemoved": self.movements_removed,
            "CompileSeconds": self.compile_seconds,
            "PhaseSeconds": dict(self.phase_seconds),
            "Phases": list(self.phases),
        }
        if self.device_memory:
            entry["DeviceMemory"] = self.device_memory
        return entry


def _with_drops(reached: Reached, drops: list[Drop]) -> Reached:
    """`reached` with placement's result saying the surplus drops, which it counts as its own."""
    if not drops:
        return reached
    placing = reached.result(Phase.PLACEMENT)
    said = dataclasses.replace(placing, ran=True, reason=f"{len(drops)} surplus replica(s) dropped; {placing.reason}")
    return reached._replace(results=tuple(said if r is placing else r for r in reached.results))


def render(
    parts: Parts, actions: tuple[Action, ...], history: Mapping[str, tuple[str, ...]], search: SearchSummary
) -> dict:
    """The plan document."""
    run, ready, out = parts
    state, _, problem, index = run.encoded
    final = out.final
    balance_after = balances(state, problem, index, final)
    told = explain(
        state,
        index,
        problem,
        _with_drops(out.reached, ready.drops),
        balance_after,
        run.priorities,
        int(((ready.initial.node_of >= 0) & ~everywhere(state, index)).sum()),
    )
    return {
        "SchemaVersion": SCHEMA_VERSION,
        "Phases": told.phases,
        "Balance": _balance_entries(out.balance_before, balance_after),
        "Score": {"Before": float(ready.input.report.avg), "After": float(final.report.avg)},
        "Actions": [a.document() for a in actions],
        "Nodes": _node_entries(index, problem, ready.input, final),
        "Health": ready.encoded.health
        + health_reports(index, problem, final.node_of, final.report)
        + unpromoted_reports(index, _without_primary(index, final)),
        "Unplaced": _unplaced(index, problem, final) + _unpromoted(index, problem, final, run.priorities),
        "History": {k: list(v) for k, v in history.items()},
        "Remaining": told.remaining,
        "Search": search.entry(),
    }


def history(state: ClusterState, index: Index, before: Placement, after: Placement) -> dict[str, tuple[str, ...]]:
    """The input's History with every replica moved by balancing remembering the node it left."""
    out = dict(state.history)  # tuples: a replica that moved gets a longer one
    for r in np.flatnonzero((before.node_of != after.node_of) & (before.node_of >= 0) & (after.node_of >= 0)):
        if index.replica_ids[r] is not None:
            rid = str(index.replica_ids[r])
            out[rid] = (*out.get(rid, ()), index.nodes[before.node_of[r]])
    return out


def _node_entries(index: Index, problem: Problem, before: Placement, after: Placement) -> list[dict]:
    """The plan's `Nodes`: capacities in force and loads before and after."""
    metrics, capacity = index.metrics, np.asarray(problem.capacity)
    return [
        {
            "NodeName": name,
            "Capacities": {m: float(capacity[n, k]) for k, m in enumerate(metrics) if np.isfinite(capacity[n, k])},
            "LoadsBefore": {m: float(before.report.loads[n, k]) for k, m in enumerate(metrics)},
            "LoadsAfter": {m: float(after.report.loads[n, k]) for k, m in enumerate(metrics)},
        }
        for n, name in enumerate(index.nodes)
    ]


def _balance_entries(before: list[MetricBalance], after: list[MetricBalance]) -> list[dict]:
    """The plan's `Balance`; `LocallyImbalanced` only where a service's own loads break LocalBalancingThreshold."""
    return [
        _local_entry(b, a)
        | {
            "Metric": b.metric,
            "NodeType": b.node_type,
            "MaxLoad": b.max_load,
            "MinLoad": b.min_load,
            "BalancingThreshold": b.threshold,
            "ActivityThreshold": b.activity,
            "IsBalancedBefore": b.balanced,
            "IsBalancedAfter": a.balanced,
            "DeviationBefore": b.deviation,
            "DeviationAfter": a.deviation,
        }
        for b, a in zip(before, after)
    ]


def _local_entry(before: MetricBalance, after: MetricBalance) -> dict:
    if not (before.local or after.local):
        return {}
    return {"LocallyImbalanced": {"Before": list(before.local), "After": list(after.local)}}


_NO_PRIMARY = "its partition's primary fits nowhere: secondaries are placed only with a primary (SF's Failover Manager)"


def _unplaced(index: Index, problem: Problem, final: Placement) -> list[dict]:
    """The plan's `Unplaced`: each replica left without a node and the nodes its constraints eliminate."""
    out, without_primary = [], headless(index, final)
    for r in np.flatnonzero(final.report.violations.unplaced):
        p = int(problem.replica_partition[r])
        service, pid = index.partitions[p]
        role = (Role.PRIMARY if final.primary_of[p] == r else Role.SECONDARY) if index.stateful[p] else Role.INSTANCE
        out.append(
            {
                "ServiceName": service,
                "PartitionId": pid,
                "Role": role.value,
                "ConstraintEliminationSequence": elimination_sequence(
                    index, problem, final.node_of, final.primary_of, final.report.loads, int(r)
                ),
            }
            | ({"Reason": _NO_PRIMARY} if role is Role.SECONDARY and without_primary[p] else {})
        )
    return out


_NO_PROMOTION = (
    "its primary is gone and no running secondary may become primary: the Failover Manager promotes one of"
    " them (the elimination sequence runs over their nodes); the partition keeps no primary until one may"
)


def _unpromoted(index: Index, problem: Problem, final: Placement, priorities: np.ndarray) -> list[dict]:
    """The plan's `Unplaced` primaries of partitions with running secondaries none of which may be
    promoted (`elect_primaries`), each with the constraints that eliminated their nodes."""
    return [
        {
            "ServiceName": index.partitions[p][0],
            "PartitionId": index.partitions[p][1],
            "Role": Role.PRIMARY.value,
            "ConstraintEliminationSequence": promotion_eliminations(problem, index, final, priorities, int(p)),
            "Reason": _NO_PROMOTION,
        }
        for p in np.flatnonzero(_without_primary(index, final)).tolist()
    ]


def _without_primary(index: Index, final: Placement) -> np.ndarray:
    """[P] partitions `unpromoted` leaves with no primary row at all (one that fits nowhere is
    listed in `Unplaced` as any replica that fits nowhere)."""
    return unpromoted(index, final) & (final.primary_of < 0)
