"""SF's per-replica fault-domain rules (plbjax/sf/_phases/domain_replicas.py) on SF's own layouts:
which replica its constraint check picks to leave, where it lets a new replica go."""

from __future__ import annotations

from sf_affinity_cases import document, fu, node, stateful

from plbjax.sf import parse_state
from plbjax.sf._encoding import Index, encode
from plbjax.sf._phases.domain_replicas import Domains, HostDomains, invalid_replicas, valid_target


def _encoded(layout: list[str], replicas: str, **extra) -> tuple[Domains, Index]:
    """The fault domains of partition 0 (one service of SF's target) and the index."""
    nodes = [node(i, fd) for i, fd in enumerate(layout)]
    target = len(replicas.split(","))
    problem, index = encode(parse_state(document([stateful("S", target)], [fu("S", 0, replicas)], nodes, **extra)))
    domains = HostDomains.of(problem).domains(0, 0)
    assert domains is not None
    return domains, index


def test_a_replica_in_a_domain_without_a_usable_node_is_the_one_to_leave():
    """ConstraintCheckFaultDomainShouldRun's layout: dc1 holds four of five replicas, N2's rack has
    no node the type may use: its replica is the only one picked (GetInvalidReplicas)."""
    layout = ["dc0/r1", "dc1/r1", "dc1/r2", "dc1/r3", "dc1/r4", "dc0/r2"]
    block = [{"NodeName": "N2", "ServiceTypeName": "TestType"}]
    domains, index = _encoded(layout, "P/0, S/1, S/2, S/3, S/4", BlockList=block)
    rows = index.partition_rows[0]
    picked = invalid_replicas(domains, [(r, int(index.initial_node[r])) for r in rows])
    assert picked == {rows[2]}


def test_without_the_block_list_any_replica_of_the_crowded_domain_may_leave():
    layout = ["dc0/r1", "dc1/r1", "dc1/r2", "dc1/r3", "dc1/r4", "dc0/r2"]
    domains, index = _encoded(layout, "P/0, S/1, S/2, S/3, S/4")
    rows = index.partition_rows[0]
    picked = invalid_replicas(domains, [(r, int(index.initial_node[r])) for r in rows])
    assert picked == set(rows[1:])


def test_a_new_replica_goes_only_below_the_floor_when_a_domain_is_under_it():
    """PlacementWithNewReplicaToUnderloadedDomainTest's layout: replicas on N0, N1 (fd:/0) and N2
    (fd:/1); fd:/2 has none. Only fd:/2 (N4, N5) takes a new replica (IsValidDomain)."""
    domains, _ = _encoded(["0", "0", "1", "1", "2", "2"], "P/0, S/1, S/2")
    assert [valid_target(domains, [0, 1, 2], target) for target in range(6)] == [False] * 4 + [True] * 2


def test_an_even_spread_takes_a_new_replica_in_any_domain_at_the_floor():
    domains, _ = _encoded(["0", "0", "1", "1", "2", "2"], "P/0, S/2, S/4")
    assert all(valid_target(domains, [0, 2, 4], target) for target in (1, 3, 5))
