"""Programs traced once, not once per process: lowered programs kept on disk, executables in XLA's
cache; a damaged or foreign file in either is skipped with a warning naming it, never a crash."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import cluster
from jax._src import compilation_cache  # reset_cache: JAX binds its cache once a process

from plbjax.anneal import _driver, _store
from plbjax.sf import SearchConfig, parse_state, plan
from plbjax.sf._model.chain import model

SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=1000, seconds=None, block_steps=500, seed=4)


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh compilation cache directory for this test: a fresh program store and, JAX's cache
    reset to it, a fresh XLA cache (so the search is compiled afresh, as on a new machine); JAX's
    setting restored after."""
    before = jax.config.values["jax_compilation_cache_dir"]
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    compilation_cache.reset_cache()
    _driver.clear_compiled()
    yield tmp_path
    jax.config.update("jax_compilation_cache_dir", before)
    compilation_cache.reset_cache()
    _driver.clear_compiled()


def _damage(path: Path, how: str, other: Path) -> None:
    """`path` with garbage in it, cut in half, or holding `other`'s bytes (a foreign entry)."""
    data = path.read_bytes()
    path.write_bytes({"garbage": b"not a program", "truncated": data[: len(data) // 2]}.get(how) or other.read_bytes())


# Two programs of the same signature, and one of another: what a foreign entry may hold.
def _less(x):
    return x - 1


def _thrice(x):
    return x * 3


def _pair(x):
    return {"a": x + 1, "b": x.sum()}


LESS, THRICE, PAIR = (_store.stored(f) for f in (_less, _thrice, _pair))
X = np.arange(3.0, dtype=np.float32)


def _key(fn) -> str:
    """The store's key of the stored program `fn(X)` (this file lies outside the traced folders:
    its digest is part of the key)."""
    key = _store._key(fn, (X,), _store._outside(fn))
    assert key is not None
    return key


def _xla_entry(cache_dir: Path, fn) -> Path:
    """The XLA cache entry of the stored program `fn(X)`."""
    name = f"jit_plbjax_{_key(fn)[:16]}-"
    (entry,) = [p for p in cache_dir.iterdir() if p.name.startswith(name)]
    return entry


@pytest.mark.parametrize("how", ["garbage", "truncated", "foreign", "foreign of another signature"])
def test_a_damaged_or_foreign_stored_program_is_skipped_with_a_warning_naming_it(cache_dir, caplog, how):
    np.testing.assert_array_equal(LESS(X), X - 1)
    np.testing.assert_array_equal(THRICE(X), X * 3)
    PAIR(X)
    path, other = (cache_dir / "programs" / f"{_key(f)}.jaxexport" for f in (_less, _thrice))
    if how == "foreign of another signature":
        other = cache_dir / "programs" / f"{_key(_pair)}.jaxexport"
    _damage(path, how.split()[0], other)
    _driver.clear_compiled()  # as a new process
    np.testing.assert_array_equal(LESS(X), X - 1)
    assert f"skipped the damaged stored program {path}" in caplog.text
    _driver.clear_compiled()
    traced = _store.counts["traced"]
    np.testing.assert_array_equal(LESS(X), X - 1)  # stored again, whole
    assert _store.counts["traced"] == traced


@pytest.mark.parametrize("how", ["garbage", "truncated", "foreign", "foreign of another signature"])
def test_a_damaged_or_foreign_xla_cache_entry_is_skipped_with_a_warning_naming_it(cache_dir, caplog, how):
    np.testing.assert_array_equal(LESS(X), X - 1)
    np.testing.assert_array_equal(THRICE(X), X * 3)
    PAIR(X)
    entry = _xla_entry(cache_dir, _less)
    other = _xla_entry(cache_dir, _pair if how.endswith("signature") else _thrice)
    _damage(entry, how.split()[0], other)
    _driver.clear_compiled()  # as a new process
    np.testing.assert_array_equal(LESS(X), X - 1)
    assert f"skipped the damaged XLA cache entry {entry}" in caplog.text
    caplog.clear()
    _driver.clear_compiled()
    np.testing.assert_array_equal(LESS(X), X - 1)
    assert "skipped" not in caplog.text  # compiled afresh, and stored whole


def test_a_stored_program_plans_as_a_compiled_one_and_is_not_built_again(cache_dir, monkeypatch):
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    programs = sorted((cache_dir / "programs").glob("*.jaxexport"))
    assert len(programs) >= 2, "the search's programs (the chains' set-up, the block runner) were not stored"
    _driver.clear_compiled()  # as a new process: nothing compiled in memory
    monkeypatch.setattr(_store, "_trace", lambda *a: pytest.fail("traced again"))
    second = plan(state, SEARCH)
    assert second.actions == first.actions and second.document()["Score"] == first.document()["Score"]
    assert sorted((cache_dir / "programs").glob("*.jaxexport")) == programs


@pytest.mark.slow
@pytest.mark.parametrize("how", ["garbage", "truncated", "foreign"])
def test_a_damaged_program_file_is_skipped_with_a_warning_naming_it_and_the_plan_is_the_same(cache_dir, caplog, how):
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    stored = sorted((cache_dir / "programs").glob("*.jaxexport"), key=lambda p: p.stat().st_size)
    _damage(stored[-1], how, stored[0])  # the block runner's, or the chains' set-up in its place
    _driver.clear_compiled()
    second = plan(state, SEARCH)
    assert f"skipped the damaged stored program {stored[-1]}" in caplog.text
    assert second.actions == first.actions
    assert sorted((cache_dir / "programs").glob("*.jaxexport"), key=lambda p: p.stat().st_size) == stored


@pytest.mark.slow
@pytest.mark.parametrize("how", ["garbage", "truncated", "foreign"])
def test_a_damaged_entry_in_xlas_cache_is_skipped_with_a_warning_naming_it(cache_dir, caplog, how):
    """Every entry of XLA's cache damaged (or the largest holding the smallest): each of the
    store's is named in a warning and compiled afresh; JAX reads its own others and compiles them
    again. The plan is the same, never a crash."""
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    entries = sorted((p for p in cache_dir.iterdir() if p.is_file()), key=lambda p: p.stat().st_size)
    ours = [p for p in entries if p.name.startswith("jit_plbjax_")]
    for path in entries if how != "foreign" else ours[-1:]:
        _damage(path, how, ours[0])
    _driver.clear_compiled()
    assert plan(state, SEARCH).actions == first.actions
    for path in ours if how != "foreign" else ours[-1:]:
        assert f"skipped the damaged XLA cache entry {path}" in caplog.text


def test_keys_name_the_model_settings_and_refuse_what_has_no_stable_description():
    kept, carried = (np.zeros(3, np.float32),), np.zeros(2, np.int32)
    of = lambda m: lambda k, c: (m, k, c)  # a program closing over a model
    key = lambda m, c=carried: _store._key(of(m), (kept, c))
    assert key(model(0.3)) == key(model(0.3))
    assert key(model(0.3)) != key(model(0.5))
    assert key(model(0.3)) != key(model(0.3), np.zeros(3, np.int32))
    assert key(object()) is None


def test_stored_keys_hold_static_arguments_shapes_and_code_outside_the_traced_folders():
    one = lambda *args: _store._key(_less, args)
    assert one(X, 2) == one(X, 2)
    assert one(X, 2) != one(X, 3)
    assert one(X, 2) != one(X.astype(np.int32), 2)
    assert one(X, 2) != one(np.zeros(4, np.float32), 2)
    assert _store._outside(_less) and _store._outside(_driver.init_chains.__wrapped__) == ""


def test_without_an_accelerator_plugin_xlas_cache_keys_do_not_name_its_directory(monkeypatch):
    """XLA's GPU caches live under the cache's directory and their path enters every entry's key: off
    where no GPU plugin is installed, so a cache copied elsewhere (an image, a CI cache) still hits."""
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_enable_xla_caches")
    before = {name: jax.config.values[name] for name in names}
    monkeypatch.setenv("PLBJAX_CACHE_DIR", before["jax_compilation_cache_dir"])
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES", raising=False)
    try:
        for plugins, expected in ((False, "none"), (True, "xla_gpu_per_fusion_autotune_cache_dir")):
            jax.config.update("jax_persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir")
            monkeypatch.setattr(_driver, "_accelerator_plugins", lambda plugins=plugins: plugins)
            _driver.enable_compilation_cache()
            assert jax.config.values["jax_persistent_cache_enable_xla_caches"] == expected
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
