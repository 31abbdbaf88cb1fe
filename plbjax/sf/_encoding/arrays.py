"""Padded arrays: sizes rounded up to buckets (so clusters of similar size reuse one compiled
search), padding, and putting host arrays on the device."""

from __future__ import annotations

import math

import jax
import numpy as np

# The smallest padded size of each dimension (named as in Problem; D: fault or upgrade domain ids),
# None: exact. Small clusters share one shape, so a batch of them (or a test suite) compiles a few
# searches, not one per cluster.
FLOORS: dict[str, int | None] = {"N": 16, "R": 16, "P": 8, "M": 4, "S": 4, "K": 4, "Kc": 8, "Ms": 4, "C": 4, "D": 16}


def padded(dim: str, n: int) -> int:
    """The padded size of dimension `dim` (a key of `FLOORS`) holding `n`."""
    floor = FLOORS[dim]
    return max(int(n), 1) if floor is None else bucket(n, floor)


def bucket(n: int, minimum: int = 1) -> int:
    """Round n up to a power of two up to 8, then to one of four sizes per octave (10, 12, 14, 16, 20...)."""
    n = max(int(n), minimum, 1)
    if n <= 8:
        return 1 << (n - 1).bit_length()
    e = math.floor(math.log2(n)) - 3
    return next(m << e for m in (8, 10, 12, 14, 16) if m << e >= n)


def on_device(value, dtype=None) -> jax.Array:
    """`value` on the device, as `jnp.asarray` puts it, but without compiling a conversion program
    for every new shape (about 10 ms each, every process)."""
    if isinstance(value, jax.Array):
        return value if dtype is None else value.astype(dtype)
    return jax.device_put(np.asarray(value, dtype))


def pad(a: np.ndarray, shape: tuple[int, ...], fill) -> np.ndarray:
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out
