"""SF's phases run in SF's order into a plan, and what the plan says of itself.

    planning.py     plan: preparation, then placement, constraint check and balancing, to a Plan
    document.py     the plan document, rendered from what the phases left
    explain.py      why each action: its phase and reason, the throttles, where it stopped
    diagnostics.py  what the plan could not do, as SF's health reports say it
    probe.py        what a PLB round finds in a state before any search (the replay's probe)
    session.py      Session: a cluster held encoded between PLB rounds

Reads `_phases` and below; the face `plbjax.sf` reads it.
"""

from plbjax.sf._plan.planning import REFRESH_ACTIONS, Plan, plan
from plbjax.sf._plan.probe import Findings, findings
from plbjax.sf._plan.session import Session

__all__ = ["REFRESH_ACTIONS", "Findings", "Plan", "Session", "findings", "plan"]
