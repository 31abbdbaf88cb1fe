"""``plbjax-apply PLAN --endpoint URL``: carry a plan out on a live cluster through SF's REST API.

Each step (`steps.order`) starts once the steps it needs are done, with at most --per-node moves into
or out of any node and --max-in-flight moves in the cluster at once; before its request the partition's
replicas and the nodes are read and its precondition checked (a step that may not start is skipped
with SF's words, and the steps that need it too); it is done when the partition's replicas show its
outcome. Adds, drops and promotions are the Failover Manager's: watched, never issued. Every change
is written to a journal beside the plan before the request is sent; a rerun resumes from it and no
move is ever made twice. The run ends by comparing the cluster with the plan's target placement.
"""

import importlib

_HOMES = {"main": "command"}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """Import on first use, so that importing one of its modules does not import the command."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
