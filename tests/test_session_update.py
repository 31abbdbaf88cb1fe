"""The session's update path takes what did not change from what it holds (issue 40): the device
arrays of the cluster stages, every replica's rows after a load batch, the surplus count without
`drop_surplus`. Each shortcut gives what encoding, probing and planning afresh give."""

from __future__ import annotations

import random

import pytest
from conftest import QUICK, cluster
from test_session import assert_same_encoding

from plbjax.sf import Session, parse_state
from plbjax.sf._encoding.encoder import STAGE_FIELDS, encode
from plbjax.sf._phases.preparation import governed_encoding, surplus_replicas
from plbjax.sf._plan.findings import findings_encoded
from plbjax.sf._plan.planning import plan_encoded


def _load_batch(doc: dict, rng: random.Random) -> dict:
    """`doc` (unchanged) after a load report of every replica: every partition another object."""
    parts = []
    for part in doc["Partitions"]:
        replicas = [
            dict(r, Loads={m: round(rng.uniform(0, 30), 1) for m in ("Metric0", "Metric1")}) for r in part["Replicas"]
        ]
        parts.append(dict(part, Replicas=replicas))
    return dict(doc, Partitions=parts)


def test_the_stage_fields_are_those_of_nodes_classes_and_weights():
    stages = encode(parse_state(cluster(0)))[1].stages
    assert stages is not None
    fields = stages.nodes.fields(stages.cluster) | stages.classes.fields(stages.cluster.N) | stages.weights.fields()
    assert sorted(fields) == sorted(STAGE_FIELDS)


@pytest.mark.parametrize("seed", range(3))
def test_a_load_batch_updates_to_the_encoding_and_findings_afresh(seed):
    rng = random.Random(seed)
    doc = cluster(seed, **({"stateless_fraction": 0.5} if seed % 2 else {}))
    session = Session()
    session.encoded(doc)
    for _ in range(3):
        doc = _load_batch(doc, rng)
        fresh = governed_encoding(parse_state(doc))
        assert_same_encoding(session.encoded(doc), fresh)
        assert session.findings(doc) == findings_encoded(fresh)
    assert session.encodings == 1 and session.updates == 3


def test_rows_named_are_the_rows_whose_ids_are_keys_in_row_order():
    index = encode(parse_state(cluster(1)))[1]
    rows = index.rows
    assert rows is not None
    texts = [str(r) for r in rows.ids if r is not None]
    by_id = {t: None for t in random.Random(0).sample(texts, 20)} | {"no such replica": None, 7: None}
    expected = [(row, rid) for row, rid in enumerate(rows.ids) if rid is not None and str(rid) in by_id]
    assert list(rows.named(by_id)) == expected and list(rows.named({})) == []


def test_surplus_replicas_count_those_beyond_the_target_and_are_dropped():
    doc = cluster(2)
    part = doc["Partitions"][0]
    taken = {r["NodeName"] for r in part["Replicas"]}
    nodes = [n["NodeName"] for n in doc["Nodes"] if n["NodeName"] not in taken]
    role = "Instance" if part["Replicas"][0]["Role"] == "Instance" else "Secondary"
    part["Replicas"] += [{"ReplicaId": f"extra-{k}", "Role": role, "NodeName": nodes[k]} for k in range(2)]
    encoded = governed_encoding(parse_state(doc))
    surplus = surplus_replicas(encoded.state, encoded.problem, encoded.index)
    p = encoded.index.partitions.index((part["ServiceName"], part["PartitionId"]))
    assert surplus[p] == 2 and surplus.sum() == 2
    assert sum(a["Action"].startswith("Drop") for a in plan_encoded(encoded, QUICK).actions) == 2
    unchanged = governed_encoding(parse_state(cluster(2)))
    assert not surplus_replicas(unchanged.state, unchanged.problem, unchanged.index).any()


def test_a_history_only_update_is_the_encoding_afresh():
    doc = cluster(4)
    session = Session()
    session.encoded(doc)
    nodes = [n["NodeName"] for n in doc["Nodes"]]
    ids = [str(r["ReplicaId"]) for p in doc["Partitions"] for r in p["Replicas"]]
    for k in range(3):
        doc = dict(doc, History={rid: nodes[k : k + 1 + k] for rid in ids[k::7]})
        assert_same_encoding(session.encoded(doc), governed_encoding(parse_state(doc)))
    assert session.encodings == 1 and session.updates == 3
