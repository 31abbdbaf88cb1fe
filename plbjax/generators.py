"""One interface for the problems' instance generators, after Jumanji's `Generator`: a callable that
turns a seed and a spec (the instance's shape) into an instance, the same for the same seed.

`plbjax.sf.generate` (ClusterSpec -> state document) and `plbjax.roadef._generator.generate`
(InstanceSpec -> (Instance, original assignment)) are generators.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

SpecT = TypeVar("SpecT", contravariant=True)
InstanceT = TypeVar("InstanceT", covariant=True)


class Generator(Protocol[SpecT, InstanceT]):
    """seed, spec -> instance, deterministic in both."""

    def __call__(self, seed: int, spec: SpecT) -> InstanceT: ...
