"""A plan's actions as steps an operator can run: each after the steps it depends on, named.

A step depends on
* the partition's previous action (the plan gives each partition's actions in an executable order,
  and Service Fabric reconfigures a partition one change at a time): so a swap comes before the
  move of the replica it demotes, and a move onto a node the partition leaves after that leaving;
* the moves off a node that make room for it there: a step that adds load to a node (a move onto
  it, a swap making its replica primary) waits for as many earlier moves, swaps or drops off that
  node as its capacity needs, counting the load of every step already started towards that node
  (a move holds room on both nodes until it is done) and freeing only that of the steps known to
  be done. With the replicas' loads unknown (no state given), it waits for every one of them.

The Failover Manager's actions (adds, drops, promotions) have no command; they come first, as
happening whenever it makes them, and a step that needs one waits for it like any other. Steps are
ordered topologically, the plan's order among those that may run; where none may (moves that each
need the room another frees, a cycle), the first in the plan's order runs with what is done and
says that it may find no room.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from plbjax.errors import BadInput
from plbjax.sf import Action, ActionKind, Role

FIELDS = ("ServiceName", "PartitionId", "Action", "SourceNode", "TargetNode")  # what each action must say
Loads = dict[str, dict[str, float]]  # node -> metric -> change of that node's load
EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class Room:
    """A node of the plan: its capacity and its load before the plan, per metric."""

    node: str
    capacities: dict[str, float]
    loads: dict[str, float]


@dataclasses.dataclass(frozen=True)
class PlanRead:
    """What carrying a plan out needs of its document: its actions, its nodes' room, its score."""

    actions: list[Action]
    nodes: list[Room]
    score: tuple[float, float]  # AvgStdDev before and after (nan if the plan does not say)


@dataclasses.dataclass
class Step:
    """One action of the plan (`index` into its Actions) with the steps (by position in the list) it
    waits for and why (`needs`: step -> reason), and a note where it may find no room."""

    index: int
    action: Action
    needs: dict[int, str] = dataclasses.field(default_factory=dict)
    note: str = ""

    @property
    def command(self) -> bool:
        return self.action.kind.is_movement


def read_plan(path: str | Path) -> PlanRead:
    """The plan document at `path`; BadInput naming the file and key if it cannot be read or is not a plan."""
    try:
        plan = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}; not a plan") from None
    return plan_read(plan, str(path))


def plan_read(plan: object, source: str) -> PlanRead:
    """The plan document's actions, nodes and score; BadInput naming the key if it is not a plan."""
    actions = plan.get("Actions") if isinstance(plan, dict) else None
    if not isinstance(actions, list):
        what = "a state document, not" if isinstance(plan, dict) and {"Nodes", "Partitions"} & set(plan) else "not"
        raise BadInput(f"{source}: Actions: missing; {what} a plan (plbjax state=STATE out=plan.json writes one)")
    for i, action in enumerate(actions):
        missing = [k for k in FIELDS if not isinstance(action, dict) or k not in action]
        if missing:
            raise BadInput(f"{source}: Actions[{i}].{missing[0]}: missing")
    try:
        read = [Action.from_document(a) for a in actions]
    except ValueError as exc:
        raise BadInput(f"{source}: Actions: {exc}") from None
    assert isinstance(plan, dict)
    nodes = [
        Room(n["NodeName"], n.get("Capacities") or {}, dict(n.get("LoadsBefore") or {}))
        for n in plan.get("Nodes") or []
    ]
    score = plan.get("Score") or {}
    return PlanRead(read, nodes, (score.get("Before", float("nan")), score.get("After", float("nan"))))


def order(actions: list[Action], nodes: list[Room], loads: list[Loads] | None = None) -> list[Step]:
    """`actions` as steps in an order that runs each after those it needs (see the module).
    `nodes`: the plan's nodes' room; `loads`: per action, what it changes of each node's load
    (`action_loads`); None: unknown."""
    ordering = _Ordering(actions, nodes, loads)
    for i, a in enumerate(actions):
        if not a.kind.is_movement:
            ordering.start(i, {})  # the Failover Manager's: whenever it makes them
    ready = [i for i in ordering.left if i not in ordering.previous or ordering.previous[i] in ordering.position]
    heapq.heapify(ready)
    waiting: dict[str, set[int]] = defaultdict(set)  # node -> steps waiting for a step off it to start
    waits: dict[int, list[str]] = {}  # and back
    while ordering.left:
        if ready:
            i = heapq.heappop(ready)
            needs, short = ordering.needs(i)
            later = [n for n in short if ordering.more_to_leave(i, n)]
            if later:  # wait for a step off that node to start
                for n in later:
                    waiting[n].add(i)
                waits[i] = later
                continue
            note = "may find no room: the moves off its node free too little" if short else ""
        else:  # a cycle: the first that may run runs, with the room the started steps give
            i = min(waits)
            needs, short = ordering.needs(i)
            note = "may find no room: it needs room that only later steps free (a cycle)" if short else ""
        for n in waits.pop(i, ()):
            waiting[n].discard(i)
        ordering.start(i, needs, note)
        woken = {j for n in ordering.changes(i) if i in ordering.leaving[n] for j in waiting[n]}
        if ordering.following.get(i) in ordering.left:
            woken.add(ordering.following[i])
        for j in woken - set(ready):
            heapq.heappush(ready, j)
    return ordering.steps


class _Ordering:
    """The steps so far, what each is sure to find done, and what they hold of each node."""

    def __init__(self, actions: list[Action], nodes: list[Room], loads: list[Loads] | None):
        self.actions, self.loads = actions, loads
        self.capacity = {n.node: n.capacities for n in nodes}
        self.held = {n.node: dict(n.loads) for n in nodes}  # before, + steps started
        self.previous: dict[int, int] = {}  # action -> the partition's previous action
        self.following: dict[int, int] = {}  # and back
        last: dict[tuple[str, str], int] = {}
        self.leaving: dict[str, set[int]] = defaultdict(set)  # node -> actions taking load off it
        for i, a in enumerate(actions):
            key = (a.service, str(a.partition))
            if key in last:
                self.previous[i], self.following[last[key]] = last[key], i
            last[key] = i
            for node, change in self.changes(i).items():
                if any(v < -EPS for v in change.values()):
                    self.leaving[node].add(i)
        self.left = {i for i, a in enumerate(actions) if a.kind.is_movement}
        self.steps: list[Step] = []
        self.position: dict[int, int] = {}  # action -> its step
        self.done_before: dict[int, int] = {}  # action -> the actions surely done when it starts (bits)

    def changes(self, i: int) -> Loads:
        """What action i changes of each node's load; loads unknown: a move or swap takes some off
        its source and puts some on its target, a drop takes some off its node."""
        if self.loads is not None:
            return self.loads[i]
        a = self.actions[i]
        src, dst = a.source or "", a.target or ""
        if a.kind.is_drop:
            return {src: {"": -np.inf}}
        if a.kind.is_movement:
            return {src: {"": -np.inf}, dst: {"": np.inf}}
        return {dst: {"": np.inf}}

    def start(self, i: int, needs: dict[int, str], note: str = "") -> None:
        self.done_before[i] = self._done(needs)
        implied = 0
        for d in needs:
            implied |= self.done_before[d]
        steps = {self.position[d]: why for d, why in needs.items() if not implied >> d & 1}
        self.position[i] = len(self.steps)
        self.steps.append(Step(i, self.actions[i], dict(sorted(steps.items())), note))
        self.left.discard(i)
        if self.loads is not None:  # a step started holds the room it takes until it is known done
            for node, change in self.loads[i].items():
                held = self.held.setdefault(node, {})
                for m, v in change.items():
                    held[m] = held.get(m, 0.0) + max(v, 0.0)

    def needs(self, i: int) -> tuple[dict[int, str], list[str]]:
        """The steps i waits for: the partition's previous ones (back to its previous command), then,
        on each node it adds load to, started steps off that node (earliest first) until it fits
        there; and the nodes where it does not fit even so."""
        needs, j = {}, i
        while j in self.previous:
            j = self.previous[j]
            needs[j] = "the partition's previous step"
            if self.actions[j].kind.is_movement:
                break
        done = self._done(needs)
        short = []
        for node, change in self.changes(i).items():
            grows = [m for m, v in change.items() if v > EPS]
            if not grows:
                continue
            for j in sorted((j for j in self.leaving[node] if j in self.position), key=self.position.__getitem__):
                if self._fits(i, node, grows, done):
                    break
                if not done >> j & 1:
                    needs[j] = f"room on {node}"
                    done |= self.done_before[j] | 1 << j
            if not self._fits(i, node, grows, done):
                short.append(node)
        return needs, short

    def more_to_leave(self, i: int, node: str) -> bool:
        """Whether a step not started yet takes load off `node`."""
        return any(j not in self.position and j != i for j in self.leaving[node])

    def _done(self, needs: dict[int, str]) -> int:
        """The steps surely done once `needs` are, as bits (step j: bit j)."""
        done = 0
        for d in needs:
            done |= self.done_before[d] | 1 << d
        return done

    def _fits(self, i: int, node: str, metrics: list[str], done: int) -> bool:
        """Whether i fits on `node` when every started step holds room there (on both of its nodes)
        and only the steps done before i have freed theirs."""
        if self.loads is None:  # unknown loads: once every step off the node is done
            return all(done >> j & 1 for j in self.leaving[node] if j != i)
        capacity, held = self.capacity.get(node, {}), self.held.get(node, {})
        freed = [self.loads[j][node] for j in self.leaving[node] if done >> j & 1]
        for m in metrics:
            cap = capacity.get(m)
            if cap is None or not np.isfinite(cap):
                continue
            load = held.get(m, 0.0) + self.loads[i][node][m] + sum(min(f.get(m, 0.0), 0.0) for f in freed)
            if load > cap + EPS:
                return False
        return True


def action_loads(state_path: str | Path, actions: list[Action]) -> list[Loads]:
    """Per action, what it changes of each node's load, by the loads plbjax plans with (the state's
    default and reported loads, the load following the role); BadInput where the state does not hold
    an action's replica (not the state the plan was made from)."""
    from plbjax.sf import encode, load_state

    problem, index = encode(load_state(state_path))
    metrics = index.metrics
    as_primary = np.asarray(problem.load_primary, np.float64)[:, : len(metrics)]
    as_secondary = np.asarray(problem.load_secondary, np.float64)[:, : len(metrics)]
    where: dict[tuple[str, str], dict[str, int]] = {}  # partition -> node -> row
    rows: dict[tuple[str, str], dict[str, int]] = {}  # partition -> ReplicaId -> row
    new: dict[tuple[str, str], list[int]] = {}  # partition -> rows of replicas to create
    for p, (service, pid) in enumerate(index.partitions):
        key = (service, str(pid))
        rows[key] = {str(index.replica_ids[r]): r for r in index.partition_rows[p] if index.replica_ids[r] is not None}
        new[key] = [r for r in index.partition_rows[p] if index.replica_ids[r] is None]
        where[key] = {index.nodes[n]: r for r in index.partition_rows[p] if (n := int(index.input_node[r])) >= 0}

    def load(r: int, role: Role | None) -> np.ndarray:
        return as_secondary[r] if role is Role.SECONDARY else as_primary[r]

    out = []
    for i, a in enumerate(actions):
        key, kind, src, dst = (a.service, str(a.partition)), a.kind, a.source, a.target
        if key not in rows:
            raise BadInput(f"--state: Actions[{i}]: partition {key[1]} of {key[0]} is not in the state")
        if a.replica is None and new[key]:
            r = new[key].pop(0)
        elif str(a.replica) in rows[key]:
            r = rows[key][str(a.replica)]
        else:
            raise BadInput(f"--state: Actions[{i}].ReplicaId: {a.replica} is not in the state")
        change: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(metrics)))
        if kind is ActionKind.SWAP_PRIMARY_SECONDARY:
            other = where[key].get(dst or "", r)
            change[src or ""] += as_secondary[r] - as_primary[r]
            change[dst or ""] += as_primary[other] - as_secondary[other]
        elif kind is ActionKind.PROMOTE_SECONDARY:
            change[dst or ""] += as_primary[r] - as_secondary[r]
        else:
            if src is not None and not kind.is_add:
                change[src] -= load(r, kind.role)
                where[key].pop(src, None)
            if dst is not None and not kind.is_drop:
                change[dst] += load(r, kind.role)
                where[key][dst] = r
        out.append({n: dict(zip(metrics, v.tolist())) for n, v in change.items()})
    return out
