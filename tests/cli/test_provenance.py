"""How a plan was made: plbjax's version with its commit (git checkouts, clean and dirty, and a
folder that is none, as an installed wheel), and the Provenance record's parts."""

from __future__ import annotations

import hashlib
import re
import subprocess

import pytest
from paths import ROOT

from plbjax import provenance, version

ROOT = ROOT


def _git(repo, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with one commit."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("a\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return tmp_path


def test_a_clean_checkout_names_its_commit(checkout):
    sha = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert version.commit(checkout) == f"g{sha[:12]}"


def test_a_changed_tracked_file_marks_it_dirty_an_untracked_one_does_not(checkout):
    (checkout / "new.txt").write_text("untracked\n")
    assert not version.commit(checkout).endswith(".dirty")
    (checkout / "a.txt").write_text("changed\n")
    assert version.commit(checkout).endswith(".dirty")


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    assert version.commit(tmp_path) is None  # an installed wheel: the package metadata's version alone


def test_the_version_is_pep_440_with_the_commit_as_local_part():
    assert re.fullmatch(r"\d+\.\d+\.\d+\+g[0-9a-f]{12}(\.dirty)?", version.VERSION), version.VERSION
    assert version.VERSION.startswith(version.base_version() + "+")


def test_the_input_record_hashes_the_files_bytes(tmp_path):
    state = tmp_path / "s.yaml"
    state.write_bytes(b"x" * (provenance.CHUNK + 5))
    record = provenance.input_record(state)
    assert record == {"Path": str(state), "Sha256": hashlib.sha256(state.read_bytes()).hexdigest()}


def test_the_provenance_record_has_every_part():
    env = provenance.environment()
    assert set(env) == {"Python", "Jax", "Jaxlib", "Backend", "Devices"} and env["Devices"]
    config = {"state": "examples/small.yaml", "search": {"seed": 3, "chains": 4}}
    made = provenance.provenance("0.1.0+gabc", env, ROOT / "examples" / "small.yaml", config, ["plbjax", "x"], 3)
    assert list(made) == [
        "Version",
        "Python",
        "Jax",
        "Jaxlib",
        "Backend",
        "Devices",
        "Input",
        "Config",
        "Command",
        "Seed",
    ]
    assert made["Config"] == config and made["Command"] == ["plbjax", "x"] and made["Seed"] == 3
