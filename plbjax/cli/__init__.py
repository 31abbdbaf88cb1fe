"""The command lines (Hydra apps): `plbjax state=PATH [out=FILE] [key=value ...]` plans a snapshot;
`plbjax-replay timeline=PATH [out=DIR] [key=value ...]` plays the PLB loop over a timeline; `-m` sweeps.

    apps.py            the Hydra glue: the apps, the plain forms of a command line, the entry points
    jobs.py            one job and how it ends: bad input exits 2, a defect 1 (its traceback in a file)
    plan_command.py    `plbjax`: load the state, plan it, write the plan, plots and report
    replay_command.py  `plbjax-replay`: the timeline played on the replay's face, its record written
    signals.py         SIGTERM and SIGINT stop the search or the clock; the plan made in a worker thread
    progress.py        progress lines while a plan searches (compiled now or loaded from the cache)
    summary.py         the console summary of a plan, the run's report, a sweep job's line
    outputs.py         run directories and outputs: paths checked first, a refused run's directory removed

The replay is reached only through its face, `plbjax.sf.replay`.
"""

from plbjax.cli.apps import main, replay_main
from plbjax.cli.plan_command import run
from plbjax.cli.progress import Progress
from plbjax.cli.replay_command import run_replay, with_overrides
from plbjax.cli.summary import summary

__all__ = ["Progress", "main", "replay_main", "run", "run_replay", "summary", "with_overrides"]
