"""Each partition of a plan (and of its state) found in the cluster by its service and id.

A plan names a partition by the pair (ServiceName, PartitionId); SF names it by its id alone
(`/Partitions/{id}`), unique in the cluster. Two services of a state document may give the same id
(examples/small.yaml gives PartitionId 0 to fabric:/Shop/Orders and to fabric:/Shop/Sessions), and a
cluster made from such a document serves the later one under another id. So the apply reads each
service's partitions (SF's Get Partition Info List, every page) and takes, for each pair, the
service's partition with that id (without regard to case, as SF reads GUIDs), else the one with the
id derived from the pair (the simulator's rule for a reused id: UUID 5 of 'SERVICE/ID' in the URL
namespace), else the plan's own id (the preflight then finds it missing).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

from plbjax.sf import Action, NodeStatus
from plbjax.sf.live.rest import Cluster, HttpError, items, service_id

Key = tuple[str, str]  # (ServiceName, PartitionId as text)


def key(service: str, partition: object) -> Key:
    return service, str(partition)


def derived(service: str, partition: object) -> str:
    """The id a cluster made from a state document gives a partition whose id an earlier service has."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{service}/{partition}"))


def service_partitions(cluster: Cluster, service: str) -> list[str] | None:
    """The ids of the service's partitions (every page of Get Partition Info List); None where the
    cluster has no such service."""
    try:
        pages = cluster.client.pages(f"/Services/{quote(service_id(service), safe='~')}/$/GetPartitions", "6.0")
    except HttpError as exc:
        if exc.status in (400, 404) or exc.code == "FABRIC_E_SERVICE_DOES_NOT_EXIST":
            return None
        raise
    info = [i.get("PartitionInformation") for i in items(pages)]
    return [str(p["Id"]) for p in info if isinstance(p, dict) and p.get("Id") is not None]


def cluster_ids(cluster: Cluster, keys: Iterable[Key]) -> dict[Key, str]:
    """(service, id) -> the partition's id in the cluster (the plan's own id where none is found)."""
    keys = list(dict.fromkeys(keys))
    services = list(dict.fromkeys(s for s, _ in keys))
    with ThreadPoolExecutor(8) as pool:
        listed = dict(zip(services, pool.map(lambda s: service_partitions(cluster, s), services)))
    out = {}
    for service, pid in keys:
        known = {i.lower(): i for i in listed[service] or ()}
        out[service, pid] = known.get(pid.lower()) or known.get(derived(service, pid)) or pid
    return out


def located(actions: list[Action], ids: Mapping[Key, str]) -> list[Action]:
    """The actions with each partition's id as the cluster has it."""
    return [
        a
        if (pid := ids.get(key(a.service, a.partition), str(a.partition))) == str(a.partition)
        else dataclasses.replace(a, partition=pid)
        for a in actions
    ]


def state_bases(path: str) -> dict[Key, dict[str, str]]:
    """(service, partition) -> node -> role as the state has it (replicas on Down nodes hold nothing)."""
    from plbjax.sf import load_state

    state = load_state(path)
    down = {n.name for n in state.nodes if n.status is NodeStatus.DOWN}
    return {
        key(p.service, p.partition_id): {r.node: r.role for r in p.replicas if r.node and r.node not in down}
        for p in state.partitions
    }


def locate(
    cluster: Cluster | None, actions: list[Action], state: str | None
) -> tuple[list[Action], dict[str, dict[str, str]] | None]:
    """The plan's actions and the state's replicas (partition -> node -> role; None without a state),
    each partition named by its id in the cluster (without a cluster: the plan's ids)."""
    bases = state_bases(state) if state else None
    if cluster is None:
        return actions, None if bases is None else {pid: base for (_, pid), base in bases.items()}
    ids = cluster_ids(cluster, [key(a.service, a.partition) for a in actions] + list(bases or ()))
    where = None if bases is None else {ids[k]: base for k, base in bases.items()}
    return located(actions, ids), where
