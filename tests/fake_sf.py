"""A fake Service Fabric cluster behind `sfctl` and `curl`, the tools the exported scripts call.

Its world is the JSON file $FAKE_SF: `replicas` (partition -> [{ReplicaId, Role, NodeName}]), the
plan's `actions`, and `late`: how many times a partition's replicas must be listed before a move
started on it is done (the Failover Manager's actions start at once and finish as late, after the
partition's earlier actions). It appends to `log` each call, each move started (`start I`) and
done (`done I`), I the plan's action index; it refuses (exit 1) a move the plan does not have, one
of a partition still reconfiguring, and one whose replica is not (yet) in the role it moves.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

PRIMARY = ("MovePrimary", "SwapPrimarySecondary")


def main() -> int:
    path = Path(os.environ["FAKE_SF"])
    world = json.loads(path.read_text())
    tool, args = sys.argv[1], sys.argv[2:]  # run as: python3 fake_sf.py sfctl|curl ARGS...
    world["log"].append(f"{tool} {' '.join(args)}")
    try:
        request = _sfctl(args) if tool == "sfctl" else _curl(args)
        if request[0] == "list":
            _advance(world, request[1])
            print(json.dumps(_listing(world, request[1], pascal=tool == "curl")))
        else:
            _start(world, *request[1:])
        return 0
    except Refused as exc:
        world["log"].append(f"refused: {exc}")
        print(f"fake {tool}: {exc}", file=sys.stderr)
        return 1
    finally:
        path.write_text(json.dumps(world))


class Refused(Exception):
    pass


def _sfctl(args: list[str]) -> tuple:
    flags = dict(zip(args[2::2], args[3::2]))
    if args[:2] == ["replica", "list"]:
        return ("list", flags["--partition-id"])
    kind = {"move-primary-replica": "primary", "move-secondary-replica": "secondary", "move-instance": "instance"}
    src = flags.get("--current-node-name")
    return ("move", kind[args[1]], flags["--partition-id"], src, flags.get("--new-node-name", flags.get("--node-name")))


def _curl(args: list[str]) -> tuple:
    url = next(a for a in args if a.startswith("http"))
    parts = urlsplit(url)
    path, query = unquote(parts.path).split("/"), {k: v[0] for k, v in parse_qs(parts.query).items()}
    if path[-1] == "GetReplicas":
        assert "POST" not in args and query["api-version"] == "6.0"
        return ("list", path[2])
    assert "POST" in args
    if path[-1] == "MoveInstance":
        return ("move", "instance", path[5], query["CurrentNodeName"], query["NewNodeName"])
    if path[-1] == "MovePrimaryReplica":
        return ("move", "primary", path[2], None, query["NodeName"])
    return ("move", "secondary", path[2], query["CurrentNodeName"], query["NewNodeName"])


def _start(world: dict, kind: str, pid: str, src: str | None, dst: str) -> None:
    pending = world.setdefault("pending", {})
    for i, a in enumerate(world["actions"]):
        matches = (a["Action"] in PRIMARY) if kind == "primary" else (a["Action"] == f"Move{kind.title()}")
        if matches and str(a["PartitionId"]) == pid and a["TargetNode"] == dst and src in (None, a["SourceNode"]):
            if f"start {i}" not in world["log"]:
                break
    else:
        raise Refused(f"no such move in the plan: {kind} {pid} {src} -> {dst}")
    busy = [int(j) for j in pending if str(world["actions"][int(j)]["PartitionId"]) == pid]
    if any(j < i or world["actions"][j]["Action"] in (*PRIMARY, "MoveSecondary", "MoveInstance") for j in busy):
        raise Refused(f"partition {pid} is reconfiguring")
    replicas = world["replicas"][pid]
    role = {"primary": "Primary", "secondary": "Secondary", "instance": "Instance"}[kind]
    if not any(r["Role"] == role and (src is None or r["NodeName"] == src) for r in replicas):
        raise Refused(f"partition {pid}: no {role} replica on {src or 'any node'}")
    pending[str(i)] = world["late"]
    world["log"].append(f"start {i}")


def _advance(world: dict, pid: str) -> None:
    """One look at partition pid: its started actions come closer to done; those due are done, in
    the plan's order, each after the partition's earlier actions."""
    pending = world.setdefault("pending", {})
    for i, a in enumerate(world["actions"]):
        if a["Action"] not in (*PRIMARY, "MoveSecondary", "MoveInstance") and f"start {i}" not in world["log"]:
            pending[str(i)] = world["late"]  # the Failover Manager's: started at once
            world["log"].append(f"start {i}")
    ours = [int(i) for i in pending if str(world["actions"][int(i)]["PartitionId"]) == pid]
    for i in sorted(ours):
        pending[str(i)] -= 1
        earlier = [j for j in range(i) if str(world["actions"][j]["PartitionId"]) == pid]
        if pending[str(i)] <= 0 and all(f"done {j}" in world["log"] for j in earlier):
            _apply(world["replicas"][pid], world["actions"][i])
            del pending[str(i)]
            world["log"].append(f"done {i}")


def _apply(replicas: list[dict], action: dict) -> None:
    kind, rid, dst = action["Action"], str(action["ReplicaId"]), action["TargetNode"]
    replica = next((r for r in replicas if str(r["ReplicaId"]) == rid), {"ReplicaId": rid})
    if kind.startswith("Drop"):
        replicas.remove(replica)
    elif kind.startswith("Add"):
        if replica not in replicas:
            replicas.append(replica)
        replica.update(NodeName=dst, Role=kind.removeprefix("Add"))
    elif kind in ("SwapPrimarySecondary", "PromoteSecondary"):
        for r in replicas:
            if r["Role"] == "Primary":
                r["Role"] = "Secondary"
        next(r for r in replicas if r["NodeName"] == dst)["Role"] = "Primary"
    else:
        replica["NodeName"] = dst


def _listing(world: dict, pid: str, pascal: bool) -> dict:
    def item(r: dict) -> dict:
        fields = {"ReplicaId": r["ReplicaId"], "ReplicaStatus": "Ready", "NodeName": r["NodeName"]}
        if r["Role"] != "Instance":
            fields["ReplicaRole"] = r["Role"]
        return fields if pascal else {k[0].lower() + k[1:]: v for k, v in fields.items()}

    items = [item(r) for r in world["replicas"].get(pid, [])]
    return {"ContinuationToken": "", "Items": items} if pascal else {"continuationToken": "", "items": items}


if __name__ == "__main__":
    sys.exit(main())
