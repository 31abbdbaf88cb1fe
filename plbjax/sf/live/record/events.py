"""SF's EventStore events, read at the door into typed records and mapped to the timeline's kinds.

Shapes: the models of azure-servicefabric (FabricEvent: Kind, EventInstanceId, TimeStamp; NodeEvent:
NodeName; NodeDeactivateStartedEvent: DeactivateIntent; Cluster/ApplicationUpgradeDomainCompletedEvent:
UpgradeDomains; ApplicationEvent: ApplicationId; ServiceEvent: ServiceId, the service's name with
``/`` as ``~`` and without ``fabric:/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from plbjax.errors import BadInput
from plbjax.sf import Intent
from plbjax.sf.live.reading.fields import Json
from plbjax.sf.live.utc import parse_utc


class Kind(StrEnum):
    """The timeline's event kinds an SF event becomes (docs/contract.md)."""

    NODE_DOWN = "NodeDown"
    NODE_UP = "NodeUp"
    NODE_ADDED = "NodeAdded"
    NODE_REMOVED = "NodeRemoved"
    NODE_DISABLED = "NodeDisabled"
    NODE_ENABLED = "NodeEnabled"
    UPGRADE_STARTED = "UpgradeStarted"
    UPGRADE_DOMAIN_COMPLETED = "UpgradeDomainCompleted"
    UPGRADE_COMPLETED = "UpgradeCompleted"
    SERVICE_CREATED = "ServiceCreated"
    SERVICE_DELETED = "ServiceDeleted"
    LOAD_REPORT = "LoadReport"


CARRIED = {  # SF's Kind -> the timeline's
    "NodeDown": Kind.NODE_DOWN,
    "NodeUp": Kind.NODE_UP,
    "NodeAddedToCluster": Kind.NODE_ADDED,
    "NodeRemovedFromCluster": Kind.NODE_REMOVED,
    "NodeDeactivateStarted": Kind.NODE_DISABLED,
    "ClusterUpgradeStarted": Kind.UPGRADE_STARTED,
    "ClusterUpgradeDomainCompleted": Kind.UPGRADE_DOMAIN_COMPLETED,
    "ClusterUpgradeCompleted": Kind.UPGRADE_COMPLETED,
    "ApplicationUpgradeStarted": Kind.UPGRADE_STARTED,
    "ApplicationUpgradeDomainCompleted": Kind.UPGRADE_DOMAIN_COMPLETED,
    "ApplicationUpgradeCompleted": Kind.UPGRADE_COMPLETED,
    "ServiceCreated": Kind.SERVICE_CREATED,
    "ServiceDeleted": Kind.SERVICE_DELETED,
}
WHY_NOT = {  # SF's Kinds the timeline leaves out on purpose, and why
    "NodeDeactivateCompleted": "its NodeDeactivateStarted carried the deactivation",
}


@dataclass(frozen=True)
class SfEvent:
    """One EventStore event: SF's Kind, its time (Unix seconds), id, where it was read, and its subject."""

    kind: str
    time: float
    instance: str
    where: str
    node: str = ""
    intent: Intent = Intent.PAUSE
    domain: str = ""
    application: str = ""
    service: str = ""

    @property
    def carried(self) -> Kind | None:
        return CARRIED.get(self.kind)


def read_event(item: object, where: str) -> SfEvent:
    """One event of an EventStore answer; BadInput naming `where` and the key."""
    if not isinstance(item, dict):
        raise BadInput(f"{where}: expected a JSON object")
    for key in ("Kind", "TimeStamp"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise BadInput(f"{where}.{key}: missing")
    try:
        moment = parse_utc(item["TimeStamp"])
    except ValueError:
        raise BadInput(f"{where}.TimeStamp: {item['TimeStamp']!r} is not an ISO 8601 time") from None
    kind = item["Kind"]
    subject = _subject(item, kind, where) if kind in CARRIED else {}
    return SfEvent(kind, moment, str(item.get("EventInstanceId") or f"{where}"), where, **subject)


def _subject(item: Json, kind: str, where: str) -> dict:
    """The fields of a carried event the timeline needs, each checked."""

    def need(key: str) -> str:
        value = item.get(key)
        if not isinstance(value, str) or not value:
            raise BadInput(f"{where}.{key}: missing")
        return value

    if kind.startswith("Node"):
        subject: dict = {"node": need("NodeName")}
        if kind == "NodeDeactivateStarted":
            intent = Intent.__members__.get(_upper(need("DeactivateIntent")))
            if intent is None:
                raise BadInput(f"{where}.DeactivateIntent: {item['DeactivateIntent']!r} is not an SF intent")
            subject["intent"] = intent
        return subject
    if kind.startswith("Application"):
        subject = {"application": "fabric:/" + need("ApplicationId").replace("~", "/")}
        return subject | ({"domain": need("UpgradeDomains")} if "Domain" in kind else {})
    if kind.startswith("Service"):
        return {"service": "fabric:/" + need("ServiceId").replace("~", "/")}
    return {"domain": need("UpgradeDomains")} if "Domain" in kind else {}


def _upper(word: str) -> str:
    """SF's intent word as the enum's member name: RemoveData -> REMOVE_DATA."""
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(word)).upper()
