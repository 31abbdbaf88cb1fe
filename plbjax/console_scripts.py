"""Every command plbjax installs, in one place: pyproject's [project.scripts] points at these.

Each imports its command's module only when run, so one command's start-up never pays for another's;
`plbjax --version` and `plbjax-replay --version` are answered here, before Hydra and JAX are imported.
Each exits 130 on SIGINT (Ctrl-C) and 143 on SIGTERM, with one line, after what it writes on a stop
(`plbjax` the best plan found, `plbjax-replay` the record so far, `plbjax-apply` its journal; the
others leave no file half-written), the shell's 128 + the signal's number.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, as Python raises KeyboardInterrupt on SIGINT."""


def _terminate(signum, frame) -> None:
    raise Terminated


def _exit_on_signals(command: Callable[[], int | None]) -> Callable[[], int | None]:
    """`command` with SIGTERM raised like SIGINT, and either, where the command does not handle it,
    ending it with one line and status 128 + the signal's number."""

    @functools.wraps(command)
    def run() -> int | None:
        signal.signal(signal.SIGTERM, _terminate)
        # Python ignores SIGINT if its parent did (a shell's background job, a test worker): Ctrl-C is ours
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return command()
        except KeyboardInterrupt as exc:  # on its way here it removed the files it was writing (plbjax.files)
            signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
            print(f"{command.__name__.replace('_', '-')}: {signum.name}: exiting", file=sys.stderr, flush=True)
            return 128 + signum

    return run


def _printed_version(prog: str) -> bool:
    """Whether the command line asks for `--version`, then printed as `PROG VERSION` (as
    plbjax.cli.apps answers it, but before Hydra, the config and JAX are imported)."""
    if "--version" not in sys.argv[1:]:
        return False
    from plbjax.version import VERSION

    print(f"{prog} {VERSION}")
    return True


@_exit_on_signals
def plbjax() -> int | None:
    """`plbjax`: a plan of a state document (the Hydra app, sweeps included); plbjax.cli."""
    if _printed_version("plbjax"):
        return 0
    from plbjax.cli import main

    return main()


@_exit_on_signals
def plbjax_replay() -> int | None:
    """`plbjax-replay`: the PLB loop over a timeline's simulated time; plbjax.cli."""
    if _printed_version("plbjax-replay"):
        return 0
    from plbjax.cli import replay_main

    return replay_main()


@_exit_on_signals
def plbjax_baseline() -> int | None:
    """`plbjax-baseline`: a plan of a state by the sequential compiled annealer (`plbjax`'s config); plbjax.cli."""
    if _printed_version("plbjax-baseline"):
        return 0
    from plbjax.cli.apps import baseline_main

    return baseline_main()


@_exit_on_signals
def plbjax_compare() -> int | None:
    """`plbjax-compare`: two sweeps joined on their swept keys, their differences with intervals; plbjax.compare."""
    from plbjax.compare import main

    return main()


@_exit_on_signals
def plbjax_generate() -> int | None:
    """`plbjax-generate`: synthetic state documents and timelines; plbjax.generate_cli."""
    from plbjax.generate_cli import main

    return main()


@_exit_on_signals
def plbjax_roadef() -> int | None:
    """`plbjax-roadef`: ROADEF/EURO 2012 machine reassignment instances; plbjax.roadef.cli."""
    from plbjax.roadef.cli import main

    return main()


@_exit_on_signals
def plbjax_dump() -> int | None:
    """`plbjax-dump`: a live cluster's REST answers into a dump directory; plbjax.sf.live.reading.dump."""
    from plbjax.sf.live import dump_main as main

    return main()


@_exit_on_signals
def plbjax_record() -> int | None:
    """`plbjax-record`: a live cluster's day, period by period, with its events; plbjax.sf.live.record."""
    from plbjax.sf.live import record_main as main

    return main()


@_exit_on_signals
def plbjax_import() -> int | None:
    """`plbjax-import`: a dump directory into a state document; plbjax.sf.live.reading.importer."""
    from plbjax.sf.live import import_main as main

    return main()


@_exit_on_signals
def plbjax_export() -> int | None:
    """`plbjax-export`: a plan as an sfctl, PowerShell or REST script; plbjax.sf.live.export."""
    from plbjax.sf.live import export_main as main

    return main()


@_exit_on_signals
def plbjax_apply() -> int | None:
    """`plbjax-apply`: a plan carried out on a live cluster; plbjax.sf.live.apply."""
    from plbjax.sf.live import apply_main as main

    return main()


@_exit_on_signals
def plbjax_warm() -> int | None:
    """`plbjax-warm`: the compiled programs of a state's or a size range's buckets stored ahead; plbjax.warm."""
    from plbjax.warm import main

    return main()
