"""Reading and validating timeline documents (plbjax.sf.replay.timeline.reading)."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml
from paths import ROOT
from referencing import Registry, Resource

from plbjax import BadInput, load_state, parse_state
from plbjax.sf.replay import scenarios
from plbjax.sf.replay.timeline.reading import ActionSeconds, load_timeline, parse_timeline

ROOT = ROOT
EXAMPLES = sorted((ROOT / "examples" / "timelines").glob("*.yaml"))
SCHEMAS = ROOT / "plbjax" / "schemas"


@pytest.fixture(scope="module")
def small() -> dict:
    return load_state(ROOT / "examples" / "small.yaml").document


def validator() -> jsonschema.Draft202012Validator:
    docs = [json.loads((SCHEMAS / f"{n}.schema.json").read_text()) for n in ("state", "timeline")]
    registry = Registry().with_resources([(d["$id"], Resource.from_contents(d)) for d in docs])
    return jsonschema.Draft202012Validator(docs[1], registry=registry)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_bundled_examples_load_and_match_the_schema(path):
    timeline = load_timeline(path)
    assert timeline.state.nodes[0].name == "N0"  # State: ../small.yaml, relative to the file
    assert timeline.events and timeline.duration >= timeline.events[-1].time
    assert not list(validator().iter_errors(yaml.safe_load(path.read_text())))


def test_defaults_and_action_seconds(small):
    doc = {"State": small, "Events": [{"Time": 3, "Kind": "NodeDown", "NodeName": "N0"}]}
    timeline = parse_timeline(doc)
    assert timeline.duration == 3 + 5  # small.yaml: MinLoadBalancingInterval 5
    assert timeline.action_seconds == ActionSeconds()
    timeline = parse_timeline(dict(doc, ActionSeconds={"Move": 4, "Swap": 1}, Duration=10))
    assert (
        timeline.duration,
        timeline.action_seconds.of("MoveSecondary"),
        timeline.action_seconds.of("SwapPrimarySecondary"),
        timeline.action_seconds.of("AddPrimary"),
    ) == (10, 4, 1, 0)


def test_input_is_not_changed(small):
    doc = {
        "State": small,
        "Events": [
            {"Time": 0, "Kind": "NodeRemoved", "NodeName": "N0"},
            {
                "Time": 1,
                "Kind": "LoadReport",
                "ServiceName": "fabric:/Shop/Orders",
                "ReplicaId": 101,
                "Loads": {"CPU": 3},
            },
        ],
    }
    before = copy.deepcopy(doc)
    parse_timeline(doc)
    assert doc == before


@pytest.mark.parametrize(
    "events, message",
    [
        ([{"Time": 0, "Kind": "NodeDown", "NodeName": "N9"}], "Events[0].NodeName: 'N9' is not a node"),
        ([{"Time": 0, "Kind": "NodeDown"}], "Events[0].NodeName: required for NodeDown"),
        ([{"Time": 0, "Kind": "Reboot"}], "Events[0].Kind: unknown event kind 'Reboot'"),
        ([{"Time": 0, "Kind": "NodeUp", "NodeName": "N0", "Why": 1}], "Events[0].Why: not a field of NodeUp"),
        (
            [{"Time": 5, "Kind": "NodeUp", "NodeName": "N0"}, {"Time": 2, "Kind": "NodeUp", "NodeName": "N0"}],
            "Events[1].Time: 2 is before the previous event's 5",
        ),
        (
            [{"Time": 0, "Kind": "NodeRemoved", "NodeName": "N1"}, {"Time": 1, "Kind": "NodeUp", "NodeName": "N1"}],
            "Events[1].NodeName: 'N1' is not a node",
        ),
        (
            [{"Time": 0, "Kind": "NodeDown", "NodeName": "N0"}, {"Time": 1, "Kind": "ReplicaFailed", "ReplicaId": 100}],
            "Events[1].ReplicaId: 100 is not a replica",
        ),
        (
            [{"Time": 0, "Kind": "BlockListAdded", "NodeName": "N0", "ServiceTypeName": "WebType", "Until": 0}],
            "Events[0].Until: 0 is not after the event's Time 0",
        ),
        (
            [{"Time": 0, "Kind": "SettingsChanged", "Settings": {"MinPlacementIntervall": 2}}],
            "Events[0].Settings: Settings.MinPlacementIntervall: unknown PlacementAndLoadBalancing setting",
        ),
        (
            [{"Time": 0, "Kind": "NodeAdded", "Node": {"NodeName": "N7", "FaultDomain": "fd:/dc0/r0"}}],
            "Events[0].Node: ",
        ),
        (
            [{"Time": 0, "Kind": "UpgradeDomainCompleted", "UpgradeDomain": "UD0"}],
            "Events[0].Kind: no upgrade is in progress",
        ),
        ([{"Time": "soon", "Kind": "NodeUp", "NodeName": "N0"}], "Events[0].Time: 'soon' is not a number"),
    ],
)
def test_bad_events_name_index_and_key(small, events, message):
    with pytest.raises(BadInput) as caught:
        parse_timeline({"State": small, "Events": events})
    assert str(caught.value).startswith(message)


def test_bad_top_level(small, tmp_path):
    with pytest.raises(BadInput, match=r"^Horizon: unknown key"):
        parse_timeline({"State": small, "Events": [], "Horizon": 3})
    with pytest.raises(BadInput, match=r"^ActionSeconds.Reboot: unknown action kind"):
        parse_timeline({"State": small, "Events": [], "ActionSeconds": {"Reboot": 3}})
    with pytest.raises(BadInput, match=r"^Events\[0\].Time: 20 is after the Duration 10"):
        parse_timeline({"State": small, "Duration": 10, "Events": [{"Time": 20, "Kind": "NodeUp", "NodeName": "N0"}]})
    with pytest.raises(BadInput, match=r"^State: Nodes: "):
        parse_timeline({"State": dict(small, Nodes="none"), "Events": []})
    (tmp_path / "t.json").write_text(json.dumps({"State": "missing.yaml", "Events": []}))
    with pytest.raises(BadInput, match="missing.yaml: no such file"):
        load_timeline(tmp_path / "t.json")


@pytest.mark.parametrize("name", sorted(scenarios.GENERATORS))
def test_generated_scenarios_are_valid_and_repeatable(small, name):
    make = scenarios.GENERATORS[name]
    kwargs = {"days": 0.25, "every_minutes": 60} if name == "diurnal" else {}
    doc = make(small, seed=3, **kwargs)
    assert doc == make(small, seed=3, **kwargs)
    timeline = parse_timeline(doc)
    assert timeline.events
    assert not list(validator().iter_errors(doc))


ORDERS = "fabric:/Shop/Orders"


@pytest.mark.parametrize(
    "events, message",
    [
        (
            [{"Time": 0, "Kind": "ServiceDeleted", "ServiceName": "fabric:/Nope"}],
            "Events[0].ServiceName: 'fabric:/Nope'",
        ),
        (
            [{"Time": 0, "Kind": "ServiceUpdated", "ServiceName": "fabric:/Nope", "Changes": {"Priority": 1}}],
            "Events[0].ServiceName: 'fabric:/Nope' is not a service",
        ),
        (
            [{"Time": 0, "Kind": "LoadReport", "ServiceName": "fabric:/Nope", "Loads": {"CPU": 1}}],
            "Events[0].ServiceName: 'fabric:/Nope' is not a service",
        ),
        (
            [{"Time": 0, "Kind": "LoadReport", "ServiceName": ORDERS, "ReplicaId": 999, "Loads": {"CPU": 1}}],
            "Events[0].ReplicaId: 999 is not a replica",
        ),
        ([{"Time": 0, "Kind": "ReplicaFailed", "ReplicaId": "nope"}], "Events[0].ReplicaId: 'nope' is not a replica"),
        (
            [{"Time": 0, "Kind": "BlockListAdded", "NodeName": "N9", "ServiceTypeName": "WebType"}],
            "Events[0].NodeName: 'N9' is not a node",
        ),
        (
            [{"Time": 0, "Kind": "BlockListAdded", "NodeName": "N0", "ServiceTypeName": "NoType"}],
            "Events[0].ServiceTypeName: 'NoType'",
        ),
        ([{"Time": 0, "Kind": "NodeDisabled", "NodeName": "N0", "Intent": "Reboot"}], "Events[0].Intent: 'Reboot'"),
        ([{"Time": 0, "Kind": "NodeDown", "NodeName": 5}], "Events[0].NodeName: 5 is not a node"),
        (
            [{"Time": 0, "Kind": "UpgradeStarted", "Scope": "Node", "UpgradeDomains": []}],
            "Events[0].Scope: 'Node' is not Cluster or Application",
        ),
        (
            [{"Time": 0, "Kind": "UpgradeStarted", "Scope": "Cluster", "UpgradeDomains": "UD0"}],
            "Events[0].UpgradeDomains: a list is required",
        ),
        (
            [{"Time": 0, "Kind": "ServiceUpdated", "ServiceName": ORDERS, "Changes": ["Priority"]}],
            "Events[0].Changes: a mapping",
        ),
        (
            [{"Time": 0, "Kind": "ServiceUpdated", "ServiceName": ORDERS, "Changes": {"ServiceKind": "Stateless"}}],
            "Events[0].Changes.ServiceKind: not a field an update may change",
        ),
        (
            [{"Time": 0, "Kind": "ServiceUpdated", "ServiceName": ORDERS, "Changes": {"TargetReplicaSetSize": "3"}}],
            "Events[0].Changes: ",
        ),
        ([{"Time": 0, "Kind": "SettingsChanged", "Settings": 3}], "Events[0].Settings: a mapping is required"),
        (
            [{"Time": 0, "Kind": "SettingsChanged", "Settings": {"MinPlacementInterval": "soon"}}],
            "Events[0].Settings: Settings.MinPlacementInterval: 'soon'",
        ),
        (
            [{"Time": 0, "Kind": "BlockListAdded", "NodeName": "N0", "ServiceTypeName": "WebType", "Until": "x"}],
            "Events[0].Until: 'x' is not a number",
        ),
        (
            [{"Time": 0, "Kind": "LoadReport", "ServiceName": ORDERS, "Loads": {"CPU": -1}}],
            "Events[0].Loads.CPU: -1 is not a non-negative number",
        ),
        (
            [{"Time": 0, "Kind": "LoadReport", "ServiceName": ORDERS, "Role": "Leader", "Loads": {"CPU": 1}}],
            "Events[0].Role: 'Leader'",
        ),
        ([{"Time": -1, "Kind": "NodeUp", "NodeName": "N0"}], "Events[0].Time: -1 is not a number >= 0"),
        ([{"Time": True, "Kind": "NodeUp", "NodeName": "N0"}], "Events[0].Time: True is not a number"),
        ([{"Kind": "NodeUp", "NodeName": "N0"}], "Events[0].Time: required"),
        (["NodeUp"], "Events[0]: an event mapping"),
        (
            [{"Time": 0, "Kind": "NodeUp", "NodeName": "N0"}, {"Time": 1, "Kind": "UpgradeCompleted", "Why": 1}],
            "Events[1].Why: not a field of UpgradeCompleted",
        ),
        (
            [
                {
                    "Time": 0,
                    "Kind": "NodeAdded",
                    "Node": {"NodeName": "N0", "FaultDomain": "fd:/x", "UpgradeDomain": "U"},
                }
            ],
            "Events[0].Node.NodeName: 'N0' is already a node",
        ),
        (
            [{"Time": 0, "Kind": "ServiceCreated", "Service": {"ServiceName": ORDERS, "ServiceKind": "Stateless"}}],
            "Events[0].Service.ServiceName: 'fabric:/Shop/Orders' is already a service",
        ),
    ],
)
def test_bad_references_and_types_name_the_event_index_and_key(small, events, message):
    """An event naming a node, service or replica that does not exist at that point, or a field of
    the wrong type or value, is bad input naming `Events[i].Key`; the document is not changed."""
    doc = {"State": small, "Events": events}
    before = copy.deepcopy(doc)
    with pytest.raises(BadInput) as caught:
        parse_timeline(doc)
    assert str(caught.value).startswith(message), str(caught.value)
    assert doc == before


def test_bad_schema_version_and_state(small):
    for version in (2, True, "1"):
        with pytest.raises(BadInput, match=r"^SchemaVersion: "):
            parse_timeline({"SchemaVersion": version, "State": small, "Events": []})
    with pytest.raises(BadInput, match=r"^State: a state document or a path"):
        parse_timeline({"State": 3, "Events": []})
    with pytest.raises(BadInput, match=r"^Events: a list is required"):
        parse_timeline({"State": small, "Events": {"Time": 0}})
    with pytest.raises(BadInput, match=r"^Duration: -1 is not a number"):
        parse_timeline({"State": small, "Events": [], "Duration": -1})
    with pytest.raises(BadInput, match=r"^ActionSeconds.Move: -2 is not a number"):
        parse_timeline({"State": small, "Events": [], "ActionSeconds": {"Move": -2}})


def test_duration_defaults_to_the_last_event_plus_min_load_balancing_interval(small):
    """timeline.md §1: the last event's time plus MinLoadBalancingInterval, as in effect then."""
    state = dict(small, Settings={**small["Settings"], "MinLoadBalancingInterval": "7"})
    up = {"Time": 12.5, "Kind": "NodeUp", "NodeName": "N0"}
    assert parse_timeline({"State": state, "Events": [up]}).duration == 12.5 + 7
    assert parse_timeline({"State": state, "Events": []}).duration == 7
    changed = {"Time": 3, "Kind": "SettingsChanged", "Settings": {"MinLoadBalancingInterval": 11}}
    assert parse_timeline({"State": state, "Events": [changed, up]}).duration == 12.5 + 11
    assert parse_timeline({"State": state, "Events": [up], "Duration": 12.5}).duration == 12.5


def test_action_seconds_cover_every_plan_action():
    """Each of the plan's action types takes the seconds of its kind (Move, Add, Swap, Drop, Promote)."""
    seconds = ActionSeconds(Move=1, Add=2, Swap=3, Drop=4, Promote=5)
    actions = {
        "MovePrimary": 1,
        "MoveSecondary": 1,
        "MoveInstance": 1,
        "AddPrimary": 2,
        "AddSecondary": 2,
        "AddInstance": 2,
        "SwapPrimarySecondary": 3,
        "DropPrimary": 4,
        "DropSecondary": 4,
        "DropInstance": 4,
        "PromoteSecondary": 5,
    }
    assert {a: seconds.of(a) for a in actions} == actions


def test_state_inline_or_a_path_relative_to_the_timeline_file(small, tmp_path):
    (tmp_path / "states").mkdir()
    (tmp_path / "timelines" / "day1").mkdir(parents=True)
    (tmp_path / "states" / "s.json").write_text(json.dumps(small))
    events = [{"Time": 1, "Kind": "NodeDown", "NodeName": "N0"}]
    relative = tmp_path / "timelines" / "day1" / "t.yaml"
    relative.write_text(yaml.safe_dump({"State": "../../states/s.json", "Events": events}))
    absolute = tmp_path / "timelines" / "t.json"
    absolute.write_text(json.dumps({"State": str(tmp_path / "states" / "s.json"), "Events": events}))
    inline = tmp_path / "timelines" / "inline.json"
    inline.write_text(json.dumps({"State": small, "Events": events}))
    for path in (relative, absolute, inline):
        assert load_timeline(path).state == parse_state(small)
    relative.write_text(yaml.safe_dump({"State": "s.json", "Events": events}))  # not relative to the cwd
    with pytest.raises(BadInput, match="s.json"):
        load_timeline(relative)


def test_timeline_schema_is_published_beside_the_state_schema_and_knows_every_kind():
    """The package ships timeline.schema.json next to state.schema.json; its event kinds, their
    fields and required fields are the parser's (`changes.KINDS`)."""
    from importlib.resources import files

    from plbjax.sf.replay.timeline.changes import KINDS

    published = {p.name for p in files("plbjax.schemas").iterdir()}
    assert {"state.schema.json", "timeline.schema.json"} <= published
    schema = json.loads((SCHEMAS / "timeline.schema.json").read_text())
    event = schema["$defs"]["event"]
    assert event["properties"]["Kind"]["enum"] == list(KINDS)
    branches = {b["if"]["properties"]["Kind"]["const"]: b["then"] for b in event["allOf"]}
    assert set(branches) == set(KINDS)
    for kind, (required, optional) in KINDS.items():
        then = branches[kind]
        assert set(then["properties"]) - {"Time", "Kind"} == required | optional, kind
        assert set(then["required"]) - {"Time", "Kind"} == required, kind
        assert then["additionalProperties"] is False


@pytest.mark.parametrize(
    "event",
    [
        {"Time": 0, "Kind": "Reboot"},
        {"Time": 0, "Kind": "NodeUp", "NodeName": "N0", "Why": 1},
        {"Time": 0, "Kind": "NodeUp"},
        {"Time": -1, "Kind": "NodeUp", "NodeName": "N0"},
        {"Time": 0, "Kind": "NodeDisabled", "NodeName": "N0", "Intent": "Reboot"},
        {"Time": 0, "Kind": "ServiceUpdated", "ServiceName": ORDERS, "Changes": {"ServiceKind": "Stateless"}},
    ],
)
def test_schema_rejects_what_the_parser_rejects(small, event):
    doc = {"State": small, "Events": [event]}
    assert list(validator().iter_errors(doc))
    with pytest.raises(BadInput, match=r"^Events\[0\]"):
        parse_timeline(doc)


def test_timeline_with_every_event_kind_loads_and_matches_the_schema(small):
    """One event of every kind, each valid where it stands."""
    web = "fabric:/Shop/Web"
    cart = {
        "ServiceName": "fabric:/Shop/Cart",
        "ServiceTypeName": "CartType",
        "ServiceKind": "Stateless",
        "InstanceCount": 1,
    }
    node = {"NodeName": "N6", "NodeType": "BackEnd", "FaultDomain": "fd:/dc0/r0", "UpgradeDomain": "UD0"}
    events = [
        {"Kind": "NodeDown", "NodeName": "N0"},
        {"Kind": "NodeUp", "NodeName": "N0"},
        {"Kind": "NodeAdded", "Node": node},
        {"Kind": "NodeRemoved", "NodeName": "N6"},
        {"Kind": "NodeDisabled", "NodeName": "N1", "Intent": "Restart"},
        {"Kind": "NodeEnabled", "NodeName": "N1"},
        {"Kind": "LoadReport", "ServiceName": web, "PartitionId": "web-0", "Role": "Instance", "Loads": {"CPU": 3}},
        {"Kind": "ServiceCreated", "Service": cart, "Partitions": [{"PartitionId": 0, "Replicas": []}]},
        {"Kind": "ServiceUpdated", "ServiceName": "fabric:/Shop/Cart", "Changes": {"InstanceCount": 2}},
        {"Kind": "ServiceDeleted", "ServiceName": "fabric:/Shop/Cart"},
        {"Kind": "ReplicaFailed", "ReplicaId": 110},
        {
            "Kind": "UpgradeStarted",
            "Scope": "Application",
            "ApplicationName": "fabric:/Shop",
            "UpgradeDomains": ["UD0"],
        },
        {"Kind": "UpgradeDomainCompleted", "UpgradeDomain": "UD0"},
        {"Kind": "UpgradeCompleted"},
        {"Kind": "SettingsChanged", "Settings": {"MinPlacementInterval": 2}, "MetricBalancingThresholds": {"CPU": 2}},
        {"Kind": "BlockListAdded", "NodeName": "N2", "ServiceTypeName": "WebType", "Until": 30},
    ]
    from plbjax.sf.replay.timeline.changes import KINDS

    assert {e["Kind"] for e in events} == set(KINDS)
    doc = {"State": small, "Events": [{"Time": float(i), **e} for i, e in enumerate(events)]}
    assert not list(validator().iter_errors(doc))
    timeline = parse_timeline(doc)
    assert [e.kind for e in timeline.events] == [e["Kind"] for e in events]
