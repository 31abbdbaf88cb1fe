"""plbjax installs like a package: a built wheel carries its Hydra config and runs from anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

pytestmark = pytest.mark.slow  # builds and installs the package in a fresh virtual environment

ROOT = ROOT


def _run(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_a_wheel_installed_in_a_fresh_venv_runs_both_console_scripts_from_another_directory(tmp_path):
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", ROOT, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("plbjax-*.whl"))
    venv = tmp_path / "venv"  # the dependencies come from this interpreter's site-packages
    assert _run(sys.executable, "-m", "venv", "--system-site-packages", venv, cwd=tmp_path).returncode == 0
    python, scripts = venv / "bin" / "python", venv / "bin"
    installed = _run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run(python, "-c", "import plbjax; print(plbjax.__file__)", cwd=elsewhere)
    assert str(venv) in where.stdout, where.stdout + where.stderr  # the wheel's copy, not the checkout

    out = _run(
        scripts / "plbjax",
        f"state={ROOT / 'examples' / 'small.yaml'}",
        "search.steps=500",
        "search.chains=2",
        "+preset=cpu",
        "out=plan.json",
        cwd=elsewhere,
    )
    assert out.returncode == 0, out.stderr
    assert (elsewhere / "plan.json").exists()
    from plbjax.version import base_version

    release = _run(scripts / "plbjax", "--version", cwd=elsewhere)  # no checkout: the package's release alone
    assert release.stdout == f"plbjax {base_version()}\n", release.stderr
    assert json.loads((elsewhere / "plan.json").read_text())["Provenance"]["Version"] == base_version()
    roadef = _run(scripts / "plbjax-roadef", "-h", cwd=elsewhere)
    assert roadef.returncode == 0 and "plbjax-roadef" in roadef.stdout, roadef.stderr
    generated = _run(scripts / "plbjax-generate", "--nodes", "8", "--services", "2", "-o", "g.json", cwd=elsewhere)
    assert generated.returncode == 0 and (elsewhere / "g.json").exists(), generated.stderr
