"""SF's application groups, translated (PLBAppGroups.Test.cpp): an application's MaximumNodes (the
scaleout count, ScaleoutCountConstraint.cpp), its capacity per node and in all
(ApplicationCapacityConstraint.cpp) and its reservation (ApplicationReservedLoads.cpp:121, counted in
a node's load by NodeCapacityConstraint.cpp:436). SF's helpers: CreateApplicationCapacities
("M/total/per node/reservation", TestUtility.cpp:403), a service of TargetReplicaSetSize 0 whose
partitions have the replicas listed plus the difference asked (CreateServiceDescriptionWithApplication,
TestUtility.cpp:952)."""

from __future__ import annotations

import pytest
from checker import app_group_violations, placement_of
from sf_cases import DEFAULT, document, fu, health, movements, run, sf_nodes

from plbjax.sf import parse_state

pytestmark = pytest.mark.slow  # SF's unit tests translated: a plan (and its compilation) each


def _app(name: str, minimum: int, maximum: int, capacities: str = "") -> dict:
    """CreateApplicationDescriptionWithCapacities(name, minimum, maximum, CreateApplicationCapacities(...))."""
    metrics = []
    for spec in filter(None, capacities.split(",")):
        metric, total, node, reservation = spec.split("/")
        metrics.append(
            {
                "Name": metric,
                "TotalApplicationCapacity": float(total),
                "MaximumCapacity": float(node),
                "ReservationCapacity": float(reservation),
            }
        )
    return {"ApplicationName": name, "MinimumNodes": minimum, "MaximumNodes": maximum, "Metrics": metrics}


def _service(name: str, app: str | None, metrics: str, target: int, type_name: str = "TestType") -> dict:
    """A stateful service of `app` with CreateMetrics("M/weight/primary/secondary,...")."""
    entries = []
    for spec in filter(None, metrics.split(",")):
        metric, weight, primary, secondary = spec.split("/")
        level = {1.0: "High", 0.0: "Zero"}.get(float(weight), "Medium")
        entries.append(
            {
                "Name": metric,
                "Weight": level,
                "PrimaryDefaultLoad": float(primary),
                "SecondaryDefaultLoad": float(secondary),
            }
        )
    out = {"ServiceName": name, "ServiceKind": "Stateful", "TargetReplicaSetSize": target, "ServiceTypeName": type_name}
    return out | {"Metrics": entries} | ({"ApplicationName": app} if app else {})


def _nodes(n: int, capacities: dict[str, float]) -> list[dict]:
    """CreateNodeDescriptionWithCapacity(i, "M/capacity,...")."""
    return [node | {"Capacities": capacities} for node in sf_nodes(n)]


def _empty(svc: str, pid: str) -> dict:
    return {"ServiceName": svc, "PartitionId": pid, "Replicas": []}


SF_TEST = {"MaxPercentageToMove": 1.0}  # LoadBalancing.Test.exe.cfg


def _plan(services, partitions, nodes, apps, **extra) -> dict:
    doc = document(services, partitions, nodes, None, False, Applications=apps, **extra)
    result, after = run(doc, DEFAULT)
    state = parse_state(doc)
    before = app_group_violations(state, placement_of(doc))
    now = app_group_violations(state, placement_of(after))
    assert all(now[k] <= before[k] + 1e-6 for k in now), (before, now)  # no application rule broken that held
    return result


def _added(result: dict) -> list[tuple[str, str]]:
    return [(a["Action"], a["TargetNode"]) for a in result["Actions"] if a["Action"].startswith("Add")]


def test_constraint_check_fixes_an_application_over_its_node_capacity():
    """PLBAppGroups.Test.cpp:1003 ConstraintCheckScaleoutCountZero: two nodes (CPU 100), App1 with
    CPU 50 per node; two singleton primaries of CPU 30 on node 0 (60 > 50). SF: 1 action."""
    services = [_service("TestService1", "App1", "CPU/1/30/30", 1)]
    partitions = [fu("TestService1", "0", "P/0"), fu("TestService1", "1", "P/0")]
    result = _plan(services, partitions, _nodes(2, {"CPU": 100}), [_app("App1", 0, 0, "CPU/1000/50/0")])
    assert len(result["Actions"]) == 1, result["Actions"]
    assert [(a["SourceNode"], a["TargetNode"], a["Phase"]) for a in movements(result)] == [
        ("N0", "N1", "ConstraintCheck")
    ]


def test_placement_keeps_a_new_replica_within_the_scaleout_count_it_already_breaks():
    """PLBAppGroups.Test.cpp:280 AppGroupsPlacementWithViolation: three nodes, App1 MaximumNodes 1;
    TestService1 P/0,S/1 (already on two nodes), TestService2 a replica to place. SF: one action,
    "1 add primary 0|1" (a third node would make the violation worse). The violation stands, reported
    as SF names it (ScaleoutCount)."""
    services = [_service("TestService1", "App1", "", 2), _service("TestService2", "App1", "", 1)]
    partitions = [fu("TestService1", "0", "P/0,S/1"), _empty("TestService2", "1")]
    result = _plan(services, partitions, sf_nodes(3), [_app("App1", 1, 1)])
    assert len(result["Actions"]) == 1, result["Actions"]
    assert _added(result) in ([("AddPrimary", "N0")], [("AddPrimary", "N1")]), result["Actions"]
    assert {"Constraint": "ScaleoutCount", "Count": 3, "Of": "Replicas"} in result["Remaining"]["Violations"]
    assert len(health(result, "ReplicaConstraintViolation_ScaleoutCount")) == 3


def test_reservation_of_other_applications_leaves_no_room_to_place():
    """PLBAppGroups.Test.cpp:946 PlacementWithAppGroupReservation: three nodes (M1, M2, M3 100);
    App1 and App2 reserve 80 of M1 and M2 on every node they occupy (all three); TestService3 (M1 10)
    and TestService4 (M2 10) of other applications each have a replica to place. SF: "There is no
    place to add new replicas because of reservation", no action."""
    reserving = "M1/1000/80/80,M2/1000/80/80"
    apps = [_app("App1", 0, 10, reserving), _app("App2", 0, 10, reserving), _app("App3", 0, 0), _app("App4", 0, 0)]
    services = [
        _service("TestService1", "App1", "M3/1.0/1/1", 3),
        _service("TestService2", "App2", "M3/1.0/1/1", 3),
        _service("TestService3", "App3", "M1/1.0/10/10,M3/1.0/1/1", 1),
        _service("TestService4", "App4", "M2/1.0/10/10,M3/1.0/1/1", 1),
    ]
    partitions = [
        fu("TestService1", "0", "P/0,S/1,S/2"),
        fu("TestService2", "1", "P/1,S/0,S/2"),
        _empty("TestService3", "2"),
        _empty("TestService4", "3"),
    ]
    result = _plan(services, partitions, _nodes(3, {"M1": 100, "M2": 100, "M3": 100}), apps)
    assert result["Actions"] == [], result["Actions"]


def test_constraint_check_moves_a_replica_off_a_node_the_reservation_overfills():
    """PLBAppGroups.Test.cpp:1165 ConstraintCheckWithAppGroupReservation: two nodes (M1, M3 100);
    App1 reserves 80 of M1 on the nodes it occupies (both: TestService1 P/0,S/1, no M1 load); App2's
    TestService2 and TestService3 (M1 15 each) have their primaries on node 0: 30 + 80 > 100. SF: 1
    action."""
    apps = [_app("App1", 0, 0, "M1/1000/80/80"), _app("App2", 0, 0)]
    services = [
        _service("TestService1", "App1", "M3/1/1/1", 2),
        _service("TestService2", "App2", "M1/1/15/15,M3/1/1/1", 1),
        _service("TestService3", "App2", "M1/1/15/15,M3/1/1/1", 1),
    ]
    partitions = [fu("TestService1", "0", "P/0,S/1"), fu("TestService2", "1", "P/0"), fu("TestService3", "2", "P/0")]
    result = _plan(services, partitions, _nodes(2, {"M1": 100, "M3": 100}), apps)
    assert len(result["Actions"]) == 1, result["Actions"]
    assert [(a["SourceNode"], a["TargetNode"], a["Phase"]) for a in movements(result)] == [
        ("N0", "N1", "ConstraintCheck")
    ]


def test_a_replica_goes_where_its_reservation_fits():
    """PLBAppGroups.Test.cpp:1865 AppGroupsPlacementWithReservation: two nodes (CPU 100), node 1
    holds an outside service's primary (CPU 10); the application reserves CPU 100 per node, its
    replica to place has CPU 10. SF: "1 add primary 0" (node 1 cannot hold the reservation). An
    application whose metric no service has changes nothing."""
    apps = [_app("App", 0, 2, "CPU/1000/500/100"), _app("Irrelevant", 0, 2, "IrrelevantCPU/1000/500/100")]
    services = [_service("AppService", "App", "CPU/1.0/10/10", 1), _service("Outside", None, "CPU/1.0/10/10", 1)]
    partitions = [fu("Outside", "0", "P/1"), _empty("AppService", "1")]
    result = _plan(services, partitions, _nodes(2, {"CPU": 100}), apps)
    assert _added(result) == [("AddPrimary", "N0")], result["Actions"]


def test_a_replica_whose_reservation_fits_nowhere_is_not_placed():
    """PLBAppGroups.Test.cpp:2004 AppGroupsPlacementWithReservationCantPlace: one node (CPU 90); the
    replica to place has CPU 10, its application reserves 100 per node. SF: no action."""
    services = [_service("Service", "App", "CPU/1.0/10/10", 1)]
    result = _plan(services, [_empty("Service", "0")], _nodes(1, {"CPU": 90}), [_app("App", 0, 2, "CPU/1000/500/100")])
    assert result["Actions"] == [], result["Actions"]


def test_constraint_check_gathers_an_application_on_one_node():
    """PLBAppGroups.Test.cpp:5153 ScaleoutCountMoveAllReplicasToNewNode: three nodes (CPU 200), App
    MaximumNodes 1; TestService0 (node 1 blocked) P/0, TestService1 (node 0 blocked) P/1,
    TestService2 (node 1 blocked) P/0: on two nodes. SF: 3 actions, "0 move primary 0=>2", "1 move
    primary 1=>2", "2 move primary 0=>2"."""
    services = [_service(f"TestService{i}", "App", "CPU/1.0/40/20", 1, f"TestType{i}") for i in range(3)]
    partitions = [fu("TestService0", "0", "P/0"), fu("TestService1", "1", "P/1"), fu("TestService2", "2", "P/0")]
    blocks = [{"NodeName": node, "ServiceTypeName": f"TestType{i}"} for i, node in ((0, "N1"), (1, "N0"), (2, "N1"))]
    result = _plan(services, partitions, _nodes(3, {"CPU": 200}), [_app("App", 0, 1)], BlockList=blocks)
    moved = sorted((a["PartitionId"], a["SourceNode"], a["TargetNode"]) for a in movements(result))
    assert moved == [("0", "N0", "N2"), ("1", "N1", "N2"), ("2", "N0", "N2")], result["Actions"]
    assert {a["Phase"] for a in result["Actions"]} == {"ConstraintCheck"}


def test_balancing_moves_only_what_keeps_each_application_within_its_nodes():
    """PLBBalancing.Test.cpp:4784 BalancingWithApplicationBasicTest1: seven nodes; Application1
    (MaximumNodes 3, MyMetric 10 per node, 30 in all) has two services on nodes 0-2 (loads 2 and 3),
    Application2 (MaximumNodes 2, 10 per node, 20 in all) one on nodes 0 and 1 (load 2). SF: 2
    actions (its commented expectation: Application2's partition moves to nodes 3 and 4; an
    Application1 replica elsewhere would be a fourth node)."""
    apps = [_app("Application1", 0, 3, "MyMetric/30/10/0"), _app("Application2", 0, 2, "MyMetric/20/10/0")]
    services = [
        _service("Service1", "Application1", "MyMetric/1.0/2/2", 3),
        _service("Service2", "Application1", "MyMetric/1.0/3/3", 3),
        _service("Service3", "Application2", "MyMetric/1.0/2/2", 2),
    ]
    partitions = [
        fu("Service1", "0", "P/0, S/1, S/2"),
        fu("Service2", "1", "P/1, S/0, S/2"),
        fu("Service3", "2", "P/0, S/1"),
    ]
    result = _plan(services, partitions, sf_nodes(7), apps, Settings=SF_TEST)
    assert len(result["Actions"]) == 2, result["Actions"]
    assert {a["ServiceName"] for a in result["Actions"]} == {"Service3"}, result["Actions"]


def test_balancing_spreads_an_application_its_limits_allow():
    """PLBBalancing.Test.cpp:4874 BalancingWithApplicationCommonMetricsTest: six nodes; one application
    (MaximumNodes 6, MyMetric 10 per node, 60 in all) with two three-replica services (load 3) on
    nodes 0-2. SF: 3 actions, one move to each of nodes 3, 4 and 5."""
    services = [_service(f"Service{i}", "Application1", "MyMetric/1.0/3/3", 3) for i in (1, 2)]
    partitions = [fu("Service1", "0", "P/0, S/1, S/2"), fu("Service2", "1", "P/1, S/0, S/2")]
    result = _plan(
        services, partitions, sf_nodes(6), [_app("Application1", 0, 6, "MyMetric/60/10/0")], Settings=SF_TEST
    )
    assert len(result["Actions"]) == 3, result["Actions"]
    assert sorted(a["TargetNode"] for a in movements(result)) == ["N3", "N4", "N5"], result["Actions"]
