"""Service Fabric's application groups (PLBAppGroups.Test.cpp), more of SF's own tests translated
with their assertions: reservations that keep a node's room, per-node application capacity,
MaximumNodes (the scaleout count) in placement and in the constraint check. SF's
CreateApplicationCapacities("M/total/perNode/reserved") is the application metric {Name: M,
TotalApplicationCapacity, MaximumCapacity, ReservationCapacity}; node i is `N{i}`; one refresh each."""

from __future__ import annotations

import pytest
from checker import checked_plan
from sf_cases import DEFAULT, document, fu

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _nodes(capacities: list[dict], down: tuple[int, ...] = ()) -> list[dict]:
    out = []
    for i, capacity in enumerate(capacities):
        node = {"NodeName": f"N{i}", "FaultDomain": f"fd:/dc{i}", "UpgradeDomain": f"UD{i}", "Capacities": capacity}
        if i in down:
            node["NodeStatus"] = "Down"
        out.append(node)
    return out


def _app(name: str, minimum: int, maximum: int, metrics: str = "") -> dict:
    """SF's CreateApplicationDescriptionWithCapacities(name, minimum, maximum, CreateApplicationCapacities(metrics))."""
    app = {"ApplicationName": f"fabric:/{name}", "MinimumNodes": minimum, "MaximumNodes": maximum, "Metrics": []}
    for spec in filter(None, metrics.split(",")):
        metric, total, node, reserved = spec.split("/")
        app["Metrics"].append(
            {
                "Name": metric,
                "TotalApplicationCapacity": float(total),
                "MaximumCapacity": float(node),
                "ReservationCapacity": float(reserved),
            }
        )
    return app


def _service(app: str | None, name: str, target: int, metrics: str = "") -> dict:
    """SF's CreateServiceDescriptionWithApplication(name, type, app, true, CreateMetrics(metrics))."""
    svc = {
        "ServiceName": f"fabric:/{app or 'Outside'}/{name}",
        "ServiceKind": "Stateful",
        "TargetReplicaSetSize": target,
    }
    if app:
        svc["ApplicationName"] = f"fabric:/{app}"
    if metrics:
        svc["Metrics"] = []
        for spec in metrics.split(","):
            metric, _, primary, secondary = spec.split("/")
            svc["Metrics"].append(
                {
                    "Name": metric,
                    "Weight": "High",
                    "PrimaryDefaultLoad": float(primary),
                    "SecondaryDefaultLoad": float(secondary),
                }
            )
    return svc


def _part(service: dict, pid: str, replicas: str = "") -> dict:
    if not replicas:
        return {"ServiceName": service["ServiceName"], "PartitionId": pid, "Replicas": []}
    return fu(service["ServiceName"], pid, replicas)


def _refresh(node_list, apps, services, parts, **extra) -> list[tuple[str, str, str | None, str | None]]:
    """One SF refresh: (partition, action, source, target) of each action."""
    doc = document(services, parts, node_list, None, False, Applications=apps, **extra)
    result, _, _ = checked_plan(doc, DEFAULT, refresh=True)
    return sorted((a["PartitionId"], a["Action"], a["SourceNode"], a["TargetNode"]) for a in result["Actions"])


def test_a_reservation_keeps_a_new_replica_off_a_node_without_room_for_it():
    """SF's AppGroupsPlacementWithReservation: N0 and N1 of CPU 100, N1 loaded 10 by a service outside
    the application; the application reserves 100 a node (MinimumNodes 0); its new replica (load 10)
    fits only N0: "1 add primary 0". An application with a metric no service has changes nothing."""
    app = _service("App", "ApplicationService", 1, "CPU/1.0/10/10")
    outside = _service(None, "OutsideService", 1, "CPU/1.0/10/10")
    apps = [_app("App", 0, 2, "CPU/1000/500/100"), _app("Irrelevant", 0, 2, "IrrelevantCPU/1000/500/100")]
    actions = _refresh(_nodes([{"CPU": 100}] * 2), apps, [app, outside], [_part(outside, "0", "P/1"), _part(app, "1")])
    assert actions == [("1", "AddPrimary", None, "N0")], actions


def test_a_reservation_above_the_node_capacity_places_nothing():
    """SF's AppGroupsPlacementWithReservationCantPlace: one node of CPU 90, a replica of load 10 whose
    application reserves 100 a node: no action."""
    app = _service("App", "Service", 1, "CPU/1.0/10/10")
    assert _refresh(_nodes([{"CPU": 90}]), [_app("App", 0, 2, "CPU/1000/500/100")], [app], [_part(app, "0")]) == []


def test_the_constraint_check_fixes_an_application_over_its_node_capacity():
    """SF's ConstraintCheckScaleoutCountZero: N0, N1 of CPU 100; App1 (MaximumNodes 0: no scaleout
    limit) may load a node with 50 CPU; two singletons of load 30 on N0 (60): one action."""
    svc = _service("App1", "TestService1", 1, "CPU/1/30/30")
    parts = [_part(svc, "0", "P/0"), _part(svc, "1", "P/0")]
    actions = _refresh(_nodes([{"CPU": 100}] * 2), [_app("App1", 0, 0, "CPU/1000/50/0")], [svc], parts)
    assert len(actions) == 1 and actions[0][1:] == ("MovePrimary", "N0", "N1"), actions


def test_placement_stays_on_the_nodes_of_an_application_over_its_scaleout():
    """SF's AppGroupsPlacementWithViolation: three nodes, App1 of MaximumNodes 1 already on N0 and N1;
    a new replica of its other service goes to N0 or N1, in one action ("1 add primary 0|1")."""
    s1, s2 = _service("App1", "TestService1", 2), _service("App1", "TestService2", 1)
    parts = [_part(s1, "0", "P/0, S/1"), _part(s2, "1")]
    actions = _refresh(_nodes([{}] * 3), [_app("App1", 1, 1)], [s1, s2], parts)
    assert len(actions) == 1 and actions[0][:2] == ("1", "AddPrimary") and actions[0][3] in ("N0", "N1"), actions


def test_a_down_node_leaves_an_application_within_its_capacity():
    """SF's AppGroupsDownNodeAppCapacity: N0 down, N1 up; App1 (two nodes, 500 CPU a node) with two
    partitions P/0, S/1 of load 300/100: SF's PLB moves and places nothing. A plan also carries the
    Failover Manager's failover of the primaries lost with N0, which SF's test's FM stub leaves out:
    the one action kind here is the promotion of the secondaries on N1."""
    s1, s2 = _service("App1", "TestService1", 2, "CPU/1/300/100"), _service("App1", "TestService2", 2, "CPU/1/300/100")
    parts = [_part(s1, "0", "P/0, S/1"), _part(s2, "1", "P/0, S/1")]
    actions = _refresh(_nodes([{}] * 2, down=(0,)), [_app("App1", 2, 2, "CPU/10000/500/0")], [s1, s2], parts)
    assert all(kind == "PromoteSecondary" for _, kind, _, _ in actions), actions


def test_the_scaleout_count_gathers_an_application_on_the_one_node_all_may_use():
    """SF's ScaleoutCountMoveAllReplicasToNewNode: N0-N2 of CPU 200; App of MaximumNodes 1 with three
    singletons, R0 on N0 (its type blocks N1), R1 on N1 (blocks N0), R2 on N0 (blocks N1): all three
    move to N2 ("0 move primary 0=>2", "1 move primary 1=>2", "2 move primary 0=>2")."""
    services = [_service("App", f"TestService{k}", 1, "CPU/1.0/40/20") for k in range(3)]
    for k, svc in enumerate(services):
        svc["ServiceTypeName"] = f"TestType{k}"
    parts = [_part(services[0], "0", "P/0"), _part(services[1], "1", "P/1"), _part(services[2], "2", "P/0")]
    block = [
        {"NodeName": "N1", "ServiceTypeName": "TestType0"},
        {"NodeName": "N0", "ServiceTypeName": "TestType1"},
        {"NodeName": "N1", "ServiceTypeName": "TestType2"},
    ]
    actions = _refresh(_nodes([{"CPU": 200}] * 3), [_app("App", 0, 1)], services, parts, BlockList=block)
    assert actions == [
        ("0", "MovePrimary", "N0", "N2"),
        ("1", "MovePrimary", "N1", "N2"),
        ("2", "MovePrimary", "N0", "N2"),
    ]


def test_replicas_that_add_nothing_to_an_overcommitted_metric_are_placed():
    """SF's AppGroupsZeroLoadReplicaPlacement: N0, N1 of M1 10 and M2 10; the application may load a
    node with 4 of M1 (its M1 service already loads each node with 5) and 5 of M2; the new replicas of a
    service of M1 load 0 and of a service of M2 load 5 are all placed: four actions, a primary and a
    secondary of each."""
    m1, zero, m2 = (
        _service("TestApplication", "ServiceWithMetricM1", 2, "M1/1.0/5/5"),
        _service("TestApplication", "ServiceWithZeroMetricM1", 2, "M1/1.0/0/0"),
        _service("TestApplication", "ServiceWithMetricM2", 2, "M2/1.0/5/5"),
    )
    parts = [_part(m1, "0", "P/0, S/1"), _part(zero, "1"), _part(m2, "2")]
    apps = [_app("TestApplication", 0, 2, "M1/8/4/0,M2/10/5/0")]
    actions = _refresh(_nodes([{"M1": 10, "M2": 10}] * 2), apps, [m1, zero, m2], parts)
    assert sorted(a[:2] for a in actions) == [
        ("1", "AddPrimary"),
        ("1", "AddSecondary"),
        ("2", "AddPrimary"),
        ("2", "AddSecondary"),
    ], actions


def test_unused_reservations_of_two_applications_leave_no_room():
    """SF's AppGroupsPlacementMultipleAppsWithReservationCantPlace: one node of CPU 100, two
    applications each reserving 50 on it and using 30; a new replica (30) of either would take its
    application above its reservation: no action."""
    services = [_service(app, f"Service{k}", 1, "CPU/1.0/30/30") for app in ("App1", "App2") for k in (1, 2)]
    parts = [
        _part(services[0], "0", "P/0"),
        _part(services[2], "1", "P/0"),
        _part(services[1], "2"),
        _part(services[3], "3"),
    ]
    apps = [_app("App1", 0, 1, "CPU/100/100/50"), _app("App2", 0, 1, "CPU/100/100/50")]
    assert _refresh(_nodes([{"CPU": 100}]), apps, services, parts) == []


def test_new_replicas_fit_inside_the_reservation():
    """SF's AppGroupsPlacementWithReservationMultipleReplicasTest: N0, N1 of CPU 100, the application
    reserves 100 a node; partition 0 (P/0) misses a secondary, partition 1 both replicas (load 10
    each): three actions, "0 add secondary 1" and two of "1 add * 0|1"."""
    svc = _service("App", "ApplicationService", 2, "CPU/1.0/10/10")
    actions = _refresh(
        _nodes([{"CPU": 100}] * 2),
        [_app("App", 0, 2, "CPU/1000/500/100")],
        [svc],
        [_part(svc, "0", "P/0"), _part(svc, "1")],
    )
    assert len(actions) == 3 and ("0", "AddSecondary", None, "N1") in actions, actions
    assert sum(p == "1" and kind.startswith("Add") for p, kind, _, _ in actions) == 2, actions


def test_a_new_replica_uses_the_rest_of_a_reservation():
    """SF's AppGroupsPlacementWithPartialReservationTest: N0, N1 of CPU 100, reservation 90 a node;
    partition 0 reports 5 on N0 and 60 on N1; partition 1 (load 95) needs two replicas: only N0 has
    room (95 + 5 within 100), one action "1 add primary 0"."""
    svc = _service("App", "ApplicationService", 2, "CPU/1.0/95/95")
    placed = {
        "ServiceName": svc["ServiceName"],
        "PartitionId": "0",
        "Replicas": [
            {"ReplicaId": "0.0", "Role": "Primary", "NodeName": "N0", "Loads": {"CPU": 5}},
            {"ReplicaId": "0.1", "Role": "Secondary", "NodeName": "N1", "Loads": {"CPU": 60}},
        ],
    }
    actions = _refresh(
        _nodes([{"CPU": 100}] * 2), [_app("App", 0, 2, "CPU/1000/500/90")], [svc], [placed, _part(svc, "1")]
    )
    assert actions == [("1", "AddPrimary", None, "N0")], actions


def test_an_affinity_fix_takes_only_the_reservation_that_fits():
    """SF's AppGroupsReservedLoadMoveBasicTest: N0 CPU 200, N1 CPU 100, N2 CPU 0; the parent's replica
    on N1, two applications (reservation 60 a node) each with two children of it on N0: N1 takes one
    application's reservation, not both: two actions, both of one application, "move primary 0=>1"."""
    parent = {"ServiceName": "fabric:/Outside/ParentService", "ServiceKind": "Stateful", "TargetReplicaSetSize": 1}
    children = [_service(app, "Service", 1, "CPU/1.0/10/10") for app in ("Application1", "Application2")]
    for child in children:
        child["Correlations"] = [{"ServiceName": parent["ServiceName"], "Scheme": "AlignedAffinity"}]
    parts = [_part(parent, "0", "P/1")] + [_part(children[(k - 1) // 2], str(k), "P/0") for k in (1, 2, 3, 4)]
    apps = [_app("Application1", 0, 2, "CPU/1000/500/60"), _app("Application2", 0, 2, "CPU/1000/500/60")]
    apps.append(_app("IrrelevantApplication", 0, 2, "IrrelevantCPU/1000/500/100"))
    actions = _refresh(_nodes([{"CPU": 200}, {"CPU": 100}, {"CPU": 0}]), apps, [parent, *children], parts)
    assert [a[1:] for a in actions] == [("MovePrimary", "N0", "N1")] * 2, actions
    assert {a[0] for a in actions} in ({"1", "2"}, {"3", "4"}), actions


def test_reservations_over_node_capacity_move_the_application_to_the_node_that_holds_them():
    """SF's AppGroupsReservedLoadNodeCapacityTest: Metric1 capacity 100 on N0, N1, N3 and 200 on N2;
    the application reserves 150 a node; two singletons of SF's default metrics on N0 and two of
    Metric1 load 10 on N1: both nodes are over capacity with the reservation; four actions,
    "* move primary 0|1=>2"."""
    s1, s2 = _service("Application1", "Service1", 1), _service("Application1", "Service2", 1, "Metric1/1.0/10/10")
    parts = [_part(s1, "0", "P/0"), _part(s1, "1", "P/0"), _part(s2, "2", "P/1"), _part(s2, "3", "P/1")]
    capacities = [{"Metric1": c} for c in (100, 100, 200, 100)]
    actions = _refresh(_nodes(capacities), [_app("Application1", 0, 2, "Metric1/300/150/150")], [s1, s2], parts)
    assert len(actions) == 4 and all(kind == "MovePrimary" and target == "N2" for _, kind, _, target in actions), (
        actions
    )


def test_a_drop_under_a_reservation():
    """SF's AppGroupsDropWithReservationTest: three nodes of CPU 100, reservation 100 a node; a
    partition of load 0 on all three, target two: one action, "0 drop secondary *"."""
    svc = _service("App", "ApplicationService", 2, "CPU/1.0/0/0")
    actions = _refresh(
        _nodes([{"CPU": 100}] * 3), [_app("App", 0, 3, "CPU/300/100/100")], [svc], [_part(svc, "0", "P/0, S/1, S/2")]
    )
    assert len(actions) == 1 and actions[0][:2] == ("0", "DropSecondary"), actions
