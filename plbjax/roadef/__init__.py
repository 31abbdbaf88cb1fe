"""The ROADEF/EURO 2012 machine-reassignment problem, solved by the plbjax annealer.

`instance` reads the challenge's files, `objective` is the exact host-side cost and feasibility
check, `search` is the problem's model for the annealer (energy terms, constraints, moves), and
`cli` is the challenge's solver command, `plbjax-roadef`.
"""

from plbjax.roadef._instance import Instance, read_instance, read_solution, write_solution
from plbjax.roadef._objective import Costs, costs, violations

__all__ = ["Costs", "Instance", "costs", "read_instance", "read_solution", "violations", "write_solution"]
