"""Real Service Fabric clusters in and out, laid out by what an operator does.

* `reading`: ``plbjax-dump`` (`dump_main`, `dump_cluster`) writes a live cluster's REST answers
  into a dump directory; ``plbjax-import`` (`import_main`, `import_dump`) turns a dump into a state
  document.
* `export`: ``plbjax-export`` (`export_main`, `export_plan`) writes a plan as a bash (sfctl, curl)
  or PowerShell script that carries it out, each step checked before and waited for after.
* `apply`: ``plbjax-apply`` (`apply_main`) carries a plan out itself through the REST API: its
  actions ordered into steps, sent within limits per node and cluster, watched until done, each
  change written to a journal first, and the cluster compared with the plan's target at the end.
* `record`: ``plbjax-record`` (`record_main`) records a live cluster's day (its periods' loads and
  placement, its EventStore's events); ``plbjax-import`` turns the recording into a replay timeline.
* `rest`: the REST client the three share. `simulator`: a simulated cluster behind the same REST
  calls, seeded from a dump, to rehearse on (``python -m plbjax.sf.live.simulator DUMP``).

See docs/live-cluster.md; the dump layout is in docs/contract.md.
"""

import importlib

_HOMES = {
    "dump_cluster": ("reading.dump", "dump_cluster"),
    "dump_main": ("reading.dump", "main"),
    "import_dump": ("reading.importer", "import_dump"),
    "import_main": ("reading.importer", "main"),
    "export_plan": ("export.script", "export_plan"),
    "export_main": ("export.script", "main"),
    "apply_main": ("apply.command", "main"),
    "record_main": ("record.recorder", "main"),
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """Import on first use, so that each command imports only its own modules."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _HOMES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
