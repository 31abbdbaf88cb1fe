"""The package's layers: no lower layer imports a higher one, and no module imports itself back."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "plbjax"
# a module may import from its own layer and the layers below it
LAYERS = [
    {"plbjax.errors", "plbjax.files", "plbjax.generators", "plbjax.version"},
    {"plbjax.anneal"},
    {"plbjax.sf", "plbjax.roadef"},
    {"plbjax.baseline", "plbjax.config", "plbjax.plotting", "plbjax.sweep", "plbjax.cli", "plbjax"},
]
APART = {"plbjax.sf": {"plbjax.roadef"}, "plbjax.roadef": {"plbjax.sf"}}  # the two problems never meet


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m == "plbjax" or m.startswith("plbjax.")}


def _layer(module: str) -> tuple[int, str]:
    """(layer, group) of a module: its longest matching group."""
    best = max((g for layer in LAYERS for g in layer if module == g or module.startswith(g + ".")), key=len)
    return next(i for i, layer in enumerate(LAYERS) if best in layer), best


def _modules() -> dict[str, set[str]]:
    return {_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_lower_layer_imports_a_higher_one():
    wrong = []
    for module, imports in _modules().items():
        level, group = _layer(module)
        for target in imports:
            to_level, to_group = _layer(target)
            if to_level > level or to_group in APART.get(group, set()):
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_import_cycles_between_modules():
    modules = _modules()
    graph = {
        m: {t for t in imports if t in modules and t != m and not m.startswith(t + ".")}
        for m, imports in modules.items()
    }
    done, path = set(), []

    def visit(m):
        if m in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(m) :] + [m]))
        if m in done:
            return
        path.append(m)
        for t in sorted(graph[m]):
            visit(t)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
