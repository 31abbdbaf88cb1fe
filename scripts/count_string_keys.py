"""Count string-keyed accesses (`x["Key"]`, `x.get("Key")`, `x.pop("Key")`, `x.setdefault("Key")`),
SF's words written as literals, loose signatures and the largest modules in plbjax: the measures of
the typed seams (issues 39, 46 and 56). Inside plbjax.sf's core only the document readers and
writers should read by key (and SF's settings by name); the count covers the rest of the core, the
replay, and live outside its SF REST readers (the dump and import path). Role words and action
kinds count as string constants outside docstrings, everywhere in plbjax but `vocabulary.py`, which
defines them; a loose annotation is one that holds `Any` or an unsubscripted `dict`.

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
    *(f"plbjax/sf/_state/{m}.py" for m in ("reading", "schema_check", "columns", "building", "rereading", "rendering")),
    "plbjax/sf/_encoding/decoding.py",
    "plbjax/sf/_state/vocabulary.py",  # Action.from_document
    "plbjax/sf/_plan/document.py",
    "plbjax/sf/_generator/clusters.py",
    *(f"plbjax/sf/_{m}.py" for m in ("reading", "schema_check", "columns", "building", "reparse")),
    *(f"plbjax/sf/_{m}.py" for m in ("decoding", "plan_document", "generator")),
}
# live's readers of SF's REST answers (the dump and its import, the recording's EventStore events and
# periods), flat and in the issue-56 layout.
LIVE_READERS = {
    *(f"plbjax/sf/live/{m}.py" for m in ("dump", "dumpdir", "importer", "fields", "nodes", "replicas")),
    *(f"plbjax/sf/live/{m}.py" for m in ("services", "manifest", "report")),
    *(f"plbjax/sf/live/record/{m}.py" for m in ("events", "timeline")),
}
GROUPS = {
    "sf core outside the document readers and writers": ("plbjax/sf/_*.py", "plbjax/sf/_*/*.py"),
    "replay": ("plbjax/sf/replay/**/*.py",),
    "live outside its SF REST readers": ("plbjax/sf/live/**/*.py",),
}
EXCLUDED = (
    DOCUMENT_IO | LIVE_READERS | {f"plbjax/sf/live/reading/{Path(m).name}" for m in LIVE_READERS if "/record/" not in m}
)
ROLE_WORDS = {"Primary", "Secondary", "ActiveSecondary", "IdleSecondary", "Instance"}
ACTION_KINDS = {
    *(verb + role for verb in ("Move", "Add", "Drop") for role in ("Primary", "Secondary", "Instance")),
    "SwapPrimarySecondary",
    "PromoteSecondary",
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


def literals(tree: ast.Module, words: set[str]) -> int:
    """String constants in `words`, docstrings aside."""
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
    }
    return sum(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in words and id(n) not in docs
        for n in ast.walk(tree)
    )


def loose(annotation: ast.expr) -> bool:
    """An annotation holding `Any` or an unsubscripted `dict`."""
    subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
    return any(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Attribute) and n.attr == "Any")
        or (isinstance(n, ast.Name) and n.id == "dict" and id(n) not in subscripted)
        for n in ast.walk(annotation)
    )


def annotations(tree: ast.Module) -> list[ast.expr]:
    """Every parameter and return annotation of the module's functions."""
    found = []
    for f in ast.walk(tree):
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            params = f.args.posonlyargs + f.args.args + f.args.kwonlyargs
            found += [a.annotation for a in params if a.annotation] + ([f.returns] if f.returns else [])
    return found


def _files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    return sorted({p for pattern in patterns for p in root.glob(pattern)} - {root / f for f in EXCLUDED})


def measure(root: Path) -> dict:
    """Counts per group and per file, SF's words as literals, the share of loose annotations in the
    replay and live, and the five largest modules by lines."""
    groups = {}
    for name, patterns in GROUPS.items():
        per_file = {str(p.relative_to(root)): string_keyed(p.read_text()) for p in _files(root, patterns)}
        groups[name] = {"total": sum(per_file.values()), "files": per_file}
    trees = {p: ast.parse(p.read_text()) for p in (root / "plbjax").rglob("*.py") if p.name != "vocabulary.py"}
    words = {
        "role words": sum(literals(t, ROLE_WORDS) for t in trees.values()),
        "action kinds": sum(literals(t, ACTION_KINDS) for t in trees.values()),
    }
    shares = {}
    for wing in ("replay", "live"):
        found = [a for p, t in trees.items() if f"plbjax/sf/{wing}/" in p.as_posix() for a in annotations(t)]
        shares[wing] = round(sum(map(loose, found)) / max(len(found), 1), 3)
    lines = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in (root / "plbjax").rglob("*.py")}
    largest = dict(sorted(lines.items(), key=lambda kv: -kv[1])[:5])
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "revision": rev.stdout.strip(),
        "string_keyed": groups,
        "literals": words,
        "loose_annotations": shares,
        "largest_modules": largest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a plbjax checkout (default: this one)")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    result = measure(args.root)
    for name, group in result["string_keyed"].items():
        print(f"{name}: {group['total']} string-keyed accesses in {len(group['files'])} files")
    for name, n in result["literals"].items():
        print(f"{name} as literals in plbjax: {n}")
    for wing, share in result["loose_annotations"].items():
        print(f"{wing}: {share:.1%} of annotations hold Any or a bare dict")
    for path, n in result["largest_modules"].items():
        print(f"{n:6d}  {path}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
