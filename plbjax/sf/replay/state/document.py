"""The state document as the Failover Manager has it during a replay, its version, and what the loop
derives from it: the scheduler's settings and the probe's answers (once per version and set of
frozen partitions), the replicas it holds, its History kept clean."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from plbjax.sf._state import DEFAULT_METRICS
from plbjax.sf.replay.scheduler.settings import Settings, read_settings, with_settings
from plbjax.sf.replay.state.layout import Census, census_of
from plbjax.sf.replay.types import Needs, PartitionKey, Probe, Stopwatch, partition_key

_NO_DOMAINS = {"FaultDomainConstraintPriority": -1, "UpgradeDomainConstraintPriority": -1}


@dataclass
class _Derived:
    """What was derived from the document at one version."""

    version: int
    settings: Settings | None = None
    needs: dict[frozenset[PartitionKey], Needs] = field(default_factory=dict)
    domains_only: dict[frozenset[PartitionKey], bool] = field(default_factory=dict)


class StateDocument:
    """The document the loop changes (events, completed actions, History) and its version, bumped by
    every change but History's; the probe is asked once per version and set of frozen partitions."""

    def __init__(self, doc: dict, probe: Probe, stopwatch: Stopwatch) -> None:
        self.doc, self.version = doc, 0
        self.probe, self.stopwatch = probe, stopwatch
        self._derived = _Derived(-1)
        self._cleaned: tuple | None = None  # the (History, replicas' Census, Nodes) last cleaned
        self._imbalanced: frozenset | None = None  # the last probe's imbalanced (metric, node type); None: not probed

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
            derived.settings = read_settings(self.doc)
        return derived.settings

    def needs(self, frozen: frozenset[PartitionKey]) -> Needs:
        """The probe's answer for the document (cached); History is cleared when a (metric, node
        type) becomes imbalanced, a new balancing trigger."""
        derived = self._now()
        if frozen not in derived.needs:
            needs = self.stopwatch.timed("probe", self.probe, self.doc, frozen)
            if self._imbalanced is not None and needs.imbalanced - self._imbalanced and self.doc.get("History"):
                self.doc = {**self.doc, "History": {}}
            self._imbalanced = needs.imbalanced
            derived.needs[frozen] = needs
        return derived.needs[frozen]

    def domain_violations_only(self, frozen: frozenset[PartitionKey]) -> bool:
        """Whether every violation is a fault or upgrade domain one: none is left with both off."""
        derived = self._now()
        if frozen not in derived.domains_only:
            off = with_settings(self.doc, _NO_DOMAINS)
            derived.domains_only[frozen] = self.stopwatch.timed("probe", self.probe, off, frozen).violations == 0
        return derived.domains_only[frozen]

    def replicas(self) -> Census:
        """The replicas' ids and how many are placed (read once per Partitions list and kept while
        only loads change: `layout`; the loop replaces the list, never changes it)."""
        return census_of(self.doc["Partitions"])

    def existing(self) -> int:
        """How many replicas are placed (what the throttles' percentages are of)."""
        return self.replicas().placed

    def replace_history(self, history: Mapping[str, tuple[str, ...]]) -> None:
        """A plan's History replaces the document's."""
        self.doc = {**self.doc, "History": {k: list(v) for k, v in history.items()}}

    def forget_history(self, replicas: set[str]) -> None:
        """The document's History without the entries of `replicas` (`history.HistoryAge.expired`)."""
        history = self.doc.get("History") or {}
        self.doc = {**self.doc, "History": {k: v for k, v in history.items() if k not in replicas}}

    def clean_history(self) -> None:
        """The document's History without entries of replicas and nodes it no longer has."""
        doc = self.doc
        history = doc.get("History")
        if not history:
            return
        census = self.replicas()
        seen = (history, census, doc["Nodes"])
        if self._cleaned is not None and all(a is b for a, b in zip(self._cleaned, seen)):
            return
        replicas, nodes = census.ids, {n["NodeName"] for n in doc["Nodes"]}
        values = history.values()
        clean = history.keys() <= replicas and all(type(v) is list and v for v in values)
        if not (clean and set().union(*values) <= nodes):  # (most often nothing is dropped: checked at once)
            cleaned = {k: [n for n in v if n in nodes] for k, v in history.items() if k in replicas}
            cleaned = {k: v for k, v in cleaned.items() if v}
            if cleaned != history:
                self.doc = doc = {**doc, "History": cleaned}
        self._cleaned = (doc["History"], census, doc["Nodes"])

    def partitions_of(self, metrics: set[str]) -> set[PartitionKey]:
        """The partitions of services with one of `metrics` (SF's SystemState::GetImbalancedFailoverUnits)."""
        of_service = {
            s["ServiceName"]: {m["Name"] for m in s.get("Metrics") or []} or {m for m, _ in DEFAULT_METRICS}
            for s in self.doc["Services"]
        }
        return {partition_key(p) for p in self.doc["Partitions"] if of_service.get(p["ServiceName"], set()) & metrics}
