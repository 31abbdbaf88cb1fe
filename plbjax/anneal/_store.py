"""Searches traced once, not once per process: a block runner's lowered program kept on disk.

Tracing and lowering a search's block runner is redone by every process that plans; XLA's
persistent cache only skips the compilation after it. When the compilation cache is on
(`enable_compilation_cache`), `compiled` also keeps each lowered program, serialized (`jax.export`)
and checksummed, in `<cache>/programs/`, keyed by what it was traced from: the sources it is traced
from, JAX's and jaxlib's versions, the backend and device, XLA's flags, the function and what it
closes over, and the arguments' structure, shapes and dtypes. A later process deserializes it and
XLA's cache supplies the executable. A file that fails its checksum or does not load is skipped with
a warning and removed; anything the key cannot describe exactly is traced as usual.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax
from jax import export

_SOURCES = Path(__file__).resolve().parents[1]  # the plbjax package
_TRACED = ("anneal", "sf/_model", "sf/_encoding", "roadef")  # the code a search's program is traced from
_loaded: dict[str, Callable] = {}  # this process's programs by key


@functools.cache
def _sources_digest() -> str:
    """A digest of the source files programs are traced from (`_TRACED`): a program traced from
    other code is another program; an edit elsewhere (the command line, the plan) keeps them."""
    digest = hashlib.sha256()
    for path in sorted(p for folder in _TRACED for p in (_SOURCES / folder).rglob("*.py")):
        digest.update(path.relative_to(_SOURCES).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _jaxlib_version() -> str:
    return importlib.metadata.version("jaxlib")


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


def _key(fn: Callable, args: tuple) -> str | None:
    """The store's key for this program, or None when something in it has no stable description."""
    shapes = [(jax.numpy.shape(x), str(jax.numpy.result_type(x))) for x in jax.tree.leaves(args)]
    text = "|".join(
        (
            _sources_digest(),
            jax.__version__,
            _jaxlib_version(),
            jax.default_backend(),
            jax.devices()[0].device_kind,
            os.environ.get("XLA_FLAGS", ""),
            describe(fn),
            str(jax.tree.structure(args)),
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


def _flat(fn: Callable, kept, carried) -> Callable:
    """fn over the arguments' leaves, returning leaves."""
    kept_tree, carried_tree = jax.tree.structure(kept), jax.tree.structure(carried)
    return lambda k, c: jax.tree.leaves(fn(jax.tree.unflatten(kept_tree, k), jax.tree.unflatten(carried_tree, c)))


def _specs(tree) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x)) for x in jax.tree.leaves(tree)]


def _export(fn: Callable, kept, carried) -> export.Exported:
    """fn(kept, carried) traced and lowered over flat leaves."""
    return export.export(jax.jit(_flat(fn, kept, carried)))(_specs(kept), _specs(carried))


def _load(path: Path) -> export.Exported | None:
    """The lowered program stored at `path`, or None (absent, or damaged: removed with a warning,
    never loaded unchecked)."""
    if not path.exists():
        return None
    try:
        digest, payload = pickle.loads(path.read_bytes())
        if hashlib.sha256(payload).hexdigest() != digest:
            raise ValueError("its checksum does not match")
        return export.deserialize(bytearray(payload))
    except Exception as error:  # any damage: removed, traced again
        logging.getLogger(__name__).warning("skipped the damaged stored program %s (%s); tracing it", path, error)
        path.unlink(missing_ok=True)
        return None


def _store(path: Path, exported: export.Exported) -> None:
    payload = bytes(exported.serialize())
    _write(path, pickle.dumps((hashlib.sha256(payload).hexdigest(), payload)))


def compiled(fn: Callable, kept, carried) -> Callable:
    """`fn(kept, carried) -> carried'` (the same structure) compiled for these arguments' structure,
    shapes and dtypes, `carried` donated; `fn` is known by its module, name and what it closes over
    (`describe`). Its lowered program comes from the store when an earlier process wrote it, and is
    stored otherwise; XLA's cache supplies the executable; kept for the rest of the process."""
    key = _key(fn, (kept, carried))
    if key is not None and key in _loaded:
        return _loaded[key]
    directory = _directory()
    if directory is not None and key is not None:
        path = directory / f"{key}.jaxexport"
        exported = _load(path)
        if exported is None:
            exported = _export(fn, kept, carried)
            _store(path, exported)
        program = exported.call
    else:
        program = _flat(fn, kept, carried)
    executable = jax.jit(program, donate_argnums=(1,)).lower(_specs(kept), _specs(carried)).compile()
    carried_tree = jax.tree.structure(carried)
    call = lambda kept, carried: jax.tree.unflatten(
        carried_tree, executable(jax.tree.leaves(kept), jax.tree.leaves(carried))
    )
    if key is not None:
        _loaded[key] = call
    return call


def forget() -> None:
    """Drop this process's loaded programs (the store on disk stays)."""
    _loaded.clear()
