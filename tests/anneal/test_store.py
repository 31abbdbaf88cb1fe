"""Searches traced once, not once per process: the block runner's lowered program kept on disk."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import cluster

from plbjax.anneal import _driver, _store
from plbjax.sf import SearchConfig, parse_state, plan
from plbjax.sf._model.chain import model

SEARCH = SearchConfig(chains=1, tries=16, parallel=True, steps=1000, seconds=None, block_steps=500, seed=4)


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh compilation cache directory for this test, so a fresh program store; JAX's setting
    restored after. XLA's executables stay in the process's cache (tests/conftest.py binds it before
    any test: JAX binds it once), so these tests compile the search once between them."""
    before = jax.config.values["jax_compilation_cache_dir"]
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    _driver.clear_compiled()
    yield tmp_path
    jax.config.update("jax_compilation_cache_dir", before)
    _driver.clear_compiled()


def test_a_stored_program_plans_as_a_traced_one_and_is_not_traced_again(cache_dir, monkeypatch):
    state = parse_state(cluster(11))
    first = plan(state, SEARCH)
    programs = sorted((cache_dir / "programs").glob("*.jaxexport"))
    assert programs, "the search's program was not stored"
    _driver.clear_compiled()  # as a new process: nothing compiled in memory
    traced = []
    monkeypatch.setattr(_store, "_flat", lambda *a: traced.append(a) or pytest.fail("traced again"))
    second = plan(state, SEARCH)
    assert not traced
    assert second.actions == first.actions and second.document()["Score"] == first.document()["Score"]
    assert sorted((cache_dir / "programs").glob("*.jaxexport")) == programs


def test_without_a_serializer_nothing_is_stored_and_the_plan_is_the_same(cache_dir, monkeypatch):
    state = parse_state(cluster(11))
    stored = plan(state, SEARCH)
    programs = sorted((cache_dir / "programs").glob("*"))
    monkeypatch.setattr(_store, "_SERIALIZABLE", False)
    _driver.clear_compiled()
    for path in programs:
        path.unlink()
    traced = plan(state, SEARCH)
    assert traced.actions == stored.actions
    assert not list((cache_dir / "programs").glob("*"))


def test_a_damaged_program_file_is_traced_again_and_replaced(cache_dir):
    state = parse_state(cluster(11))
    plan(state, SEARCH)
    for path in (cache_dir / "programs").glob("*.jaxexport"):
        path.write_bytes(b"not a program")
    _driver.clear_compiled()
    plan(state, SEARCH)
    assert all(p.read_bytes() != b"not a program" for p in (cache_dir / "programs").glob("*.jaxexport"))


def test_keys_name_the_model_settings_and_refuse_what_has_no_stable_description():
    kept, carried = (np.zeros(3, np.float32),), np.zeros(2, np.int32)
    assert _store._key((model(0.3), 1), kept, carried) == _store._key((model(0.3), 1), kept, carried)
    assert _store._key((model(0.3), 1), kept, carried) != _store._key((model(0.5), 1), kept, carried)
    assert _store._key((model(0.3), 1), kept, carried) != _store._key((model(0.3), 1), kept, np.zeros(3, np.int32))
    assert _store._key(object(), kept, carried) is None
