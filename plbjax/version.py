"""plbjax's version, from the installed package's metadata: what every command's `--version`
prints and every plan, replay record and sweep summary carries."""

from __future__ import annotations

import argparse
from importlib import metadata


def _version() -> str:
    try:
        return metadata.version("plbjax")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


VERSION = _version()


def add_flag(parser: argparse.ArgumentParser) -> None:
    """`--version` on an argparse command: prints `PROG VERSION` and exits 0."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
