"""Searches traced once, not once per process: the block runner's lowered program kept on disk."""

from __future__ import annotations

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


def test_a_stored_program_plans_as_a_compiled_one_and_is_not_built_again(cache_dir, monkeypatch):
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    programs = sorted((cache_dir / "programs").glob("*.jaxexport"))
    assert programs, "the search's program was not stored"
    _driver.clear_compiled()  # as a new process: nothing compiled in memory
    monkeypatch.setattr(_store, "_export", lambda *a: pytest.fail("traced again"))
    second = plan(state, SEARCH)
    assert second.actions == first.actions and second.document()["Score"] == first.document()["Score"]
    assert sorted((cache_dir / "programs").glob("*.jaxexport")) == programs


@pytest.mark.slow
@pytest.mark.parametrize("damage", [b"not a program", None])
def test_a_damaged_program_file_is_skipped_with_a_warning_and_removed(cache_dir, caplog, damage):
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    stored = sorted((cache_dir / "programs").glob("*.jaxexport"))
    for path in stored:
        data = path.read_bytes()  # None: one byte flipped in the middle (the checksum catches it)
        path.write_bytes(
            damage or data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 1]) + data[len(data) // 2 + 1 :]
        )
    _driver.clear_compiled()
    second = plan(state, SEARCH)
    assert "skipped the damaged stored program" in caplog.text
    assert second.actions == first.actions
    assert sorted((cache_dir / "programs").glob("*.jaxexport")) == stored  # traced and stored again


@pytest.mark.slow
def test_a_damaged_entry_in_xlas_cache_is_skipped(cache_dir):
    """JAX reads its own cache entries; a damaged one is compiled again, not a crash."""
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    entries = [p for p in cache_dir.iterdir() if p.is_file()]
    for path in entries:
        path.write_bytes(b"damaged")
    for path in (cache_dir / "programs").glob("*.jaxexport"):
        path.unlink()
    _driver.clear_compiled()
    assert plan(state, SEARCH).actions == first.actions


def test_keys_name_the_model_settings_and_refuse_what_has_no_stable_description():
    kept, carried = (np.zeros(3, np.float32),), np.zeros(2, np.int32)
    of = lambda m: lambda k, c: (m, k, c)  # a program closing over a model
    key = lambda m, c=carried: _store._key(of(m), (kept, c))
    assert key(model(0.3)) == key(model(0.3))
    assert key(model(0.3)) != key(model(0.5))
    assert key(model(0.3)) != key(model(0.3), np.zeros(3, np.int32))
    assert key(object()) is None
