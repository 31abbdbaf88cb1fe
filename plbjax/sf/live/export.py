"""``plbjax-export PLAN --format sfctl|powershell|rest [-o FILE]``: the commands that carry a plan out.

One command per movement, in the plan's order; nothing runs until the user runs it. Commands and
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
its interpreter's line and stops at the first command that fails (``set -euo pipefail``;
``$ErrorActionPreference = 'Stop'``). Its steps come in the order `steps.order` gives: each after
the steps it depends on (the partition's previous step; the moves off a node that make room on it).
A request may be answered before its move is done, so before a step that needs an earlier one the
script polls the cluster (``sfctl replica list``, ``Get-ServiceFabricReplica``, ``GET
.../$/GetReplicas``) until that movement is done: the replica Ready on its target node in the role
expected and gone from its source. A wait that lasts longer than its timeout (``PLBJAX_WAIT_TIMEOUT``
seconds, default ``--wait-timeout``) stops the script with a message naming the step.

A SwapPrimarySecondary is the move of the primary onto its secondary's node, which SF carries out
as a swap. Adds, drops and promotions have no command: the Failover Manager makes them (to restore
the target replica count), so they are steps without a command, waited for where a later one needs them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf.live.steps import Step, action_loads, order
from plbjax.version import add_flag as add_version_flag

FORMATS = ("sfctl", "powershell", "rest")
PRIMARY = ("MovePrimary", "SwapPrimarySecondary")
FIELDS = ("ServiceName", "PartitionId", "Action", "SourceNode", "TargetNode")
FAILOVER_MANAGER = "no command; the Failover Manager does this itself"
WAIT_TIMEOUT = 1800  # seconds a wait may last: building a replica copies its state, which may take long
POLL_SECONDS = 10


def service_id(service_name: str) -> str:
    """SF's service id: the name without 'fabric:/' and with '~' for '/' (fabric:/A/B -> A~B)."""
    return service_name.removeprefix("fabric:").lstrip("/").replace("/", "~")


def command(action: dict, fmt: str) -> str:
    """The command for one movement action (MovePrimary, MoveSecondary, MoveInstance, SwapPrimarySecondary)
    in format `fmt`."""
    kind, pid, svc = action["Action"], str(action["PartitionId"]), action["ServiceName"]
    src, dst = action["SourceNode"], action["TargetNode"]
    if kind in PRIMARY:
        forms = (
            ["sfctl", "partition", "move-primary-replica", "--partition-id", pid, "--node-name", dst],
            ["Move-ServiceFabricPrimaryReplica", "-PartitionId", pid, "-ServiceName", svc, "-NodeName", dst],
            (f"/Partitions/{quote(pid)}/$/MovePrimaryReplica", "6.5", {"NodeName": dst}),
        )
    elif kind == "MoveSecondary":
        forms = (
            [
                "sfctl",
                "partition",
                "move-secondary-replica",
                "--partition-id",
                pid,
                "--current-node-name",
                src,
                "--new-node-name",
                dst,
            ],
            [
                "Move-ServiceFabricSecondaryReplica",
                "-PartitionId",
                pid,
                "-ServiceName",
                svc,
                "-CurrentSecondaryNodeName",
                src,
                "-NewSecondaryNodeName",
                dst,
            ],
            (f"/Partitions/{quote(pid)}/$/MoveSecondaryReplica", "6.5", {"CurrentNodeName": src, "NewNodeName": dst}),
        )
    elif kind == "MoveInstance":
        forms = (
            [
                "sfctl",
                "partition",
                "move-instance",
                "--service-id",
                service_id(svc),
                "--partition-id",
                pid,
                "--current-node-name",
                src,
                "--new-node-name",
                dst,
            ],
            [
                "Move-ServiceFabricInstance",
                "-PartitionId",
                pid,
                "-ServiceName",
                svc,
                "-CurrentInstanceNodeName",
                src,
                "-NewInstanceNodeName",
                dst,
            ],
            (
                f"/Services/{quote(service_id(svc), safe='~')}/$/GetPartitions/{quote(pid)}/$/MoveInstance",
                "8.0",
                {"CurrentNodeName": src, "NewNodeName": dst},
            ),
        )
    else:
        raise ValueError(f"{kind}: no command; the Failover Manager makes it")
    sfctl, powershell, (path, version, query) = forms
    if fmt == "sfctl":
        return shlex.join(sfctl)
    if fmt == "powershell":
        return _ps_join(powershell)
    return shlex.join(["post", f"{path}?{urlencode({'api-version': version} | query)}"])


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
) -> str:
    """The script for `plan` in format `fmt`: header comments, the waiting functions, then each step
    (`steps.order`; `loads`: per action, what it changes of each node's load, None if unknown)
    with, before it, a wait for each step it needs that is not known done yet."""
    if fmt not in FORMATS:
        raise BadInput(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    actions = _actions(plan, source)
    steps = order(actions, plan.get("Nodes") or [], loads)
    score = plan.get("Score") or {}
    commands = sum(step.command for step in steps)
    doubtful = [k + 1 for k, step in enumerate(steps) if step.note]
    header = [
        f"# plbjax-export ({fmt}) of the plan {source}" + (f", written {when}" if when else ""),
        f"# score (AvgStdDev): {score.get('Before', float('nan')):.6g} -> {score.get('After', float('nan')):.6g}; "
        f"{len(actions)} action(s): {commands} command(s), {len(steps) - commands} made by the Failover Manager",
        "# Nothing has run: review these steps, then run this script. Each step comes after the steps it needs,",
        "# and waits (polls the cluster) until they are done; a wait longer than PLBJAX_WAIT_TIMEOUT seconds",
        f"# (default {wait_timeout}) stops the script. PLBJAX_POLL_SECONDS (default {POLL_SECONDS}): between polls.",
        *PRELUDE_NOTE[fmt],
    ]
    if loads is None:
        header.append("# The replicas' loads are unknown (no --state): a step onto a node waits for every move off it.")
    if doubtful:
        header.append(
            f"# Steps {', '.join(map(str, doubtful))} may find no room (see their notes)"
            + ("; --state tells whether they need it." if loads is None else ".")
        )
    lines = [*INTERPRETER[fmt], *header, *_prelude(fmt, wait_timeout)]
    waited: set[int] = set()
    for k, step in enumerate(steps):
        lines += ["", f"# step {k + 1}/{len(steps)}: {_describe(step.action)} (the plan's Actions[{step.index}])"]
        for d, why in step.needs.items():
            lines.append(f"# step {k + 1} needs step {d + 1} done ({why}): {_describe(steps[d].action)}")
            if d not in waited:
                lines.append(_wait(fmt, k, d, steps[d]))
                waited.add(d)
        if step.note:
            lines.append(f"# step {k + 1} {step.note}")
        lines.append(command(step.action, fmt) if step.command else f"# {FAILOVER_MANAGER}")
    lines += ["", _say(fmt, f"plbjax: all {len(steps)} step(s) started; the last ones may still be under way")]
    return "\n".join(lines) + "\n"


def _describe(action: dict) -> str:
    src, dst = action["SourceNode"] or "-", action["TargetNode"] or "-"
    return f"{action['Action']} {action['ServiceName']} partition {action['PartitionId']} {src} -> {dst}"


def _settled(action: dict) -> list[str]:
    """What the cluster shows once `action` is done, as NODE=ROLE: NODE holds a Ready replica of the
    partition in ROLE (Instance: any role), or none ('-')."""
    kind, src, dst = action["Action"], action["SourceNode"], action["TargetNode"]
    if kind == "SwapPrimarySecondary":
        return [f"{dst}=Primary", f"{src}=Secondary"]
    if kind.startswith("Move"):
        return [f"{dst}={kind.removeprefix('Move')}", f"{src}=-"]
    if kind.startswith("Drop"):
        return [f"{src}=-"]
    return [f"{dst}={'Primary' if kind == 'PromoteSecondary' else kind.removeprefix('Add')}"]


def _wait(fmt: str, k: int, d: int, needed: Step) -> str:
    """The line that waits, before step k, for step d to be done."""
    what, pid = _describe(needed.action), str(needed.action["PartitionId"])
    if fmt == "powershell":
        expected = ", ".join(map(_ps_quote, _settled(needed.action)))
        return f"Wait-PlbjaxStep {k + 1} {d + 1} {_ps_quote(what)} {_ps_quote(pid)} @({expected})"
    return shlex.join(["wait_for", str(k + 1), str(d + 1), what, pid, *_settled(needed.action)])


def _say(fmt: str, text: str) -> str:
    if fmt == "powershell":
        return f"[Console]::Error.WriteLine({_ps_quote(text)})"
    return f"echo {shlex.quote(text)} >&2"


INTERPRETER = {
    "sfctl": ["#!/usr/bin/env bash", "set -euo pipefail  # stop at the first command that fails"],
    "rest": ["#!/usr/bin/env bash", "set -euo pipefail  # stop at the first command that fails"],
    "powershell": ["#!/usr/bin/env pwsh", "$ErrorActionPreference = 'Stop'  # stop at the first command that fails"],
}
PRELUDE_NOTE = {
    "sfctl": ["# Needs sfctl, connected to the cluster (sfctl cluster select), and python3 to read its answers."],
    "rest": [
        "# Needs curl and python3; PLBJAX_ENDPOINT: the cluster's HTTP endpoint (https://mycluster:19080);",
        "# PLBJAX_CURL_ARGS: curl's options for it, e.g. '--cert client.pem --key client.key' or '--insecure'.",
    ],
    "powershell": ["# Needs the ServiceFabric module, connected to the cluster (Connect-ServiceFabricCluster)."],
}
# Reads the partition's replicas (sfctl's camelCase or REST's PascalCase JSON) on stdin; exit 0 when
# every NODE=ROLE argument holds: NODE has a Ready replica in ROLE (Instance: any), or none ("-";
# a dropped, standby or down replica holds no room).
SETTLED_PY = """\
import json, sys
doc = json.load(sys.stdin)
if isinstance(doc, dict):
    doc = next((v for k, v in doc.items() if k.lower() == "items"), [])
here = {}
for item in doc:
    item = {k.lower(): v for k, v in item.items()}
    if str(item.get("replicastatus")).lower() not in ("dropped", "standby", "down"):
        role = str(item.get("replicarole") or "Instance").lower()
        here.setdefault(item.get("nodename"), []).append((role, str(item.get("replicastatus")).lower()))
def settled(node, role):
    if role == "-":
        return node not in here
    return any(s == "ready" and role.lower() in (r, "instance") for r, s in here.get(node, []))
sys.exit(0 if all(settled(*arg.rsplit("=", 1)) for arg in sys.argv[1:]) else 1)"""
BASH_WAIT = """\
wait_timeout=${{PLBJAX_WAIT_TIMEOUT:-{timeout}}}  # seconds a wait may last before the script stops
poll_seconds=${{PLBJAX_POLL_SECONDS:-{poll}}}  # seconds between two looks at the cluster
{replicas}
settled_py=$(cat <<'PY'
{settled}
PY
)
settled() {{  # settled PARTITION NODE=ROLE...: each NODE holds a Ready replica in ROLE (Instance: any; -: none)
  replicas "$1" | python3 -c "$settled_py" "${{@:2}}"
}}
wait_for() {{  # wait_for STEP NEEDED WHAT PARTITION NODE=ROLE...: poll until settled, or stop
  local step=$1 needed=$2 what=$3 deadline=$((SECONDS + wait_timeout))
  shift 3
  until settled "$@"; do
    if ((SECONDS >= deadline)); then
      echo "plbjax: stopped: step $needed ($what) is not done after $wait_timeout s (PLBJAX_WAIT_TIMEOUT);" \\
        "step $step and those after it have not run" >&2
      exit 3
    fi
    sleep "$poll_seconds"
  done
  echo "plbjax: step $needed done: $what" >&2
}}
command -v python3 >/dev/null || {{ echo "plbjax: python3 is needed to read the cluster's answers" >&2; exit 2; }}"""
REPLICAS = {
    "sfctl": 'replicas() { sfctl replica list --partition-id "$1"; }  # the partition\'s replicas, as JSON',
    "rest": """\
endpoint=${PLBJAX_ENDPOINT:?set PLBJAX_ENDPOINT to the HTTP endpoint of the cluster, e.g. https://mycluster:19080}
read -r -a curl_args <<<"${PLBJAX_CURL_ARGS-}"  # e.g. --cert client.pem --key client.key
request() { curl --fail --silent --show-error ${curl_args[@]+"${curl_args[@]}"} "$@"; }
post() { request -X POST --data '' "$endpoint$1" >/dev/null; }  # a request with an empty body
replicas() { request "$endpoint/Partitions/$1/\\$/GetReplicas?api-version=6.0"; }  # as JSON""",
}
PS_WAIT = """\
# seconds a wait may last before the script stops, and between two looks at the cluster
$WaitTimeout = if ($env:PLBJAX_WAIT_TIMEOUT) {{ [int]$env:PLBJAX_WAIT_TIMEOUT }} else {{ {timeout} }}
$PollSeconds = if ($env:PLBJAX_POLL_SECONDS) {{ [int]$env:PLBJAX_POLL_SECONDS }} else {{ {poll} }}
function Test-PlbjaxSettled([string]$PartitionId, [string[]]$Expected) {{
    # each 'NODE=ROLE' holds: NODE has a Ready replica in ROLE (Instance: any role), or none ('-')
    $replicas = @(Get-ServiceFabricReplica -PartitionId $PartitionId |
            Where-Object {{ "$($_.ReplicaStatus)" -notin 'Dropped', 'Standby', 'Down' }})
    foreach ($pair in $Expected) {{
        $at = $pair.LastIndexOf('=')
        $node, $role = $pair.Substring(0, $at), $pair.Substring($at + 1)
        $here = @($replicas | Where-Object {{ $_.NodeName -eq $node }})
        if ($role -eq '-') {{
            if ($here.Count -gt 0) {{ return $false }}
        }} else {{
            $ready = @($here | Where-Object {{
                    "$($_.ReplicaStatus)" -eq 'Ready' -and ($role -eq 'Instance' -or "$($_.ReplicaRole)" -eq $role) }})
            if ($ready.Count -eq 0) {{ return $false }}
        }}
    }}
    return $true
}}
function Wait-PlbjaxStep([int]$Step, [int]$Needed, [string]$What, [string]$PartitionId, [string[]]$Expected) {{
    # poll until step $Needed is done, or stop the script
    $deadline = (Get-Date).AddSeconds($WaitTimeout)
    while (-not (Test-PlbjaxSettled $PartitionId $Expected)) {{
        if ((Get-Date) -ge $deadline) {{
            [Console]::Error.WriteLine("plbjax: stopped: step $Needed ($What) is not done after $WaitTimeout s " +
                "(PLBJAX_WAIT_TIMEOUT); step $Step and those after it have not run")
            exit 3
        }}
        Start-Sleep -Seconds $PollSeconds
    }}
    [Console]::Error.WriteLine("plbjax: step $Needed done: $What")
}}"""


def _prelude(fmt: str, wait_timeout: int) -> list[str]:
    """The script's variables and functions: how it reads the cluster and waits."""
    if fmt == "powershell":
        return [PS_WAIT.format(timeout=wait_timeout, poll=POLL_SECONDS)]
    return [BASH_WAIT.format(timeout=wait_timeout, poll=POLL_SECONDS, replicas=REPLICAS[fmt], settled=SETTLED_PY)]


def _actions(plan: object, source: str) -> list[dict]:
    """The plan's Actions; BadInput naming the key if it is not a plan."""
    actions = plan.get("Actions") if isinstance(plan, dict) else None
    if not isinstance(actions, list):
        what = "a state document" if isinstance(plan, dict) and "Nodes" in plan else "not a plbjax plan"
        raise BadInput(f"{source}: Actions: missing; {what}, not a plan (plbjax state=STATE out=plan.json writes one)")
    for i, action in enumerate(actions):
        missing = [k for k in FIELDS if not isinstance(action, dict) or k not in action]
        if missing:
            raise BadInput(f"{source}: Actions[{i}].{missing[0]}: missing")
    return actions


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None  # the module's docstring
    parser = argparse.ArgumentParser(
        prog="plbjax-export",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  plbjax-export plan.json --state state.json --format sfctl -o moves.sh   (then review, and: ./moves.sh)\n"
        "  plbjax-export plan.json --state state.json --format powershell -o moves.ps1\n"
        "  plbjax-export outputs/2026-01-01/12-00-00/plan.json --format rest --wait-timeout 600 -o moves.sh\n"
        "each step comes after those it needs and waits until they are done (polling the cluster);\n"
        "a script stops at the first failed command or at a wait longer than its timeout",
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
    args = parser.parse_args(argv)
    try:
        if args.wait_timeout <= 0:
            raise BadInput(f"--wait-timeout: {args.wait_timeout} is not a positive number of seconds")
        path = Path(args.plan)
        try:
            plan = json.loads(path.read_text())
            when = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
        except OSError as exc:
            raise BadInput(f"{args.plan}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"{args.plan}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}; "
                "not a plan (plbjax writes plans as JSON)"
            ) from None
        loads = action_loads(args.state, _actions(plan, args.plan)) if args.state else None
        text = export_plan(plan, args.format, args.plan, when, loads, args.wait_timeout)
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
