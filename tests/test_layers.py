"""Who imports whom (docs/architecture.md, "What imports what"): every import in plbjax/ is checked
against the rules below, the rules go one way up the layers, and no module imports itself back."""

from __future__ import annotations

import ast
from pathlib import Path

from paths import ROOT

PACKAGE = ROOT / "plbjax"
# The groups, lowest layer first. A group is a module or a package with everything under it; the
# packages `plbjax` and `plbjax.sf` (the face of sf's private folders) are only their own __init__.
LAYERS = [
    {"plbjax.errors", "plbjax.files", "plbjax.generators", "plbjax.version", "plbjax.provenance"},
    {"plbjax.anneal"},
    {"plbjax.sf._state", "plbjax.roadef"},
    {"plbjax.sf._generator", "plbjax.sf._encoding"},
    {"plbjax.sf._model"},
    {"plbjax.sf._phases"},
    {"plbjax.sf._plan"},
    {"plbjax.sf"},
    {"plbjax.sf.live", "plbjax.sf.replay"},
    {
        "plbjax.baseline",
        "plbjax.config",
        "plbjax.help",
        "plbjax.plotting",
        "plbjax.sweep",
        "plbjax.compare",
        "plbjax.cli",
        "plbjax.generate_cli",
        "plbjax.warm",
        "plbjax",
    },
    {"plbjax.console_scripts"},
]
# What each group may import besides itself (docs/architecture.md states the same, group by group).
ERRORS, FILES, VERSION, ANNEAL, SF = "plbjax.errors", "plbjax.files", "plbjax.version", "plbjax.anneal", "plbjax.sf"
STATE, ENCODING, MODEL, PHASES, PLAN = (f"plbjax.sf._{f}" for f in ("state", "encoding", "model", "phases", "plan"))
GENERATOR = "plbjax.sf._generator"
MAY_IMPORT: dict[str, set[str]] = {
    ERRORS: set(),
    FILES: set(),
    "plbjax.generators": set(),
    VERSION: set(),
    "plbjax.provenance": set(),
    ANNEAL: set(),
    STATE: {ERRORS},
    GENERATOR: {STATE, ERRORS},  # _state: the vocabulary of the documents it writes
    ENCODING: {STATE, ERRORS},
    MODEL: {ENCODING, STATE, ANNEAL, ERRORS},
    PHASES: {MODEL, ENCODING, STATE, ANNEAL, ERRORS},
    PLAN: {PHASES, MODEL, ENCODING, STATE, ANNEAL, ERRORS, VERSION},
    SF: {STATE, GENERATOR, ENCODING, MODEL, PHASES, PLAN},
    "plbjax.roadef": {ANNEAL, ERRORS, VERSION},
    "plbjax.sf.live": {SF, ERRORS, FILES, VERSION},
    "plbjax.sf.replay": {SF, STATE, ERRORS, FILES, VERSION},  # _state: DEFAULT_METRICS, resolve_settings
    "plbjax.baseline": {SF, ENCODING, "plbjax"},  # _encoding: the constraint kinds indexing Problem.enforce
    "plbjax.config": {SF, ERRORS},
    "plbjax.help": {"plbjax.config"},
    "plbjax.plotting": {FILES},
    "plbjax.sweep": {FILES},
    "plbjax.compare": {ERRORS, FILES, "plbjax.sweep", VERSION},
    "plbjax.cli": {
        ANNEAL,
        "plbjax.baseline",
        "plbjax.config",
        ERRORS,
        FILES,
        "plbjax.help",
        "plbjax.plotting",
        "plbjax.provenance",
        SF,
        "plbjax.sf.replay",
        "plbjax.sweep",
        VERSION,
    },
    "plbjax.generate_cli": {SF, "plbjax.sf.replay", ERRORS, VERSION},
    "plbjax.warm": {"plbjax", ANNEAL, "plbjax.config", ERRORS, FILES, SF, VERSION},
    "plbjax": {ANNEAL, ERRORS, SF},
    "plbjax.console_scripts": {
        "plbjax.cli",
        "plbjax.compare",
        "plbjax.generate_cli",
        "plbjax.roadef",
        "plbjax.sf.live",
        VERSION,
        "plbjax.warm",
    },
}
# sf's private folders: another group reaches one only through its face (its __init__).
FOLDERS = {STATE, GENERATOR, ENCODING, MODEL, PHASES, PLAN}
# The internal modules a group may reach all the same (docs/architecture.md names each).
INTERNAL_ALLOWED: dict[str, set[str]] = {
    "plbjax.warm": {"plbjax.anneal._store"},  # the program store's counts: what plbjax-warm says it stored
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(module: str, is_package: bool, source: str, known: set[str]) -> set[str]:
    """The plbjax modules `source` (module `module`) imports: `from X import y` counts as X.y where
    X.y is a module, else as X; relative imports are resolved."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m == "plbjax" or m.startswith("plbjax.")}


def _modules() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {_name(p) for p in paths}
    return {_name(p): _imports(_name(p), p.name == "__init__.py", p.read_text(), known) for p in paths}


def _group(module: str) -> str | None:
    """The group of `module` (its longest matching group), None if no rule names it."""
    if module in ("plbjax", SF):
        return module
    groups = [g for g in MAY_IMPORT if g not in ("plbjax", SF) and (module == g or module.startswith(g + "."))]
    return max(groups, key=len, default=None)


def _internal(module: str, group: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module[len(group) :].split("."))


def wrong_imports(modules: dict[str, set[str]]) -> list[str]:
    """Every import of `modules` ({module: modules it imports}) against the rules, one line each."""
    wrong = []
    for module, imports in sorted(modules.items()):
        group = _group(module)
        if group is None:
            wrong.append(f"{module}: in no group of the rules")
            continue
        for target in sorted(imports):
            to = _group(target)
            if to is None:
                wrong.append(f"{module} imports {target}, which is in no group of the rules")
            elif to != group and to not in MAY_IMPORT[group]:
                wrong.append(f"{module} imports {target}: {group} may not import {to}")
            elif to != group and to in FOLDERS and target != to:
                wrong.append(f"{module} imports {target}: past the face of {to}")
            elif to != group and _internal(target, to) and target not in INTERNAL_ALLOWED.get(group, set()):
                wrong.append(f"{module} imports {target}: internal to {to}")
    return wrong


def test_every_import_keeps_the_rules():
    assert wrong_imports(_modules()) == []


def test_the_rules_go_one_way_up_the_layers():
    """A group imports only its own layer and the layers below it; the groups are those of the layers."""
    layer = {group: i for i, groups in enumerate(LAYERS) for group in groups}
    assert set(layer) == set(MAY_IMPORT)
    assert [(g, t) for g, targets in MAY_IMPORT.items() for t in targets if layer[t] > layer[g]] == []
    assert "plbjax.sf.replay" not in MAY_IMPORT["plbjax.sf.live"] | MAY_IMPORT[SF]
    assert "plbjax.sf.live" not in MAY_IMPORT["plbjax.sf.replay"] | MAY_IMPORT[SF]
    assert "plbjax.roadef" not in MAY_IMPORT[SF] and SF not in MAY_IMPORT["plbjax.roadef"]
    assert [g for g, targets in MAY_IMPORT.items() if "plbjax.baseline" in targets] == ["plbjax.cli"]  # plbjax-baseline


def test_the_architecture_doc_names_every_group():
    """docs/architecture.md's "What imports what" states these rules: it names every group."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = doc.split("## What imports what", 1)[1].split("\n## ", 1)[0]
    named = {g.removeprefix("plbjax.") for g in MAY_IMPORT}
    assert {g for g in named if f"`{g}`" not in section} == set()


def test_a_wrong_import_is_caught():
    """The check bites: each of these breaks a rule (the first is the hole issue 39 found: the
    generator's command line, then in sf, importing sf.replay)."""
    wrong = {
        "plbjax.sf._generator.clusters": {"plbjax.sf.replay.generate"},
        "plbjax.sf._plan.planning": {"plbjax.sf.live.apply.steps"},
        "plbjax.sf.live.reading.importer": {"plbjax.sf.replay.timeline"},
        "plbjax.sf.replay.rounds.loop": {"plbjax.sf.live"},
        "plbjax.sf.live.reading.nodes": {"plbjax.sf._state"},
        "plbjax.sf.replay.state.document": {"plbjax.sf._state.cluster"},
        "plbjax.anneal._kernel": {"plbjax.errors"},
        "plbjax.roadef._model": {"plbjax.sf"},
        "plbjax.config": {"plbjax.baseline"},
        "plbjax.errors": {"plbjax.files"},
        "plbjax.cli": {"plbjax.anneal._store"},
        "plbjax.warm": {"plbjax.anneal._driver"},
        "plbjax.newcomer": set(),
    }
    for module, imports in wrong.items():
        assert len(wrong_imports({module: imports})) == 1, (module, imports)
    allowed = {
        "plbjax.sf.replay.loop": {"plbjax.sf", "plbjax.sf._state", "plbjax.sf.replay.events"},
        "plbjax.generate_cli": {"plbjax.sf", "plbjax.sf.replay.generate"},
        "plbjax.baseline._arrays": {"plbjax.sf", "plbjax.sf._encoding"},
        "plbjax.sf._plan.planning": {"plbjax.sf._phases", "plbjax.sf._plan.probe", "plbjax.anneal", "plbjax.version"},
    }
    assert wrong_imports(allowed) == []


def test_an_import_against_the_flow_fails():
    """Inside sf the folders go one way, document -> state -> arrays -> model -> phases -> plan, and
    a folder is entered only through its face: an import back up the flow, or past a face, fails."""
    against = {
        "plbjax.sf._state.reading": {"plbjax.sf._encoding"},
        "plbjax.sf._encoding.encoder": {"plbjax.sf._model"},
        "plbjax.sf._model.energy": {"plbjax.sf._phases"},
        "plbjax.sf._phases.phase": {"plbjax.sf._plan"},
        "plbjax.sf._plan.planning": {"plbjax.sf"},
        "plbjax.sf._generator.spec": {"plbjax.sf._model"},
    }
    past_the_face = {
        "plbjax.sf._phases.balancing": {"plbjax.sf._model.energy"},
        "plbjax.sf._plan.explain": {"plbjax.sf._encoding.problem"},
    }
    for module, imports in (against | past_the_face).items():
        assert len(wrong_imports({module: imports})) == 1, (module, imports)
    along = {f"plbjax.sf._{a}.x": {f"plbjax.sf._{b}"} for a, b in (("encoding", "state"), ("plan", "model"))}
    assert wrong_imports(along) == []


def test_imports_are_read_as_the_modules_they_name():
    known = {"plbjax", "plbjax.sf", "plbjax.sf._state", "plbjax.sf.replay", "plbjax.sf.replay.loop"}
    source = (
        "from plbjax.sf import _state, parse_state\nfrom . import loop\nfrom ..live import x\nimport plbjax.sf.replay"
    )
    assert _imports("plbjax.sf.replay.engine", False, source, known) == {
        "plbjax.sf._state",
        "plbjax.sf",
        "plbjax.sf.replay.loop",
        "plbjax.sf.live",
        "plbjax.sf.replay",
    }


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


def test_the_commands_reach_the_replay_only_through_its_face():
    """`plbjax.cli` imports what `plbjax-replay` needs from `plbjax.sf.replay` itself (its face),
    never from a module or folder inside it (issue 56)."""

    def past_the_face(source: str) -> list[str]:
        named = [n.module or "" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
        named += [a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names]
        return [m for m in named if m.startswith("plbjax.sf.replay.")]

    found = {p.name: past_the_face(p.read_text()) for p in sorted((PACKAGE / "cli").rglob("*.py"))}
    assert any("from plbjax.sf.replay import" in p.read_text() for p in (PACKAGE / "cli").rglob("*.py"))
    assert {name: m for name, m in found.items() if m} == {}
    assert past_the_face("from plbjax.sf.replay.rounds.loop import replay") == ["plbjax.sf.replay.rounds.loop"]
