"""SF's PLB unit tests on quorum-based replica distribution, translated into the contract with SF's
assertions (microsoft/service-fabric, src/prod/src/Reliability/LoadBalancing/*.Test.cpp; each test
names the one it mirrors). Under the quorum rule a fault or upgrade domain may hold up to
max(T - (T / 2 + 1), 1) of a partition's T replicas (one more when the domains could not take T
so), by the `QuorumBasedReplicaDistributionPer*` settings or where `QuorumBasedLogicAutoSwitch`
finds the even spread too strict for the nodes. The vocabulary is tests/sf_affinity_cases.py's.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from checker import document_with, placement_of, violations
from sf_affinity_cases import count, document, fu, node, refresh, shown, stateful, stateless

from plbjax.sf import parse_state
from plbjax.sf._encoding import encode
from plbjax.sf._model.constraints import domain_violations_of

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each

TEN = [(0, "dc0/rack0"), (1, "dc0/rack0"), (2, "dc0/rack1"), (3, "dc0/rack1"), (4, "dc1/rack0")]
TEN += [(5, "dc1/rack0"), (6, "dc1/rack0"), (7, "dc2/rack0"), (8, "dc2/rack0"), (9, "dc3/rack0")]
UDS = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3]


def _spread_services() -> tuple[list[dict], list[dict]]:
    """ConstraintCheckWithQuorumBasedDomainNoViolationsHelper's services and partitions, the quorum
    rule's own ones: five replicas two-two-one over the domains, four one per domain."""
    nonpacking = [{"Type": "RequireDomainDistribution"}]
    services = [
        stateful("Packing5", 5),
        stateful("NonPacking3", 3, PlacementPolicies=nonpacking),
        stateless("Packing3", 3),
        stateless("NonPacking4", 4, PlacementPolicies=nonpacking),
        stateful("Stateful4", 4),
        stateless("Stateless4", 4),
    ]
    partitions = [
        fu("Packing5", 0, "P/0, S/1, S/4, S/5, S/7"),
        fu("NonPacking3", 1, "P/0, S/4, S/7"),
        fu("Packing3", 2, "I/0, I/4, I/7"),
        fu("NonPacking4", 3, "I/0, I/4, I/7, I/9"),
        fu("Stateful4", 9, "P/0, S/4, S/7, S/9"),
        fu("Stateless4", 10, "I/0, I/4, I/7, I/9"),
    ]
    return services, partitions


@pytest.mark.parametrize("domains", ["fault", "upgrade", "both"])
def test_quorum_based_domains_without_a_violation_need_no_action(domains):
    """SF's ConstraintCheckQuorumBased{Fault,Upgrade,FaultAndUpgrade}DomainNoViolationToFixTest
    (PLBConstraintCheck.Test.cpp:2970-3044): ten nodes in domains of four, three, two and one; five
    replicas two-two-one are within the quorum rule (two per domain), though not the even spread.
    SF's nodes without a fault (upgrade) domain have one of their own here (the contract wants one)."""
    fault = domains in ("fault", "both")
    upgrade = domains in ("upgrade", "both")
    nodes = [node(i, fd if fault else None, str(UDS[i]) if upgrade else None) for i, fd in TEN]
    settings = {
        "QuorumBasedReplicaDistributionPerFaultDomains": fault,
        "QuorumBasedReplicaDistributionPerUpgradeDomains": upgrade,
        "LoadBalancingEnabled": False,  # SF's MinLoadBalancingInterval: TimeSpan::MaxValue
    }
    services, partitions = _spread_services()
    result = refresh(document(services, partitions, nodes, Settings=settings))
    assert result["Actions"] == [], shown(result)


def test_without_the_quorum_rule_the_same_spread_is_fixed():
    """The same cluster with the fault domains and no quorum setting (T 5 is not divisible by the
    four fault domains, so no automatic switch): the even spread rule moves the five-replica
    partition's replica out of a two-replica domain into dc3."""
    nodes = [node(i, fd, f"UD{i}") for i, fd in TEN]
    services, partitions = _spread_services()
    result = refresh(document(services, partitions, nodes, Settings={"LoadBalancingEnabled": False}))
    assert count(result, "0 move * 0|1|4|5=>9") == 1, shown(result)


def test_the_quorum_rule_switches_on_and_off_with_the_domains_a_service_may_use():
    """SF's QuorumLogicSwitchOnOffTest (PLBConstraintCheck.Test.cpp:7831): five instances over five
    third-level fault domains and five upgrade domains, nine nodes (no more than 5 x 5): the quorum
    rule holds by itself and two instances may share a domain. With Color == blue (SF: NodeType) the service
    has four upgrade domains, which five does not divide: the even spread holds and 8 => 5 fixes it."""
    layout = [("c0", "ud0"), ("c1", "ud1"), ("c2", "ud2"), ("c3", "ud3"), ("c4", "ud4")]
    layout += [("c0", "ud1"), ("c1", "ud2"), ("c2", "ud3"), ("c3", "ud4")]
    nodes = [
        node(i, f"dc0/r0/{c}", ud, PlacementProperties={"Color": "red" if i == 0 else "blue"})
        for i, (c, ud) in enumerate(layout)
    ]
    settings = {"LoadBalancingEnabled": False}
    replicas = fu("TestService", 0, "I/1, I/2, I/3, I/4, I/8")
    free = stateless("TestService", 5)
    assert refresh(document([free], [replicas], nodes, Settings=settings))["Actions"] == []
    blue = stateless("TestService", 5, PlacementConstraints="Color == blue")
    result = refresh(document([blue], [replicas], nodes, Settings=settings))
    assert count(result, "0 move instance 8=>5") == 1 and len(result["Actions"]) == 1, shown(result)


@pytest.mark.parametrize("domains", ["fault", "upgrade"])
def test_quorum_based_balancing_moves_onto_a_sixth_node(domains):
    """SF's BalancingWithQuorumBasedSfrpCase{Fd,Ud}WithSixthNodeTest (PLBBalancing.Test.cpp:747, 793):
    five nodes in five domains, a sixth in dc0 (or upgrade domain 0), six five-replica partitions on
    the first five: under the quorum rule a domain may hold two, and balancing fills the sixth node
    (one primary, more than two secondaries, more than one of them from nodes 2-4)."""
    nodes = [node(i, f"dc{i}", str(i)) for i in range(5)]
    nodes.append(node(5, "dc0", "1") if domains == "fault" else node(5, "dc1", "0"))
    settings = {"QuorumBasedReplicaDistributionPerFaultDomains": True}
    settings["QuorumBasedReplicaDistributionPerUpgradeDomains"] = True
    partitions = []
    for i in range(6):
        roles = ", ".join(("P" if k == i % 5 else "S") + f"/{k}" for k in range(5))
        partitions.append(fu("S", i, roles))
    result = refresh(document([stateful("S", 5)], partitions, nodes, Settings=settings))
    assert count(result, "* move primary *=>5") == 1, shown(result)
    assert count(result, "* move secondary *=>5") > 2, shown(result)
    assert count(result, "* move secondary 2|3|4=>5") > 1, shown(result)


def test_the_searchs_quorum_measure_agrees_with_the_independent_checker():
    """On 200 random placements of a five-replica partition over the ten nodes above, under the quorum
    rule by the settings (each on its own: the other domains keep the even spread), the search's
    fault- and upgrade-domain violations are zero exactly where tests/checker.py, SF's rules written
    again, finds none; both outcomes occur."""
    rng = np.random.default_rng(0)
    seen = set()
    for setting in ("QuorumBasedReplicaDistributionPerFaultDomains", "QuorumBasedReplicaDistributionPerUpgradeDomains"):
        nodes = [node(i, fd, str(UDS[i])) for i, fd in TEN]
        doc = document([stateful("S", 5)], [fu("S", 0, "P/0, S/1, S/4, S/5, S/7")], nodes, Settings={setting: True})
        state = parse_state(doc)
        problem, index = encode(state)
        assert sorted(np.asarray(problem.domain_quorum[0]).tolist()) == [0, 2]
        node_of = np.tile(np.asarray(index.initial_node), (100, 1))
        node_of[:, :5] = [rng.choice(10, 5, replace=False) for _ in range(100)]
        measured = np.asarray(jax.vmap(domain_violations_of, in_axes=(None, 0))(problem, node_of))[:, 0] > 0
        for k in range(100):
            found = violations(state, placement_of(document_with(state, index, node_of[k], index.initial_primary)))
            assert measured[k].tolist() == [bool(found["fault_domain"]), bool(found["upgrade_domain"])]
            seen.update((kind, bool(v)) for kind, v in zip("fu", measured[k]))
    assert len(seen) == 4
