"""Random machine-reassignment instances with a feasible original assignment (for tests and scaling
benchmarks), and the writer of the challenge's model format."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plbjax.roadef.instance import Instance


def random_instance(seed: int, machines: int = 8, processes: int = 40, resources: int = 2, services: int = 10,
                    locations: int = 4, neighborhoods: int = 2, dependencies: int = 6,
                    scale: int = 100) -> tuple[Instance, np.ndarray]:
    """An instance whose services have processes // services processes each, and an original
    assignment that meets every hard constraint. `scale` multiplies capacities and requirements
    (large values take costs past 2^31)."""
    rng = np.random.default_rng(seed)
    per_service = processes // services
    service = np.repeat(np.arange(services), per_service)
    processes = len(service)
    requirement = rng.integers(1, 10, (processes, resources)) * scale
    capacity = np.full((machines, resources), int(requirement.sum(0).max() / machines / 0.7) + 10 * scale)
    capacity = capacity + rng.integers(0, 5, (machines, resources)) * scale
    location = np.arange(machines) % locations
    neighborhood = np.arange(machines) % neighborhoods
    original = np.full(processes, -1)
    used = np.zeros_like(capacity)
    for p in rng.permutation(processes):
        taken = original[service == service[p]]
        for m in rng.permutation(machines):
            if m not in taken and np.all(used[m] + requirement[p] <= capacity[m]):
                original[p], used[m] = m, used[m] + requirement[p]
                break
        else:
            raise ValueError("no room for a process: use fewer processes or more machines")
    covered = np.array([len(set(location[original[service == s]])) for s in range(services)])
    hoods = np.zeros((services, neighborhoods), bool)
    hoods[service, neighborhood[original]] = True
    pairs = rng.integers(0, services, (dependencies * 4, 2))
    kept = {(int(a), int(b)) for a, b in pairs if a != b and not np.any(hoods[a] & ~hoods[b])}
    mmc = rng.integers(0, 4, (machines, machines))
    np.fill_diagonal(mmc, 0)
    return Instance(
        transient=np.arange(resources) % 2 == 1, load_weight=rng.integers(1, 20, resources),
        neighborhood=neighborhood, location=location, capacity=capacity,
        safety=(capacity * rng.uniform(0.5, 0.9, capacity.shape)).astype(np.int64), machine_move_cost=mmc,
        spread_min=rng.integers(0, covered + 1), dependencies=np.array(sorted(kept)[:dependencies],
                                                                          np.int64).reshape(-1, 2),
        service=service, requirement=requirement, process_move_cost=rng.integers(0, 4, processes),
        balance=np.array([[0, resources - 1, 2, int(rng.integers(1, 20))]]), weight_process_move=1,
        weight_service_move=10, weight_machine_move=100), original


def write_instance(path: str | Path, instance: Instance) -> None:
    """Write `instance` in the challenge's model format."""
    rows: list = [[len(instance.transient)]]
    rows += [[int(t), w] for t, w in zip(instance.transient, instance.load_weight)]
    rows += [[len(instance.location)]]
    rows += [[h, loc, *c, *s, *mmc] for h, loc, c, s, mmc in zip(
        instance.neighborhood, instance.location, instance.capacity, instance.safety, instance.machine_move_cost)]
    rows += [[len(instance.spread_min)]]
    for s, spread in enumerate(instance.spread_min):
        deps = instance.dependencies[instance.dependencies[:, 0] == s, 1]
        rows.append([spread, len(deps), *deps])
    rows += [[len(instance.service)]]
    rows += [[s, *req, c] for s, req, c in zip(instance.service, instance.requirement, instance.process_move_cost)]
    rows += [[len(instance.balance)]] + [list(b) for b in instance.balance]
    rows += [[instance.weight_process_move, instance.weight_service_move, instance.weight_machine_move]]
    Path(path).write_text("\n".join(" ".join(str(int(x)) for x in row) for row in rows) + "\n")
