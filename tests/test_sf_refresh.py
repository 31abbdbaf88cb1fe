"""SF's PLB unit tests for issue 37 (items 2, 7, 8, 9), translated into the contract:

- local balancing domains: each service with two or more partitions is checked against
  LocalBalancingThreshold on its own loads (BalanceCheckerCreator::CreateLoadBalancingDomainEntries,
  LoadBalancingDomainEntry::RefreshIsBalanced);
- `refresh=True`: one SF refresh, the first of placement, constraint check and balancing that has
  work (PLBScheduler::RefreshAction); with PlaceChildWithoutParent false a child waits for its parent;
- new partitions as the Failover Manager builds them: secondaries only with a primary.
"""

from __future__ import annotations

from test_policies import document, movements, phase, run
from test_sf_fidelity import DEFAULT, _fu, _sf_nodes


def test_an_imbalanced_local_domain_triggers_balancing():
    """SF's BalancingWithImbalancedLocalDomains (PLBBalancing.Test.cpp:4744), following
    BalanceCheckerCreator::CreateLoadBalancingDomainEntries: two services of two one-replica
    partitions on two nodes with SF's default metrics, each service's primaries on one node. The
    cluster is balanced (two primaries a node); with LocalBalancingThreshold 1 each service's own
    domain is not: SF moves one primary of each service (0|1 move primary 0=>1, 2|3 1=>0)."""
    services = [{"ServiceName": f"S{k}", "ServiceKind": "Stateful", "TargetReplicaSetSize": 1} for k in (1, 2)]
    partitions = [_fu("S1", f"p{i}", "P/0") for i in (0, 1)] + [_fu("S2", f"p{i}", "P/1") for i in (2, 3)]
    doc = document(services, partitions, _sf_nodes(2), None, False, Settings={"LocalBalancingThreshold": 1.0})
    result, _ = run(doc, DEFAULT)
    moves = sorted((a["ServiceName"], a["SourceNode"], a["TargetNode"]) for a in movements(result))
    assert moves == [("S1", "N0", "N1"), ("S2", "N1", "N0")], result["Actions"]
    assert phase(result, "Balancing")["Ran"]
    entry = next(b for b in result["Balance"] if b["Metric"] == "PrimaryCount")
    assert entry["LocallyImbalanced"] == {"Before": ["S1", "S2"], "After": []} and not entry["IsBalancedBefore"]
    off, _ = run(dict(doc, Settings={}), DEFAULT)  # SF's default 0: local domains never trigger
    assert not movements(off) and not phase(off, "Balancing")["Ran"]
