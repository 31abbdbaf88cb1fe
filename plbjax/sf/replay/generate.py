"""`plbjax-generate timeline KIND --state PATH [-o FILE] [--seed N] [--param NAME=VALUE ...]`: a
timeline to play, made from a state document (`scenarios`): a diurnal load pattern, a fault domain
failing and returning, a rolling upgrade, a scale-out by a node type, a hot service. `--param`
sets one of the scenario's own options (`--param days=0.5`, `--param node_type=BackEnd`)."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from pathlib import Path

import yaml

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf import load_state
from plbjax.sf.replay import scenarios

KINDS = scenarios.GENERATORS
_FIXED = {"state", "seed", "state_ref"}  # set by the command itself, not by --param


def options(kind: str) -> dict[str, object]:
    """The scenario's own options and their defaults."""
    return {
        name: p.default
        for name, p in inspect.signature(KINDS[kind]).parameters.items()
        if name not in _FIXED and p.default is not inspect.Parameter.empty
    }


def _params(kind: str, given: list[str]) -> dict[str, object]:
    known, params = options(kind), {}
    for item in given:
        name, sep, text = item.partition("=")
        if not sep or name not in known:
            listed = ", ".join(f"{k}={v}" for k, v in known.items())
            raise BadInput(f"--param {item!r}: not NAME=VALUE with a NAME of {kind} ({listed})")
        value = yaml.safe_load(text) if text else None
        default = known[name]
        wanted = (int, float) if isinstance(default, float) else type(default)
        if default is not None and (
            isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, wanted)
        ):
            what = {bool: "true or false", int: "an integer", float: "a number"}[type(default)]
            raise BadInput(f"--param {name}: {text!r} is not {what}")
        if default is None and value is not None and not isinstance(value, str):
            value = text
        params[name] = value
    return params


def _parser() -> argparse.ArgumentParser:
    assert __doc__ is not None
    ap = argparse.ArgumentParser(
        prog="plbjax-generate timeline",
        description=" ".join(__doc__.split()),
        epilog="exit status: 0 written; 2 bad input (one line naming it); 130 after Ctrl-C (SIGINT), 143 after "
        "SIGTERM (no file half-written)",
    )
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("--state", required=True, metavar="PATH", help="the timeline's initial state document")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a scenario option, e.g. days=0.5 (diurnal), at=30 down_for=300 (fault-domain-failure)",
    )
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
        params = _params(args.kind, args.param)
        state = load_state(args.state).document
        ref = os.path.relpath(Path(args.state).resolve(), Path(args.out).resolve().parent) if args.out else None
        timeline = KINDS[args.kind](state, seed=args.seed, state_ref=ref, **params)
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
