"""A sweep asking for a Hydra launcher that is not installed says, in one line, which extra installs it."""

from __future__ import annotations

import io

import pytest

from plbjax.cli.apps import _HeldStderr


@pytest.mark.parametrize(
    "hydra_says, line",
    [
        (
            "Could not load 'hydra/launcher/submitit_slurm'.\n\nAvailable options in 'hydra/launcher':\n\tbasic\n",
            "hydra/launcher=submitit_slurm: its Hydra plugin is not installed; pip install 'plbjax[sweep]' installs it",
        ),
        (
            "Error locating target 'hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher'",
            "hydra/launcher (joblib): its Hydra plugin is not installed; pip install 'plbjax[sweep]' installs it",
        ),
    ],
)
def test_a_missing_launcher_names_the_extra(hydra_says, line):
    held = _HeldStderr(io.StringIO())
    held.write(hydra_says)
    assert held.one_line("plbjax") == line
