"""The concurrent scheduler of plbjax-apply: starts each step once the steps it needs are done, within
the limits on moves per node and in the cluster, and watches the cluster until each is done.

One thread (the caller's) owns every step's state; a small pool makes the HTTP calls. A step's life:
pending -> checking (its partition and the nodes read, its precondition checked) -> issued (written to
the journal, then sent; watched until the cluster shows it done) -> done; or skipped (precondition,
or a step it needs did not get done), failed (SF refused it, or the cluster could not be read),
timed-out. A request left without an answer is looked for in the cluster before it is sent again,
and only if its precondition still holds: no move is ever made twice.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from plbjax.errors import BadInput
from plbjax.sf import Action, ActionKind, HealthState, NodeStatus, Role
from plbjax.sf.live.apply.decide import Board, Gates, Limits, Policy, decide, nodes_of
from plbjax.sf.live.apply.expectations import BUILDING, NONE, Holding, after, before, mismatches
from plbjax.sf.live.apply.journal import AGAIN, Journal, Status, now
from plbjax.sf.live.apply.preflight import Read, Standing, verdict
from plbjax.sf.live.apply.steps import Step
from plbjax.sf.live.rest import BUSY, Cluster, HttpError, application_id

SENDS = 3  # sends of one step in one run, each after its precondition was checked again
TICK = 0.05  # seconds between two looks at the finished calls


def describe(k: int, steps: list[Step]) -> str:
    """'step K/N: Action service partition P A -> B', K counted from 1."""
    a = steps[k].action
    where = f"{a.source or '-'} -> {a.target or '-'}"
    return f"step {k + 1}/{len(steps)}: {a.kind} {a.service} partition {a.partition} {where}"


def precondition(action: Action, held: dict[str, Holding], status: dict[str, str]) -> str:
    """Why `action` may not start now, in SF's words ('' when it may): a node not Up, or the partition's
    replicas not as `expectations.before` says."""
    for node in (action.source, action.target):
        if node and status.get(node) != NodeStatus.UP:
            return f"node {node} is {status.get(node) or 'not in the cluster'}, not Up"
    return "; ".join(mismatches(held, before(action.kind, action.source, action.target)))


def shows(action: Action, held: dict[str, Holding]) -> bool:
    """Whether the cluster shows a sign of the move having been made (its target building or holding it)."""
    src, dst = held.get(action.source or ""), held.get(action.target or "")
    if action.kind is ActionKind.SWAP_PRIMARY_SECONDARY:
        return getattr(dst, "role", "") == Role.PRIMARY or getattr(src, "role", "") != Role.PRIMARY
    return dst is not None


class Executor:
    """Carries out `steps` on `cluster`, recording each change in `journal`; `say` logs a line."""

    def __init__(
        self,
        steps: list[Step],
        cluster: Cluster,
        journal: Journal,
        say: Callable[[str], None],
        *,
        per_node: int,
        max_in_flight: int,
        step_timeout: float,
        poll: float,
        bases: dict[str, dict[str, str]] | None = None,
        settled: Mapping[int, tuple[Status, str]] | None = None,
        policy: Policy | None = None,
    ) -> None:
        """The limits: moves per node and in the cluster at once, seconds a step may take and between two
        looks at a partition; `bases`: partition -> node -> role as the plan found it (from --state), or
        None: as this run first reads it; `settled`: plan action -> (DONE or SKIPPED, why), as the
        preflight found them before the first step."""
        self.steps, self.cluster, self.journal, self.say = steps, cluster, journal, say
        self.settled = dict(settled or {})
        self.poll = poll
        self.bases = bases
        self.limits = Limits(per_node, max_in_flight, step_timeout)
        self.seen: dict[str, dict[str, str]] = {}  # partition -> node -> role, as first read
        self.partition: dict[str, list[tuple[int, Action]]] = {}  # partition -> its (index, action)s in order
        for step in sorted(steps, key=lambda s: s.index):
            self.partition.setdefault(str(step.action.partition), []).append((step.index, step.action))
        self.done_before: set[int] = set()  # actions done before this run
        self.state = [Status.PENDING] * len(steps)
        self.since: dict[int, float] = {}  # step -> when its watch began (monotonic)
        self.sends: Counter[int] = Counter()
        self.load: Counter[str] = Counter()  # node -> moves in flight into or out of it
        self.in_flight = self.most = 0
        self.durations: list[float] = []
        self.jobs: dict[Future, tuple[str, object]] = {}
        self.polled: dict[str, float] = {}  # partition -> when last asked for
        self.pool = ThreadPoolExecutor(max(4, min(32, max_in_flight + 4)))
        self.stopping = self.aborted = False
        self.knock_on: set[int] = set()  # steps skipped because a step they need was not done
        self.tick: Callable[[], None] = lambda: None  # called between two looks (the progress line)
        self.policy = policy or Policy()
        self.gates, self.gates_at = Gates(), -math.inf  # SF's health and upgrades, read at most once per poll
        self.held: dict[int, float] = {}  # step -> when a gate first held it (monotonic)
        self.ever_held: set[int] = set()  # steps a gate held at some point
        self.gave_up: set[int] = set()  # steps skipped after a gate held them past the policy's timeout
        self.unread: set[str] = set()  # what of SF's health could not be read (said once)
        self.reported: set[tuple[str, tuple[str, ...]]] = set()  # changes made without the plan, said once

    def run(self) -> None:
        """Every step to its end (or to the stop asked by `interrupt`)."""
        try:
            self._resume()
            while not self.aborted and self._busy():
                if not self.stopping:
                    self._start_ready()
                self._poll_due()
                if not self.jobs:
                    time.sleep(TICK)  # nothing asked of the cluster now: the next poll is due later
                finished, _ = wait(list(self.jobs), timeout=TICK, return_when=FIRST_COMPLETED)
                for future in finished:
                    self._finish(future)
                self._time_out()
                self.tick()
        finally:
            self.pool.shutdown(wait=not self.aborted, cancel_futures=True)

    def interrupt(self) -> None:
        """First call: issue nothing more, watch what is in flight; second: stop waiting at once."""
        self.aborted, self.stopping = self.stopping, True

    def counts(self) -> Counter[Status]:
        return Counter(self.state)

    def _busy(self) -> bool:
        if self.jobs or any(s in (Status.CHECKING, Status.ISSUED) for s in self.state):
            return True
        return not self.stopping and Status.PENDING in self.state

    def _resume(self) -> None:
        """Steps as the journal has them: done stay done, issued are looked for, the others tried again."""
        for k, step in enumerate(self.steps):
            status = self.journal.status(step.index)
            if status != Status.DONE and step.index in self.settled:
                settled, why = self.settled[step.index]
                self.done_before.update([step.index] if settled == Status.DONE else [])
                self.journal.set(step.index, step=k + 1)
                self._end(k, settled, why)
            elif status == Status.DONE:
                self.state[k] = Status.DONE
                self.done_before.add(step.index)
            elif status == Status.ISSUED:
                self.say(f"{describe(k, self.steps)}: issued by an earlier run; looking for it in the cluster")
                self._begin(k)
            elif status in AGAIN:
                self.journal.set(step.index, status=Status.PENDING, step=k + 1)

    def _board(self) -> Board:
        return Board(tuple(self.state), dict(self.since), dict(self.load), self.in_flight, dict(self.held))

    def _start_ready(self) -> None:
        """`decide`'s starts, holds and skips, in the steps' order, SF's health and upgrades read first."""
        self._read_gates()
        clock = time.monotonic()
        decision, board = decide(self.steps, self._board(), self.limits, clock, gates=self.gates, policy=self.policy)
        for k, why in decision.hold:
            if k not in self.held:
                wait = f"{self.policy.timeout:g} s"
                self.say(f"{describe(k, self.steps)}: held: {why}; waiting up to {wait} (--health-timeout)")
            self.ever_held.add(k)
        self.held = dict(board.held)
        skipped = dict(decision.skip)
        for k, why in decision.gave_up:
            self.gave_up.add(k)
            self._end(k, Status.SKIPPED, f"{why}, still after {self.policy.timeout:g} s (--health-timeout)")
        for k in sorted([*decision.begin, *skipped]):
            if k in skipped:
                self.knock_on.add(k)
                self._end(k, Status.SKIPPED, f"needs step {skipped[k] + 1}, {self.state[skipped[k]]}")
            else:
                self._begin(k)

    def _read_gates(self) -> None:
        """SF's upgrade state and health, at most once per poll, for the moves that may start now: the
        cluster's upgrade and health (one read each); where the cluster is not Ok, the partitions' and
        nodes' health; the applications' upgrades. What cannot be read is said once and does not hold."""
        clock = time.monotonic()
        if clock - self.gates_at < self.poll:
            return
        ready = [
            s
            for k, s in enumerate(self.steps)
            if s.command and self.state[k] == Status.PENDING and all(self.state[d] == Status.DONE for d in s.needs)
        ]
        if not ready:
            return
        self.gates_at = clock
        apps = {}
        upgrade = self._ask("the cluster's upgrade progress", "", self.cluster.upgrade)
        if self.policy.hold_upgrade:
            names = sorted({application_id(s.action.service) for s in ready} - {""})
            found = self.pool.map(
                lambda a: self._ask(f"fabric:/{a}'s upgrade progress", "", self.cluster.upgrade, a), names
            )
            apps = {a: state for a, state in zip(names, found) if state}
        partitions: dict[str, HealthState] = {}
        nodes: dict[str, HealthState] = {}
        if self._ask("the cluster's health", HealthState.UNKNOWN, self.cluster.cluster_health) is not HealthState.OK:
            first = [s for k, s in enumerate(self.steps) if k in self.held]  # bounded: the held and the next ones
            first += ready[: 2 * self.limits.max_in_flight]
            pids = sorted({str(s.action.partition) for s in first})
            names = sorted({n for s in first for n in nodes_of(s)})
            partitions = self._healths("a partition's health", self.cluster.partition_health, pids)
            nodes = self._healths("a node's health", self.cluster.node_health, names)
        if upgrade and not self.gates.upgrade:
            hold = "every move held" if self.policy.hold_upgrade else "moves go on (continue)"
            self.say(f"a cluster upgrade is {upgrade}: {hold} (--during-upgrade)")
        elif self.gates.upgrade and not upgrade:
            self.say("the cluster upgrade no longer rolls: the held moves go on")
        if nodes:  # a node not Up is the precondition's (the step skipped at once), not a gate's
            status = self._ask("the nodes", {}, self.cluster.nodes)
            nodes = {n: h for n, h in nodes.items() if NodeStatus.from_sf(status.get(n, "")) is NodeStatus.UP}
        self.gates = Gates(upgrade, apps, partitions, nodes, frozenset(partitions) if partitions else None)

    def _healths(self, what: str, call: Callable[[str], HealthState], keys: list[str]) -> dict[str, HealthState]:
        """Each key's health, read in parallel (Unknown where SF cannot answer)."""
        return dict(zip(keys, self.pool.map(lambda key: self._ask(what, HealthState.UNKNOWN, call, key), keys)))

    def _ask(self, what: str, default, call: Callable, *args: object):
        """`call(*args)`, or `default` when SF cannot answer it (said once per `what`)."""
        try:
            return call(*args)
        except BadInput as exc:
            if what not in self.unread:
                self.unread.add(what)
                self.say(f"cannot read {what}, taken as not holding any step: {exc}")
            return default

    def _begin(self, k: int) -> None:
        """Step k in flight: a move is checked then sent; a Failover Manager's step is watched."""
        step = self.steps[k]
        for n in nodes_of(step):
            self.load[n] += 1
        self.in_flight += step.command
        self.most = max(self.most, self.in_flight)
        if self.journal.status(step.index) != Status.ISSUED:
            self.journal.set(step.index, status=Status.PENDING, step=k + 1, started=now())
        if step.command:
            self.state[k] = Status.CHECKING
            self._submit("check", k, self._read, str(step.action.partition))
        else:
            self.state[k], self.since[k] = Status.ISSUED, time.monotonic()
            self.say(f"{describe(k, self.steps)}: watching for the Failover Manager to make it")

    def _submit(self, kind: str, what: object, call: Callable, *args: object) -> None:
        self.jobs[self.pool.submit(call, *args)] = (kind, what)

    def _read(self, partition_id: str, pause: float = 0.0) -> tuple[dict[str, Holding], dict[str, str]]:
        time.sleep(pause)
        return self.cluster.replicas(partition_id), self.cluster.nodes()

    def _finish(self, future: Future) -> None:
        kind, what = self.jobs.pop(future)
        try:
            result, error = future.result(), None
        except BadInput as exc:
            result, error = None, exc
        getattr(self, f"_on_{kind}")(what, result, error)

    def _on_check(self, k: int, result, error: BadInput | None) -> None:
        """Step k's partition and the nodes read: done already, under way, or sent if it may start."""
        if self.aborted:
            return
        if error is not None:
            return self._end(k, Status.FAILED, f"cannot read the cluster: {error}")
        held, status = result
        action, index = self.steps[k].action, self.steps[k].index
        self.seen.setdefault(str(action.partition), {n: h.role for n, h in held.items()})
        self._changed_without_plan(k, held)
        if not mismatches(held, after(action.kind, action.source, action.target)):
            return self._end(k, Status.DONE, "the cluster already shows it")
        if self.journal.status(index) == Status.ISSUED and shows(action, held):
            return self._watch(k)
        reason = precondition(action, held, status)
        if reason:
            return self._end(k, Status.SKIPPED, reason)
        if self.stopping:
            return self._end(k, Status.PENDING, "stopped before it was sent")
        if self.sends[k] >= SENDS:
            return self._end(k, Status.FAILED, f"no answer to {SENDS} requests")
        self.sends[k] += 1
        attempts = self.journal.entries[index].attempts + 1
        self.journal.set(index, status=Status.ISSUED, attempts=attempts, issued=now())  # before it is sent
        self.say(f"{describe(k, self.steps)}: started" + (f" (attempt {attempts})" if attempts > 1 else ""))
        self._submit("move", k, self.cluster.move, action)

    def _changed_without_plan(self, k: int, held: dict[str, Holding]) -> None:
        """Say (once per change) where step k's partition holds its replicas where no prefix of its plan's
        actions leaves them: moved without a step of the plan, by SF's own balancer (PLB), the Failover
        Manager or another operator; the preflight's comparison, the step then re-checked as any other."""
        pid = str(self.steps[k].action.partition)
        if self.journal.status(self.steps[k].index) == Status.ISSUED:
            return  # sent by an earlier run: looked for, not compared
        actions = [a for _, a in self.partition[pid]]
        named = {n for a in actions for n in (a.source, a.target) if n}
        base = {pid: self.bases[pid]} if self.bases is not None and pid in self.bases else None
        found = verdict(actions, Read({pid: held}, dict.fromkeys(named, NodeStatus.UP)), base)
        lines = tuple(d for p in found.partitions if p.standing is Standing.DRIFTED for d in p.differences)
        key = tuple(line for line in lines if not line.startswith("("))  # the same change, however far along
        if lines and (pid, key) not in self.reported:
            self.reported.add((pid, key))
            changed = {line.split(" ", 1)[0] for line in lines}
            mine = [j for j in range(k, len(self.steps)) if str(self.steps[j].action.partition) == pid]
            k = next((j for j in mine if changed & {self.steps[j].action.source, self.steps[j].action.target}), k)
            self.say(
                f"{describe(k, self.steps)}: its partition changed without a step of the plan (SF's balancer, "
                f"the Failover Manager or another operator): {'; '.join(lines)}; "
                "the step is re-checked before it is sent"
            )

    def _on_move(self, k: int, result, error: BadInput | None) -> None:
        """SF's answer to step k's request: accepted (watched), refused (failed), or none (looked for)."""
        if error is None:
            return self._watch(k)
        if isinstance(error, HttpError) and error.status != BUSY:
            reason = f"{error.code}: {error.detail}" if error.code else str(error)
            return self._end(k, Status.FAILED, f"refused: {reason}", error=error.code or f"HTTP {error.status}")
        self.say(f"{describe(k, self.steps)}: no answer ({error}); looking for it in the cluster")
        self._submit("check", k, self._read, str(self.steps[k].action.partition), min(self.poll, 1.0))

    def _watch(self, k: int) -> None:
        self.state[k], self.since[k] = Status.ISSUED, time.monotonic()

    def _poll_due(self) -> None:
        """Ask for each partition with a step watched, once per poll."""
        asked = {what for kind, what in self.jobs.values() if kind == "poll"}
        clock = time.monotonic()
        for k, since in self.since.items():
            pid = str(self.steps[k].action.partition)
            if pid not in asked and clock - max(since, self.polled.get(pid, -1e9)) >= self.poll:
                asked.add(pid)
                self.polled[pid] = clock
                self._submit("poll", pid, self.cluster.replicas, pid)

    def _on_poll(self, pid: str, held, error: BadInput | None) -> None:
        if error is None:
            self.seen.setdefault(pid, {n: h.role for n, h in held.items()})
        for k in [k for k in self.since if str(self.steps[k].action.partition) == pid]:
            if error is not None:
                self._end(k, Status.FAILED, f"cannot read the cluster: {error}")
            elif self._done(k, held):
                self._end(k, Status.DONE)

    def _done(self, k: int, held: dict[str, Holding]) -> bool:
        """Whether the cluster shows step k done: its action's outcome, or for an add the Failover Manager
        placed elsewhere, as many Ready replicas of that role as the plan expects there."""
        action = self.steps[k].action
        if not mismatches(held, after(action.kind, action.source, action.target)):
            return True
        if not action.kind.is_add:
            return False
        pid, index, role = str(action.partition), self.steps[k].index, action.kind.role
        known = self.bases is not None and pid in self.bases
        base = self.bases[pid] if known and self.bases is not None else self.seen.get(pid, {})
        prior = [a for i, a in self.partition[pid] if i <= index and (known or i not in self.done_before)]
        want = sum(r == role for r in compose(base, prior).values())
        return sum(h.role == role for h in held.values()) >= want

    def _time_out(self) -> None:
        """`decide`'s time-outs."""
        decision, _ = decide(self.steps, self._board(), self.limits, time.monotonic(), starting=False)
        for k in decision.time_out:
            self._end(k, Status.TIMED_OUT, f"not done after {self.limits.step_timeout:g} s")

    def _end(self, k: int, status: Status, reason: str = "", error: str | None = None) -> None:
        """Step k ends: its node and cluster counts freed, the journal written, a line logged."""
        step, since = self.steps[k], self.since.pop(k, None)
        if self.state[k] in (Status.CHECKING, Status.ISSUED):
            for n in nodes_of(step):
                self.load[n] -= 1
            self.in_flight -= step.command
        took = ""
        if status == Status.DONE and since is not None:
            took = f" after {time.monotonic() - since:.1f} s"
            self.durations += [time.monotonic() - since] if step.command else []
        self.state[k] = status
        failed = {"error": error} if error else {}
        self.journal.set(step.index, status=status, finished=now(), reason=reason, **failed)
        self.say(f"{describe(k, self.steps)}: {status}{took}" + (f": {reason}" if reason else ""))


def compose(base: dict[str, str], actions: list[Action]) -> dict[str, str]:
    """Node -> role after `actions` (one partition's, in order) from `base`; an add replacing a replica
    on another node (its source) takes that node's out."""
    out = dict[str | None, str](base.items())
    for action in actions:
        if action.kind.is_add and action.source:
            out.pop(action.source, None)
        for node, role in after(action.kind, action.source, action.target).items():
            if role == NONE:
                out.pop(node, None)
            else:
                out[node] = role
    return {n: r for n, r in out.items() if n is not None and r != BUILDING}
