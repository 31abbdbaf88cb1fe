"""Every example command in the README and in each command's --help: each parses (Hydra's commands
are composed and validated as the command would, the others' arguments parsed by their own parser),
the cheap ones run for real on small inputs in the order a user would type them, and the claims
they make hold (the sweep examples' rows differ: tests/cli/test_sweep_summary.py runs that sweep)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml
from paths import ROOT

ROOT = ROOT
HYDRA_APPS = {"plbjax": "config", "plbjax-replay": "replay", "plbjax-baseline": "config"}  # command -> its config
SHARED_HELP = {"plbjax-baseline"}  # a command whose --help is another's (plbjax's keys and examples)
ARGPARSE = {  # command -> the module whose main(argv) it runs
    "plbjax-generate": "plbjax.generate_cli",
    "plbjax-import": "plbjax.sf.live.reading.importer",
    "plbjax-export": "plbjax.sf.live.export",
    "plbjax-dump": "plbjax.sf.live.reading.dump",
    "plbjax-roadef": "plbjax.roadef.cli",
    "plbjax-warm": "plbjax.warm",
    "plbjax-record": "plbjax.sf.live.record.recorder",
    "plbjax-compare": "plbjax.compare",
}
OTHERS = {"pip", "python3"}  # README commands that are not plbjax's


def readme_commands() -> list[str]:
    """The commands of the README's bash and console blocks (comments cut, continuations joined,
    `a && b` split) and of its inline code that starts with a plbjax command."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for kind, block in re.findall(r"```(bash|console)\n(.*?)```", text, re.S):
        lines = block.replace("\\\n", " ").splitlines()
        if kind == "console":
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        for line in lines:
            line = re.sub(r"\s+#.*$", "", line).strip()
            commands += [part.strip() for part in line.split("&&") if part.strip() and not line.startswith("#")]
    inline = re.findall(r"`((?:plbjax|plbjax-[a-z]+) [^`]*)`", text)
    return commands + [c for c in inline if "..." not in c]


def help_examples(command: str) -> list[str]:
    """The example lines of `command --help`."""
    if command in HYDRA_APPS:
        code = f"from plbjax.cli import {'main' if command == 'plbjax' else 'replay_main'} as m; m()"
        out = subprocess.run(
            [sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
        ).stdout
        lines = out.split("== Examples ==\n", 1)[1].splitlines()
    else:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), pytest.raises(SystemExit):
            importlib.import_module(ARGPARSE[command]).main(["--help"])
        lines = buffer.getvalue().split("examples:\n", 1)[1].splitlines()
    return [re.sub(r"\s+\(.*\)$", "", line).strip() for line in lines if line.startswith(f"  {command} ")]


def _all_examples() -> list[tuple[str, str]]:
    found = [("README", c) for c in readme_commands()]
    for command in [*HYDRA_APPS, *ARGPARSE]:
        found += [] if command in SHARED_HELP else [(f"{command} --help", c) for c in help_examples(command)]
    return found


EXAMPLES = _all_examples()


class _Parsed(Exception):
    """Raised by a patched ArgumentParser.parse_args: the arguments parsed, nothing run."""


def parse_argparse(command: str, args: list[str]) -> argparse.Namespace | None:
    """`args` parsed by `command`'s own parser (its main, stopped once it has parsed them; a
    subcommand's parser too); None for --help."""
    original = argparse.ArgumentParser.parse_args

    def parse(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse), contextlib.redirect_stdout(io.StringIO()):
        try:
            importlib.import_module(ARGPARSE[command]).main(args)
        except _Parsed as done:
            return done.args[0]
        except SystemExit as exit:
            if exit.code == 0 and "--help" in args:
                return None
            raise
    raise AssertionError(f"{command} {shlex.join(args)}: ran without parsing its arguments")


def compose_hydra(command: str, args: list[str], tmp_path: Path):
    """The config `command args` runs with (a sweep's first job), validated as the command does."""
    from hydra import compose, initialize_config_module
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from plbjax.cli.apps import REQUIRED, plain_forms, take_settings
    from plbjax.config import from_hydra

    args = [a for a in args if a not in ("-m", "--multirun")]
    overrides = []
    for override in OverridesParser.create().parse_overrides(plain_forms(args, REQUIRED[command])):
        value = next(iter(override.sweep_string_iterator())) if override.is_sweep_override() else None
        overrides.append(override.input_line if value is None else f"{override.get_key_element()}={value}")
    with initialize_config_module("plbjax.conf", version_base=None):
        cfg = compose(HYDRA_APPS[command], overrides=overrides)
    if command == "plbjax":  # +settings.NAME=VALUE: the state's Settings, checked when the state is read
        take_settings(cfg)
    return from_hydra(cfg, REQUIRED[command])


@pytest.mark.parametrize("source, command", EXAMPLES, ids=[f"{s}: {c}" for s, c in EXAMPLES])
def test_every_example_parses(source, command, tmp_path):
    """Each example's program is a plbjax command whose arguments parse: Hydra's compose with every
    key checked (a misspelled or mistyped key fails here), argparse's parser for the others."""
    words = shlex.split(command.replace("$PWD", str(tmp_path)))
    program, args = words[0], words[1:]
    if program in OTHERS:
        return
    assert program in HYDRA_APPS or program in ARGPARSE, f"{source}: unknown program in {command!r}"
    for path in re.findall(r"(?<![\w/])((?:examples|tests)/[^\s,]+)", command):
        assert (ROOT / path).exists(), f"{source}: {command!r} names {path}, which the repository lacks"
    if program in HYDRA_APPS:
        if "--help" not in args:
            compose_hydra(program, args, tmp_path)
    else:
        parse_argparse(program, args)


def test_examples_were_found():
    """The extraction finds the README's commands and three examples per --help."""
    sources = [s for s, _ in EXAMPLES]
    assert sources.count("README") >= 15
    assert all(sources.count(f"{c} --help") == 3 for c in [*HYDRA_APPS, *ARGPARSE] if c not in SHARED_HELP)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """An argparse example run for real in `cwd` (repository paths made absolute)."""
    words = shlex.split(re.sub(r"(?<![\w/])(tests|examples)/", f"{ROOT}/\\1/", command))
    code = f"import sys; from {ARGPARSE[words[0]]} import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_generate_import_and_export_examples_run(tmp_path):
    """plbjax-generate's, plbjax-import's and plbjax-export's examples, in the order a user types
    them, on the bundled sample dump and a plan of the bundled example: each exits 0 and writes
    what it names."""
    shutil.copytree(ROOT / "tests" / "data" / "sf-dump" / "small", tmp_path / "dump")
    plan = (ROOT / "tests" / "data" / "pinned" / "example.json").read_text()
    (tmp_path / "plan.json").write_text(plan)
    (tmp_path / "outputs" / "2026-01-01" / "12-00-00").mkdir(parents=True)
    (tmp_path / "outputs" / "2026-01-01" / "12-00-00" / "plan.json").write_text(plan)
    readme = [c for s, c in EXAMPLES if s == "README" and c.startswith(("plbjax-generate ", "plbjax-import "))]
    examples = [c for c in readme if "cluster.json" not in c] + [
        c for s, c in EXAMPLES if s in ("plbjax-generate --help", "plbjax-import --help", "plbjax-export --help")
    ]
    assert len(examples) >= 9
    for command in examples:
        if command.startswith("plbjax-export"):  # the plan's own state, as `--state` asks
            (tmp_path / "state.json").write_text(
                json.dumps(yaml.safe_load((ROOT / "examples" / "small.yaml").read_text()))
            )
        done = _run(command, tmp_path)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        words = shlex.split(command)
        for flag in ("-o", "-r"):
            if flag in words:
                assert (tmp_path / words[words.index(flag) + 1]).stat().st_size > 0, command
    json.loads((tmp_path / "state.json").read_text())
    assert (tmp_path / "moves.sh").read_text().startswith("#!/usr/bin/env bash")


def test_the_readme_replay_timeline_example_is_generated_as_its_comment_says(tmp_path):
    """The README generates `day.yaml` from `cluster.json` (a state of the user's): with the
    bundled example as that state the command runs and writes a timeline the replay reads."""
    from plbjax.sf.replay import load_timeline

    command = next(c for s, c in EXAMPLES if s == "README" and c.startswith("plbjax-generate timeline"))
    from plbjax import load_state

    (tmp_path / "cluster.json").write_text(json.dumps(load_state(ROOT / "examples" / "small.yaml").document))
    done = _run(command, tmp_path)
    assert done.returncode == 0, done.stderr
    assert load_timeline(tmp_path / "day.yaml").events


def test_help_and_readme_sweeps_of_the_bundled_example_are_one_sweep():
    """Every plbjax sweep example on the bundled example is the README's, whose rows differ
    (tests/cli/test_sweep_summary.py runs it): `balancing.threshold=1.2,2,4` gave three identical plans."""
    from plbjax.cli.apps import plain_forms

    def normal(command: str) -> list[str]:
        return sorted(plain_forms(shlex.split(command)[2:], "state"))

    sweeps = {tuple(normal(c)) for _, c in EXAMPLES if c.startswith("plbjax -m ") and "examples/small.yaml" in c}
    readme = next(line[2:] for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("$ plbjax -m "))
    assert sweeps == {tuple(normal(readme))}


@pytest.mark.slow
def test_the_readme_first_command_plans_and_leaves_the_clone_clean(tmp_path):
    """The README's set-up command (a short search): a plan under outputs/ (which .gitignore
    ignores) and nothing else in the directory it ran in."""
    command = next(c for s, c in EXAMPLES if s == "README" and c.startswith("plbjax "))
    args = shlex.split(command.replace("examples/", f"{ROOT}/examples/"))[1:]
    fast = ["search.steps=500", "search.block_steps=250", "search.chains=1", "search.tries=16"]
    code = "from plbjax.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, *args, *fast], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["outputs"] and list(tmp_path.glob("outputs/*/*/plan.json"))
    assert "outputs/" in (ROOT / ".gitignore").read_text().splitlines()


def test_results_readme_indexes_every_file():
    """results/README.md names every file results/ holds (a folder as `name/`), and no file it lacks."""
    index = (ROOT / "results" / "README.md").read_text()
    named = set(re.findall(r"`([\w.-]+\.(?:json|png|csv))`", index))
    held = {p.name for p in (ROOT / "results").iterdir() if p.is_file() and p.name != "README.md"}
    assert named == held, (held - named, named - held)
    assert [p.name for p in (ROOT / "results").iterdir() if p.is_dir() and f"`{p.name}/`" not in index] == []


@pytest.mark.slow
def test_the_replay_help_sweep_rows_differ(tmp_path):
    """plbjax-replay --help's sweep (a shorter search a round): one row per value, no two alike."""
    import csv

    command = next(c for s, c in EXAMPLES if s == "plbjax-replay --help" and " -m " in c)
    args = shlex.split(command.replace("examples/", f"{ROOT}/examples/"))[1:]
    fast = ["search.steps=300", "search.block_steps=150", "search.chains=1", "search.tries=16"]
    sweep = tmp_path / "sweep"
    code = "from plbjax.cli import replay_main; replay_main()"
    done = subprocess.run(
        [sys.executable, "-c", code, *args, *fast, f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(sweep / "summary.csv")))
    outcomes = [(r["movements"], r["rounds"], r["time_averaged_avg_std_dev"]) for r in rows]
    assert len(rows) >= 2 and len(set(outcomes)) == len(rows), outcomes
