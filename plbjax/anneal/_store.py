"""Programs traced once, not once per process: lowered programs kept on disk.

Tracing and lowering a program (a search's block runner, the chains' set-up, any function made
`stored`) is redone by every process that plans; XLA's persistent cache only skips the
compilation after it. When the compilation cache is on (`enable_compilation_cache`), `compiled` and
`stored` also keep each lowered program, serialized (`jax.export`) with its key and its output's
structure and checksummed, in `<cache>/programs/`, keyed by what it was traced from: the sources it
is traced from, JAX's and jaxlib's versions, the backend and device, XLA's flags, the function and
what it closes over, and the arguments' structure, shapes, dtypes and static values. A later process
deserializes it and XLA's cache supplies the executable: the store's programs are written to XLA's
cache whatever their compile time (`jax_persistent_cache_min_compile_time_secs` is the floor of the
rest), so a warm process traces and compiles none of them. A stored file that fails its checksum,
does not load or holds another key's program is skipped with a warning naming it and removed; so is
an entry of XLA's cache that does not load or holds another program (each stored program is named
after its key, `plbjax_KEY`, in XLA's cache). Anything the key cannot describe exactly is traced as
usual.

(Executables themselves are not stored: on a CPU, XLA's cache loads the bundled example's block
program in 0.33 s, a serialized executable in 0.35 s, and the store's lowered program costs 0.08 s
to lower again; the executable is 3.9 MB against XLA's compressed 0.67 MB. Nor are op-by-op
programs kept by lowering the floor to 0 for every program: a 2.5 KB entry loads in about the 15-20
ms it takes to compile; `plbjax-warm` alone writes them, so that a warmed plan compiles nothing.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import logging
import os
import pickle
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax import export

try:  # the floor as a context manager: JAX's public `config.update` sets it for every thread
    from jax._src.config import persistent_cache_min_compile_time_secs as _FLOOR
except ImportError:  # another JAX: the global floor applies
    _FLOOR = None

_SOURCES = Path(__file__).resolve().parents[1]  # the plbjax package
_TRACED = ("anneal", "sf/_model", "sf/_encoding", "roadef")  # the code a search's program is traced from
_loaded: dict[str, Callable] = {}  # this process's programs by key
_log = logging.getLogger(__name__)
counts = {"traced": 0, "loaded": 0}  # programs this process traced and stored, and loaded from the store


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
    with their closures and partial arguments; dataclasses field by field; arrays by shape and dtype)."""
    if isinstance(value, functools.partial):
        return f"partial({describe(value.func)}, {describe(value.args)}, {describe(sorted(value.keywords.items()))})"
    if callable(value) and hasattr(value, "__qualname__"):
        cells = tuple(cell.cell_contents for cell in getattr(value, "__closure__", None) or ())
        return f"{value.__module__}.{value.__qualname__}{describe(cells) if cells else ''}"
    if isinstance(value, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
        return f"{type(value).__name__}{jax.numpy.shape(value)}{jax.numpy.result_type(value)}"
    if isinstance(value, (list, tuple)):
        named = type(value).__qualname__ if hasattr(value, "_fields") else ""
        return named + "(" + ", ".join(describe(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{describe(k)}: {describe(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "__dataclass_fields__"):
        fields = ", ".join(f"{name}={describe(getattr(value, name))}" for name in value.__dataclass_fields__)
        return f"{type(value).__qualname__}({fields})"
    return repr(value)


def _key(fn: Callable, args: tuple, source: str = "") -> str | None:
    """The store's key for `fn(*args)` (arrays by shape and dtype, anything else by `describe`), or
    None when something in it has no stable description. `source`: a digest of code outside `_TRACED`
    the program is traced from."""
    text = "|".join(
        (
            _sources_digest(),
            source,
            jax.__version__,
            _jaxlib_version(),
            jax.default_backend(),
            jax.devices()[0].device_kind,
            os.environ.get("XLA_FLAGS", ""),
            describe(fn),
            str(jax.tree.structure(args)),
            describe(jax.tree.leaves(args)),
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


def _specs(leaves) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x)) for x in leaves]


@dataclasses.dataclass(frozen=True)
class _Program:
    """A lowered program over flat leaves (one list argument per group of arguments, a list of
    leaves out) and its output's structure: a skeleton, the output with every leaf 0."""

    exported: export.Exported
    skeleton: Any


def _skeleton(tree) -> Any:
    return jax.tree.map(lambda _: 0, tree)


def _load(path: Path, key: str) -> _Program | None:
    """The lowered program stored at `path`, or None (absent, or damaged or foreign: removed with a
    warning, never loaded unchecked)."""
    if not path.exists():
        return None
    try:
        digest, payload = pickle.loads(path.read_bytes())
        if hashlib.sha256(payload).hexdigest() != digest:
            raise ValueError("its checksum does not match")
        stored_key, program, skeleton = pickle.loads(payload)
        if stored_key != key:
            raise ValueError(f"it holds another program ({str(stored_key)[:16]}...)")
        return _Program(export.deserialize(bytearray(program)), skeleton)
    except Exception as error:  # any damage: removed, traced again
        _log.warning("skipped the damaged stored program %s (%s); tracing it", path, error)
        path.unlink(missing_ok=True)
        return None


def _store(path: Path, key: str, program: _Program) -> None:
    payload = pickle.dumps((key, bytes(program.exported.serialize()), program.skeleton))
    _write(path, pickle.dumps((hashlib.sha256(payload).hexdigest(), payload)))


def _trace(fn: Callable, groups: tuple) -> _Program:
    """`fn(*groups)` traced and lowered over each group's leaves."""
    trees = [jax.tree.structure(group) for group in groups]
    out: list = []

    def flat(*leaves):
        result = fn(*(jax.tree.unflatten(tree, group) for tree, group in zip(trees, leaves)))
        out.append(_skeleton(result))
        return jax.tree.leaves(result)

    exported = export.export(jax.jit(flat))(*(_specs(jax.tree.leaves(group)) for group in groups))
    return _Program(exported, out[0])


def _floorless():
    """XLA's cache keeps what is compiled inside, whatever its compile time (this thread only)."""
    return _FLOOR(0.0) if _FLOOR is not None else contextlib.nullcontext()


def _xla_entries(name: str) -> list[Path]:
    cache = jax.config.values["jax_compilation_cache_dir"]
    return sorted(Path(cache).glob(f"jit_{name}-*")) if cache else []


def _compile(program: Callable, name: str, groups: tuple, donate: tuple[int, ...]):
    """`program` (over each group's leaves) compiled under the name `name`, through XLA's cache,
    whatever its compile time. An entry of XLA's cache that does not load (JAX warns and compiles),
    fails to or holds another program is named in a warning and removed, and the program compiled
    afresh."""
    specs = [_specs(jax.tree.leaves(group)) for group in groups]
    for attempt in range(3):
        named = name if attempt == 0 else f"{name}_{attempt}"  # another name: JAX keeps what it loaded
        program.__name__ = program.__qualname__ = named
        entries = _xla_entries(named)
        lowered = jax.jit(program, donate_argnums=donate).lower(*specs)
        try:
            with warnings.catch_warnings(record=True) as heard, _floorless():
                warnings.simplefilter("always")
                executable = lowered.compile()
        except Exception as error:  # a foreign entry may not even fit the program's signature
            if not entries:
                raise
            _skip(entries, f"it does not fit: {type(error).__name__}: {error}")
            continue
        unreadable = [w for w in heard if "Error reading persistent compilation cache" in str(w.message)]
        for other in heard:
            if other not in unreadable:
                warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
        found = _module_name(executable)
        if entries and found is not None and found != f"jit_{named}":
            _skip(entries, f"it holds {found}")
            continue
        if entries and unreadable:
            _skip(entries, str(unreadable[0].message))  # compiled afresh already: its entry written anew
        return executable
    raise RuntimeError(f"XLA's cache kept supplying another program for {name}")


def _skip(entries: list[Path], why: str) -> None:
    """XLA's cache entries `entries` warned of and removed."""
    for path in entries:
        _log.warning("skipped the damaged XLA cache entry %s (%s); compiling it", path, why)
        path.unlink(missing_ok=True)


def _module_name(executable) -> str | None:
    """The name of the HLO module `executable` runs (None where the backend does not say)."""
    try:
        return executable.runtime_executable().hlo_modules()[0].name
    except Exception:
        return None


def _build(fn: Callable, groups: tuple, donate: tuple[int, ...], key: str | None) -> tuple[Callable, Any]:
    """`fn(*groups)` compiled over the groups' leaves (the groups in `donate` donated): its lowered
    program from the store (or traced and stored), its executable from XLA's cache; and the output's
    skeleton."""
    directory = _directory()
    if directory is None or key is None:
        program = _trace(fn, groups)
        call = program.exported.call
    else:
        path = directory / f"{key}.jaxexport"
        program = _load(path, key)
        if program is None:
            program = _trace(fn, groups)
            _store(path, key, program)
            counts["traced"] += 1
        else:
            counts["loaded"] += 1
        call = program.exported.call
    name = f"plbjax_{key[:16]}" if key is not None else "plbjax_program"
    executable = _compile(lambda *leaves: call(*leaves), name, groups, donate)
    return executable, program.skeleton


def compiled(fn: Callable, kept, carried) -> Callable:
    """`fn(kept, carried) -> carried'` (the same structure) compiled for these arguments' structure,
    shapes and dtypes, `carried` donated; `fn` is known by its module, name and what it closes over
    (`describe`). Its lowered program comes from the store when an earlier process wrote it, and is
    stored otherwise; XLA's cache supplies the executable; kept for the rest of the process."""
    key = _key(fn, (kept, carried))
    if key is not None and key in _loaded:
        return _loaded[key]
    executable, skeleton = _build(fn, (kept, carried), (1,), key)
    out_tree = jax.tree.structure(skeleton)
    call = lambda kept, carried: jax.tree.unflatten(
        out_tree, executable(jax.tree.leaves(kept), jax.tree.leaves(carried))
    )
    if key is not None:
        _loaded[key] = call
    return call


def _outside(fn: Callable) -> str:
    """A digest of `fn`'s source file where it lies outside `_TRACED` (whose digest every key holds),
    so that editing it changes the key; '' inside."""
    try:
        path = Path(inspect.getfile(fn)).resolve()
    except (TypeError, OSError):
        return ""
    if any(path.is_relative_to(_SOURCES / folder) for folder in _TRACED):
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def stored(fn: Callable) -> Callable:
    """`fn` compiled like `equinox.filter_jit` (its array arguments traced, everything else static),
    its program kept in the store (`compiled`): a later process neither traces nor compiles it.
    Where the key cannot describe the arguments, or they span devices or processes, it is
    `equinox.filter_jit`. What `fn` calls should lie in `_TRACED` (or in `fn`'s own file): edits
    elsewhere do not change the key."""
    jitted = eqx.filter_jit(fn)
    source = _outside(fn)

    @functools.wraps(fn)
    def call(*args):
        dynamic, static = eqx.partition(args, eqx.is_array)
        leaves = jax.tree.leaves(dynamic)
        if jax.process_count() > 1 or any(isinstance(x, jax.Array) and len(x.sharding.device_set) > 1 for x in leaves):
            return jitted(*args)
        key = _key(fn, args, source)
        if key is None:
            return jitted(*args)
        if key not in _loaded:
            body = lambda dynamic: fn(*eqx.combine(dynamic, static))
            executable, skeleton = _build(body, (dynamic,), (), key)
            out_tree = jax.tree.structure(skeleton)
            _loaded[key] = lambda leaves: jax.tree.unflatten(out_tree, executable(leaves))
        return _loaded[key](leaves)

    return call


def forget() -> None:
    """Drop this process's loaded programs (the store on disk stays)."""
    _loaded.clear()
