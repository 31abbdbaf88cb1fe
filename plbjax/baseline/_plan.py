"""The baseline's plan: one sequential chain balances the state (`run_baseline` on the balancing
problem, under SF's movement throttles) and its best placement is written as a plan document of the
shape `plbjax` writes (Actions, Score, Balance, Phases' Movements, Nodes, History, Search), so that
the sweep tables and `plbjax-compare` read both alike (`plbjax-baseline`).

The baseline balances only: a state with replicas to place or hard constraints broken is refused
(placement and the constraint check are plbjax's), as is one that uses a rule it does not implement
(`problem_arrays`). Like the rest of the baseline, the throttles are its own reading of SF's
GetAllowedMovements, not plbjax's code.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping

import numpy as np

from plbjax import BadInput
from plbjax.baseline._arrays import problem_arrays
from plbjax.baseline._sequential import probe_temperature, run_baseline
from plbjax.sf import (
    ClusterState,
    Phase,
    SearchConfig,
    apply_actions,
    diff,
    encode,
    findings,
    full_scope,
    parse_state,
    scope,
)

STEPS_PER_REPLICA = 2_000  # search.steps=auto: one chain's steps per replica (plbjax's chains share theirs)
BACKEND = "numba (sequential baseline)"  # the plan's Search.Backend
CHECKPOINTS = 20  # the chain's blocks (its temperature schedule is geometric across them)
_THROTTLES = (  # (absolute, percentage) pairs counted against balancing: 0 is no limit
    ("GlobalMovementThrottleThreshold", "GlobalMovementThrottleThresholdPercentage"),
    ("GlobalMovementThrottleThresholdForBalancing", "GlobalMovementThrottleThresholdPercentageForBalancing"),
)


def balancing_limits(settings: Mapping, placed: int) -> dict[str, int]:
    """{setting: most movements it allows} for balancing with `placed` replicas: MaxPercentageToMove
    (0: none), the global throttles and their balancing pair (0: no limit); percentages of the
    placed replicas, rounded up."""
    limits = {"MaxPercentageToMove": math.ceil(settings["MaxPercentageToMove"] * placed)}
    for absolute, percentage in _THROTTLES:
        if settings[absolute] > 0:
            limits[absolute] = int(settings[absolute])
        if settings[percentage] > 0:
            limits[percentage] = math.ceil(settings[percentage] * placed)
    return limits


@dataclasses.dataclass(frozen=True)
class SequentialPlan:
    """A plan of the baseline; `document()` is its plan document (as `plbjax.sf.Plan`'s)."""

    plan: dict

    def document(self) -> dict:
        return self.plan


def sequential_plan(state: ClusterState, search: SearchConfig, version: str) -> SequentialPlan:
    """Balance `state` with one sequential chain under its throttles; `search`'s seed, steps (auto:
    STEPS_PER_REPLICA a replica) or seconds, initial temperature (None: probed), probe factor, final
    ratio and swap probability apply; `version`: the plbjax that plans (`Search.Version`). BadInput
    for a state the baseline cannot plan."""
    before = findings(state)
    if before.unplaced or before.violations:
        raise BadInput(
            f"state: {before.unplaced} replica(s) to place and {before.violations} breaking a hard constraint: "
            "plbjax-baseline only balances (plbjax places and fixes them)"
        )
    start = time.perf_counter()
    problem, index = encode(state)
    placed = int((index.initial_node[: index.n_replicas] >= 0).sum())
    limits = balancing_limits(state.settings, placed)
    balanced = all(b.balanced for b in before.balance)  # SF's trigger: then balancing does not run
    out = None if balanced else _anneal(problem, index, search, min(limits.values()), placed)
    node_of, primary_of = (index.initial_node, index.initial_primary) if out is None else out[:2]
    actions = tuple(
        dataclasses.replace(a, notes={"Phase": Phase.BALANCING, "Reason": "the sequential baseline's best placement"})
        for a in diff(index, node_of, primary_of)
    )
    after = findings(_applied(state, actions))
    used = _movements(index, node_of, primary_of)
    plan = {
        "SchemaVersion": 1,
        "Phases": _phases(limits, used, balanced),
        "Balance": [_balance(b, a) for b, a in zip(before.balance, after.balance)],
        "Score": {"Before": before.avg_std_dev, "After": after.avg_std_dev},
        "Actions": [a.document() for a in actions],
        "Nodes": _nodes(index, np.asarray(problem.capacity), before.node_loads, after.node_loads),
        "Health": [],
        "Unplaced": [],
        "History": _history(state, index, node_of),
        "Search": _search(search, None if out is None else out[2], time.perf_counter() - start, version),
    }
    return SequentialPlan(plan)


def _budget(search: SearchConfig) -> str:
    """What bounds the chain: `search.seconds` when given without steps, else the steps."""
    return "seconds" if search.seconds is not None and search.steps in ("auto", None) else "steps"


def _anneal(problem, index, search: SearchConfig, budget: int, placed: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """The chain's best placement (node_of, primary_of) and `run_baseline`'s record: every placed
    replica may move, at most `budget` movements; BadInput for a rule the baseline lacks."""
    within = dataclasses.replace(full_scope(problem, index), budget=budget)
    try:
        arrays = problem_arrays(scope(problem, index.initial_node, index.initial_primary, within))
    except NotImplementedError as exc:
        raise BadInput(f"state: {exc} (plbjax plans it)") from None
    by_seconds = _budget(search) == "seconds"
    steps = search.steps if isinstance(search.steps, int) else STEPS_PER_REPLICA * placed
    t0 = search.initial_temperature or probe_temperature(
        arrays, search.seed, swap_probability=search.swap_probability, factor=search.probe_factor
    )
    out = run_baseline(
        arrays,
        steps=None if by_seconds else steps,
        seconds=search.seconds if by_seconds else None,
        seed=search.seed,
        t0=t0,
        final_ratio=search.final_ratio,
        swap_probability=search.swap_probability,
        checkpoints=CHECKPOINTS,
    )
    return out["node_of"], out["primary_of"], out


def _applied(state: ClusterState, actions: tuple) -> ClusterState:
    """`state` after `actions`, with the thresholds the command line set kept."""
    moved = parse_state(apply_actions(state.document, actions), "the sequential baseline's plan")
    kept = ("balancing_thresholds", "activity_thresholds")
    return dataclasses.replace(moved, **{name: getattr(state, name) for name in kept})


def _movements(index, node_of: np.ndarray, primary_of: np.ndarray) -> int:
    """Movements from the input as SF's throttles count them: placed replicas moved, primaries swapped."""
    origin_node, origin_primary = index.initial_node, index.initial_primary
    moved = (node_of != origin_node) & (origin_node >= 0)
    swapped = (primary_of != origin_primary) & (origin_primary >= 0)
    return int(moved.sum() + swapped.sum())


def _phases(limits: dict[str, int], used: int, balanced: bool) -> list[dict]:
    """The plan's `Phases`: placement and the constraint check had nothing to do; balancing, unless
    every metric was `balanced`, its movements and the throttle that bound it."""
    idle = "plbjax-baseline balances only; the state has nothing to place or fix"
    setting = min(limits, key=lambda k: (limits[k], k))
    allowed = limits[setting]
    balancing = {"Phase": Phase.BALANCING, "Ran": True, "Reason": "the sequential baseline's one chain"}
    balancing |= {"Movements": {"Allowed": allowed, "Used": used}, "Stopped": f"{used} movement(s)"}
    if balanced:
        balancing = {"Phase": Phase.BALANCING, "Ran": False, "Reason": "every metric is balanced: nothing to do"}
    elif used >= allowed:
        balancing["Throttle"] = {"Setting": setting, "Limit": allowed, "Allowed": allowed, "Used": used}
        balancing["Stopped"] = f"stopped at the throttle {setting}: {used} of {allowed} movement(s) allowed"
    return [
        {"Phase": Phase.PLACEMENT, "Ran": False, "Reason": idle},
        {"Phase": Phase.CONSTRAINT_CHECK, "Ran": False, "Reason": idle},
        balancing,
    ]


def _balance(before, after) -> dict:
    """A metric's `Balance` entry (as plbjax's plan gives it) from its balance before and after."""
    local = {"LocallyImbalanced": {"Before": list(before.local), "After": list(after.local)}}
    return (local if before.local or after.local else {}) | {
        "Metric": before.metric,
        "NodeType": before.node_type,
        "MaxLoad": before.max_load,
        "MinLoad": before.min_load,
        "BalancingThreshold": before.threshold,
        "ActivityThreshold": before.activity,
        "IsBalancedBefore": before.balanced,
        "IsBalancedAfter": after.balanced,
        "DeviationBefore": before.deviation,
        "DeviationAfter": after.deviation,
    }


def _nodes(index, capacity: np.ndarray, before: Mapping, after: Mapping) -> list[dict]:
    """The plan's `Nodes`: capacities in force and loads before and after."""
    return [
        {
            "NodeName": name,
            "Capacities": {
                m: float(capacity[n, k]) for k, m in enumerate(index.metrics) if np.isfinite(capacity[n, k])
            },
            "LoadsBefore": dict(before[name]),
            "LoadsAfter": dict(after[name]),
        }
        for n, name in enumerate(index.nodes)
    ]


def _history(state: ClusterState, index, node_of: np.ndarray) -> dict[str, list[str]]:
    """The input's History with every replica moved remembering the node it left."""
    out = {rid: list(nodes) for rid, nodes in state.history.items()}
    origin = index.initial_node
    for r in np.flatnonzero((node_of != origin) & (origin >= 0) & (node_of >= 0)).tolist():
        if r < index.n_replicas and index.replica_ids[r] is not None:
            out.setdefault(str(index.replica_ids[r]), []).append(index.nodes[origin[r]])
    return out


def _search(search: SearchConfig, out: dict | None, wall: float, version: str) -> dict:
    """The plan's `Search`: one chain, its steps, temperatures and energies (none searched: `out` None)."""
    phases = []
    if out is not None:
        phases.append(
            {
                "Phase": Phase.BALANCING,
                "Stopped": _budget(search),
                "Blocks": CHECKPOINTS,
                "Steps": out["steps"],
                "Chains": 1,
                "Tries": 1,
                "InitialTemperature": out["t0"],
                "InitialEnergy": out["initial_energy"],
                "Energy": out["best_energy"],
                "Seconds": round(out["seconds"], 3),
                "CompileSeconds": round(out["compile_seconds"], 3),
            }
        )
    return {
        "Version": version,
        "Backend": BACKEND,
        "Chains": 1,
        "Steps": sum(p["Steps"] for p in phases),
        "Seconds": sum(p["Seconds"] for p in phases),
        "Seed": search.seed,
        "Budget": _budget(search),
        "Interrupted": False,
        "Minimal": False,
        "MovementsRemoved": 0,
        "CompileSeconds": sum(p["CompileSeconds"] for p in phases),
        "PhaseSeconds": {"Balancing": round(wall, 3)},
        "Phases": phases,
    }
