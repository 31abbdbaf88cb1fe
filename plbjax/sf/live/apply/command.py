"""The command line of plbjax-apply: the plan read, its steps ordered, carried out, verified."""

from __future__ import annotations

import argparse
import os
import signal
import ssl
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.sf import Action, NodeStatus, Role
from plbjax.sf.live import apply as face
from plbjax.sf.live.apply.decide import Policy, nodes_of
from plbjax.sf.live.apply.executor import Executor, describe, precondition
from plbjax.sf.live.apply.expectations import AUXILIARY, Holding, after, mismatches
from plbjax.sf.live.apply.journal import Journal, Status, now
from plbjax.sf.live.apply.partitions import locate
from plbjax.sf.live.apply.preflight import Verdict, read, verdict
from plbjax.sf.live.apply.steps import Step, action_loads, order, read_plan
from plbjax.sf.live.rest import Client, Cluster, add_token_over_http_flag, quiet_on_broken_pipe
from plbjax.version import add_flag as add_version_flag

PROG = "plbjax-apply"
Bases = dict[str, dict[str, str]] | None  # partition -> node -> role as the state has it (None: no --state)
EPILOG = """\
before the first step (and with --dry-run) the cluster is read and compared with the plan's input:
another cluster's plan is refused (2); a cluster at the plan's target has nothing to do (0); a
drifted partition (its replicas where no prefix of its actions leaves them) stops the run before any
step (4, each difference listed), or with --allow-drift only its steps are skipped.

health and upgrade gates: before each move SF's health and upgrade state are read (at most once per
--poll): a move whose partition, source or target node is in Error (or Warning, --strict-health), or
any move while a cluster upgrade or its application's upgrade rolls (--during-upgrade hold), is held;
still held after --health-timeout, it is skipped with the state in SF's words (exit 4). A replica
moved without a step of the plan (SF's own balancer, the Failover Manager) is reported with the step
it affects, and that step re-checked before it is sent.

exit status: 0 every step done and the cluster as the plan's target (or nothing to do); 1 done, but
the cluster differs (or --verify found differences); 2 bad input (a file that is not a plan, a
journal of another plan, another cluster's plan, an unreachable endpoint, a URL without http(s)://,
a token over plain http without --allow-token-over-http); 3 a step timed out; 4 the cluster drifted
from the plan's input, or a step refused by SF or skipped (precondition failed, or held by a health
or upgrade gate past --health-timeout); 130 after Ctrl-C (SIGINT), 143 after SIGTERM (no new
step, those in flight watched; a second: stop at once); 141 output closed early (| head).

examples:
  plbjax-apply plan.json --state state.json --endpoint https://mycluster:19080 --cert client.pem --key client.key
  plbjax-apply plan.json --state state.json --endpoint https://mycluster:19080 --cert client.pem --dry-run
  plbjax-apply plan.json --endpoint http://localhost:19080 --insecure --verify
the journal (PLAN.journal.json) makes a rerun resume: done steps stay done, issued ones are watched"""


class Log:
    """Lines on stderr stamped with the UTC time, and a progress line (redrawn on a TTY, else every 10 s)."""

    def __init__(self, progress: bool) -> None:
        self.progress, self.tty, self.drawn, self.last = progress, sys.stderr.isatty(), "", time.monotonic()

    def say(self, text: str) -> None:
        self._clear()
        print(f"{now()} {text}", file=sys.stderr, flush=True)
        if self.drawn:
            self._draw(self.drawn)

    def show(self, ex: Executor, began: float) -> None:
        """The progress line: steps done, in flight, failed/skipped, and the time left if known."""
        if not self.progress:
            return
        c = ex.counts()
        left = len(ex.steps) - c[Status.DONE] - c[Status.SKIPPED] - c[Status.FAILED] - c[Status.TIMED_OUT]
        eta = ""
        if ex.durations and left:
            seconds = sum(ex.durations) / len(ex.durations) * left / max(1, ex.in_flight)
            eta = f", ETA {seconds:.0f} s"
        text = (
            f"progress: {c[Status.DONE]}/{len(ex.steps)} done, {ex.in_flight} in flight, {c[Status.FAILED]} failed, "
            f"{c[Status.SKIPPED]} skipped, {c[Status.TIMED_OUT]} timed out, {len(ex.held)} held, "
            f"{time.monotonic() - began:.0f} s{eta}"
        )
        if self.tty:
            self._draw(text)
        elif time.monotonic() - self.last >= 10:
            self.last = time.monotonic()
            print(f"{now()} {text}", file=sys.stderr, flush=True)

    def _draw(self, text: str) -> None:
        self.drawn = text
        sys.stderr.write(f"\r{now()} {text}\033[K")
        sys.stderr.flush()

    def _clear(self) -> None:
        if self.tty and self.drawn:
            sys.stderr.write("\r\033[K")


def state_bases(path: str) -> dict[str, dict[str, str]]:
    """Partition -> node -> role as the state has it (replicas on Down nodes hold nothing)."""
    from plbjax.sf import load_state

    state = load_state(path)
    down = {n.name for n in state.nodes if n.status is NodeStatus.DOWN}
    return {
        str(p.partition_id): {r.node: r.role for r in p.replicas if r.node and r.node not in down}
        for p in state.partitions
    }


def dry_run(steps: list[Step], cluster: Cluster | None, found: Verdict | None = None) -> None:
    """Each step in order, what it waits for, which nodes it counts against, and (read-only, with a
    cluster) where it stands now: past, drifted, or its precondition checked (the first step of each
    partition still to make; the others wait for it)."""
    first: set[str] = set()
    for k, step in enumerate(steps):
        needs = ", ".join(f"step {d + 1} ({why})" for d, why in step.needs.items()) or "nothing"
        counts = ", ".join(nodes_of(step)) or "no node (the Failover Manager makes it; watched, not issued)"
        line = f"{describe(k, steps)}; needs {needs}; counts against {counts}"
        pid = str(step.action.partition)
        if found is not None and step.index in found.done:
            line += f"; now: done ({found.done[step.index]})"
        elif found is not None and step.index in found.drifted:
            line += f"; now: skipped ({found.drifted[step.index]})"
        elif cluster is not None and step.command and pid not in first:
            first.add(pid)
            reason = precondition(step.action, cluster.replicas(pid), cluster.nodes())
            line += f"; now: {'may start' if not reason else reason}"
        elif cluster is not None and step.command:
            line += "; now: after the partition's earlier steps"
        print(line + (f"; {step.note}" if step.note else ""))


def differences(cluster: Cluster, actions: list[Action], bases: Bases) -> list[str]:
    """Every difference between the cluster and the plan's target placement, one line each: the
    partitions the plan touches on the nodes it touches (with the state: every partition, every node)."""
    targets: dict[str, tuple[str, dict[str | None, str]]] = {}
    for action in actions:
        pid = str(action.partition)
        service, target = targets.setdefault(
            pid, (action.service, dict[str | None, str]((bases or {}).get(pid, {}).items()))
        )
        if action.kind.is_add and action.source and bases is not None:
            target.pop(action.source, None)
        target.update(after(action.kind, action.source, action.target))
    for pid, base in (bases or {}).items():
        targets.setdefault(pid, ("", dict[str | None, str](base.items())))
    with ThreadPoolExecutor(8) as pool:
        held = dict(zip(targets, pool.map(cluster.replicas, targets)))
    out = []
    for pid, (service, target) in targets.items():
        found = mismatches(held[pid], target)
        if bases is not None and pid in bases:
            extra = [(n, h) for n, h in held[pid].items() if n not in target and h.role != AUXILIARY]
            found += [f"{n} holds {h}, not in the plan's target" for n, h in extra]
        else:
            found = [_chosen(line, held[pid], target) for line in found]
        out += [f"{service + ' ' if service else ''}partition {pid}: {line}" for line in found]
    return out


def _chosen(line: str, held: dict[str, Holding], target: dict[str | None, str]) -> str:
    """A missing replica's line, with the nodes holding that role which the target does not name (where
    the Failover Manager may have put it instead)."""
    elsewhere = [n for n, h in held.items() if n not in target and f"not a Ready {h.sf_role or Role.INSTANCE}" in line]
    return line + (f" (the cluster has one on {', '.join(elsewhere)} instead)" if elsewhere else "")


def parse(argv: list[str] | None) -> argparse.Namespace:
    assert face.__doc__ is not None
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=face.__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    add_version_flag(parser)
    parser.add_argument("plan", metavar="PLAN", help="a plan written by plbjax")
    parser.add_argument("--endpoint", metavar="URL", help="the cluster's HTTP gateway, e.g. https://host:19080")
    parser.add_argument("--state", help="the state the plan was made from (the loads that order the steps)")
    parser.add_argument("--cert", metavar="PEM", help="client certificate (PEM) for https")
    parser.add_argument("--key", metavar="KEY", help="its private key (PEM), if not in --cert")
    parser.add_argument("--ca", metavar="CA_BUNDLE", help="CA certificates to verify the cluster's certificate with")
    parser.add_argument("--insecure", action="store_true", help="allow plain http, and https without verifying")
    parser.add_argument("--token-file", metavar="FILE", help="a bearer token (also from PLBJAX_TOKEN)")
    parser.add_argument("--per-node", type=int, default=2, help="most moves into or out of a node at once (2)")
    parser.add_argument("--max-in-flight", type=int, default=20, help="most moves in the cluster at once (20)")
    parser.add_argument("--step-timeout", type=float, default=1800, help="seconds a step may take (1800)")
    parser.add_argument("--poll", type=float, default=5, help="seconds between two looks at a partition (5)")
    parser.add_argument("--journal", metavar="FILE", help="the journal (default: PLAN.journal.json)")
    parser.add_argument("--dry-run", action="store_true", help="list the steps; send nothing")
    parser.add_argument("--verify", action="store_true", help="only compare the cluster with the plan's target")
    parser.add_argument("--no-progress", action="store_true", help="no progress line")
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="where the cluster drifted from the plan's input, carry out the steps of the other partitions",
    )
    parser.add_argument(
        "--strict-health", action="store_true", help="hold a move whose partition or nodes are in Warning too"
    )
    parser.add_argument(
        "--health-timeout",
        type=float,
        default=600,
        help="seconds a move held by the health or upgrade gates waits before it is skipped (600)",
    )
    parser.add_argument(
        "--during-upgrade",
        choices=("hold", "continue"),
        default="hold",
        help="while a cluster (or the move's application) upgrade rolls: hold every move (default), or continue",
    )
    add_token_over_http_flag(parser)
    return parser.parse_args(argv)


def _client(args: argparse.Namespace) -> Cluster:
    """The cluster behind --endpoint, read once (BadInput if it cannot be reached)."""
    token = os.environ.get("PLBJAX_TOKEN")
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise BadInput(f"--token-file: {args.token_file}: cannot read: {exc.strerror}") from None
    client = Client(
        args.endpoint,
        args.cert,
        args.key,
        args.insecure,
        ca=args.ca,
        token=token,
        retries=4,
        token_over_http=args.allow_token_over_http,
    )
    cluster = Cluster(client, args.poll)
    try:
        cluster.nodes()
    except BadInput as exc:
        raise BadInput(f"--endpoint: {args.endpoint}: cannot read the cluster's nodes: {exc}") from None
    return cluster


def _check(args: argparse.Namespace) -> None:
    for key, value in (("--per-node", args.per_node), ("--max-in-flight", args.max_in_flight)):
        if value < 1:
            raise BadInput(f"{key}: {value} is not a positive number")
    for key, value in (
        ("--step-timeout", args.step_timeout),
        ("--poll", args.poll),
        ("--health-timeout", args.health_timeout),
    ):
        if not value > 0:
            raise BadInput(f"{key}: {value} is not a positive number of seconds")
    if not args.endpoint and not args.dry_run:
        raise BadInput("--endpoint: required (only --dry-run goes without it)")


def run(args: argparse.Namespace) -> int:
    """The command's work; its exit status."""
    _check(args)
    plan = read_plan(args.plan)
    actions = plan.actions
    loads = action_loads(args.state, actions) if args.state else None
    cluster = _client(args) if args.endpoint else None
    actions, bases = locate(cluster, actions, args.state)  # each partition by its service and id, as SF has it
    steps = order(actions, plan.nodes, loads)
    if cluster is not None and args.verify and not args.dry_run:
        found = differences(cluster, actions, bases)
        print("\n".join(found) if found else "the cluster matches the plan's target", file=sys.stdout)
        return 1 if found else 0
    checked = preflight(args, cluster, actions, bases) if cluster is not None else None
    if args.dry_run:
        dry_run(steps, cluster, checked)
        return _after_preflight(args, checked) if checked is not None else 0
    assert cluster is not None and checked is not None
    if checked.nothing_to_do or (checked.drift and not args.allow_drift):
        return _after_preflight(args, checked)
    journal = Journal.open(args.journal or f"{args.plan}.journal.json", args.plan, args.endpoint, actions)
    settled = {i: (Status.DONE, why) for i, why in checked.done.items()}
    settled |= {i: (Status.SKIPPED, why) for i, why in checked.drifted.items()}
    return execute(args, steps, cluster, journal, actions, bases, settled)


def preflight(args: argparse.Namespace, cluster: Cluster, actions: list[Action], bases: Bases) -> Verdict:
    """The cluster read and compared with the plan's input; BadInput if the plan is another cluster's;
    the drift said on stderr."""
    try:
        checked = verdict(actions, read(cluster, actions), bases)
    except BadInput as exc:
        raise BadInput(f"--endpoint: {args.endpoint}: cannot read the cluster: {exc}") from None
    if checked.foreign:
        some = checked.partitions[0]
        raise BadInput(
            f"this plan is not for this cluster: none of its {len(checked.partitions)} partition(s) is in the "
            f"cluster at {args.endpoint} (e.g. {some.service} partition {some.partition})"
        )
    drift = checked.drift
    for line in checked.lines():
        print(f"{now()} drifted: {line}", file=sys.stderr)
    if drift:
        steps = len(checked.drifted)
        print(
            f"{now()} preflight: {len(drift)} of {len(checked.partitions)} partition(s) drifted from the plan's input"
            + (
                f" (their {steps} step(s) skipped, the others carried out: --allow-drift)"
                if args.allow_drift
                else "; no step sent (--allow-drift carries out the steps of the others)"
            ),
            file=sys.stderr,
        )
    return checked


def _after_preflight(args: argparse.Namespace, checked: Verdict) -> int:
    """The exit status the preflight alone decides: 0 nothing to do (or all may go ahead), 4 drifted."""
    if checked.nothing_to_do:
        print(
            f"{now()} nothing to do: the cluster is at the plan's target "
            f"({len(checked.partitions)} partition(s) checked)",
            file=sys.stderr,
        )
        return 0
    return 4 if checked.drift else 0


def execute(
    args: argparse.Namespace,
    steps: list[Step],
    cluster: Cluster,
    journal: Journal,
    actions: list[Action],
    bases: Bases,
    settled: dict[int, tuple[Status, str]] | None = None,
) -> int:
    """Carry the steps out, then verify; the exit status."""
    log, began = Log(not args.no_progress), time.monotonic()
    limits = dict(per_node=args.per_node, max_in_flight=args.max_in_flight, step_timeout=args.step_timeout)
    policy = Policy(args.strict_health, args.during_upgrade == "hold", args.health_timeout)
    ex = Executor(
        steps, cluster, journal, log.say, poll=args.poll, bases=bases, settled=settled, policy=policy, **limits
    )
    ex.tick = lambda: log.show(ex, began)
    caught: list[int] = []

    def stop(signum: int, frame: object) -> None:
        caught.append(signum)
        ex.interrupt()
        name = signal.Signals(signum).name
        if ex.aborted:
            log.say(f"{name} again: stopping now; steps in flight stay 'issued' in the journal")
        else:
            log.say(f"{name}: no new step; watching the {ex.in_flight} in flight ({name} again: stop at once)")

    before = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    log.say(f"{len(steps)} step(s), {sum(s.command for s in steps)} move(s); journal {journal.path}")
    try:
        ex.run()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    c = ex.counts()
    summary = (
        f"summary: {c[Status.DONE]} done, {c[Status.SKIPPED]} skipped, {c[Status.FAILED]} failed, "
        f"{c[Status.TIMED_OUT]} timed out "
        f"of {len(steps)}; {time.monotonic() - began:.1f} s; at most {ex.most} move(s) in flight at once; "
        f"{len(ex.ever_held)} held by the health and upgrade gates ({len(ex.gave_up)} of them skipped)"
    )
    if caught:
        log.say(summary + "; interrupted, not verified")
        return 128 + caught[-1]
    found = differences(cluster, actions, bases)
    for line in found:
        log.say(f"differs: {line}")
    log.say(summary + (f"; verification: {len(found)} difference(s)" if found else "; verification: as planned"))
    if c[Status.FAILED] or c[Status.SKIPPED] > len(ex.knock_on):
        return 4
    return 3 if c[Status.TIMED_OUT] else 1 if found else 0


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    with quiet_on_broken_pipe():
        try:
            code = run(args)
        except (BadInput, ssl.SSLError) as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        sys.stdout.flush()
        sys.stderr.flush()
    if code in (130, 143):
        os._exit(code)  # without waiting for a request still in the air (the journal is written)
    raise SystemExit(code)
