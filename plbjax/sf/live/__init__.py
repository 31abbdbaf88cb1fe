"""Real Service Fabric clusters in and out.

``plbjax-dump`` (`dump.main`) writes a dump of a live cluster through SF's REST API,
``plbjax-import`` (`importer.main`) turns a dump into a state document, and ``plbjax-export``
(`export.main`) writes the commands (sfctl, PowerShell or REST) that carry a plan's actions out.
See docs/live-cluster.md; the dump layout is in docs/contract.md.
"""

import importlib

_HOMES = {"dump_cluster": "dump", "export_plan": "export", "import_dump": "importer"}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """Import on first use, so that ``python -m plbjax.sf.live.<module>`` runs its module once."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
