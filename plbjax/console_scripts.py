"""Every command plbjax installs, in one place: pyproject's [project.scripts] points at these.

Each imports its command's module only when run, so one command's start-up never pays for another's.
"""

from __future__ import annotations


def plbjax() -> int | None:
    """`plbjax`: a plan of a state document (the Hydra app, sweeps included); plbjax.cli."""
    from plbjax.cli import main

    return main()


def plbjax_replay() -> int | None:
    """`plbjax-replay`: the PLB loop over a timeline's simulated time; plbjax.cli."""
    from plbjax.cli import replay_main

    return replay_main()


def plbjax_generate() -> int | None:
    """`plbjax-generate`: synthetic state documents and timelines; plbjax.generate_cli."""
    from plbjax.generate_cli import main

    return main()


def plbjax_roadef() -> int | None:
    """`plbjax-roadef`: ROADEF/EURO 2012 machine reassignment instances; plbjax.roadef.cli."""
    from plbjax.roadef.cli import main

    return main()


def plbjax_dump() -> int | None:
    """`plbjax-dump`: a live cluster's REST answers into a dump directory; plbjax.sf.live.dump."""
    from plbjax.sf.live.dump import main

    return main()


def plbjax_import() -> int | None:
    """`plbjax-import`: a dump directory into a state document; plbjax.sf.live.importer."""
    from plbjax.sf.live.importer import main

    return main()


def plbjax_export() -> int | None:
    """`plbjax-export`: a plan as an sfctl, PowerShell or REST script; plbjax.sf.live.export."""
    from plbjax.sf.live.export import main

    return main()


def plbjax_apply() -> int | None:
    """`plbjax-apply`: a plan carried out on a live cluster; plbjax.sf.live.apply."""
    from plbjax.sf.live.apply import main

    return main()
