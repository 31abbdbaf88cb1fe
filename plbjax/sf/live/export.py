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

A shell script (sfctl, powershell) starts with its interpreter's line and stops at the first
command that fails (``set -e``; ``$ErrorActionPreference = 'Stop'``). A move onto a node that an
earlier move of the plan leaves gets a comment before it: the earlier one must have finished, or the
later may find no room (each line is one request, which may be answered before the move is done).

A SwapPrimarySecondary is the move of the primary onto its secondary's node, which SF carries out
as a swap. Adds, drops and promotions have no command: the Failover Manager makes them (to restore
the target replica count), so they are written as comments.
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
from plbjax.version import add_flag as add_version_flag

FORMATS = ("sfctl", "powershell", "rest")
PRIMARY = ("MovePrimary", "SwapPrimarySecondary")
FIELDS = ("ServiceName", "PartitionId", "Action", "SourceNode", "TargetNode")
PREAMBLE = {
    "sfctl": ["#!/bin/sh", "set -e  # stop at the first command that fails"],
    "powershell": ["#!/usr/bin/env pwsh", "$ErrorActionPreference = 'Stop'  # stop at the first command that fails"],
    "rest": [],
}


def service_id(service_name: str) -> str:
    """SF's service id: the name without 'fabric:/' and with '~' for '/' (fabric:/A/B -> A~B)."""
    return service_name.removeprefix("fabric:").lstrip("/").replace("/", "~")


def command(action: dict, fmt: str) -> str:
    """The command for one movement action in format `fmt` (a comment for an action with none)."""
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
        return (
            f"# {kind} {svc} partition {pid} ({src or '-'} -> {dst or '-'}): no command; "
            "the Failover Manager does this itself"
        )
    sfctl, powershell, (path, version, query) = forms
    if fmt == "sfctl":
        return shlex.join(sfctl)
    if fmt == "powershell":
        return " ".join(w if w.startswith("-") or i == 0 else _ps_quote(w) for i, w in enumerate(powershell))
    return f"POST {path}?{urlencode({'api-version': version} | query)}"


def _ps_quote(word: str) -> str:
    return "'" + word.replace("'", "''") + "'"


def export_plan(plan: dict, fmt: str, source: str = "<plan>", when: str = "") -> str:
    """The script (header comments, then one line per action) for `plan` in format `fmt`."""
    if fmt not in FORMATS:
        raise BadInput(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    actions = _actions(plan, source)
    score = plan.get("Score") or {}
    header = [
        f"# plbjax-export ({fmt}) of the plan {source}" + (f", written {when}" if when else ""),
        f"# score (AvgStdDev): {score.get('Before', float('nan')):.6g} -> {score.get('After', float('nan')):.6g}; "
        f"{len(actions)} action(s)",
        "# Nothing has run: review these commands, then run them yourself, in this order.",
    ]
    if fmt == "rest":
        header.append("# Each line is a request to the cluster's HTTP endpoint (https://host:19080), body empty.")
    lines = []
    for action, waits in zip(actions, _waits(actions)):
        lines += [_wait_comment(actions[i], action) for i in waits] + [command(action, fmt)]
    return "\n".join(PREAMBLE[fmt] + header + lines) + "\n"


def _waits(actions: list[dict]) -> list[list[int]]:
    """Per movement, the earlier movements that leave its target node (they must finish first)."""
    left: dict[str, list[int]] = {}  # node -> movements so far that leave it
    out = []
    for i, action in enumerate(actions):
        moves = action["Action"] in (*PRIMARY, "MoveSecondary", "MoveInstance")
        out.append(left.get(action["TargetNode"], []) if moves else [])
        if moves and action["SourceNode"]:
            left.setdefault(action["SourceNode"], []).append(i)
    return out


def _wait_comment(earlier: dict, action: dict) -> str:
    return (
        f"# wait: the {earlier['Action']} of partition {earlier['PartitionId']} off {earlier['SourceNode']} (above) "
        f"must have finished before this move onto {action['TargetNode']} starts"
    )


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
        "  plbjax-export plan.json --format sfctl -o moves.sh        (then review, and: ./moves.sh)\n"
        "  plbjax-export plan.json --format powershell -o moves.ps1\n"
        "  plbjax-export outputs/2026-01-01/12-00-00/plan.json --format rest\n"
        "a script stops at the first failed command; '# wait:' lines mark a move that needs an earlier one done",
    )
    add_version_flag(parser)
    parser.add_argument("plan", metavar="PLAN", help="a plan written by plbjax")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    args = parser.parse_args(argv)
    try:
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
        text = export_plan(plan, args.format, args.plan, when)
    except BadInput as exc:
        print(f"plbjax-export: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.output:
        write_text(args.output, text, executable=bool(PREAMBLE[args.format]))
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
