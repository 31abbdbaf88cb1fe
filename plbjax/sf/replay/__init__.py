"""`plbjax-replay`: the PLB loop over simulated time (timeline.md).

A timeline (a state and events) is played on a simulated clock: events change the state as the
Failover Manager would, SF's scheduler picks one phase per round, an injected planner plans it,
and its actions are applied (after their ActionSeconds). The record is written by `write_outputs`.

The folders follow the loop's parts:
- `timeline/`: the timeline document read once, its events applied, the events due;
- `state/`: the state document the loop holds between rounds, and what is derived from it;
- `scheduler/`: SF's scheduler, its settings, throttles, History's ageing, the actions in flight;
- `rounds/`: the loop itself and each round's search effort;
- `record/`: the series, actions, summary, story, plots and progress written out.
Beside them: `types` (what travels between the parts), `engine` (the planner and probe on
`plbjax.sf`), `scenarios` and `generate` (timelines made for `plbjax-generate timeline`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for pyright; at run time `__getattr__` imports them
    from plbjax.sf.replay.engine import engine
    from plbjax.sf.replay.record import ReplayProgress, story, summary, write_outputs
    from plbjax.sf.replay.rounds.loop import replay
    from plbjax.sf.replay.scheduler.settings import with_settings
    from plbjax.sf.replay.timeline import ActionSeconds, Timeline, load_timeline, parse_timeline
    from plbjax.sf.replay.timeline.events import Event, apply_event
    from plbjax.sf.replay.types import Needs, PlannedRound, Planner, Probe, Replay, Row

# each public name -> the module that defines it (imported on first use: `plbjax-generate timeline`
# and its --help read the scenarios alone, without JAX or matplotlib)
_HOMES = {
    "engine": "engine",
    **dict.fromkeys(["ReplayProgress", "story", "summary", "write_outputs"], "record"),
    "replay": "rounds.loop",
    "with_settings": "scheduler.settings",
    **dict.fromkeys(["ActionSeconds", "Timeline", "load_timeline", "parse_timeline"], "timeline"),
    **dict.fromkeys(["Event", "apply_event"], "timeline.events"),
    **dict.fromkeys(["Needs", "PlannedRound", "Planner", "Probe", "Replay", "Row"], "types"),
}

__all__ = [
    "ActionSeconds",
    "Event",
    "Needs",
    "PlannedRound",
    "Planner",
    "Probe",
    "Replay",
    "ReplayProgress",
    "Row",
    "Timeline",
    "apply_event",
    "engine",
    "load_timeline",
    "parse_timeline",
    "replay",
    "story",
    "summary",
    "with_settings",
    "write_outputs",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
