"""Count the private names (a leading underscore) one module of plbjax imports from another, and
those that cross a folder: the measure of issue 46's "private means private".

    python scripts/count_private_imports.py [--list]
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _folder(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _reaches_in(importer: str, is_package: bool, imported: str, packages: set[str]) -> bool:
    """Whether `importer` reaches into a private module or folder it is not part of: through the
    folder's face (its `__init__`) from beside it, or from within the folder, is not reaching in."""
    parts = imported.split(".")
    private = next((i for i, part in enumerate(parts) if part.startswith("_")), None)
    if private is None:
        return False
    inner, parent = ".".join(parts[: private + 1]), ".".join(parts[:private])
    own = _folder(importer, is_package)
    if own == inner or own.startswith(inner + "."):
        return False
    beside = own == parent or own.startswith(parent + ".")
    return not (imported == inner and (beside if inner in packages else own == parent))


def private_imports() -> list[tuple[str, str, str, bool]]:
    """(importer, imported module, name, crosses a folder) for each name imported from another
    plbjax module that is private: a name with a leading underscore, or any name reached from a
    private module or folder the importer is not part of (not through its face)."""
    paths = sorted((ROOT / "plbjax").rglob("*.py"))
    packages = {_module(path) for path in paths if path.name == "__init__.py"}
    found = []
    for path in paths:
        module, is_package = _module(path), path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("plbjax")):
                continue
            reaches = _reaches_in(module, is_package, node.module, packages)
            crosses = reaches or _folder(node.module, node.module in packages) != _folder(module, is_package)
            for alias in node.names:
                if reaches or (alias.name.startswith("_") and not alias.name.startswith("__")):
                    found.append((module, node.module, alias.name, crosses))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every import, not only the counts")
    args = parser.parse_args()
    found = private_imports()
    crossing = [f for f in found if f[3]]
    by_package = Counter(f[0].split(".")[1] for f in found)
    print(f"{len(found)} private names imported from another module, {len(crossing)} of them across a folder")
    for package, count in by_package.most_common():
        print(f"  plbjax.{package}: {count}")
    if args.list:
        for importer, module, name, crosses in found:
            print(f"  {'x' if crosses else ' '} {importer} <- {module}.{name}")


if __name__ == "__main__":
    main()
