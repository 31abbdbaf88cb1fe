"""`plbjax-replay`: the PLB loop over simulated time (timeline.md).

A timeline (a state and events) is played on a simulated clock: events change the state as the
Failover Manager would, SF's scheduler picks one phase per round, an injected planner plans it,
and its actions are applied (after their ActionSeconds). The record is written by `write_outputs`.
"""

from plbjax.sf.replay.events import Event, apply_event
from plbjax.sf.replay.loop import replay
from plbjax.sf.replay.record import summary, write_outputs
from plbjax.sf.replay.timeline import ActionSeconds, Timeline, load_timeline, parse_timeline
from plbjax.sf.replay.types import Needs, PlannedRound, Planner, Probe, Replay, Row

__all__ = [
    "ActionSeconds",
    "Event",
    "Needs",
    "PlannedRound",
    "Planner",
    "Probe",
    "Replay",
    "Row",
    "Timeline",
    "apply_event",
    "load_timeline",
    "parse_timeline",
    "replay",
    "summary",
    "write_outputs",
]
