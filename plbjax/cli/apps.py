"""The Hydra glue: the apps on the packaged config (plbjax's, plbjax-baseline's, plbjax-replay's),
the command line's plain forms made Hydra's, and the console entry points, which cut Hydra's
configuration errors to one line (exit 2)."""

from __future__ import annotations

import io
import os
import re
import signal
import sys
from collections.abc import Callable
from contextlib import redirect_stderr
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from plbjax import sweep
from plbjax.cli import jobs, plan_command
from plbjax.cli.plan_command import run
from plbjax.cli.replay_command import run_replay
from plbjax.cli.signals import STOPPED
from plbjax.config import register
from plbjax.errors import BadInput, did_you_mean
from plbjax.files import discard_partial_files
from plbjax.help import keys as config_keys
from plbjax.help import register as register_help
from plbjax.version import VERSION

CONFIG_DIR = "pkg://plbjax.conf"  # the repository's conf/, shipped in the package (pyproject.toml)
register()
register_help()
REQUIRED = {"plbjax": "state", "plbjax-baseline": "state", "plbjax-replay": "timeline"}  # what a bare path names
CONFIG_OF = {"plbjax-baseline": "plbjax"}  # a command on another's config (whose keys plbjax.help lists)
_VALUE_FLAGS = (  # Hydra's flags that take the next word as their value
    *("-c", "--cfg", "-p", "--package", "-i", "--info", "--experimental-rerun"),
    *("-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir"),
)


def _plain(cfg: DictConfig) -> dict[str, Any]:
    """`cfg` as plain dicts, lists and values, interpolations resolved."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    return {str(key): value for key, value in plain.items()}


def take_settings(cfg: DictConfig) -> dict[str, Any]:
    """`+settings.NAME=VALUE` taken out of `cfg` (plbjax's schema has no `settings`: they go into
    the state document's Settings, where they are checked)."""
    with open_dict(cfg):
        settings = cfg.pop("settings", None)
    return _plain(settings) if isinstance(settings, DictConfig) else {}


def _plan_job(cfg: DictConfig, prog: str) -> float:
    """One job of `plbjax` or `plbjax-baseline` (the same config; `plan_command.ENGINES`)."""
    resolved = _plain(cfg)
    settings = take_settings(cfg)
    return jobs.job(
        cfg, "state", lambda config, run_dir: run(config, run_dir, settings, resolved, prog)["Score"]["After"], prog
    )


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="config")
def _app(cfg: DictConfig) -> float:
    return _plan_job(cfg, "plbjax")


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="config")
def _baseline_app(cfg: DictConfig) -> float:
    return _plan_job(cfg, "plbjax-baseline")


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="replay")
def _replay_app(cfg: DictConfig) -> float:
    return jobs.job(
        cfg, "timeline", lambda config, run_dir: run_replay(config, run_dir)["TimeAveragedAvgStdDev"], "plbjax-replay"
    )


# Hydra's launchers that plbjax's `sweep` extra installs, by the name a command line gives
PLUGIN_EXTRAS = {"joblib", "submitit_local", "submitit_slurm", "slurm"}
PLUGIN_MISSING = "its Hydra plugin is not installed; pip install 'plbjax[sweep]' installs it"


class _HeldStderr(io.TextIOBase):
    """stderr that holds what is written until the job starts (then passes everything through), so
    that a configuration error Hydra reports before it can be cut to one line."""

    def __init__(self, stream):
        self.stream, self.held = stream, []

    def write(self, text: str) -> int:
        if jobs.JOB_STARTED.is_set():
            if self.held:
                self.stream.write("".join(self.held))
                self.held = []
            return self.stream.write(text)
        self.held.append(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def one_line(self, prog: str) -> str:
        """What was held, as one line (and nothing held any more)."""
        text, self.held = "".join(self.held), []
        unknown = re.search(r"Could not override '([^']+)'", text)
        if unknown:
            if unknown[1].startswith("settings."):
                hint = f" (a PLB setting is added: +{unknown[1]}=VALUE)"
            else:
                hint = did_you_mean(unknown[1], config_keys(CONFIG_OF.get(prog, prog)))
            return f"{unknown[1]}: unknown config key{hint}"
        plugin = re.search(r"Could not (?:load|find) '(hydra/(?:launcher|sweeper))/([^']+)'", text)
        module = re.search(r"hydra_plugins\.hydra_(joblib|submitit)_launcher", text)
        if plugin and plugin[2] in PLUGIN_EXTRAS:
            return f"{plugin[1]}={plugin[2]}: {PLUGIN_MISSING}"
        if module:
            return f"hydra/launcher ({module[1]}): {PLUGIN_MISSING}"
        group = re.search(r"Could not find '([\w/]+)/([^']+)'\n\nAvailable options in '[^']+':\n((?:\t.*\n)*)", text)
        if group:
            options = group[3].split()
            hint = did_you_mean(group[2], options)
            return f"{group[1]}={group[2]}: no such {group[1]}{hint} (one of: {', '.join(options)})"
        typed = re.search(r"Error merging override ([^=\s]+)=.*?\n(.+)", text)
        if typed:
            return f"{typed[1]}: {typed[2].strip()}"
        lines = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and "HYDRA_FULL_ERROR" not in line and not line.startswith("See https")
        ]
        return "; ".join(lines[:2]) if lines else "bad command line"


def plain_forms(argv: list[str], required: str) -> list[str]:
    """`argv` with the forms a person tries first made Hydra's: a bare path (`plbjax STATE`) as
    `state=STATE`, `preset=NAME` as `+preset=NAME`; BadInput for a word that is neither."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith("preset="):
            arg = "+" + arg
        elif not (arg.startswith(("-", "+", "~")) or "=" in arg or (i and argv[i - 1] in _VALUE_FLAGS)):
            if any(a.startswith(f"{required}=") for a in out + argv):
                raise BadInput(f"{arg}: not key=value (the {required} is named once, as {required}=PATH)")
            arg = f"{required}={arg}"
        out.append(arg)
    return out


def _main(app: Callable[[], Any], prog: str) -> None:
    """A console entry point; configuration errors Hydra reports before the job starts exit with 2
    and one line; a signal outside the job's search exits at once with one line."""

    def quit_now(signum, frame) -> None:
        print(f"{prog}: {signal.Signals(signum).name}: exiting now", file=sys.stderr, flush=True)
        discard_partial_files()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, quit_now)
    if "--version" in sys.argv[1:]:
        print(f"{prog} {VERSION}")
        sys.exit(0)
    plan_command.COMMAND[:] = [prog, *sys.argv[1:]]
    held = _HeldStderr(sys.stderr)
    multirun = any(arg in ("-m", "--multirun") for arg in sys.argv[1:])  # sweep workers inherit no redirect
    try:
        sys.argv[1:] = plain_forms(sys.argv[1:], REQUIRED[prog])
    except BadInput as exc:
        print(f"{prog}: bad config: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        with redirect_stderr(sys.stderr if multirun else held):
            app()
        if multirun and STOPPED:
            sys.exit(128 + STOPPED[0])
        if multirun and sweep.FAILURES:
            print(f"{prog}: {len(sweep.FAILURES)} job(s) failed: {', '.join(sweep.FAILURES)}", file=sys.stderr)
            sys.exit(1)
    except SystemExit as exc:
        if exc.code not in (0, None) and not jobs.JOB_STARTED.is_set():
            print(f"{prog}: bad config: {held.one_line(prog)}", file=sys.stderr)
            sys.exit(2)
        raise
    finally:
        if held.held:
            sys.stderr.write("".join(held.held))


def main() -> None:
    """`plbjax`."""
    _main(_app, "plbjax")


def replay_main() -> None:
    """`plbjax-replay`."""
    _main(_replay_app, "plbjax-replay")


def baseline_main() -> None:
    """`plbjax-baseline`."""
    _main(_baseline_app, "plbjax-baseline")
