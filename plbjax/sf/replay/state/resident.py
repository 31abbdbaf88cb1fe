"""The cluster as the Failover Manager has it during a replay: a typed `ClusterState` that events and
completed actions replace (never a document between rounds), its version, and what the loop derives
from it: the scheduler's settings and the probe's answers (once per version and set of frozen
partitions), where its partitions and replicas are (`places`), its History kept clean."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from plbjax.sf import ClusterState
from plbjax.sf._state import resolve_settings
from plbjax.sf.replay.scheduler.settings import Settings, read_settings, with_settings
from plbjax.sf.replay.state.places import Places
from plbjax.sf.replay.types import Needs, PartitionKey, Probe, Stopwatch

_NO_DOMAINS = {"FaultDomainConstraintPriority": -1, "UpgradeDomainConstraintPriority": -1}


@dataclass
class _Derived:
    """What was derived from the state at one version."""

    version: int
    settings: Settings | None = None
    needs: dict[frozenset[PartitionKey], Needs] = field(default_factory=dict)
    domains_only: dict[frozenset[PartitionKey], bool] = field(default_factory=dict)


class Resident:
    """The state the loop changes (events, completed actions, History) and its version, bumped by
    every change but History's; the probe is asked once per version and set of frozen partitions."""

    def __init__(self, state: ClusterState, probe: Probe, stopwatch: Stopwatch) -> None:
        self.state, self.version = state, 0
        self.places = Places.of(state.partitions)
        self.probe, self.stopwatch = probe, stopwatch
        self._derived = _Derived(-1)
        self._cleaned: tuple | None = None  # the (History, census, nodes) last cleaned
        self._imbalanced: frozenset | None = None  # the last probe's imbalanced (metric, node type); None: not probed

    def replace(self, state: ClusterState, touched: Iterable[int] | None = ()) -> None:
        """`state` replaces the held one: with the same partitions but at `touched` (loads reported,
        actions completed), or any other (`touched` None: an event read the cluster again)."""
        if touched is None:
            self.places = Places.of(state.partitions)
        else:
            self.places = self.places.after(self.state.partitions, state.partitions, touched)
        self.state = state

    def changed(self) -> None:
        """A change other than History's: what was derived is derived again."""
        self.version += 1

    def _now(self) -> _Derived:
        if self._derived.version != self.version:
            self._derived = _Derived(self.version)
        return self._derived

    def settings(self) -> Settings:
        derived = self._now()
        if derived.settings is None:
            derived.settings = read_settings(self.state)
        return derived.settings

    def needs(self, frozen: frozenset[PartitionKey]) -> Needs:
        """The probe's answer for the state (cached); History is cleared when a (metric, node type)
        becomes imbalanced, a new balancing trigger."""
        derived = self._now()
        if frozen not in derived.needs:
            needs = self.stopwatch.timed("probe", self.probe, self.state, frozen)
            if self._imbalanced is not None and needs.imbalanced - self._imbalanced and self.state.history:
                self.state = dataclasses.replace(self.state, history={})
            self._imbalanced = needs.imbalanced
            derived.needs[frozen] = needs
        return derived.needs[frozen]

    def domain_violations_only(self, frozen: frozenset[PartitionKey]) -> bool:
        """Whether every violation is a fault or upgrade domain one: none is left with both off."""
        derived = self._now()
        if frozen not in derived.domains_only:
            off = settings_view(self.state, _NO_DOMAINS)
            derived.domains_only[frozen] = self.stopwatch.timed("probe", self.probe, off, frozen).violations == 0
        return derived.domains_only[frozen]

    def existing(self) -> int:
        """How many replicas are placed (what the throttles' percentages are of)."""
        return self.places.census.placed

    def replace_history(self, history: Mapping[str, tuple[str, ...]]) -> None:
        """A plan's History replaces the state's."""
        self.state = dataclasses.replace(self.state, history={k: tuple(v) for k, v in history.items()})

    def forget_history(self, replicas: set[str]) -> None:
        """The History without the entries of `replicas` (`history.HistoryAge.expired`)."""
        kept = {k: v for k, v in self.state.history.items() if k not in replicas}
        self.state = dataclasses.replace(self.state, history=kept)

    def clean_history(self) -> None:
        """The History without entries of replicas and nodes the state no longer has."""
        state = self.state
        history = state.history
        if not history:
            return
        census = self.places.census
        seen = (history, census, state.nodes)
        if self._cleaned is not None and all(a is b for a, b in zip(self._cleaned, seen)):
            return
        replicas, nodes = census.ids, {n.name for n in state.nodes}
        if not (history.keys() <= replicas and all(history.values()) and set().union(*history.values()) <= nodes):
            cleaned = {k: tuple(n for n in v if n in nodes) for k, v in history.items() if k in replicas}
            self.state = state = dataclasses.replace(state, history={k: v for k, v in cleaned.items() if v})
        self._cleaned = (state.history, census, state.nodes)

    def partitions_of(self, metrics: set[str]) -> set[PartitionKey]:
        """The partitions of services with one of `metrics` (SF's SystemState::GetImbalancedFailoverUnits)."""
        state = self.state
        services = {s.name for s in state.services if {m.name for m in s.metrics} & metrics}
        return {key for name in services for key in _keys(state, self.places, name)}


def _keys(state: ClusterState, places: Places, service: str) -> Iterable[PartitionKey]:
    for k in places.of_service.get(service, ()):
        p = state.partitions[k]
        yield p.service, str(p.partition_id)


def settings_view(state: ClusterState, overrides: Mapping) -> ClusterState:
    """`state` with these settings replaced (the scheduler's view for the planner, the probe's with
    domains off), in its document's Settings too."""
    document = with_settings(state.document, overrides)
    return dataclasses.replace(state, settings=resolve_settings(document["Settings"]), document=document)
