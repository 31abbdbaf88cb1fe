"""The challenge's instance and solution files (whitespace-separated integers) as NumPy arrays.

Model file: resources (transient flag, load-cost weight), machines (neighborhood, location,
capacities, safety capacities, machine-move costs to every machine), services (spread minimum,
services depended on), processes (service, requirements, process-move cost), balance objectives
(two resources, target, weight), and the weights of the three move costs. A solution is one machine
per process.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from plbjax.errors import BadInput


@dataclasses.dataclass(frozen=True)
class Instance:
    transient: np.ndarray  # [R] bool
    load_weight: np.ndarray  # [R]
    neighborhood: np.ndarray  # [M]
    location: np.ndarray  # [M]
    capacity: np.ndarray  # [M, R]
    safety: np.ndarray  # [M, R] safety capacity
    machine_move_cost: np.ndarray  # [M, M] from (row) to (column)
    spread_min: np.ndarray  # [S]
    dependencies: np.ndarray  # [D, 2] (service, service it depends on)
    service: np.ndarray  # [P]
    requirement: np.ndarray  # [P, R]
    process_move_cost: np.ndarray  # [P]
    balance: np.ndarray  # [B, 4] (resource 1, resource 2, target, weight)
    weight_process_move: int
    weight_service_move: int
    weight_machine_move: int

    @property
    def shape(self) -> dict[str, int]:
        return dict(
            resources=len(self.transient),
            machines=len(self.location),
            services=len(self.spread_min),
            processes=len(self.service),
            balances=len(self.balance),
        )


class _Tokens:
    """The file's integers, read in order with the name of what is being read for error messages."""

    def __init__(self, path: Path):
        try:
            words = Path(path).read_text().split()
        except OSError as e:
            raise BadInput(f"{path}: cannot read ({e.strerror})") from None
        self.path, self.words, self.at = path, words, 0

    def take(self, n: int, what: str, low: int | None = 0, high: int | None = None) -> np.ndarray:
        if self.at + n > len(self.words):
            raise BadInput(f"{self.path}: ends early, reading {what}")
        try:
            values = np.array([int(w) for w in self.words[self.at : self.at + n]], dtype=np.int64)
        except ValueError:
            bad = next(w for w in self.words[self.at : self.at + n] if not w.lstrip("-").isdigit())
            raise BadInput(f"{self.path}: {what}: {bad!r} is not an integer") from None
        if n and low is not None and values.min() < low:
            raise BadInput(f"{self.path}: {what}: {values.min()} is below {low}")
        if n and high is not None and values.max() > high:
            raise BadInput(f"{self.path}: {what}: {values.max()} is above {high}")
        self.at += n
        return values

    def one(self, what: str, low: int | None = 0, high: int | None = None) -> int:
        return int(self.take(1, what, low, high)[0])

    def done(self):
        if self.at != len(self.words):
            raise BadInput(f"{self.path}: {len(self.words) - self.at} unexpected values after the last field")


def read_instance(path: str | Path) -> Instance:
    """Parse a model file; BadInput names the field that is wrong."""
    t = _Tokens(Path(path))
    r = t.one("number of resources", 1)
    res = t.take(2 * r, "resources").reshape(r, 2)
    if res[:, 0].max() > 1:
        raise BadInput(f"{path}: resources: transient flag must be 0 or 1")
    m = t.one("number of machines", 1)
    rows = t.take(m * (2 + 2 * r + m), "machines").reshape(m, 2 + 2 * r + m)
    s = t.one("number of services", 1)
    spread_min, deps = np.zeros(s, np.int64), []
    for i in range(s):
        spread_min[i] = t.one(f"service {i} spreadMin")
        k = t.one(f"service {i} dependency count", 0, s)
        deps += [(i, int(d)) for d in t.take(k, f"service {i} dependencies", 0, s - 1)]
    p = t.one("number of processes", 1)
    procs = t.take(p * (2 + r), "processes").reshape(p, 2 + r)
    if procs[:, 0].max() >= s:
        raise BadInput(
            f"{path}: process {int(np.argmax(procs[:, 0] >= s))} service: {procs[:, 0].max()} "
            f"is not a service (there are {s})"
        )
    b = t.one("number of balance objectives")
    balance = t.take(4 * b, "balance objectives").reshape(b, 4)
    if b and balance[:, :2].max() >= r:
        raise BadInput(f"{path}: balance objectives: resource {balance[:, :2].max()} does not exist")
    weights = t.take(3, "move-cost weights")
    t.done()
    return Instance(
        transient=res[:, 0].astype(bool),
        load_weight=res[:, 1],
        neighborhood=rows[:, 0],
        location=rows[:, 1],
        capacity=rows[:, 2 : 2 + r],
        safety=rows[:, 2 + r : 2 + 2 * r],
        machine_move_cost=rows[:, 2 + 2 * r :],
        spread_min=spread_min,
        dependencies=np.array(deps, np.int64).reshape(-1, 2),
        service=procs[:, 0],
        requirement=procs[:, 1 : 1 + r],
        process_move_cost=procs[:, 1 + r],
        balance=balance,
        weight_process_move=int(weights[0]),
        weight_service_move=int(weights[1]),
        weight_machine_move=int(weights[2]),
    )


def read_solution(path: str | Path, instance: Instance) -> np.ndarray:
    """[P] machine per process from an assignment or solution file."""
    t = _Tokens(Path(path))
    p, m = len(instance.service), len(instance.location)
    solution = t.take(p, f"machine of each of the {p} processes", 0, m - 1)
    t.done()
    return solution


def write_solution(path: str | Path, solution: np.ndarray) -> None:
    """Write a solution atomically (a reader never sees a half-written file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(" ".join(str(int(x)) for x in solution) + "\n")
    tmp.replace(path)
