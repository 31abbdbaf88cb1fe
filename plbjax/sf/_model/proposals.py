"""A step's proposals: the kinds' shares (`shares`), and a step's worth, evaluated, with each kind
computed only where it is drawn and traced once (`propose_batch`)."""

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


def _first_choice(search: Search, word, mix: tuple[float, ...]) -> jax.Array:
    """Which of the kinds `mix` gives a share (in `KINDS` order) a proposal is, from one random word,
    with probability `mix[k]` for kind k (a kind this phase cannot draw gives way to the first that it can)."""
    scope = search.scope
    kinds = [(kind, p) for kind, p in zip(KINDS, mix) if p > 0]
    edges = np.cumsum([p for _, p in kinds])[:-1] / sum(p for _, p in kinds)
    choice = jnp.sum(uniform(word) >= jnp.asarray(edges, jnp.float32))
    can = jnp.stack([scope.n_swappable > 0 if kind is propose_swap else scope.n_movable > 0 for kind, _ in kinds])
    return jnp.where(can[choice], choice, jnp.argmax(can))


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
    """Whether moves of `kind` may change two services' loads (static)."""
    return kind is propose_exchange or (kind in (propose_move, propose_swap) and problem.features.affinity)


def propose_batch(search: Search, node_of, primary_of, loads, words, mix: tuple[float, ...], evaluate: Callable):
    """One move per row of `words` [T, DRAWS], kinds in `mix` shares (`_slots`), evaluated: one
    proposal is of kind k with probability `mix[k]`; of more, the first may be a move or a swap,
    the others are of a fixed kind each. `evaluate(paired, moves)` -> (moves, energies, changes) of
    a batch of moves (`paired`: static, `two_services`); returns its result for every row, in row
    order.

    Each kind is traced once, and the kinds that evaluate alike as one batch: of more than one
    proposal, the first row's candidate of each kind it may be rides along as an extra row of that
    kind's batch, and the first row is chosen among its evaluated candidates (one evaluation more
    per step, no copy of the program); one proposal is drawn of every kind and evaluated once."""
    first_mix, kind_of = _slots(words.shape[0], mix)
    choice = _first_choice(search, words[0, 4], first_mix)
    if words.shape[0] == 1:
        drawn = [kind(search, node_of, primary_of, loads, words[0]) for kind, p in zip(KINDS, first_mix) if p > 0]
        return evaluate(True, _take(_select(choice, drawn), None))
    groups: dict[bool, list[tuple[int, Move, np.ndarray]]] = {}
    for k, kind in enumerate(KINDS):
        rows = 1 + np.flatnonzero(kind_of == k)
        taken = np.concatenate([rows, [0]]) if first_mix[k] > 0 else rows
        if taken.size:
            batched = jax.vmap(kind, in_axes=(None, None, None, None, 0))
            moves = batched(search, node_of, primary_of, loads, words[taken])
            groups.setdefault(two_services(search.cluster, kind), []).append((k, moves, rows))
    evaluated, position, candidates = [], np.zeros(words.shape[0], int), []
    at = 0  # rows of the evaluated batches so far
    for paired, group in groups.items():
        evaluated.append(evaluate(paired, _joined([moves for _, moves, _ in group])))
        for k, _, rows in group:
            position[rows] = at + np.arange(rows.size)
            at += rows.size
            if first_mix[k] > 0:
                candidates.append((k, at))
                at += 1
    firsts = jnp.asarray([place for _, place in sorted(candidates)])
    index = jnp.asarray(position).at[0].set(firsts[choice])  # every row's place, the first row's chosen
    return jax.tree.map(lambda x: x[index], _joined(evaluated))


def _joined(trees: list):
    """The trees' leaves concatenated on their first axis."""
    return trees[0] if len(trees) == 1 else jax.tree.map(lambda *xs: jnp.concatenate(xs), *trees)


def _select(choice: jax.Array, trees: list):
    """The tree of `trees` at index `choice` (traced)."""
    return jax.tree.map(lambda *xs: jax.lax.select_n(choice, *xs), *trees)


def _take(tree, index):
    """Every leaf of `tree` indexed by `index` on its first axis (None: a new first axis)."""
    return jax.tree.map(lambda x: x[index], tree)
