"""A step's proposals: the kinds' shares (`shares`), one proposal of a drawn kind (`propose`), and a
step's worth with each kind computed only where it is drawn (`propose_batch`)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from plbjax.anneal import uniform
from plbjax.sf._encoding import Problem
from plbjax.sf._model.compound_moves import propose_compound
from plbjax.sf._model.moves import Move, propose_exchange, propose_move, propose_swap
from plbjax.sf._model.search_scope import Search

KINDS = (propose_move, propose_swap, propose_exchange, propose_compound)


def shares(swap: float, exchange: float, compound: float = 0.0) -> tuple[float, ...]:
    """The probability of each of `KINDS` (replica moves take what the others leave; exchanges and
    compound moves, which move more replicas, no more than swaps leave: SwapPrimaryProbability 1
    searches swaps only)."""
    exchange = min(exchange, 1.0 - swap)
    compound = min(compound, 1.0 - swap - exchange)
    return (max(1.0 - swap - exchange - compound, 0.0), swap, exchange, compound)


def propose(search: Search, node_of, primary_of, loads, words, mix: tuple[float, ...]) -> Move:
    """One random move from `DRAWS` random words, of kind k with probability `mix[k]` (word 4 draws
    it; a kind this phase cannot draw gives way to the first that it can)."""
    scope = search.scope
    kinds = [(kind, p) for kind, p in zip(KINDS, mix) if p > 0]
    edges = np.cumsum([p for _, p in kinds])[:-1] / sum(p for _, p in kinds)
    choice = jnp.sum(uniform(words[4]) >= jnp.asarray(edges, jnp.float32))
    can = jnp.stack([scope.n_swappable > 0 if kind is propose_swap else scope.n_movable > 0 for kind, _ in kinds])
    choice = jnp.where(can[choice], choice, jnp.argmax(can))
    drawn = [kind(search, node_of, primary_of, loads, words) for kind, _ in kinds]
    return jax.tree.map(lambda *xs: jnp.stack(xs)[choice], *drawn)


def _slots(tries: int, mix: tuple[float, ...]) -> tuple[tuple[float, ...], np.ndarray]:
    """How a step's proposals are drawn: the kind shares of slot 0 and the kind of slots 1..tries-1.
    Those hold floor(tries x share) swaps and exchanges, interleaved evenly (a golden-ratio sequence,
    as earlier slots come first when accepted moves compete: `annealer.step`); slot 0 is a swap with
    the remaining chance, so swaps keep their expected share (and slot 0, the temperature probe,
    the mixture it always had)."""
    if tries == 1:
        return mix, np.zeros(0, int)
    counts = np.floor(np.array(mix[1:]) * tries).astype(int)
    counts = np.minimum(counts, np.maximum(tries - 1 - np.cumsum(counts) + counts, 0))
    swap = min(mix[1] * tries - counts[0], 1.0)
    shares = np.array([tries - 1 - counts.sum(), *counts], float)
    position = (np.arange(1, tries) * 0.6180339887498949) % 1.0
    kinds = np.searchsorted(np.cumsum(shares) / shares.sum(), position, side="right")
    return (1.0 - swap, swap) + (0.0,) * (len(mix) - 2), np.minimum(kinds, len(mix) - 1)


def two_services(problem: Problem, kind) -> bool:
    """Whether moves of `kind` (None: any) may change two services' loads (static)."""
    return kind in (None, propose_exchange) or (kind in (propose_move, propose_swap) and problem.features.affinity)


def propose_batch(search: Search, node_of, primary_of, loads, words, mix: tuple[float, ...]):
    """One move per row of `words` [T, DRAWS], kinds in `mix` shares (`_slots`): one proposal is
    exactly `propose`; of more, the first may be a move or a swap, the others are of a fixed kind each.
    A proposal that may be of any kind costs them all; these cost one. Returns the moves by kind, as
    [(kind or None, batched Move)], and the order that puts their concatenation back in row order."""
    first_mix, kind_of = _slots(words.shape[0], mix)
    first = jax.tree.map(lambda x: x[None], propose(search, node_of, primary_of, loads, words[0], first_mix))
    parts: list[tuple[Callable | None, Move]] = [(None, first)]
    slots = [np.zeros(1, int)]
    for k, kind in enumerate(KINDS):
        rows = 1 + np.flatnonzero(kind_of == k)
        if rows.size:
            parts.append(
                (
                    kind,
                    jax.vmap(kind, in_axes=(None, None, None, None, 0))(
                        search, node_of, primary_of, loads, words[rows]
                    ),
                )
            )
            slots.append(rows)
    return parts, np.argsort(np.concatenate(slots))
