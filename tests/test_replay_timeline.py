"""Reading and validating timeline documents (plbjax.sf.replay.timeline)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from plbjax import BadInput, load_state
from plbjax.sf.replay import scenarios
from plbjax.sf.replay.timeline import ActionSeconds, load_timeline, parse_timeline

ROOT = Path(__file__).parent.parent
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
    assert timeline.state["Nodes"][0]["NodeName"] == "N0"  # State: ../small.yaml, relative to the file
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
