"""``plbjax-export PLAN --format sfctl|powershell|rest [-o FILE]``: the commands that carry a plan out.

One command per movement, in the order `steps.order` gives; nothing runs until the user runs it. Commands and
parameters as Service Fabric documents them:

* sfctl (Azure/service-fabric-cli, src/sfctl/commands.py and tests/request_generation_test.py):
  ``sfctl partition move-primary-replica --partition-id --node-name``,
  ``move-secondary-replica --partition-id --current-node-name --new-node-name``,
  ``move-instance --service-id --partition-id --current-node-name --new-node-name``;
* PowerShell (Move-ServiceFabricPrimaryReplica.md etc. in MicrosoftDocs/azure-docs-powershell):
  ``-PartitionId -ServiceName -NodeName``, ``-CurrentSecondaryNodeName -NewSecondaryNodeName``,
  ``-CurrentInstanceNodeName -NewInstanceNodeName``; the cmdlets' ``PartitionId`` parameter set
  requires ``-ServiceName`` with ``-PartitionId`` (learn.microsoft.com/powershell/module/servicefabric/
  move-servicefabricprimaryreplica, Syntax), and Service Fabric Explorer writes
  ``Move-ServiceFabricInstance -ServiceName -PartitionId -CurrentInstanceNodeName -NewInstanceNodeName``
  (microsoft/service-fabric-explorer, its replica commands); ``-IgnoreConstraints`` is never written,
  so SF checks every constraint again before it moves anything;
* REST (learn.microsoft.com/rest/api/servicefabric: Move Primary Replica, Move Secondary Replica,
  Move Instance): ``POST /Partitions/{partitionId}/$/MovePrimaryReplica?api-version=6.5&NodeName=``,
  ``.../$/MoveSecondaryReplica?api-version=6.5&CurrentNodeName=&NewNodeName=``,
  ``/Services/{serviceId}/$/GetPartitions/{partitionId}/$/MoveInstance?api-version=8.0&CurrentNodeName=&NewNodeName=``
  (serviceId: the name without ``fabric:`` and with ``~`` for ``/``, as the 6.0+ API writes it).

Every format is a script: bash for sfctl and REST (curl), PowerShell for the cmdlets. It starts with
its interpreter's line. Its steps come in the order `steps.order` gives: each after the steps it
depends on (the partition's previous step; the moves off a node that make room on it). A request
may be answered before its move is done, so before a step that needs an earlier one the script
polls the cluster (``sfctl replica list``, ``Get-ServiceFabricReplica``, ``GET .../$/GetReplicas``,
every page) until that step is done, read by `expectations` (the bash scripts run that module's own
source in python3; PowerShell has it translated): the replica Ready on its target node in the role
expected (SF's ``Primary``, ``ActiveSecondary``, an instance) and gone from its source.

Before its command a step checks that the replica is where the plan assumed
(`expectations.before`); a step already done (`expectations.after`, or a later step of its
partition done) is not issued again, so a stopped script may simply be run again;
``PLBJAX_START_AT=N`` starts at step N (the steps before it are taken as issued; their waits still
check the cluster). After the last step the script waits for every step not confirmed yet (an add
of the Failover Manager's: also the partition holding as many Ready replicas of its role as the
plan leaves, on any node, where ``--state`` tells how many) and ends with ``plbjax: all N step(s)
done``. Every line it prints goes to stderr, after the UTC time. Exit status: 0 every step done;
3 a wait timed out (``PLBJAX_WAIT_TIMEOUT`` seconds, default ``--wait-timeout``; the line names the
step); 4 a step refused (the line names it, with SF's error) or not as the plan assumed; 2 a tool or
setting missing.

A SwapPrimarySecondary is the move of the primary onto its secondary's node, which SF carries out
as a swap. Adds, drops and promotions have no command: the Failover Manager makes them (to restore
the target replica count), so they are steps without a command, waited for where a later one needs them.
"""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf.live import expectations
from plbjax.sf.live.expectations import after, before, holdings, mismatches
from plbjax.sf.live.rest import move_request, service_id
from plbjax.sf.live.steps import Step, action_loads, order, plan_actions, read_plan
from plbjax.version import add_flag as add_version_flag

FORMATS = ("sfctl", "powershell", "rest")
PRIMARY = ("MovePrimary", "SwapPrimarySecondary")
FAILOVER_MANAGER = "no command; the Failover Manager does this itself"
WAIT_TIMEOUT = 1800  # seconds a wait may last: building a replica copies its state, which may take long
POLL_SECONDS = 10


def command(action: dict, fmt: str) -> str:
    """The command for one movement action (MovePrimary, MoveSecondary, MoveInstance, SwapPrimarySecondary)
    in format `fmt`."""
    kind, pid, svc = action["Action"], str(action["PartitionId"]), action["ServiceName"]
    src, dst = action["SourceNode"], action["TargetNode"]
    if fmt == "rest":
        path, version, query = move_request(action)
        return shlex.join(["post", f"{path}?{urlencode({'api-version': version} | query)}"])
    if kind in PRIMARY:
        sfctl = ["move-primary-replica", "--partition-id", pid, "--node-name", dst]
        cmdlet = ["Move-ServiceFabricPrimaryReplica", "-PartitionId", pid, "-ServiceName", svc, "-NodeName", dst]
    elif kind == "MoveSecondary":
        sfctl = ["move-secondary-replica", "--partition-id", pid, "--current-node-name", src, "--new-node-name", dst]
        cmdlet = ["Move-ServiceFabricSecondaryReplica", "-PartitionId", pid, "-ServiceName", svc]
        cmdlet += ["-CurrentSecondaryNodeName", src, "-NewSecondaryNodeName", dst]
    elif kind == "MoveInstance":
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
    plan: dict,
    fmt: str,
    source: str = "<plan>",
    when: str = "",
    loads: list | None = None,
    wait_timeout: int = WAIT_TIMEOUT,
    counts: dict[tuple[str, str], int] | None = None,
) -> str:
    """The script for `plan` in format `fmt`: header comments, its functions, the table of steps
    (`steps.order`; `loads`: per action, what it changes of each node's load, None if unknown), the
    look for steps already done, each step after a wait for each step it needs, and the final
    confirmation (`counts`: (partition, role) -> the Ready replicas of that role the plan leaves,
    where the Failover Manager adds one; `target_counts`)."""
    if fmt not in FORMATS:
        raise BadInput(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    actions = plan_actions(plan, source)
    steps = order(actions, plan.get("Nodes") or [], loads)
    lines = [*INTERPRETER[fmt], *_header(plan, fmt, source, when, steps, loads, wait_timeout, counts)]
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
    plan: dict,
    fmt: str,
    source: str,
    when: str,
    steps: list[Step],
    loads: list | None,
    wait_timeout: int,
    counts: dict | None,
) -> list[str]:
    """The script's comment lines: the plan, what the script does and needs, its exit statuses."""
    score, commands = plan.get("Score") or {}, sum(step.command for step in steps)
    doubtful = [k + 1 for k, step in enumerate(steps) if step.note]
    lines = [
        f"# plbjax-export ({fmt}) of the plan {source}" + (f", written {when}" if when else ""),
        f"# score (AvgStdDev): {score.get('Before', float('nan')):.6g} -> {score.get('After', float('nan')):.6g}; "
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
    if counts is None and any(step.action["Action"].startswith("Add") for step in steps):
        lines.append("# Without --state an add of the Failover Manager's is confirmed only on the plan's node.")
    if doubtful:
        lines.append(
            f"# Steps {', '.join(map(str, doubtful))} may find no room (see their notes)"
            + ("; --state tells whether they need it." if loads is None else ".")
        )
    return lines


def _row(k: int, steps: list[Step], counts: dict | None) -> list:
    """Step k's line in the table: number, description, partition, action, nodes, the steps done
    once it is (all it needs, transitively), and the count that confirms a Failover Manager's add."""
    a = steps[k].action
    closure, todo = set(), list(steps[k].needs)
    while todo:
        d = todo.pop()
        if d not in closure:
            closure.add(d)
            todo += steps[d].needs
    kind, pid = a["Action"], str(a["PartitionId"])
    count = (counts or {}).get((pid, kind.removeprefix("Add")), 0) if kind.startswith("Add") else 0
    where = [pid, kind, a["SourceNode"] or "", a["TargetNode"] or ""]
    return [k + 1, _describe(a), *where, sorted(d + 1 for d in closure), count]


def _by_partition(steps: list[Step]) -> list[list[int]]:
    """The step numbers of each partition, partitions in the order of their first step."""
    groups: dict[tuple[str, str], list[int]] = {}
    for k, step in enumerate(steps):
        groups.setdefault((step.action["ServiceName"], str(step.action["PartitionId"])), []).append(k + 1)
    return list(groups.values())


def _describe(action: dict) -> str:
    src, dst = action["SourceNode"] or "-", action["TargetNode"] or "-"
    return f"{action['Action']} {action['ServiceName']} partition {action['PartitionId']} {src} -> {dst}"


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


def _issue(fmt: str, k: int, action: dict) -> str:
    """The line that runs step k's command (unless done, before PLBJAX_START_AT, or not as planned)."""
    if fmt == "powershell":
        return f"{PS_NAMES['issue']} {k} {{ {command(action, fmt)} }}"
    return f"issue {k} {command(action, fmt)}"


def target_counts(state_path: str | Path, actions: list[dict]) -> dict[tuple[str, str], int]:
    """(partition, role) -> how many replicas of that role the partition holds on Up nodes once the
    plan's `actions` are applied to the state, for each partition the Failover Manager adds to."""
    from plbjax.sf import apply_actions, load_state

    document = load_state(state_path).document
    try:
        target = apply_actions(document, actions)
    except (ValueError, KeyError, StopIteration) as exc:
        raise BadInput(f"--state: the plan's actions do not fit the state ({exc})") from None
    down = {n["NodeName"] for n in target["Nodes"] if n.get("NodeStatus") == "Down"}
    added = {(str(a["PartitionId"]), a["Action"].removeprefix("Add")) for a in actions if a["Action"].startswith("Add")}
    counts: dict[tuple[str, str], int] = dict.fromkeys(added, 0)
    for partition in target["Partitions"]:
        for replica in partition["Replicas"]:
            key = (str(partition["PartitionId"]), replica.get("Role") or "Instance")
            if key in counts and replica.get("NodeName") not in (None, *down):
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
        return 0, " ".join(k for k, *where in groups if not mismatches(held, after(_act(*where))))
    action = _act(*args[:3])
    wrong = mismatches(held, after(action))
    if not wrong:
        return 0, "done" if mode == "step" else ""
    if mode == "step":
        wrong = mismatches(held, before(action))
        return int(bool(wrong)), "; ".join(wrong)
    elsewhere = _elsewhere(held, action, int(args[3]) if args[3:] else 0)
    return (0, elsewhere) if elsewhere else (1, "; ".join(wrong))


def _act(kind: str, source: str, target: str) -> dict:
    """An action as expectations.py reads it ('' for no node)."""
    return {"Action": kind, "SourceNode": source or None, "TargetNode": target or None}


def _elsewhere(held: dict, action: dict, count: int) -> str:
    """For an add: that the partition holds `count` (> 0) Ready replicas of its role, on any nodes."""
    role = action["Action"].removeprefix("Add")
    have = sum(h.role == role for h in held.values())
    if not action["Action"].startswith("Add") or count <= 0 or have != count:
        return ""
    sf_role = {"Secondary": "ActiveSecondary"}.get(role, role)
    return f"placed elsewhere by the Failover Manager: the partition holds the {have} Ready {sf_role}(s) planned"


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


READER_PY = "\n\n".join(
    [inspect.getsource(expectations), *map(inspect.getsource, (read_cluster, _act, _elsewhere, _pages, _sf_error))]
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
BASH = r"""
wait_timeout=${PLBJAX_WAIT_TIMEOUT:-@TIMEOUT@}  # seconds a wait may last before the script stops
poll_seconds=${PLBJAX_POLL_SECONDS:-@POLL@}  # seconds between two looks at the cluster
start_at=${PLBJAX_START_AT:-1}  # the first step to issue: those before it are taken as issued
total=@TOTAL@
say() { printf '%s plbjax: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }  # a line on stderr, with the UTC time
stop() { say "stopped: ${*:2}"; exit "$1"; }  # stop STATUS WHY
[[ $start_at =~ ^[0-9]+$ ]] || stop 2 "PLBJAX_START_AT=$start_at is not a step number"
command -v python3 >/dev/null || stop 2 "python3 is needed to read the cluster's answers"
@TOOL@
errors=$(mktemp)  # the last command's error output
trap 'rm -f "$errors"' EXIT
# the reader of the cluster's JSON: plbjax/sf/live/expectations.py and export.py's read_cluster
IFS= read -r -d '' reader <<'PY' || true
@READER@
PY
what=() partition=() action=() src=() dst=() closure=() count=() confirmed=()
plan_step() {  # plan_step STEP WHAT PARTITION ACTION SOURCE TARGET CLOSURE COUNT: a row of the steps' table
  what[$1]=$2 partition[$1]=$3 action[$1]=$4 src[$1]=$5 dst[$1]=$6 closure[$1]=$7 count[$1]=$8
}
replicas() {  # replicas PARTITION: every page of its replica list
  local token='' page
  while :; do
    page=$(replica_page "$1" "$token") || { printf '%s\n' "$page" >&2 && return 1; }  # SF's error: on stderr
    printf '%s\n' "$page"
    [[ $page =~ \"[cC]ontinuation[tT]oken\"[[:space:]]*:[[:space:]]*\"([^\"]+)\" ]] || return 0
    token=${BASH_REMATCH[1]}
  done
}
fetch() {  # fetch PARTITION: its replica list into $pages, asking again while the cluster does not answer
  local deadline=$((SECONDS + wait_timeout))
  until pages=$(replicas "$1" 2>"$errors"); do
    ((SECONDS < deadline)) ||
      stop 3 "the cluster has not answered for $wait_timeout s (PLBJAX_WAIT_TIMEOUT): $(sf_error)"
    say "the cluster did not answer ($(sf_error)); asking again"
    sleep "$poll_seconds"
  done
}
read_as() { python3 -c "$reader" "$@" <<<"$pages"; }  # read_as MODE ARGS...: the reader on $pages
sf_error() { python3 -c "$reader" error <"$errors"; }  # the last command's error, in SF's words
confirm() {  # confirm STEP: the step is done, and so are the steps it needs
  local d
  confirmed[$1]=1
  for d in ${closure[$1]}; do confirmed[d]=1; done
}
recognise() {  # recognise 'STEP...': those of these steps (of one partition) already done, by a run before this one
  local k found args=()
  for k in $1; do args+=("$k" "${action[k]}" "${src[k]}" "${dst[k]}"); done
  fetch "${partition[args[0]]}"
  found=$(read_as survey "${args[@]}")
  for k in $found; do confirm "$k"; done
}
issue() {  # issue STEP COMMAND...: unless the step is done or before PLBJAX_START_AT, check and run its command
  local k=$1 out
  shift
  if [[ -z ${confirmed[k]-} ]] && ((k >= start_at)); then
    fetch "${partition[k]}"
    out=$(read_as step "${action[k]}" "${src[k]}" "${dst[k]}") ||
      stop 4 "step $k/$total (${what[k]}): the replica is not where the plan assumed: $out"
    [[ $out != done ]] || confirm "$k"
  fi
  if [[ -n ${confirmed[k]-} ]]; then
    say "step $k/$total already done, not issued: ${what[k]}"
  elif ((k < start_at)); then
    say "step $k/$total taken as issued (PLBJAX_START_AT=$start_at): ${what[k]}"
  else
    say "step $k/$total: ${what[k]}"
    "$@" >/dev/null 2>"$errors" || stop 4 "step $k/$total (${what[k]}) refused: $(sf_error)"
  fi
}
failover_step() {  # failover_step STEP: a step of the Failover Manager's, without a command
  if [[ -n ${confirmed[$1]-} ]]; then
    say "step $1/$total already done: ${what[$1]}"
  else
    say "step $1/$total left to the Failover Manager (no command): ${what[$1]}"
  fi
}
wait_for() {  # wait_for STEP NEEDED: before step STEP, poll until step NEEDED is done (unless known), or stop
  (($1 >= start_at)) && [[ -z ${confirmed[$1]-}${confirmed[$2]-} ]] || return 0
  await "$2" 0 "step $1 and those after it have not run"
}
await() {  # await STEP COUNT THEN: poll until step STEP is done, or stop (exit 3) saying THEN
  local k=$1 deadline=$((SECONDS + wait_timeout)) out
  while :; do
    fetch "${partition[k]}"
    if out=$(read_as done "${action[k]}" "${src[k]}" "${dst[k]}" "$2"); then
      confirm "$k"
      say "step $k/$total done${out:+ ($out)}: ${what[k]}"
      return
    fi
    ((SECONDS < deadline)) ||
      stop 3 "step $k (${what[k]}) is not done after $wait_timeout s (PLBJAX_WAIT_TIMEOUT): $out; $3"
    sleep "$poll_seconds"
  done
}
finish() {  # after the last step: wait for each step not confirmed yet, last first, then say all is done
  local k
  for ((k = total; k >= 1; k--)); do
    [[ -n ${confirmed[k]-} ]] || await "$k" "${count[k]}" "the steps before it may not be done either"
  done
  say "all $total step(s) done"
}"""
TOOL = {
    "sfctl": r"""command -v sfctl >/dev/null || stop 2 "sfctl is needed (pip install sfctl; sfctl cluster select)"
replica_page() { sfctl replica list --partition-id "$1" ${2:+--continuation-token "$2"}; }  # PARTITION TOKEN""",
    "rest": r"""command -v curl >/dev/null || stop 2 "curl is needed"
endpoint=${PLBJAX_ENDPOINT:-}
[[ -n $endpoint ]] || stop 2 "set PLBJAX_ENDPOINT to the HTTP endpoint of the cluster, e.g. https://mycluster:19080"
read -r -a curl_args <<<"${PLBJAX_CURL_ARGS-}"  # e.g. --cert client.pem --key client.key
request() { curl --silent --show-error --fail-with-body ${curl_args[@]+"${curl_args[@]}"} "$@"; }
post() { request -X POST --data '' "$endpoint$1" >&2; }  # a move; SF's answer (an error) on stderr
replica_page() {  # replica_page PARTITION TOKEN: a page of its replica list
  request -G --data-urlencode api-version=6.0 ${2:+--data-urlencode "ContinuationToken=$2"} \
    "$endpoint/Partitions/$1/\$/GetReplicas"
}""",
}
PS = r"""
# seconds a wait may last before the script stops, and between two looks at the cluster
$WaitTimeout = if ($env:PLBJAX_WAIT_TIMEOUT) { [int]$env:PLBJAX_WAIT_TIMEOUT } else { @TIMEOUT@ }
$PollSeconds = if ($env:PLBJAX_POLL_SECONDS) { [double]$env:PLBJAX_POLL_SECONDS } else { @POLL@ }
$StartAt = if ($env:PLBJAX_START_AT) { [int]$env:PLBJAX_START_AT } else { 1 }  # those before: taken as issued
$Total = @TOTAL@
$PlanSteps = @{}
$Confirmed = @{}
function Write-Plbjax([string]$Text) {
    # a line on stderr, with the UTC time
    $stamp = [DateTime]::UtcNow.ToString("yyyy-MM-dd'T'HH:mm:ss'Z'", [Globalization.CultureInfo]::InvariantCulture)
    [Console]::Error.WriteLine("$stamp plbjax: $Text")
}
function Stop-Plbjax([int]$Status, [string]$Why) {
    Write-Plbjax "stopped: $Why"
    exit $Status
}
function Add-PlbjaxStep([int]$Step, [string]$What, [string]$PartitionId, [string]$Action, [string]$Source,
    [string]$Target, [int[]]$Closure, [int]$Expected) {
    # a row of the steps' table; Closure: the steps done once it is; Expected: the Ready replicas of an add's role
    $PlanSteps[$Step] = [pscustomobject]@{ What = $What; PartitionId = $PartitionId; Action = $Action
        Source = $Source; Target = $Target; Closure = $Closure; Expected = $Expected }
}
function Get-PlbjaxHolding([string]$PartitionId) {
    # node -> what it holds of the partition (expectations.py's rule): an auxiliary replica is Auxiliary;
    # else a Ready 'Primary' is a Primary, a Ready 'ActiveSecondary' a Secondary, a Ready replica without
    # a role an Instance; one not Ready, or in any other role ('IdleSecondary', 'None', ...), is InBuild;
    # a Down, Dropped, Standby or Invalid replica holds nothing
    $held = @{}
    foreach ($replica in @(Get-ServiceFabricReplica -PartitionId $PartitionId)) {
        $status, $sfRole, $node = "$($replica.ReplicaStatus)", "$($replica.ReplicaRole)", "$($replica.NodeName)"
        if ($status -in 'Down', 'Dropped', 'Standby', 'Invalid' -or -not $node) { continue }
        $role = if ($sfRole -like '*auxiliary*') { 'Auxiliary' } elseif ($status -ne 'Ready') { 'InBuild' }
        elseif (-not $sfRole) { 'Instance' }
        elseif ($sfRole -eq 'Primary') { 'Primary' } elseif ($sfRole -eq 'ActiveSecondary') { 'Secondary' }
        else { 'InBuild' }
        if (-not $held.ContainsKey($node) -or $held[$node].Role -eq 'InBuild') {
            $words = if ($sfRole) { "$sfRole ($status)" } else { "an instance ($status)" }
            $held[$node] = [pscustomobject]@{ Role = $role; Words = $words }
        }
    }
    return $held
}
function Read-PlbjaxPartition([string]$PartitionId) {
    # what the partition's nodes hold, asking again while the cluster does not answer
    $deadline = (Get-Date).AddSeconds($WaitTimeout)
    while ($true) {
        try { return Get-PlbjaxHolding $PartitionId }
        catch {
            if ((Get-Date) -ge $deadline) {
                $why = Format-PlbjaxError $_
                Stop-Plbjax 3 "the cluster has not answered for $WaitTimeout s (PLBJAX_WAIT_TIMEOUT): $why"
            }
            Write-Plbjax "the cluster did not answer ($(Format-PlbjaxError $_)); asking again"
            Start-Sleep -Milliseconds ([int](1000 * $PollSeconds))
        }
    }
}
function Get-PlbjaxExpected([string]$When, $Step) {
    # node -> role ('-': no replica) the partition shows when the step may start ('Before') or once it is done
    $kind, $src, $dst, $expected = $Step.Action, $Step.Source, $Step.Target, @{}
    if ($kind -eq 'SwapPrimarySecondary') {
        if ($When -eq 'Before') { $expected[$src] = 'Primary'; $expected[$dst] = 'Secondary' }
        else { $expected[$dst] = 'Primary'; $expected[$src] = 'Secondary' }
    } elseif ($kind.StartsWith('Move')) {
        if ($When -eq 'Before') { $expected[$src] = $kind.Substring(4); $expected[$dst] = '-' }
        else { $expected[$dst] = $kind.Substring(4); $expected[$src] = '-' }
    } elseif ($kind -eq 'PromoteSecondary') {
        $expected[$dst] = if ($When -eq 'Before') { 'Secondary' } else { 'Primary' }
    } elseif ($When -ne 'Before') {
        if ($kind.StartsWith('Drop')) { $expected[$src] = '-' } else { $expected[$dst] = $kind.Substring(3) }
    }
    return $expected
}
function Get-PlbjaxMismatch($Held, $Expected) {
    # each node whose holding is not the expected one, in SF's words (none when all match)
    foreach ($node in $Expected.Keys) {
        $role, $holding = $Expected[$node], $Held[$node]
        if ($role -eq '-' -and $holding) { "$node still holds $($holding.Words)" }
        elseif ($role -ne '-' -and (-not $holding -or $holding.Role -ne $role)) {
            $want = if ($role -eq 'Secondary') { 'ActiveSecondary' } else { $role }
            $has = if ($holding) { $holding.Words } else { 'no replica' }
            "$node holds $has, not a Ready $want"
        }
    }
}
function Format-PlbjaxError($Failure) {
    # SF's error: its code (a FabricException's ErrorCode) and message, on one line
    $e = $Failure.Exception
    $code = if ($e.PSObject.Properties['ErrorCode']) { "$($e.ErrorCode): " } else { '' }
    return ($code + $e.Message) -replace '\s+', ' '
}
function Confirm-PlbjaxStep([int]$Step) {
    # the step is done, and so are the steps it needs
    $Confirmed[$Step] = $true
    foreach ($d in $PlanSteps[$Step].Closure) { $Confirmed[$d] = $true }
}
function Find-PlbjaxDone([int[]]$Steps) {
    # those of these steps (of one partition) already done, by a run before this one
    $held = Read-PlbjaxPartition $PlanSteps[$Steps[0]].PartitionId
    foreach ($k in $Steps) {
        $wrong = @(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'After' $PlanSteps[$k]))
        if ($wrong.Count -eq 0) { Confirm-PlbjaxStep $k }
    }
}
function Invoke-PlbjaxStep([int]$Step, [scriptblock]$Command) {
    # unless the step is done or before PLBJAX_START_AT, check and run its command
    $s = $PlanSteps[$Step]
    if (-not $Confirmed[$Step] -and $Step -ge $StartAt) {
        $held = Read-PlbjaxPartition $s.PartitionId
        if (@(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'After' $s)).Count -eq 0) { Confirm-PlbjaxStep $Step }
        else {
            $wrong = @(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'Before' $s))
            if ($wrong.Count) {
                $why = $wrong -join '; '
                Stop-Plbjax 4 "step $Step/$Total ($($s.What)): the replica is not where the plan assumed: $why"
            }
        }
    }
    if ($Confirmed[$Step]) { Write-Plbjax "step $Step/$Total already done, not issued: $($s.What)" }
    elseif ($Step -lt $StartAt) {
        Write-Plbjax "step $Step/$Total taken as issued (PLBJAX_START_AT=$StartAt): $($s.What)"
    }
    else {
        Write-Plbjax "step $Step/$($Total): $($s.What)"
        try { & $Command | Out-Null }
        catch { Stop-Plbjax 4 "step $Step/$Total ($($s.What)) refused: $(Format-PlbjaxError $_)" }
    }
}
function Write-PlbjaxFailoverStep([int]$Step) {
    # a step of the Failover Manager's, without a command
    if ($Confirmed[$Step]) { Write-Plbjax "step $Step/$Total already done: $($PlanSteps[$Step].What)" }
    else { Write-Plbjax "step $Step/$Total left to the Failover Manager (no command): $($PlanSteps[$Step].What)" }
}
function Wait-PlbjaxDone([int]$Step, [bool]$Anywhere, [string]$Then) {
    # poll until the step is done (an add, $Anywhere: or its role's Ready replicas as planned), or stop (exit 3)
    $s, $deadline = $PlanSteps[$Step], (Get-Date).AddSeconds($WaitTimeout)
    while ($true) {
        $held = Read-PlbjaxPartition $s.PartitionId
        $wrong = @(Get-PlbjaxMismatch $held (Get-PlbjaxExpected 'After' $s))
        $role = $s.Action.Substring(3)
        $have = @($held.Values | Where-Object { $_.Role -eq $role }).Count
        if ($wrong.Count -eq 0) { $how = '' }
        elseif ($Anywhere -and $s.Action.StartsWith('Add') -and $s.Expected -gt 0 -and $have -eq $s.Expected) {
            $word = if ($role -eq 'Secondary') { 'ActiveSecondary' } else { $role }
            $how = " (placed elsewhere by the Failover Manager: the partition holds the $have Ready " +
                "$($word)(s) planned)"
        } else {
            if ((Get-Date) -ge $deadline) {
                $why = "$($wrong -join '; '); $Then"
                Stop-Plbjax 3 "step $Step ($($s.What)) is not done after $WaitTimeout s (PLBJAX_WAIT_TIMEOUT): $why"
            }
            Start-Sleep -Milliseconds ([int](1000 * $PollSeconds))
            continue
        }
        Confirm-PlbjaxStep $Step
        Write-Plbjax "step $Step/$Total done$($how): $($s.What)"
        return
    }
}
function Wait-PlbjaxStep([int]$Step, [int]$Needed) {
    # before step $Step, poll until step $Needed is done (unless known), or stop
    if ($Step -lt $StartAt -or $Confirmed[$Step] -or $Confirmed[$Needed]) { return }
    Wait-PlbjaxDone $Needed $false "step $Step and those after it have not run"
}
function Complete-PlbjaxPlan {
    # after the last step: wait for each step not confirmed yet, last first, then say all is done
    for ($k = $Total; $k -ge 1; $k--) {
        if (-not $Confirmed[$k]) { Wait-PlbjaxDone $k $true 'the steps before it may not be done either' }
    }
    Write-Plbjax "all $Total step(s) done"
}"""


def _prelude(fmt: str, wait_timeout: int, total: int) -> list[str]:
    """The script's settings and functions: how it says, reads the cluster, checks, issues and waits."""
    text = PS if fmt == "powershell" else BASH.replace("@TOOL@", TOOL[fmt]).replace("@READER@", READER_PY)
    for key, value in (("@TIMEOUT@", wait_timeout), ("@POLL@", POLL_SECONDS), ("@TOTAL@", total)):
        text = text.replace(key, str(value))
    return text.splitlines()


def _parser() -> argparse.ArgumentParser:
    """plbjax-export's command line."""
    assert __doc__ is not None  # the module's docstring
    parser = argparse.ArgumentParser(
        prog="plbjax-export",
        description=__doc__.splitlines()[0],
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
        actions = plan["Actions"]
        loads = action_loads(args.state, actions) if args.state else None
        counts = target_counts(args.state, actions) if args.state else None
        text = export_plan(plan, args.format, args.plan, when, loads, args.wait_timeout, counts)
    except BadInput as exc:
        print(f"plbjax-export: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    doubtful = [line for line in text.splitlines() if line.startswith("# Steps ") and "may find no room" in line]
    if doubtful:
        print(f"plbjax-export: warning: {doubtful[0].removeprefix('# ')}", file=sys.stderr)
    if args.output:
        write_text(args.output, text, executable=True)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
