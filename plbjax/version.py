"""plbjax's version: what every command's `--version` prints and every plan, replay record and sweep
summary carries. From a source checkout it names the commit, PEP 440's local part:
`0.1.0+g<12 hex digits>`, `.dirty` after it when tracked files differ from that commit; an installed
wheel gives its package metadata's version. Worked out once, on first use (`VERSION`), with one
`git status` (a few ms), so a command that never asks pays nothing."""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the source checkout, when plbjax runs from one


def base_version() -> str:
    """The release: pyproject.toml's in a source checkout, else the installed package's metadata."""
    pyproject = ROOT / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        if project.get("name") == "plbjax" and "version" in project:
            return project["version"]
    try:
        return metadata.version("plbjax")
    except metadata.PackageNotFoundError:  # neither installed nor a checkout
        return "unknown"


def commit(root: Path = ROOT) -> str | None:
    """`g<sha>` of `root`'s checked-out commit, `.dirty` after it when a tracked file differs from it;
    None when `root` is no git checkout (an installed wheel) or git cannot tell."""
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    oid = re.search(r"^# branch\.oid ([0-9a-f]{12})", done.stdout, re.M)
    if done.returncode or not oid:
        return None
    dirty = any(not line.startswith("#") for line in done.stdout.splitlines())
    return f"g{oid[1]}" + (".dirty" if dirty else "")


@functools.cache
def version() -> str:
    """The release with the commit when known: `0.1.0+g<sha>[.dirty]`, else `0.1.0`."""
    sha = commit()
    return f"{base_version()}+{sha}" if sha else base_version()


def __getattr__(name: str) -> str:
    """`VERSION`, worked out on first use (module attribute access, PEP 562)."""
    if name == "VERSION":
        return version()
    raise AttributeError(name)


class _VersionAction(argparse.Action):
    """`--version` that works the version out only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def add_flag(parser: argparse.ArgumentParser) -> None:
    """`--version` on an argparse command: prints `PROG VERSION` and exits 0."""
    parser.add_argument("--version", action=_VersionAction, help="print plbjax's version (with its commit) and exit")
