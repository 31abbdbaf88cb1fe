"""plbjax: Service Fabric's Cluster Resource Manager (PLB) as a vectorised simulated-annealing optimizer.

The public API is small: load a state document, plan, and (optionally) drive the pieces yourself.
"""

from plbjax.annealer import AnnealConfig, anneal
from plbjax.decoding import apply_actions, diff
from plbjax.encoding import Index, Problem, encode
from plbjax.errors import BadInput
from plbjax.phases import plan
from plbjax.state import ClusterState, load_state, parse_state

__all__ = ["AnnealConfig", "BadInput", "ClusterState", "Index", "Problem", "anneal", "apply_actions",
           "diff", "encode", "load_state", "parse_state", "plan"]
