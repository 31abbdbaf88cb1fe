"""Plans on tiny clusters are optimal: an exact brute-force oracle (issue 21 point 9).

Random tiny clusters (tests/oracle.py: at most 4 nodes and 6 replicas, 1-2 metrics, capacities, node
buffers, fault/upgrade domains, move costs, placement constraints, defragmentation, affinity and
movement throttles) are planned through the public entry point; the oracle, which shares no code with
the engine, enumerates every placement the phase that runs may reach within the throttles and checks
that the plan's final state has no more violations than the best (constraint check), no actions
when nothing triggers balancing, and no higher SF energy than the best (balancing; ties allowed). It
also checks the plan's Score.Before against its own AvgStdDev.

The clusters share the engine's padded shape but for affinity (two compiled searches). The search is
a short parallel one (700 steps of 16 tries) so that 300 clusters fit the fast tier.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import Oracle, tiny_cluster

from plbjax import SearchConfig, parse_state, plan

pytestmark = pytest.mark.slow  # brute force over 300 tiny clusters

CONFIG = SearchConfig(chains=1, steps=700, seconds=None, block_steps=350, tries=16, parallel=True)
CLUSTERS = 300

# Plans the oracle finds not optimal with CONFIG on the engine of this writing: 16 of 300 (seeds 16,
# 117, 210, 228, 264, 296: the constraint check ends with more (hard, soft) violations than the best
# placement it may reach — a deep reshuffle, or a soft violation traded where none was needed; 30, 50,
# 152, 254, 289: balancing reaches the best AvgStdDev with one movement too many or a worse primary;
# 84, 86, 132, 162, 180: a lower-energy placement not found — a trade, a chain inside a partition whose
# replicas report their own loads, a far defragmentation optimum of negative score). All are local
# optima of this short search (8 chains refreshing every 100 steps solve 12 of an earlier 16). More
# of them fails the test; so does any plan that breaks a rule, moves without a trigger, or misreads
# the score, whatever the count.
MOST_MISSED = 16
WRONG = ("score", "apply", "the plan adds", "violations: the plan breaks", "needless moves")


def mismatches(seeds, config: SearchConfig = CONFIG) -> dict[int, str]:
    found = {}
    for seed in seeds:
        doc = tiny_cluster(seed)
        result = plan(parse_state(doc), config).document()
        oracle = Oracle(doc)
        before = float(oracle.avg_std_dev(oracle.node0[None], oracle.primary0[None])[0])
        if abs(before - result["Score"]["Before"]) > 1e-4 * max(1.0, abs(before)):
            found[seed] = f"score: the plan's Score.Before {result['Score']['Before']:.6f}, the oracle's {before:.6f}"
            continue
        message = oracle.expect(result["Actions"])
        if message:
            found[seed] = message
    return found


def test_the_oracle_reaches_the_input_and_counts_it():
    """The enumeration holds the input placement, and its counts agree with the input's."""
    for seed in range(20):
        oracle = Oracle(tiny_cluster(seed))
        nodes, prims = oracle.enumerate(np.ones(oracle.R, bool), np.ones(len(oracle.parts), bool), 10**6)
        here = np.all(nodes == oracle.node0, axis=1) & np.all(prims == oracle.primary0, axis=1)
        assert here.sum() == 1
        assert oracle.movements(oracle.node0[None], oracle.primary0[None])[0][0] == 0


def test_plans_on_tiny_clusters_are_optimal():
    found = mismatches(range(CLUSTERS))
    wrong = {seed: msg for seed, msg in found.items() if msg.startswith(WRONG)}
    assert not wrong, "\n".join(f"seed {s}: {m}" for s, m in sorted(wrong.items()))
    assert len(found) <= MOST_MISSED, "\n".join(f"seed {s}: {m}" for s, m in sorted(found.items()))
    if found:
        pytest.xfail(f"{len(found)} plans of {CLUSTERS} not optimal with the short search (seeds {sorted(found)})")


# The short search's misses (issue 33.5), planned with the default search: all but two are optimal.
SHORT_MISSES = (16, 30, 50, 84, 86, 117, 132, 152, 162, 180, 210, 228, 254, 264, 289, 296)
DEFAULT_MISSES = {
    # the constraint check ends with (3, 1) (hard, soft) violations where (1, 1) is reachable: the
    # fix moves a node's capacity excess onto another node on the way (r5 off the Blue node N0 onto
    # N2, then S0's second dc2 instance onto N1); SF's check, which ranks violations by priority
    # totals, may take that path: open (not a rule SF shares)
    296,
    # balancing: the optimum sends S0's r1 N2 -> N0 and r3 (own load 1) N3 -> N2; every path of single
    # moves passes a fault-domain violation (N0 and N3 share dc0) or two replicas on one node, which
    # SF's balancing moves never make either (Checker::MoveSolutionRandomly: no violation worse)
    162,
    # the constraint check ends with (1, 1) where (1, 0) is reachable by swapping S0's and S1's
    # primaries: since issue 37 item 4 the check swaps only in partitions whose primary is on a node
    # over capacity or in an affinity violation (SF's ConstraintCheckDomainAndCapacityViolationsTest
    # makes one move, no swap); this soft violation needs a swap outside that scope: open
    117,
    # balancing ends at the optimum's AvgStdDev and movements with one partition's primary on another of its
    # replicas, 0.09 % above the optimum's energy (-37.825 against -37.859): blocks of 1,000 steps
    # find it, the default 256 (issue 47: a block's length grows with the cluster) mostly not
    180,
}


def test_the_default_search_finds_what_the_short_search_misses():
    found = mismatches(SHORT_MISSES, SearchConfig(seconds=None))
    assert not any(msg.startswith(WRONG) for msg in found.values()), found
    assert set(found) <= DEFAULT_MISSES, "\n".join(f"seed {s}: {m}" for s, m in sorted(found.items()))
