"""What the cluster shows before and after a plan's action, read from SF's replica listings.

Service Fabric reports a stateful replica's ``ReplicaRole`` as ``Primary``, ``ActiveSecondary``,
``IdleSecondary``, ``None``, ``Unknown`` (or an auxiliary role) with a ``ReplicaStatus`` (``InBuild``,
``Ready``, ``Standby``, ``Down``, ``Dropped``); a stateless instance has no role (REST reference:
ReplicaRole, ReplicaStatus, StatefulServiceReplicaInfo, StatelessServiceInstanceInfo). SF never says
``Secondary``: plbjax's roles ``Primary`` / ``Secondary`` / ``Instance`` are a Ready ``Primary``, a
Ready ``ActiveSecondary`` and a Ready instance. A replica being built (``InBuild``, or an
``IdleSecondary``) holds room on its node but has no role yet, and so does an auxiliary replica
(which the state leaves out); a ``Down``, ``Dropped`` or ``Standby`` replica holds neither. Listings
are read as SF's REST API writes them (PascalCase) or as sfctl prints them (camelCase), keys and
words without regard to case.
"""

from __future__ import annotations

import dataclasses

# the vocabulary (a script's reader, which runs without plbjax, gets it as plain words: export.script)
from plbjax.sf import ActionKind, Role

SF_WORD = {role.value: role.sf() for role in Role}  # SF's word for a Ready replica's role
# end of the vocabulary

NONE = "-"  # an expectation that the node holds no replica of the partition
BUILDING = "InBuild"  # a replica being built: holds room, has no role yet
AUXILIARY = "Auxiliary"  # an auxiliary replica (SF 10+): holds room, outside plbjax's replica set
ROLES = {SF_WORD[r].lower(): r for r in (Role.PRIMARY, Role.SECONDARY)}  # SF's role words of a Ready replica
GONE = ("down", "dropped", "standby", "invalid")  # statuses of replicas that hold no room


@dataclasses.dataclass(frozen=True)
class Holding:
    """What a node holds of one partition: plbjax's role (or BUILDING), and SF's own words for it."""

    role: str
    sf_role: str
    status: str

    def __str__(self) -> str:
        return f"{self.sf_role or 'an instance'} ({self.status})"


def holdings(listing: object) -> dict[str, Holding]:
    """Node -> what it holds of the partition, from a Get Replica Info List answer (a paged list,
    its pages or its items) or sfctl's print of it; replicas that hold no room are left out."""
    out: dict[str, Holding] = {}
    for item in _items(listing):
        item = {str(k).lower(): v for k, v in item.items()}
        status = str(item.get("replicastatus") or "")
        if status.lower() in GONE or not item.get("nodename"):
            continue
        sf_role = str(item.get("replicarole") or "")
        if "auxiliary" in sf_role.lower():
            role = AUXILIARY
        elif status.lower() != "ready":
            role = BUILDING
        elif not sf_role:
            role = Role.INSTANCE
        else:
            role = ROLES.get(sf_role.lower(), BUILDING)
        node = str(item["nodename"])
        if node not in out or out[node].role == BUILDING:  # a Ready replica wins over one being built
            out[node] = Holding(role, sf_role, status)
    return out


def _items(listing: object) -> list[dict]:
    if isinstance(listing, dict):
        listing = next((v for k, v in listing.items() if str(k).lower() == "items"), [])
    if not isinstance(listing, list):
        return []
    if listing and all(isinstance(page, dict) and any(str(k).lower() == "items" for k in page) for page in listing):
        return [item for page in listing for item in _items(page)]
    return [item for item in listing if isinstance(item, dict)]


def before(kind: str, src: str | None, dst: str | None) -> dict[str | None, str]:
    """What the partition's nodes hold when an action of `kind` from `src` to `dst` may start (node ->
    role, NONE: no replica)."""
    if kind == ActionKind.SWAP_PRIMARY_SECONDARY:
        return {src: Role.PRIMARY, dst: Role.SECONDARY}
    if kind.startswith("Move"):
        return {src: _role(kind, "Move"), dst: NONE}
    if kind == ActionKind.PROMOTE_SECONDARY:
        return {dst: Role.SECONDARY}
    return {}  # the Failover Manager's adds and drops: whatever it finds


def after(kind: str, src: str | None, dst: str | None) -> dict[str | None, str]:
    """What the partition's nodes hold once an action of `kind` from `src` to `dst` is done (node ->
    role, NONE: no replica)."""
    if kind == ActionKind.SWAP_PRIMARY_SECONDARY:
        return {dst: Role.PRIMARY, src: Role.SECONDARY}
    if kind.startswith("Move"):
        return {dst: _role(kind, "Move"), src: NONE}
    if kind.startswith("Drop"):
        return {src: NONE}
    if kind == ActionKind.PROMOTE_SECONDARY:
        return {dst: Role.PRIMARY}
    return {dst: _role(kind, "Add")}


def _role(kind: str, verb: str) -> str:
    return kind.removeprefix(verb)


def mismatches(held: dict[str, Holding], expected: dict[str | None, str]) -> list[str]:
    """Each node whose holding is not the expected one, said in SF's words ([] when all match)."""
    out = []
    for node, role in expected.items():
        holding = held.get(node or "")
        if role == NONE and holding is not None:
            out.append(f"{node} still holds {holding}")
        elif role != NONE and (holding is None or holding.role != role):
            out.append(f"{node} holds {holding or 'no replica'}, not a Ready {said(role)}")
    return out


def said(role: str) -> str:
    """A Ready replica's role in SF's words (a secondary is an ActiveSecondary; an instance, Instance)."""
    return SF_WORD[role] if role == Role.SECONDARY else role
