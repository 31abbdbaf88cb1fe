"""The contract between the annealer and a problem: a `Model` of pure functions, typed by Protocols.

A problem's factory closes its own settings (e.g. Service Fabric's swap probability) inside the
functions, so the annealer's signatures are the same for every problem.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import jax

Problem = Any  # the problem's immutable data (a pytree, shared by every chain)
State = Any  # a chain's search state (a pytree with an `energy` field)


class StartFn(Protocol):
    def __call__(self, problem: Problem, /) -> State:
        """The search state at the problem's initial solution."""
        ...


class ProposeFn(Protocol):
    def __call__(self, problem: Problem, state: State, words: jax.Array, /) -> tuple[Any, jax.Array, jax.Array, Any]:
        """A step's random moves, one per row of `words` [T, draws] (random uint32): (moves, the energy
        each would leave, whether each is allowed, whatever `apply` reuses), batched over T. With a
        `finish`, a lower bound of the energy and a necessary condition for validity."""
        ...


class FinishFn(Protocol):
    def __call__(
        self, problem: Problem, state: State, moves: Any, stats: Any, /
    ) -> tuple[Any, jax.Array, jax.Array, Any]:
        """The costly rest of the evaluation, exact, run only on proposals that may be accepted."""
        ...


class ApplyFn(Protocol):
    def __call__(
        self, problem: Problem, state: State, moves: Any, keep: jax.Array, energies: jax.Array, stats: Any, /
    ) -> State:
        """The state after the proposals marked in `keep` [T]."""
        ...


class RefreshFn(Protocol):
    def __call__(self, problem: Problem, state: State, /) -> State:
        """The running statistics recomputed exactly."""
        ...


class SolutionFn(Protocol):
    def __call__(self, state: State) -> Any:
        """What the search returns (e.g. the placement)."""
        ...


class FootprintFn(Protocol):
    def __call__(self, problem: Problem, state: State, move: Any, /) -> jax.Array:
        """[F] int ids (-1: none) of what one move touches: moves with disjoint footprints commute."""
        ...


class FootprintIdsFn(Protocol):
    def __call__(self, problem: Problem, /) -> int:
        """How many distinct footprint ids there are."""
        ...


@dataclasses.dataclass(frozen=True)
class Model:
    """How a problem is searched (plain functions, hashable: static under jit). `footprint` and
    `footprint_ids` let a step apply several independent moves at once (None: one move a step);
    `finish` completes the evaluation of the proposals that may be accepted (None: none needed)."""

    start: StartFn
    propose: ProposeFn
    apply: ApplyFn
    refresh: RefreshFn
    solution: SolutionFn
    draws: int  # random words a proposal reads
    footprint: FootprintFn | None = None
    footprint_ids: FootprintIdsFn | None = None
    finish: FinishFn | None = None
