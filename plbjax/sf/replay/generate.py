"""`plbjax-generate timeline KIND --state PATH [-o FILE] [--seed N]`: a timeline to play, made from a
state document (`scenarios`): a diurnal load pattern, a fault domain failing and returning, a
rolling upgrade, a scale-out by a node type, a hot service."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf import load_state
from plbjax.sf.replay import scenarios

KINDS = {
    "diurnal": scenarios.diurnal,
    "fault-domain-failure": scenarios.fault_domain_failure,
    "rolling-upgrade": scenarios.rolling_upgrade,
    "scale-out": scenarios.scale_out,
    "hot-service": scenarios.hot_service,
}


def _parser() -> argparse.ArgumentParser:
    assert __doc__ is not None
    ap = argparse.ArgumentParser(prog="plbjax-generate timeline", description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("--state", required=True, metavar="PATH", help="the timeline's initial state document")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "-o",
        "--out",
        metavar="PATH",
        help="timeline file, .json or .yaml (default: JSON on stdout); its State is the state's path relative to it",
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        state = load_state(args.state).document
        ref = os.path.relpath(Path(args.state).resolve(), Path(args.out).resolve().parent) if args.out else None
        timeline = KINDS[args.kind](state, seed=args.seed, state_ref=ref)
        if args.out is None:
            json.dump(timeline, sys.stdout, indent=1)
            sys.stdout.write("\n")
        elif args.out.lower().endswith((".yaml", ".yml")):
            write_text(args.out, yaml.safe_dump(timeline, sort_keys=False, default_flow_style=None))
        else:
            write_text(args.out, json.dumps(timeline, indent=1) + "\n")
    except BadInput as exc:
        print(f"plbjax-generate: bad input: {exc}", file=sys.stderr)
        sys.exit(2)
