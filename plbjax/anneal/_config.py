"""What a search is: the kernel's shape (hashed, static under jit) and the run's schedule (runtime values).

Two runs that differ only in their schedule share one compiled program.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """What shapes the compiled step and block."""

    tries: int = 1  # proposals evaluated together per step (the first accepted is applied)
    parallel: bool = False  # apply every accepted proposal independent of earlier ones
    room: int | None = None  # most proposals a step finishes and may apply; None: tries / 16, at least 32
    block_steps: int = 1_000  # steps between exact refreshes (SF: 1000 per round)
    population: bool = False  # population annealing: resample the chains' states at each block's end

    @property
    def step_room(self) -> int:
        """`room`, or its default for `tries` (a sixteenth, at least 32: a GPU step of 65,536 finishes 4,096)."""
        return self.room if self.room is not None else max(32, self.tries // 16)

    def halved(self) -> KernelConfig | None:
        """Half the tries a step (None: one try already)."""
        if self.tries <= 1:
            return None
        return dataclasses.replace(
            self, tries=self.tries // 2, room=None if self.room is None else max(1, self.room // 2)
        )


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How many chains run, for how long, and how they cool."""

    chains: int = 64
    steps: int | None = 20_000  # per chain; None: as many as `seconds` allows
    seconds: float | None = 60.0  # wall-time budget of the search, compilation excluded
    seed: int = 0
    initial_temperature: float | None = None  # None: probe, probe_factor x the largest |dE| seen
    probe_factor: float = 50.0  # SF: 50 x the largest |dE| of its probe moves
    final_ratio: float = 1e-4  # final temperature / initial temperature
    reserve_blocks: int = 0  # blocks the caller runs after this search within `seconds` (left time for)
    patience: int | None = None  # stop once this many blocks in a row improved nothing and left every chain
    # at its best (frozen: more cooling cannot pay); None: run every block the steps or seconds allow
    tolerance: float = 1e-5  # an improvement smaller than this share of the energy counts as none
