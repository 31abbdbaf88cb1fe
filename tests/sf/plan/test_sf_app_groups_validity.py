"""Random clusters with SF's application groups: every plan keeps every hard rule that held, the
application groups' too, by the checker that shares no code with the engine (tests/validity.py:
`breaks`, `app_breaks`)."""

from __future__ import annotations

import pytest
from validity import app_breaks, breaks, random_cluster, with_applications

from plbjax import SearchConfig, parse_state, plan
from plbjax.anneal import clear_compiled

pytestmark = pytest.mark.slow  # searches on random clusters

CONFIGS = {
    "chains": SearchConfig(chains=4, steps=1000, seconds=None, block_steps=250, tries=1, parallel=False),
    "parallel": SearchConfig(chains=1, steps=200, seconds=None, block_steps=50, tries=64, parallel=True),
}
PER_FAMILY = 6  # random clusters a family: each is a plan, and the slow set keeps within CI's 30 minutes


@pytest.mark.parametrize("family", [0, 1])
def test_random_clusters_with_application_groups_break_no_hard_rule(family):
    clear_compiled()  # each family is a new shape
    config = CONFIGS["parallel" if family % 2 else "chains"]
    failures, limited = {}, 0
    for seed in range(family * PER_FAMILY, (family + 1) * PER_FAMILY):
        doc, predicates = random_cluster(seed, family)
        doc = with_applications(doc, predicates, seed)
        state = parse_state(doc)
        limited += any(a.limits for a in state.applications)
        result = plan(state, config).document()
        found = breaks(doc, predicates, result) + app_breaks(doc, predicates, result)
        if found:
            failures[seed] = found
    assert not failures, failures
    assert limited == PER_FAMILY
