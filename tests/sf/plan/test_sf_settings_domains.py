"""SF's FaultDomainEnabled and UpgradeDomainEnabled: false builds no domain structure
(BalanceCheckerCreator.cpp:61-62), so the domain constraint is off whatever its priority says."""

from __future__ import annotations

import pytest
from sf_cases import DEFAULT, document, fu, movements, run, sf_nodes

from plbjax.sf._state.settings import resolve_settings


@pytest.mark.parametrize(
    ("enabled", "priority"),
    [
        ("FaultDomainEnabled", "FaultDomainConstraintPriority"),
        ("UpgradeDomainEnabled", "UpgradeDomainConstraintPriority"),
    ],
)
def test_a_domain_kind_switched_off_has_its_constraint_off(enabled, priority):
    assert resolve_settings({enabled: "false", priority: 0})[priority] == -1
    assert resolve_settings({enabled: "true", priority: 0})[priority] == 0


def _crowded(**settings) -> dict:
    """Three stateful replicas, two in fault domain dc0 (N0, N1) of a five-domain cluster: a fault-domain
    violation the constraint check fixes with one move."""
    svc = {
        "ServiceName": "S",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": 3,
        "Metrics": [{"Name": "Load", "Weight": "High", "PrimaryDefaultLoad": 1, "SecondaryDefaultLoad": 1}],
    }
    return document(
        [svc],
        [fu("S", "p0", "P/0, S/1, S/2")],
        sf_nodes(5, [0, 0, 1, 2, 3]),
        None,
        False,
        Settings={"MaxPercentageToMove": 1} | settings,
    )


@pytest.mark.slow
def test_fault_domain_enabled_false_leaves_a_fault_domain_violation_alone():
    fixed, _ = run(_crowded(), DEFAULT)
    assert len(movements(fixed)) == 1 and movements(fixed)[0]["SourceNode"] in ("N0", "N1"), fixed["Actions"]
    kept, _ = run(_crowded(FaultDomainEnabled=False), DEFAULT)
    assert kept["Actions"] == []
