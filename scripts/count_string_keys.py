"""Count string-keyed accesses (`x["Key"]`, `x.get("Key")`, `x.pop("Key")`, `x.setdefault("Key")`)
and the largest modules in plbjax: the measures of the typed seams (issues 39 and 46). Inside
plbjax.sf's core only the document readers and writers should read by key (and SF's settings by
name); the count covers the rest of the core, and the replay.

    python scripts/count_string_keys.py [--root CHECKOUT] [--json results/string_keys_<rev>.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The modules that read or write the documents (state, plan, actions), in the folder layout (issue
# 46) and in the flat one before it, so one script measures both.
DOCUMENT_IO = {
    *(f"plbjax/sf/_state/{m}.py" for m in ("reading", "schema_check", "columns", "building", "rereading")),
    "plbjax/sf/_encoding/decoding.py",
    "plbjax/sf/_plan/document.py",
    "plbjax/sf/_generator/clusters.py",
    *(f"plbjax/sf/_{m}.py" for m in ("reading", "schema_check", "columns", "building", "reparse")),
    *(f"plbjax/sf/_{m}.py" for m in ("decoding", "plan_document", "generator")),
}
GROUPS = {
    "sf core outside the document readers and writers": ("plbjax/sf/_*.py", "plbjax/sf/_*/*.py"),
    "replay": ("plbjax/sf/replay/*.py",),
}
_METHODS = {"get", "pop", "setdefault"}


def string_keyed(source: str) -> int:
    """String-keyed subscripts and dict-method calls in one module's source."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            key = node.slice
            count += isinstance(key, ast.Constant) and isinstance(key.value, str)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS:
            first = node.args[0] if node.args else None
            count += isinstance(first, ast.Constant) and isinstance(first.value, str)
    return count


def measure(root: Path) -> dict:
    """Counts per group and per file, and the five largest modules by lines."""
    groups = {}
    for name, patterns in GROUPS.items():
        files = sorted({p for pattern in patterns for p in root.glob(pattern)} - {root / f for f in DOCUMENT_IO})
        per_file = {str(p.relative_to(root)): string_keyed(p.read_text()) for p in files}
        groups[name] = {"total": sum(per_file.values()), "files": per_file}
    lines = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in (root / "plbjax").rglob("*.py")}
    largest = dict(sorted(lines.items(), key=lambda kv: -kv[1])[:5])
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {"revision": rev.stdout.strip(), "string_keyed": groups, "largest_modules": largest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a plbjax checkout (default: this one)")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    result = measure(args.root)
    for name, group in result["string_keyed"].items():
        print(f"{name}: {group['total']} string-keyed accesses in {len(group['files'])} files")
    for path, n in result["largest_modules"].items():
        print(f"{n:6d}  {path}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
