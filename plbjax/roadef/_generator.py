"""Random machine-reassignment instances with a feasible original assignment (for tests and scaling
benchmarks): `generate(seed, InstanceSpec(...))`; and the writer of the challenge's model format."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plbjax.roadef._instance import Instance


@dataclass(frozen=True)
class InstanceSpec:
    """The shape of a random instance: services of processes // services processes each. `scale`
    multiplies capacities and requirements (large values take costs past 2^31)."""

    machines: int = 8
    processes: int = 40
    resources: int = 2
    services: int = 10
    locations: int = 4
    neighborhoods: int = 2
    dependencies: int = 6
    scale: int = 100


def generate(seed: int, spec: InstanceSpec) -> tuple[Instance, np.ndarray]:
    """An instance of shape `spec` and an original assignment that meets every hard constraint, the
    same for the same seed: a :class:`plbjax.generators.Generator`."""
    rng = np.random.default_rng(seed)
    service = np.repeat(np.arange(spec.services), spec.processes // spec.services)
    requirement = rng.integers(1, 10, (len(service), spec.resources)) * spec.scale
    capacity = np.full(
        (spec.machines, spec.resources), int(requirement.sum(0).max() / spec.machines / 0.7) + 10 * spec.scale
    )
    capacity = capacity + rng.integers(0, 5, (spec.machines, spec.resources)) * spec.scale
    location = np.arange(spec.machines) % spec.locations
    neighborhood = np.arange(spec.machines) % spec.neighborhoods
    original = _original_assignment(rng, service, requirement, capacity)
    covered = np.array([len(set(location[original[service == s]])) for s in range(spec.services)])
    dependencies = _dependencies(rng, spec, service, neighborhood[original])
    mmc = rng.integers(0, 4, (spec.machines, spec.machines))
    np.fill_diagonal(mmc, 0)
    return Instance(
        transient=np.arange(spec.resources) % 2 == 1,
        load_weight=rng.integers(1, 20, spec.resources),
        neighborhood=neighborhood,
        location=location,
        capacity=capacity,
        safety=(capacity * rng.uniform(0.5, 0.9, capacity.shape)).astype(np.int64),
        machine_move_cost=mmc,
        spread_min=rng.integers(0, covered + 1),
        dependencies=dependencies,
        service=service,
        requirement=requirement,
        process_move_cost=rng.integers(0, 4, len(service)),
        balance=np.array([[0, spec.resources - 1, 2, int(rng.integers(1, 20))]]),
        weight_process_move=1,
        weight_service_move=10,
        weight_machine_move=100,
    ), original


def _original_assignment(
    rng: np.random.Generator, service: np.ndarray, requirement: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Each process, in random order, on the first machine (in random order) with room for it that no
    other process of its service uses."""
    machines = len(capacity)
    original = np.full(len(service), -1)
    used = np.zeros_like(capacity)
    for p in rng.permutation(len(service)):
        taken = original[service == service[p]]
        for m in rng.permutation(machines):
            if m not in taken and np.all(used[m] + requirement[p] <= capacity[m]):
                original[p], used[m] = m, used[m] + requirement[p]
                break
        else:
            raise ValueError("no room for a process: use fewer processes or more machines")
    return original


def _dependencies(
    rng: np.random.Generator, spec: InstanceSpec, service: np.ndarray, neighborhood: np.ndarray
) -> np.ndarray:
    """[k, 2] random (service, service it depends on) pairs that the original assignment meets: the
    first service's neighborhoods are all among the second's. `neighborhood`: each process's."""
    hoods = np.zeros((spec.services, spec.neighborhoods), bool)
    hoods[service, neighborhood] = True
    pairs = rng.integers(0, spec.services, (spec.dependencies * 4, 2))
    kept = {(int(a), int(b)) for a, b in pairs if a != b and not np.any(hoods[a] & ~hoods[b])}
    return np.array(sorted(kept)[: spec.dependencies], np.int64).reshape(-1, 2)


def write_instance(path: str | Path, instance: Instance) -> None:
    """Write `instance` in the challenge's model format."""
    rows: list = [[len(instance.transient)]]
    rows += [[int(t), w] for t, w in zip(instance.transient, instance.load_weight)]
    rows += [[len(instance.location)]]
    rows += [
        [h, loc, *c, *s, *mmc]
        for h, loc, c, s, mmc in zip(
            instance.neighborhood, instance.location, instance.capacity, instance.safety, instance.machine_move_cost
        )
    ]
    rows += [[len(instance.spread_min)]]
    for s, spread in enumerate(instance.spread_min):
        deps = instance.dependencies[instance.dependencies[:, 0] == s, 1]
        rows.append([spread, len(deps), *deps])
    rows += [[len(instance.service)]]
    rows += [[s, *req, c] for s, req, c in zip(instance.service, instance.requirement, instance.process_move_cost)]
    rows += [[len(instance.balance)]] + [list(b) for b in instance.balance]
    rows += [[instance.weight_process_move, instance.weight_service_move, instance.weight_machine_move]]
    Path(path).write_text("\n".join(" ".join(str(int(x)) for x in row) for row in rows) + "\n")
