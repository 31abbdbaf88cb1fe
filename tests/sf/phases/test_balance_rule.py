"""SF's balancing trigger, as the contract reads it."""

import pytest

from plbjax.sf._phases.balance_rule import is_balanced


@pytest.mark.parametrize(
    "hi, lo, threshold, activity, balanced",
    [
        (5, 2, 3, 0, True),  # docs: ratio 2.5 under threshold 3
        (10, 2, 3, 0, False),  # docs: ratio 5 over threshold 3
        (1000, 100, 3, 1536, True),  # docs: over the ratio but no node above the activity threshold
        (2000, 100, 3, 1536, False),
        (300, 100, 2.5, 50, False),  # per-node-type example 1, node type A
        (700, 500, 1.4, 400, True),  # example 1, node type B (the consistent reading: 1.4)
        (600, 300, 2, 300, True),  # example 2, node type C: ratio 2 is not > 2 (strict)
        (900, 100, 10, 200, True),  # example 2, node type B
        (600, 100, 5, 700, True),  # example 2, node type A: max not above activity
        (4, 2, 2, 0, True),  # ratio equal to threshold: balanced
        (5, 2, 2, 0, False),
        (3, 2, 1, 0, True),  # gap of one load unit is balanced
        (1, 0, 1, 0, True),
        (5, 0, 10, 0, False),  # min 0 with a larger gap: imbalanced whatever the threshold
        (5, 3, 1, 0, False),  # threshold 1: any gap over one triggers
        (100, 0, 0, 0, True),  # threshold 0: never balance
        (100, 100, 1, 0, True),
        (50, 10, 2, 50, True),  # max equal to activity: not above it
    ],
)
def test_trigger(hi, lo, threshold, activity, balanced):
    assert is_balanced(hi, lo, threshold, activity) is balanced


def test_zero_weight_never_triggers():
    assert is_balanced(100, 0, 1, 0, weight=0.0)
