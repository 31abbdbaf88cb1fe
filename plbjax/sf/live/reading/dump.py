"""``plbjax-dump --endpoint URL -o DIR``: a live cluster's REST responses, in the dump layout.

Standard library only (urllib, ssl). Calls and api-versions are those of SF's REST API reference
(learn.microsoft.com/rest/api/servicefabric), as microsoft/service-fabric-client-dotnet's generated
clients send them: Get Cluster Manifest ``/$/GetClusterManifest`` 6.0, Get Node Info List ``/Nodes``
6.3, Get Node Load Info ``/Nodes/{node}/$/GetLoadInformation`` 6.0, Get Application Info List
``/Applications`` 6.1, Get Application Load Info ``/Applications/{app}/$/GetLoadInformation`` 6.0
(optional, as the other load calls), Get Service Info List ``/Applications/{app}/$/GetServices`` 6.4, Get Service
Description ``/Services/{svc}/$/GetDescription`` 6.0, Get Partition Info List
``/Services/{svc}/$/GetPartitions`` 6.4, Get Replica Info List ``/Partitions/{pid}/$/GetReplicas``
6.0, Get Partition Load Information ``/Partitions/{pid}/$/GetLoadInformation`` 6.0 and, with
``--replica-loads``, Get Deployed Service Replica Detail Info
``/Nodes/{node}/$/GetPartitions/{pid}/$/GetReplicas/{id}/$/GetDetail`` 6.0. Every list is paged
through with the ``ContinuationToken`` query parameter (``MaxResults`` where the call takes it).
The load calls are optional in the dump layout: one the cluster refuses (HTTP error, e.g. the replica
detail of a replica on a node that is down) is left out with a warning on stderr; every other call
that fails stops the dump (exit status 2, one line naming the request).
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf.live.rest import Client, HttpError, items
from plbjax.version import add_flag as add_version_flag

C = TypeVar("C", bound=Client)


def optional(client: Client, path: str, version: str) -> object | None:
    """The JSON body of GET path, or None (with a warning on stderr) if the cluster refuses it."""
    try:
        return client.get(path, version)
    except HttpError as exc:
        print(f"plbjax-dump: warning: {exc}; left out of the dump", file=sys.stderr)
        return None


def field(item: object, *keys: str) -> str:
    """item[keys[0]][keys[1]]...: a string (an int64 id written as a number too); BadInput naming it."""
    value = item
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise BadInput(f"a response item has no {'.'.join(keys)}: {str(item)[:120]}")
    return value


def dump_cluster(client: Client, out: str | Path, replica_loads: bool = False, indent: int | None = 2) -> int:
    """Write the dump of the cluster behind `client` into directory `out` (JSON indented by `indent`;
    None: compact, as a recording of many periods keeps them); the number of files."""
    writer = _Writer(Path(out), indent)
    writer.put("cluster-manifest.json", client.get("/$/GetClusterManifest", "6.0"))
    nodes = writer.put("nodes.json", client.pages("/Nodes", "6.3"))
    for node in items(nodes):
        name = field(node, "Name")
        writer.put(f"node-load/{name}.json", optional(client, f"/Nodes/{quote(name)}/$/GetLoadInformation", "6.0"))
    for app in items(writer.put("applications.json", client.pages("/Applications", "6.1"))):
        app_id = field(app, "Id")
        app_path = f"/Applications/{quote(app_id, safe='~')}"
        writer.put(f"application-load/{app_id}.json", optional(client, f"{app_path}/$/GetLoadInformation", "6.0"))
        services = client.pages(f"{app_path}/$/GetServices", "6.4")
        for service in items(writer.put(f"services/{app_id}.json", services)):
            _service(client, writer, field(service, "Id"), replica_loads)
    return writer.count


def _service(client: Client, writer: _Writer, service_id: str, replica_loads: bool) -> None:
    """The description, partitions, replicas and loads of one service."""
    base = f"/Services/{quote(service_id, safe='~')}"
    writer.put(f"service-descriptions/{service_id}.json", client.get(f"{base}/$/GetDescription", "6.0"))
    for partition in items(writer.put(f"partitions/{service_id}.json", client.pages(f"{base}/$/GetPartitions", "6.4"))):
        pid = field(partition, "PartitionInformation", "Id")
        replicas = writer.put(f"replicas/{pid}.json", client.pages(f"/Partitions/{pid}/$/GetReplicas", "6.0"))
        writer.put(f"partition-load/{pid}.json", optional(client, f"/Partitions/{pid}/$/GetLoadInformation", "6.0"))
        for replica in items(replicas) if replica_loads else []:
            rid = field(replica, "ReplicaId" if "ReplicaId" in replica else "InstanceId")
            node = field(replica, "NodeName")
            path = f"/Nodes/{quote(node)}/$/GetPartitions/{pid}/$/GetReplicas/{rid}/$/GetDetail"
            writer.put(f"replica-load/{pid}/{rid}.json", optional(client, path, "6.0"))


class _Writer:
    """Writes each response atomically; a paged list as one object, or an array when it had pages."""

    def __init__(self, root: Path, indent: int | None) -> None:
        self.root, self.indent, self.count = root, indent, 0

    def put(self, rel: str, body: object) -> list:
        if body is None:  # an optional call the cluster refused
            return []
        value = body[0] if isinstance(body, list) and len(body) == 1 else body
        write_text(self.root / rel, json.dumps(value, indent=self.indent) + "\n")
        self.count += 1
        return body if isinstance(body, list) else [body]


def add_connection_flags(parser: argparse.ArgumentParser, output: str) -> None:
    """The options plbjax-dump and plbjax-record share: the cluster, how to reach it, what to read."""
    parser.add_argument("--endpoint", required=True, help="the cluster's HTTP gateway, e.g. https://host:19080")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help=output)
    parser.add_argument("--cert", help="client certificate (PEM) for https")
    parser.add_argument("--key", help="its private key (PEM), if not in --cert")
    parser.add_argument("--ca", metavar="CA_BUNDLE", help="CA certificates to verify the cluster's certificate with")
    parser.add_argument(
        "--insecure", action="store_true", help="allow plain http, and https without verifying the server's certificate"
    )
    parser.add_argument("--max-results", type=int, default=0, help="page size asked of list calls (0: SF's)")
    parser.add_argument(
        "--replica-loads", action="store_true", help="also read every replica's own load reports (one call per replica)"
    )


def connect(args: argparse.Namespace, client: type[C] = Client) -> C:
    """The client the connection options ask for (BadInput for a bad endpoint)."""
    return client(args.endpoint, args.cert, args.key, args.insecure, args.max_results, ca=args.ca)


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None  # the module's docstring
    parser = argparse.ArgumentParser(
        prog="plbjax-dump",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 dump written; 2 bad input or a call that failed (one line naming it); 130 after\n"
        "Ctrl-C (SIGINT), 143 after SIGTERM (no file half-written)\n\n"
        "examples:\n"
        "  plbjax-dump --endpoint https://mycluster:19080 --cert client.pem --key client.key -o dump/\n"
        "  plbjax-dump --endpoint http://localhost:19080 --insecure -o dump/\n"
        "  plbjax-dump --endpoint https://mycluster:19080 --cert client.pem --replica-loads -o dump/\n"
        "then: plbjax-import dump/ -o state.json (docs/live-cluster.md)",
    )
    add_version_flag(parser)
    add_connection_flags(parser, "the dump directory to write")
    args = parser.parse_args(argv)
    try:
        client = connect(args)
        count = dump_cluster(client, args.output, args.replica_loads)
    except (BadInput, ssl.SSLError) as exc:
        print(f"plbjax-dump: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"plbjax-dump: {count} files written to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
