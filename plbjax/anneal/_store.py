"""Searches traced once, not once per process: a block runner's lowered program is kept on disk.

Tracing and lowering the annealer's block (seconds, whatever the cluster's size) is redone by every
process that plans; XLA's persistent cache only skips the compilation after it. When the compilation
cache is on (`enable_compilation_cache`), the lowered program is also serialized (`jax.export`) to
`<cache>/programs/`, keyed by what it was traced from: plbjax's sources, JAX's version and backend,
the model's functions and settings, the kernel config and the arguments' structure, shapes and
dtypes. A later process deserializes it (milliseconds) and XLA's cache supplies the executable.
Anything the key cannot describe exactly (an object without a stable description) is not stored.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax
from jax import export

_SOURCES = Path(__file__).resolve().parents[1]  # the plbjax package
_SERIALIZABLE = importlib.util.find_spec("flatbuffers") is not None  # what jax.export serializes with


@functools.cache
def _sources_digest() -> str:
    """A digest of every plbjax source file: a program traced from other code is another program."""
    digest = hashlib.sha256()
    for path in sorted(_SOURCES.rglob("*.py")):
        digest.update(path.relative_to(_SOURCES).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def describe(value) -> str:
    """A description of `value` that is the same in every process (functions by module and name,
    with their closures and partial arguments; dataclasses field by field)."""
    if isinstance(value, functools.partial):
        return f"partial({describe(value.func)}, {describe(value.args)}, {describe(sorted(value.keywords.items()))})"
    if callable(value) and hasattr(value, "__qualname__"):
        cells = tuple(cell.cell_contents for cell in getattr(value, "__closure__", None) or ())
        return f"{value.__module__}.{value.__qualname__}{describe(cells) if cells else ''}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(describe(v) for v in value) + ")"
    if hasattr(value, "__dataclass_fields__"):
        fields = ", ".join(f"{name}={describe(getattr(value, name))}" for name in value.__dataclass_fields__)
        return f"{type(value).__qualname__}({fields})"
    return repr(value)


def _key(tag, kept, carried) -> str | None:
    """The store's key for this program, or None when something in it has no stable description."""
    shapes = [(x.shape, str(x.dtype)) for x in jax.tree.leaves((kept, carried))]
    text = "|".join(
        (
            _sources_digest(),
            jax.__version__,
            jax.default_backend(),
            jax.devices()[0].device_kind,
            describe(tag),
            str(jax.tree.structure((kept, carried))),
            repr(shapes),
        )
    )
    return None if " at 0x" in text else hashlib.sha256(text.encode()).hexdigest()


def _directory() -> Path | None:
    cache = jax.config.values["jax_compilation_cache_dir"]
    return Path(cache) / "programs" if cache else None


def _write(path: Path, data: bytes) -> None:
    """Atomically: concurrent processes may write the same program."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def _exported(fn: Callable, kept, carried, path: Path) -> export.Exported:
    """The lowered program of fn(kept, carried) over flat leaves, from the store or traced now."""
    if path.exists():
        try:
            return export.deserialize(bytearray(path.read_bytes()))
        except Exception:  # a stale or damaged file: trace again and replace it
            pass
    exported = export.export(jax.jit(_flat(fn, kept, carried)))(_specs(kept), _specs(carried))
    _write(path, bytes(exported.serialize()))
    return exported


def _flat(fn: Callable, kept, carried) -> Callable:
    """fn over the arguments' leaves, returning leaves."""
    kept_tree, carried_tree = jax.tree.structure(kept), jax.tree.structure(carried)
    return lambda kept_leaves, carried_leaves: jax.tree.leaves(
        fn(jax.tree.unflatten(kept_tree, kept_leaves), jax.tree.unflatten(carried_tree, carried_leaves))
    )


def _specs(tree) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in jax.tree.leaves(tree)]


def stored(fn: Callable, kept, carried, tag) -> Callable:
    """`fn(kept, carried) -> carried'` (same structure) compiled for these arguments' shapes, with
    `carried` donated. `tag` describes what `fn` closes over (model, config). Its lowered program
    comes from the store when an earlier process wrote it, and is written there otherwise; without
    the compilation cache, or when `tag` has no stable description, it is traced as usual."""
    directory = _directory()
    key = _key(tag, kept, carried) if directory is not None else None
    if directory is not None and key is not None and _SERIALIZABLE:
        program = _exported(fn, kept, carried, directory / f"{key}.jaxexport").call
    else:
        program = _flat(fn, kept, carried)
    kept_leaves, carried_leaves = jax.tree.leaves(kept), jax.tree.leaves(carried)
    compiled = jax.jit(program, donate_argnums=(1,)).lower(kept_leaves, carried_leaves).compile()
    carried_tree = jax.tree.structure(carried)
    return lambda kept, carried: jax.tree.unflatten(
        carried_tree, compiled(jax.tree.leaves(kept), jax.tree.leaves(carried))
    )
