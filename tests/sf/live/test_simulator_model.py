"""The simulator's records: a state document read once at the door, and SF's answers written from them."""

from __future__ import annotations

from plbjax.sf import ReplicaStatus
from plbjax.sf.live.simulator.cluster import Replica
from plbjax.sf.live.simulator.http import replica_item
from plbjax.sf.live.simulator.records import read_state

DOC = {
    "Nodes": [{"NodeName": "n0"}, {"NodeName": "n1", "NodeStatus": "Down", "UpgradeDomain": "1"}],
    "Services": [
        {"ServiceName": "fabric:/App/S", "ServiceKind": "Stateful", "DefaultMoveCost": "High"},
        {"ServiceName": "fabric:/App/W", "ServiceKind": "Stateless", "InstanceCount": 2},
    ],
    "Partitions": [
        {"ServiceName": "fabric:/App/S", "PartitionId": "p", "Replicas": [{"ReplicaId": 7, "NodeName": "n0"}]}
    ],
    "Settings": {"UseMoveCostReports": True},
}


def test_a_state_document_reads_into_records_with_its_defaults():
    state = read_state(DOC)
    assert [(n.name, n.status, n.upgrade_domain) for n in state.nodes] == [("n0", "Up", None), ("n1", "Down", "1")]
    stateful, stateless = state.services
    assert (stateful.stateful, stateful.target, stateful.move_cost_specified) == (True, 3, True)
    assert (stateless.stateful, stateless.instances, stateless.move_cost_specified) == (False, 2, False)
    assert stateful.app_name == "fabric:/App"
    replica = state.partitions[0].replicas[0]
    assert (replica.rid, replica.node, replica.role, replica.raw) == (7, "n0", None, {"ReplicaId": 7, "NodeName": "n0"})
    assert state.sections == {"PlacementAndLoadBalancing": {"UseMoveCostReports": True}}


def test_a_replica_answer_keeps_its_rows_order_and_follows_its_node_and_id():
    row = {
        "ReplicaId": "1",
        "ReplicaRole": "Primary",
        "ServiceKind": "Stateful",
        "NodeName": "a",
        "Address": "http://a:80/1",
        "ReplicaStatus": "Ready",
    }
    item = replica_item(True, Replica("2", "b", "ActiveSecondary", ReplicaStatus.IN_BUILD, "1", row))
    assert list(item) == [
        "ServiceKind",
        "NodeName",
        "Address",
        "ReplicaStatus",
        "HealthState",
        "ReplicaRole",
        "ReplicaId",
    ]
    assert (item["NodeName"], item["Address"], item["ReplicaStatus"], item["ReplicaId"]) == (
        "b",
        "http://b:80/2",
        "InBuild",
        "2",
    )
    fresh = replica_item(False, Replica("3", "c", None, ReplicaStatus.IN_BUILD))
    assert fresh == {
        "ServiceKind": "Stateless",
        "ReplicaStatus": "InBuild",
        "NodeName": "c",
        "HealthState": "Ok",
        "InstanceId": "3",
    }


def test_health_states_are_read_once_in_sfs_words_and_aggregate_to_the_worst():
    from plbjax.sf import HealthState
    from plbjax.sf.live.simulator.records import worst

    assert [HealthState.read(w) for w in ("Ok", "Warning", "Error", "Unknown")] == list(HealthState)
    assert worst([HealthState.OK, HealthState.ERROR, HealthState.WARNING]) is HealthState.ERROR
    assert worst([]) is HealthState.OK and worst([HealthState.UNKNOWN, HealthState.OK]) is HealthState.OK
    try:
        HealthState.read("ok")
    except ValueError:
        pass
    else:
        raise AssertionError("SF's words are case-sensitive")
