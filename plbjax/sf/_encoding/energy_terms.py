"""SF's energy settings as numbers the search reads at run time (`Problem.energy_terms`), so a
cluster compiles the same search whatever they say (SF's Score::CalculateEnergy and
Score::StdDevCaculationHelper, Score.cpp:418-431 and 575-588).

- `IgnoreCostInScoring`: the energy is AvgStdDev alone, the move cost left out (`COST` 0, else 1).
- `MoveCostOffset`: the constant SF adds to the cost factor, `(AvgStdDev + 0.001) x (±cost + replicas
  + MoveCostOffset)` (`OFFSET`).
- `DefragmentationNodesStdDevFactor`, `DefragmentationFdsStdDevFactor`, `DefragmentationUdsStdDevFactor`:
  a defragmentation metric's score `a - a x dev(nodes) + b x dev(fault domains) + c x dev(upgrade
  domains)` (`NODES`, `FDS`, `UDS`).
"""

from __future__ import annotations

import numpy as np

COST, OFFSET, NODES, FDS, UDS = range(5)


def energy_terms(settings: dict) -> np.ndarray:
    """float32[5] the energy's settings, indexed COST, OFFSET, NODES, FDS, UDS."""
    return np.array(
        [
            0.0 if settings["IgnoreCostInScoring"] else 1.0,
            float(settings["MoveCostOffset"]),
            float(settings["DefragmentationNodesStdDevFactor"]),
            float(settings["DefragmentationFdsStdDevFactor"]),
            float(settings["DefragmentationUdsStdDevFactor"]),
        ],
        np.float32,
    )


def energy_unit(replicas: float, offset: float) -> float:
    """What the energy weighs AvgStdDev by with no move made, `replicas + MoveCostOffset` (at least
    1: an offset that would flip the energy's sign counts as 1 - replicas); violations and the
    constraint check's charge per move are counted in this unit."""
    return max(float(replicas) + float(offset), 1.0)
