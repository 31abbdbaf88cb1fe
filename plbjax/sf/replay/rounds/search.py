"""How long a replay round searches: SF's balancing action and what changed since the last round.

SF's scheduler alternates balancing between QuickLoadBalancing (its search bounded by
FastBalancingSearchTimeout, 10 s) and LoadBalancing (SlowBalancingSearchTimeout, 120 s):
PLBActionRetryTimes quick rounds, then as many slow ones, and so on, back to quick once the system
is balanced (PLBScheduler::RefreshAction, PLBSchedulerAction::CanRetry). Its annealing runs rounds
of SimulatedAnnealingIterationsPerRound transitions, at most MaxSimulatedAnnealingIterations rounds
(-1: no limit) within the timeout (Searcher::SearchForBalancing, Searcher::SimulatedAnnealing).

A replay round starts from the placement the last round left, so a balancing round after a few
completed actions has far less to find than one after every partition reported new loads. The
rule (`ADAPTIVE`):

- placement, the constraint check and a slow balancing round search `search.steps`, today's fixed
  length (the replay's default: 2,000 steps in blocks of 500);
- a quick balancing round searches in proportion to the partitions whose loads or placement
  changed since the last balancing round: ceil(share x blocks) blocks of `search.block_steps`, at
  least one (the search's first block, a zero-temperature descent that also probes the
  temperature);
- caps, SF's: at most MaxSimulatedAnnealingIterations blocks when it is set; the round's SF timeout
  as the search's `seconds` (binding only on a machine too slow for the steps).

`search.*` still overrides: `search.steps` is the full length, `search.seconds` replaces the SF
timeout, and `FIXED` searches `search.steps` every round.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from plbjax.sf import Partition, Phase, SearchConfig
from plbjax.sf.replay.scheduler.settings import Settings
from plbjax.sf.replay.timeline.changes import Change, LoadReport
from plbjax.sf.replay.types import Effort, PartitionKey

ADAPTIVE, FIXED = "adaptive", "fixed"
QUICK, SLOW = "QuickLoadBalancing", "LoadBalancing"


def effort(phase: Phase, action: str, share: float, settings: Settings) -> Effort:
    """The effort of a round of `phase`; `action`: SF's balancing action (QUICK or SLOW)."""
    blocks = settings.max_annealing_rounds if settings.max_annealing_rounds > 0 else None
    if phase != Phase.BALANCING:
        return Effort(1.0, None, blocks)
    if action == SLOW:
        return Effort(1.0, settings.slow_balancing_timeout, blocks)
    return Effort(min(max(share, 0.0), 1.0), settings.fast_balancing_timeout, blocks)


def round_search(search: SearchConfig, effort: Effort) -> SearchConfig:
    """`search` (resolved: `steps` an int) fitted to `effort`: the steps in whole blocks, at least one;
    the SF timeout as `seconds` unless `search.seconds` is given."""
    seconds = search.seconds if search.seconds is not None else effort.seconds
    if not isinstance(search.steps, int):  # auto or none: the search's own length, SF's timeout
        return dataclasses.replace(search, seconds=seconds)
    block = search.block_steps
    blocks = max(1, math.ceil(math.ceil(search.steps / block) * effort.share - 1e-9))
    if effort.blocks is not None:
        blocks = min(blocks, effort.blocks)
    return dataclasses.replace(search, steps=min(search.steps, blocks * block), seconds=seconds)


class BalancingAction:
    """SF's balancingAction_: QUICK for PLBActionRetryTimes balancing rounds, then SLOW as many, and
    so on; QUICK again whenever balancing finds the system balanced."""

    def __init__(self) -> None:
        self.action, self.iteration = QUICK, 0

    def ran(self, retry_times: int) -> None:
        """A balancing round ran with the current action (SF's IncreaseIteration, then CanRetry)."""
        self.iteration += 1
        if self.iteration >= retry_times:
            self.action, self.iteration = (SLOW if self.action == QUICK else QUICK), 0

    def balanced(self) -> None:
        """Balancing found nothing imbalanced: the next round is quick (SF: IsBalanced)."""
        self.action, self.iteration = QUICK, 0


class Touched:
    """The partitions whose loads or placement changed since the last balancing round: those a
    LoadReport names (a report naming no partition: its service's), those an issued action moves;
    any other event changes everything (and so does the start)."""

    def __init__(self) -> None:
        self.keys: set[PartitionKey] = set()
        self.services: set[str] = set()
        self.everything = True

    def event(self, change: Change) -> None:
        """An event was applied."""
        if not isinstance(change, LoadReport):
            self.everything = True
        elif change.partition is not None:
            self.keys.add((change.service, str(change.partition)))
        else:
            self.services.add(change.service)

    def moved(self, key: PartitionKey) -> None:
        """An action was issued to partition `key`."""
        self.keys.add(key)

    def share(self, partitions: Sequence[Partition]) -> float:
        """The share of `partitions` (the resident state's) touched."""
        if self.everything or not partitions:
            return 1.0
        touched = sum(1 for p in partitions if p.service in self.services) if self.services else 0
        touched += sum(1 for service, _ in self.keys if service not in self.services)
        return min(touched / len(partitions), 1.0)

    def clear(self) -> None:
        """A balancing round has seen every change so far."""
        self.keys, self.services, self.everything = set(), set(), False
