"""The challenge's objective and hard constraints, computed exactly on the host (64-bit integers).

This is what `plbjax-roadef` reports and what decides whether a solution may be written; the search
itself uses the same terms incrementally (`roadef.search`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plbjax.roadef._instance import Instance


@dataclasses.dataclass(frozen=True)
class Costs:
    load: int
    balance: int
    process_move: int
    service_move: int
    machine_move: int

    @property
    def total(self) -> int:
        return self.load + self.balance + self.process_move + self.service_move + self.machine_move


def usage(instance: Instance, solution: np.ndarray) -> np.ndarray:
    """[M, R] resources used on each machine."""
    out = np.zeros_like(instance.capacity)
    np.add.at(out, solution, instance.requirement)
    return out


def load_terms(safety, load_weight, used, xp=np):
    """[...] weighted use above the safety capacity, per machine (summed over resources); `xp` is
    NumPy here and jax.numpy in the search."""
    return xp.sum(load_weight * xp.maximum(0, used - safety), axis=-1)


def balance_terms(capacity, balance_r1, balance_r2, target, weight, used, xp=np):
    """[...] weighted balance shortfall per machine: sum over objectives of
    weight * max(0, target * available(r1) - available(r2))."""
    free = capacity - used
    return xp.sum(weight * xp.maximum(0, target * free[..., balance_r1] - free[..., balance_r2]), axis=-1)


def costs(instance: Instance, original: np.ndarray, solution: np.ndarray) -> Costs:
    """The objective's five parts (weights applied)."""
    used = usage(instance, solution)
    moved = solution != original
    per_service = np.bincount(instance.service[moved], minlength=len(instance.spread_min))
    return Costs(
        load=int(load_terms(instance.safety, instance.load_weight, used).sum()),
        balance=int(balance_terms(instance.capacity, *instance.balance.T, used).sum()),  # pyright: ignore[reportCallIssue]
        process_move=instance.weight_process_move * int(instance.process_move_cost[moved].sum()),
        service_move=instance.weight_service_move * int(per_service.max(initial=0)),
        machine_move=instance.weight_machine_move * int(instance.machine_move_cost[original, solution].sum()),
    )


def violations(instance: Instance, original: np.ndarray, solution: np.ndarray) -> list[str]:
    """The hard constraints `solution` breaks, one line each (empty: feasible)."""
    out = []
    used = usage(instance, solution)
    moved = solution != original
    transient = np.zeros_like(used)
    np.add.at(transient, original[moved], instance.requirement[moved])
    used = used + np.where(instance.transient, transient, 0)
    for m, r in zip(*np.nonzero(used > instance.capacity)):
        out.append(f"capacity: machine {m} resource {r} uses {used[m, r]} of {instance.capacity[m, r]}")
    pairs = instance.service * len(instance.location) + solution
    for pair in np.unique(pairs[np.bincount(pairs)[pairs] > 1]):
        out.append(
            f"conflict: service {pair // len(instance.location)} has several processes on machine "
            f"{pair % len(instance.location)}"
        )
    n_services = len(instance.spread_min)
    pairs = np.unique(instance.service * (instance.location.max() + 1) + instance.location[solution])
    covered = np.bincount(pairs // (instance.location.max() + 1), minlength=n_services)
    for s in np.nonzero(covered < instance.spread_min)[0]:
        out.append(f"spread: service {s} covers {covered[s]} locations, needs {instance.spread_min[s]}")
    hoods = np.zeros((n_services, instance.neighborhood.max() + 1), bool)
    hoods[instance.service, instance.neighborhood[solution]] = True
    for s, d in instance.dependencies:
        missing = np.nonzero(hoods[s] & ~hoods[d])[0]
        if len(missing):
            out.append(f"dependency: service {s} is in neighborhood {missing[0]} without service {d}")
    return out
