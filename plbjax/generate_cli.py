"""`plbjax-generate`: a synthetic cluster state document (`plbjax.sf.generate`) on the command line,
or a replay timeline over a state (`plbjax-generate timeline KIND`, `plbjax.sf.replay.generate`).

It sits in the top layer (docs/architecture.md): it imports `plbjax.sf` and `plbjax.sf.replay`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from plbjax.errors import BadInput
from plbjax.sf import ClusterSpec, generate
from plbjax.version import add_flag as add_version_flag


def _epilog() -> str:
    """The `timeline` kinds with their options, and examples."""
    from plbjax.sf.replay.generate import KINDS, options

    kinds = [
        f"  {kind}: " + ", ".join(f"{name}={value}" for name, value in options(kind).items()) for kind in sorted(KINDS)
    ]
    return "\n".join(
        [
            "plbjax-generate timeline KIND --state PATH [-p NAME=VALUE ...] [-o FILE]: a replay timeline over a",
            "state (plbjax-generate timeline --help). KIND, with its options (-p) and their defaults:",
            *kinds,
            "",
            "exit status: 0 written; 2 bad input (one line naming it); 130 after Ctrl-C (SIGINT), 143 after SIGTERM",
            "(no file half-written)",
            "",
            "examples:",
            "  plbjax-generate --nodes 40 --services 20 --metrics 3 -o cluster.yaml",
            "  plbjax-generate --nodes 100 --skew 0.9 --placement-constraint-fraction 0.2 --seed 7 -o skewed.json",
            "  plbjax-generate timeline diurnal --state cluster.yaml -p days=0.5 -o diurnal.yaml",
        ]
    )


OPTION_HELP = {  # ClusterSpec field -> what its option means (plbjax-generate --help)
    "nodes": "nodes in the cluster",
    "node_types": "node types NodeType0.. (the nodes split among them)",
    "fault_domains": "top-level fault domains",
    "racks_per_fault_domain": "racks per fault domain; above 1, fault domains are fd:/dcK/rJ",
    "upgrade_domains": "upgrade domains",
    "metrics": "custom metrics Metric0..; 0: SF's default metrics",
    "services": "services fabric:/App/Svc0..",
    "partitions_per_service": "partitions of each service",
    "replicas_per_partition": "TargetReplicaSetSize (stateful) or InstanceCount (stateless)",
    "stateless_fraction": "share of the services that are stateless",
    "skew": "how unevenly replicas are placed: 0 spreads them evenly, 1 piles them on a few nodes "
    "(Zipf-like node weights, exponent 3 x skew)",
    "load_scale": "typical load of a replica per metric (log-normal around it, primaries heavier; "
    "5 and above: integer loads)",
    "capacity_headroom": "node capacity per custom metric: headroom x the metric's total load / nodes "
    "(at least the largest replica's load); 0: no capacities",
    "placement_constraint_fraction": "share of the services constrained to one node type (NodeType == NodeTypeK)",
}


class _Parser(argparse.ArgumentParser):
    """The parser, its epilog (`_epilog`: the replay's timeline kinds) written only when help is
    asked for, so that generating a state imports neither the replay nor JAX."""

    def format_help(self) -> str:
        if self.epilog is None:
            self.epilog = _epilog()
        return super().format_help()


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="plbjax-generate",
        description="Generate a synthetic Service Fabric cluster state document (JSON or YAML).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_flag(ap)
    for f in dataclasses.fields(ClusterSpec):
        typ = type(f.default)
        ap.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=typ,
            default=f.default,
            metavar=typ.__name__.upper(),
            help=f"{OPTION_HELP[f.name]} (default: {f.default})",
        )
    ap.add_argument(
        "--seed", type=int, default=0, metavar="INT", help="random seed: the same seed, the same cluster (default: 0)"
    )
    ap.add_argument(
        "-o", "--out", metavar="PATH", default=None, help="output file, .json or .yaml/.yml (default: JSON on stdout)"
    )
    return ap


def _dump(doc: dict, path: str | None) -> None:
    if path is None:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    low = path.lower()
    if low.endswith((".yaml", ".yml")):
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        with open(path, "w", encoding="utf-8") as fh:
            yaml.dump(doc, fh, Dumper=dumper, sort_keys=False, default_flow_style=None)
    elif low.endswith(".json"):
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
    else:
        raise BadInput(f"--out {path!r}: extension must be .json, .yaml or .yml")


def main(argv=None) -> int:
    """``plbjax-generate [--nodes N ...] [-o PATH]``, or ``plbjax-generate timeline KIND --state PATH``
    (`plbjax.sf.replay.generate`); 0 on success, 2 on bad input."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["timeline"]:
        from plbjax.sf.replay.generate import main as timeline_main

        timeline_main(argv[1:])
        return 0
    args = vars(_parser().parse_args(argv))
    out, seed = args.pop("out"), args.pop("seed")
    try:
        doc = generate(seed, ClusterSpec(**args))
        _dump(doc, out)
    except BadInput as e:
        print(f"plbjax-generate: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
