"""The script plbjax-export writes: a plan's steps as commands, each checked before and waited for
after, in bash (sfctl, curl) or PowerShell; and the command line that writes it."""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from urllib.parse import urlencode

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf import Action, ActionKind, NodeStatus, Role
from plbjax.sf.live import export as face
from plbjax.sf.live.apply import expectations
from plbjax.sf.live.apply.expectations import Holding, after, before, holdings, mismatches, said
from plbjax.sf.live.apply.steps import Loads, PlanRead, Step, action_loads, order, plan_read, read_plan
from plbjax.sf.live.rest import move_request, quiet_on_broken_pipe, service_id
from plbjax.version import add_flag as add_version_flag

FORMATS = ("sfctl", "powershell", "rest")
FAILOVER_MANAGER = "no command; the Failover Manager does this itself"
WAIT_TIMEOUT = 1800  # seconds a wait may last: building a replica copies its state, which may take long
POLL_SECONDS = 10
Counts = dict[tuple[str, Role | None], int]  # (partition, role) -> Ready replicas of it the plan leaves


def command(action: Action, fmt: str) -> str:
    """The command for one movement action (a move, or a swap: the primary moved onto its secondary's
    node) in format `fmt`."""
    kind, pid, svc = action.kind, str(action.partition), action.service
    src, dst = action.source or "", action.target or ""
    if fmt == "rest":
        path, version, query = move_request(action)
        return shlex.join(["post", f"{path}?{urlencode({'api-version': version} | query)}"])
    if kind in (ActionKind.MOVE_PRIMARY, ActionKind.SWAP_PRIMARY_SECONDARY):
        sfctl = ["move-primary-replica", "--partition-id", pid, "--node-name", dst]
        cmdlet = ["Move-ServiceFabricPrimaryReplica", "-PartitionId", pid, "-ServiceName", svc, "-NodeName", dst]
    elif kind is ActionKind.MOVE_SECONDARY:
        sfctl = ["move-secondary-replica", "--partition-id", pid, "--current-node-name", src, "--new-node-name", dst]
        cmdlet = ["Move-ServiceFabricSecondaryReplica", "-PartitionId", pid, "-ServiceName", svc]
        cmdlet += ["-CurrentSecondaryNodeName", src, "-NewSecondaryNodeName", dst]
    elif kind is ActionKind.MOVE_INSTANCE:
        sfctl = ["move-instance", "--service-id", service_id(svc), "--partition-id", pid]
        sfctl += ["--current-node-name", src, "--new-node-name", dst]
        cmdlet = ["Move-ServiceFabricInstance", "-PartitionId", pid, "-ServiceName", svc]
        cmdlet += ["-CurrentInstanceNodeName", src, "-NewInstanceNodeName", dst]
    else:
        raise ValueError(f"{kind}: no command; the Failover Manager makes it")
    return shlex.join(["sfctl", "partition", *sfctl]) if fmt == "sfctl" else _ps_join(cmdlet)


def _ps_join(words: list[str]) -> str:
    """A PowerShell command line: the command, then its -Parameters bare and every value quoted."""
    return " ".join(w if w.startswith("-") or i == 0 else _ps_quote(w) for i, w in enumerate(words))


def _ps_quote(word: str) -> str:
    return "'" + word.replace("'", "''") + "'"


def export_plan(
    plan: object,
    fmt: str,
    source: str = "<plan>",
    when: str = "",
    loads: list[Loads] | None = None,
    wait_timeout: int = WAIT_TIMEOUT,
    counts: Counts | None = None,
) -> str:
    """The script for the plan document `plan` in format `fmt`: header comments, its functions, the table of steps
    (`steps.order`; `loads`: per action, what it changes of each node's load, None if unknown), the
    look for steps already done, each step after a wait for each step it needs, and the final
    confirmation (`counts`: (partition, role) -> the Ready replicas of that role the plan leaves,
    where the Failover Manager adds one; `target_counts`)."""
    if fmt not in FORMATS:
        raise BadInput(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    return script(plan_read(plan, source), fmt, source, when, loads, wait_timeout, counts)


def script(
    read: PlanRead,
    fmt: str,
    source: str,
    when: str,
    loads: list[Loads] | None,
    wait_timeout: int,
    counts: Counts | None,
) -> str:
    """`export_plan` of a plan read."""
    steps = order(read.actions, read.nodes, loads)
    lines = [*INTERPRETER[fmt], *_header(read.score, fmt, source, when, steps, loads, wait_timeout, counts)]
    lines += [*_prelude(fmt, wait_timeout, len(steps)), "", "# the steps: what, where, and the steps done once it is"]
    lines += [_call(fmt, "plan_step", *_row(k, steps, counts)) for k in range(len(steps))]
    lines += ["", "# the steps already done (a run before this one): each partition's replicas, read once"]
    lines += [_call(fmt, "recognise", ks) for ks in _by_partition(steps)]
    for k, step in enumerate(steps):
        lines += ["", f"# step {k + 1}/{len(steps)}: {_describe(step.action)} (the plan's Actions[{step.index}])"]
        for d, why in step.needs.items():
            lines.append(f"# step {k + 1} needs step {d + 1} done ({why}): {_describe(steps[d].action)}")
            lines.append(_call(fmt, "wait_for", k + 1, d + 1))
        if step.note:
            lines.append(f"# step {k + 1} {step.note}")
        if not step.command:
            lines.append(f"# {FAILOVER_MANAGER}")
        lines.append(_issue(fmt, k + 1, step.action) if step.command else _call(fmt, "failover_step", k + 1))
    lines += ["", "# every step not confirmed yet, last first: the end", _call(fmt, "finish")]
    return "\n".join(lines) + "\n"


def _header(
    score: tuple[float, float],
    fmt: str,
    source: str,
    when: str,
    steps: list[Step],
    loads: list[Loads] | None,
    wait_timeout: int,
    counts: Counts | None,
) -> list[str]:
    """The script's comment lines: the plan, what the script does and needs, its exit statuses."""
    commands = sum(step.command for step in steps)
    doubtful = [k + 1 for k, step in enumerate(steps) if step.note]
    lines = [
        f"# plbjax-export ({fmt}) of the plan {source}" + (f", written {when}" if when else ""),
        f"# score (AvgStdDev): {score[0]:.6g} -> {score[1]:.6g}; "
        f"{len(steps)} action(s): {commands} command(s), {len(steps) - commands} made by the Failover Manager",
        "# Nothing has run: review these steps, then run this script. Each step comes after the steps it needs,",
        "# and waits (polls the cluster) until they are done; a wait longer than PLBJAX_WAIT_TIMEOUT seconds",
        f"# (default {wait_timeout}) stops the script; PLBJAX_POLL_SECONDS (default {POLL_SECONDS}, fractions",
        "# allowed) between polls. Before its command a step checks that the replica is where the plan assumed;",
        "# a step already done (its replica where the plan puts it) is not issued again: run it again at will.",
        "# PLBJAX_START_AT=N: start at step N, the steps before it taken as issued (waits still check them).",
        "# After the last step the script waits until every step is done (an add of the Failover Manager's: the",
        "# partition holding the replicas the plan expects, on any node). Every line it prints (on stderr)",
        "# begins with the UTC time. Exit status: 0 every step done; 3 a wait timed out (the line names the",
        "# step); 4 a step refused (with SF's error) or not as the plan assumed; 2 a tool or setting missing.",
        *PRELUDE_NOTE[fmt],
    ]
    if loads is None:
        lines.append("# The replicas' loads are unknown (no --state): a step onto a node waits for every move off it.")
    if counts is None and any(step.action.kind.is_add for step in steps):
        lines.append("# Without --state an add of the Failover Manager's is confirmed only on the plan's node.")
    if doubtful:
        lines.append(
            f"# Steps {', '.join(map(str, doubtful))} may find no room (see their notes)"
            + ("; --state tells whether they need it." if loads is None else ".")
        )
    return lines


def _row(k: int, steps: list[Step], counts: Counts | None) -> list[object]:
    """Step k's line in the table: number, description, partition, action, nodes, the steps done
    once it is (all it needs, transitively), and the count that confirms a Failover Manager's add."""
    a = steps[k].action
    closure, todo = set(), list(steps[k].needs)
    while todo:
        d = todo.pop()
        if d not in closure:
            closure.add(d)
            todo += steps[d].needs
    pid = str(a.partition)
    count = (counts or {}).get((pid, a.kind.role), 0) if a.kind.is_add else 0
    where = [pid, str(a.kind), a.source or "", a.target or ""]
    return [k + 1, _describe(a), *where, sorted(d + 1 for d in closure), count]


def _by_partition(steps: list[Step]) -> list[list[int]]:
    """The step numbers of each partition, partitions in the order of their first step."""
    groups: dict[tuple[str, str], list[int]] = {}
    for k, step in enumerate(steps):
        groups.setdefault((step.action.service, str(step.action.partition)), []).append(k + 1)
    return list(groups.values())


def _describe(action: Action) -> str:
    src, dst = action.source or "-", action.target or "-"
    return f"{action.kind} {action.service} partition {action.partition} {src} -> {dst}"


PS_NAMES = {
    "plan_step": "Add-PlbjaxStep",
    "recognise": "Find-PlbjaxDone",
    "wait_for": "Wait-PlbjaxStep",
    "issue": "Invoke-PlbjaxStep",
    "failover_step": "Write-PlbjaxFailoverStep",
    "finish": "Complete-PlbjaxPlan",
}


def _call(fmt: str, name: str, *args: object) -> str:
    """A call of one of the script's functions (bash's name; PowerShell's in PS_NAMES)."""
    if fmt == "powershell":
        words = [f"@({', '.join(map(str, a))})" if isinstance(a, list) else _ps_value(a) for a in args]
        return " ".join([PS_NAMES[name], *words])
    return shlex.join([name, *(" ".join(map(str, a)) if isinstance(a, list) else str(a) for a in args)])


def _ps_value(value: object) -> str:
    """A PowerShell argument: an int bare, anything else quoted."""
    return str(value) if isinstance(value, int) else _ps_quote(str(value))


def _issue(fmt: str, k: int, action: Action) -> str:
    """The line that runs step k's command (unless done, before PLBJAX_START_AT, or not as planned)."""
    if fmt == "powershell":
        return f"{PS_NAMES['issue']} {k} {{ {command(action, fmt)} }}"
    return f"issue {k} {command(action, fmt)}"


def target_counts(state_path: str | Path, actions: list[Action]) -> Counts:
    """(partition, role) -> how many replicas of that role the partition holds on Up nodes once the
    plan's `actions` are applied to the state, for each partition the Failover Manager adds to."""
    from plbjax.sf import apply_actions, load_state, parse_state

    document = load_state(state_path).document
    try:
        target = parse_state(apply_actions(document, actions), "--state")
    except (ValueError, KeyError, StopIteration) as exc:
        raise BadInput(f"--state: the plan's actions do not fit the state ({exc})") from None
    down = {n.name for n in target.nodes if n.status is NodeStatus.DOWN}
    added = {(str(a.partition), a.kind.role) for a in actions if a.kind.is_add}
    counts: Counts = dict.fromkeys(added, 0)
    for partition in target.partitions:
        for replica in partition.replicas:
            key = (str(partition.partition_id), replica.role)
            if key in counts and replica.node not in (None, *down):
                counts[key] += 1
    return counts


# ------------------------------------------------------- the bash scripts' reader, run there by python3
# READER_PY is expectations.py's source and these functions' (so each imports what it needs itself).


def read_cluster(argv: list[str], text: str) -> tuple[int, str]:
    """What a bash script asks of a partition's replica list (`text`: its pages, sfctl's or REST's
    JSON), by expectations.py's rules, as an exit status and a line. `argv`: ``survey (STEP ACTION
    SOURCE TARGET)...``: the steps done; ``step ACTION SOURCE TARGET``: "done", or "" when the replica
    is where the step starts, else status 1 and why; ``done ACTION SOURCE TARGET [COUNT]``: status 0
    once done (an add: also when the partition holds COUNT Ready replicas of its role), else 1 and
    why; ``error``: `text` is a command's error output, said as SF's code and message."""
    mode, *args = argv
    if mode == "error":
        return 0, _sf_error(text)
    held = holdings(_pages(text))
    if mode == "survey":
        groups = [args[i : i + 4] for i in range(0, len(args), 4)]
        return 0, " ".join(k for k, *where in groups if not mismatches(held, after(*_act(*where))))
    action = _act(*args[:3])
    wrong = mismatches(held, after(*action))
    if not wrong:
        return 0, "done" if mode == "step" else ""
    if mode == "step":
        wrong = mismatches(held, before(*action))
        return int(bool(wrong)), "; ".join(wrong)
    elsewhere = _elsewhere(held, action[0], int(args[3]) if args[3:] else 0)
    return (0, elsewhere) if elsewhere else (1, "; ".join(wrong))


def _act(kind: str, source: str, target: str) -> tuple[str, str | None, str | None]:
    """An action's kind, source and target as expectations.py reads them ('' for no node)."""
    return kind, source or None, target or None


def _elsewhere(held: dict[str, Holding], kind: str, count: int) -> str:
    """For an add: that the partition holds `count` (> 0) Ready replicas of its role, on any nodes."""
    role = kind.removeprefix("Add")
    have = sum(h.role == role for h in held.values())
    if not kind.startswith("Add") or count <= 0 or have != count:
        return ""
    return f"placed elsewhere by the Failover Manager: the partition holds the {have} Ready {said(role)}(s) planned"


def _pages(text: str) -> object:
    """The JSON documents in `text` (a replica list's pages, one after another): one, or the list of them."""
    import json  # the script's reader runs this function's source on its own

    decoder, docs, text, at = json.JSONDecoder(), [], text.strip(), 0
    while at < len(text):
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
        at = len(text) - len(text[at:].lstrip())
    return docs[0] if len(docs) == 1 else docs


def _sf_error(text: str) -> str:
    """SF's error in a command's output as 'Code: Message': REST's ``{"Error": {"Code", "Message"}}``
    or sfctl's ``(Code) Message``; else the output on one line."""
    import json  # the script's reader runs this function's source on its own
    import re

    decoder = json.JSONDecoder()
    for at in [i for i, c in enumerate(text) if c == "{"]:
        try:
            doc = decoder.raw_decode(text, at)[0]
        except ValueError:
            continue
        error = next((v for k, v in doc.items() if str(k).lower() == "error"), None) if isinstance(doc, dict) else None
        if isinstance(error, dict):
            error = {str(k).lower(): v for k, v in error.items()}
            return f"{error.get('code')}: {' '.join(str(error.get('message')).split())}"
    said = re.search(r"\(([A-Z][A-Z0-9_]{2,})\) (.+)", text)
    return f"{said[1]}: {said[2].strip()}" if said else " ".join(text.split()) or "(no message)"


def _reader_main() -> None:
    """`read_cluster` on the command line and stdin: its line on stdout, its status as the exit status."""
    import sys

    status, line = read_cluster(sys.argv[1:], sys.stdin.read())
    if line:
        print(line)
    sys.exit(status)


def _plain_words(source: str) -> str:
    """expectations.py's source with its vocabulary as plain words: the script's python3 has no plbjax."""
    head, rest = source.split("# the vocabulary", 1)
    classes = [
        f"class {e.__name__}:\n" + "".join(f"    {m.name} = {m.value!r}\n" for m in e) for e in (Role, ActionKind)
    ]
    words = {str(role): role.sf() for role in Role}
    return head + "\n".join([*classes, f"SF_WORD = {words!r}\n"]) + rest.split("# end of the vocabulary\n", 1)[1]


READER_PY = "\n\n".join(
    [_plain_words(inspect.getsource(expectations))]
    + [*map(inspect.getsource, (read_cluster, _act, _elsewhere, _pages, _sf_error))]
    + [inspect.getsource(_reader_main), "_reader_main()"]
)


INTERPRETER = {
    "sfctl": ["#!/usr/bin/env bash", "set -euo pipefail  # stop at the first command that fails"],
    "rest": ["#!/usr/bin/env bash", "set -euo pipefail  # stop at the first command that fails"],
    "powershell": ["#!/usr/bin/env pwsh", "$ErrorActionPreference = 'Stop'  # stop at the first command that fails"],
}
PRELUDE_NOTE = {
    "sfctl": ["# Needs sfctl, connected to the cluster (sfctl cluster select), and python3 to read its answers."],
    "rest": [
        "# Needs curl (7.76 or later) and python3; PLBJAX_ENDPOINT: the cluster's HTTP endpoint (https://mycluster:19080);",
        "# PLBJAX_CURL_ARGS: curl's options for it, e.g. '--cert client.pem --key client.key' or '--insecure'.",
    ],
    "powershell": ["# Needs the ServiceFabric module, connected to the cluster (Connect-ServiceFabricCluster)."],
}


def _data(name: str) -> str:
    """A script text shipped beside this module (prelude.sh, prelude.ps1, tool-sfctl.sh, tool-rest.sh)."""
    return resources.files(face).joinpath(name).read_text()


def _prelude(fmt: str, wait_timeout: int, total: int) -> list[str]:
    """The script's settings and functions: how it says, reads the cluster, checks, issues and waits."""
    if fmt == "powershell":
        text = _data("prelude.ps1")
    else:
        text = (
            _data("prelude.sh").replace("@TOOL@", _data(f"tool-{fmt}.sh").rstrip("\n")).replace("@READER@", READER_PY)
        )
    for key, value in (("@TIMEOUT@", wait_timeout), ("@POLL@", POLL_SECONDS), ("@TOTAL@", total)):
        text = text.replace(key, str(value))
    return text.splitlines()


def _parser() -> argparse.ArgumentParser:
    """plbjax-export's command line."""
    assert face.__doc__ is not None
    parser = argparse.ArgumentParser(
        prog="plbjax-export",
        description=face.__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 script written; 2 bad input (one line naming it); 130 after Ctrl-C (SIGINT), 143\n"
        "after SIGTERM (no file half-written)\n\n"
        "examples:\n"
        "  plbjax-export plan.json --state state.json --format sfctl -o moves.sh   (then review, and: ./moves.sh)\n"
        "  plbjax-export plan.json --state state.json --format powershell -o moves.ps1\n"
        "  plbjax-export outputs/2026-01-01/12-00-00/plan.json --format rest --wait-timeout 600 -o moves.sh\n"
        "each step comes after those it needs and waits until they are done (polling the cluster);\n"
        "a step already done is not issued again; PLBJAX_START_AT=N starts at step N; at the end the\n"
        "script waits until every step is done. The script's exit status: 0 every step done; 3 a wait\n"
        "timed out (PLBJAX_WAIT_TIMEOUT); 4 a step refused or not as the plan assumed; 2 a tool or setting missing",
    )
    add_version_flag(parser)
    parser.add_argument("plan", metavar="PLAN", help="a plan written by plbjax")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument(
        "--state",
        metavar="STATE",
        help="the state the plan was made from: its replicas' loads tell which moves need room that others "
        "free (without it, a step onto a node waits for every move off it)",
    )
    parser.add_argument(
        "--wait-timeout",
        metavar="SECONDS",
        type=int,
        default=WAIT_TIMEOUT,
        help=f"the script's default for how long a wait may last before it stops (default {WAIT_TIMEOUT}; "
        "PLBJAX_WAIT_TIMEOUT overrides it when the script runs)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        if args.wait_timeout <= 0:
            raise BadInput(f"--wait-timeout: {args.wait_timeout} is not a positive number of seconds")
        plan = read_plan(args.plan)
        when = datetime.fromtimestamp(Path(args.plan).stat().st_mtime, UTC).isoformat(timespec="seconds")
        loads = action_loads(args.state, plan.actions) if args.state else None
        counts = target_counts(args.state, plan.actions) if args.state else None
        text = script(plan, args.format, args.plan, when, loads, args.wait_timeout, counts)
    except BadInput as exc:
        print(f"plbjax-export: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    doubtful = [line for line in text.splitlines() if line.startswith("# Steps ") and "may find no room" in line]
    if doubtful:
        print(f"plbjax-export: warning: {doubtful[0].removeprefix('# ')}", file=sys.stderr)
    if args.output:
        write_text(args.output, text, executable=True)
    else:
        with quiet_on_broken_pipe():  # `plbjax-export plan.json | head` ends quietly
            sys.stdout.write(text)
            sys.stdout.flush()
