"""How a plan was made: plbjax's version with its commit (git checkouts, clean and dirty, and a
folder that is none, as an installed wheel), and the Provenance record's parts."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import jsonschema
import pytest
from paths import ROOT

from plbjax import provenance, version

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "small.yaml"
FAST = ["search.chains=4", "search.steps=1000", "search.block_steps=250"]


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
    assert set(env) == {"Python", "Jax", "Jaxlib", "Numpy", "Equinox", "Hydra", "Backend", "Devices", "Host"}
    assert env["Devices"] and env["Numpy"] and env["Equinox"] and env["Hydra"]
    config = {"state": "examples/small.yaml", "search": {"seed": 3, "chains": 4}}
    made = provenance.provenance("0.1.0+gabc", env, ROOT / "examples" / "small.yaml", config, ["plbjax", "x"], 3)
    assert list(made) == [
        "Version",
        "Python",
        "Jax",
        "Jaxlib",
        "Numpy",
        "Equinox",
        "Hydra",
        "Backend",
        "Devices",
        "Host",
        "Input",
        "Config",
        "Command",
        "Seed",
    ]
    assert made["Config"] == config and made["Command"] == ["plbjax", "x"] and made["Seed"] == 3


def _plbjax(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "plbjax.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_the_plan_and_its_out_copy_say_how_they_were_made(tmp_path):
    """Provenance in plan.json and the out= copy alike: the version, the input's hash, every config key
    (the PLB setting given on the command line among them), the command line and the seed; the
    setting lifted the throttle (more than MaxPercentageToMove's default 0.3 x 22 = 7 moves allowed)."""
    out = tmp_path / "plan.json"
    args = [str(EXAMPLE), f"out={out}", "+settings.MaxPercentageToMove=1", "search.seed=3", *FAST]
    done = _plbjax(*args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    jsonschema.validate(plan, json.loads((ROOT / "plbjax" / "schemas" / "plan.schema.json").read_text()))
    assert plan == json.loads((tmp_path / "run" / "plan.json").read_text())
    made = plan["Provenance"]
    assert made["Version"] == version.VERSION == plan["Search"]["Version"]
    assert made["Input"] == {"Path": str(EXAMPLE), "Sha256": hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()}
    config = made["Config"]
    assert config["settings"] == {"MaxPercentageToMove": 1} and config["search"]["seed"] == 3 == made["Seed"]
    assert set(config["search"]) >= {"chains", "steps", "tries", "block_steps", "probe_factor", "final_ratio"}
    assert config["state"] == str(EXAMPLE) and config["out"] == str(out)
    assert made["Command"][0] == "plbjax" and made["Command"][1:5] == args[:4]
    assert made["Backend"] == plan["Search"]["Backend"] and made["Jax"] and made["Jaxlib"]
    balancing = next(p for p in plan["Phases"] if p["Phase"] == "Balancing")
    assert balancing["Movements"]["Allowed"] > 7
