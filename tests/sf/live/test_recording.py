"""plbjax-record on the simulator's day, and plbjax-import of the recording into a timeline (issue 63)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import azure.servicefabric.models as sf_models
import pytest
from msrest import Deserializer

from plbjax.sf import Intent
from plbjax.sf.live.reading.dump import dump_cluster
from plbjax.sf.live.reading.importer import import_dump
from plbjax.sf.live.reading.importer import main as import_main
from plbjax.sf.live.record.recorder import main as record_main
from plbjax.sf.live.record.timeline import import_recording
from plbjax.sf.live.rest import Client
from plbjax.sf.live.simulator import Scheduled, Simulator
from plbjax.sf.live.simulator.day import DayKind

ROOT = Path(__file__).resolve().parents[3]
SMALL = ROOT / "examples" / "small.yaml"
EPOCH = 1767225600.0  # 2026-01-01T00:00:00Z
RATE = 3600.0  # an hour of the cluster a wall second
SDK = Deserializer({k: v for k, v in vars(sf_models).items() if isinstance(v, type)})


def _timeline(root: Path) -> tuple[dict, list[str]]:
    doc, _, report = import_recording(root, import_dump)
    return doc, report


def _day(rate: float = RATE) -> Simulator:
    """The small cluster living day 0; its Failover Manager every 30 simulated seconds (light on the CPU)."""
    sim = Simulator.from_state(SMALL, clock_rate=rate, epoch=EPOCH, build_seconds=30.0)
    sim.live_day(seed=0)
    return sim


def _record(url: str, out: Path, length: str = "6h", *extra: str) -> None:
    args = ["--endpoint", url, "--insecure", "--every", "1h", "--for", length, "--clock-rate", str(RATE)]
    record_main([*args, "--max-rate", "0", "-o", str(out), *extra])


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six hours of the simulator's day, recorded every hour (about six wall seconds)."""
    out = tmp_path_factory.mktemp("rec") / "day"
    with _day().serve() as url:
        _record(url, out)
    return out


def test_eventstore_answers_as_the_sdk_reads_them() -> None:
    sim = _day(rate=50000.0)
    with sim.serve() as url:
        while sim.now() < 86400:
            time.sleep(0.1)
        window = "api-version=6.4&StartTimeUtc=2026-01-01T00:00:00Z&EndTimeUtc=2026-01-02T00:00:00Z"
        kinds = []
        families = ("Cluster", "Nodes", "Applications", "Services", "Partitions")
        for family in families:
            model = f"{family.removesuffix('s')}Event"
            with urllib.request.urlopen(f"{url}/EventsStore/{family}/Events?{window}") as answer:
                assert answer.headers["Date"].endswith("GMT")
                events = SDK(f"[{model}]", json.loads(answer.read()))
            for event in events:
                event.validate()  # every field the SDK's model requires is there
            kinds += [type(e).__name__ for e in events]
    assert {"NodeDownEvent", "NodeUpEvent", "NodeDeactivateStartedEvent", "ClusterUpgradeStartedEvent"} <= set(kinds)
    assert {"ServiceDeletedEvent", "ServiceCreatedEvent"} <= set(kinds)
    assert "ClusterUpgradeDomainCompletedEvent" in kinds and "ClusterUpgradeCompletedEvent" in kinds
    assert sim.failovers, "SF's balancer moved nothing in a day"


def test_eventstore_needs_its_window() -> None:
    with _day().serve() as url:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{url}/EventsStore/Nodes/Events?api-version=6.4")
    assert err.value.code == 400


def test_a_recorded_day_imports_as_a_timeline(recording: Path) -> None:
    periods = sorted(p.name for p in (recording / "periods").iterdir())
    assert periods == [f"{i:06d}" for i in range(7)]
    doc, report = _timeline(recording)
    kinds = [e["Kind"] for e in doc["Events"]]
    assert kinds.count("NodeDown") == 1 and kinds.count("NodeUp") == 1  # at 3.2 h and 3.7 h
    assert kinds.count("LoadReport") >= 6 * 2  # the diurnal loads change every period
    assert [e["Time"] for e in doc["Events"]] == sorted(e["Time"] for e in doc["Events"])
    first, last = (_period_time(recording / "periods" / name) for name in (periods[0], periods[-1]))
    assert doc["Duration"] == pytest.approx(
        (last - first).total_seconds(), abs=1
    )  # about 6 h, late on a loaded machine
    assert report[0].startswith("recording: 7 periods")
    assert report[2].startswith("SF's placement: ") and "replicas on a node" in report[2]


def test_a_rerun_continues_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "day"
    with _day().serve() as url:
        _record(url, out, "2h")
        first = json.loads((out / "periods" / "000002" / "period.json").read_text())
        _record(url, out, "4h")
    assert sorted(p.name for p in (out / "periods").iterdir()) == [f"{i:06d}" for i in range(5)]
    assert json.loads((out / "periods" / "000002" / "period.json").read_text()) == first


def test_sigterm_keeps_the_periods_recorded(tmp_path: Path) -> None:
    """SIGTERM mid-recording: exit 143, every period kept whole, none half-written; a rerun continues."""
    out = tmp_path / "day"
    record = "from plbjax.console_scripts import plbjax_record; raise SystemExit(plbjax_record())"
    with _day().serve() as url:
        args = [
            "--endpoint",
            url,
            "--insecure",
            "--every",
            "1h",
            "--for",
            "24h",
            "--clock-rate",
            str(RATE),
            "--max-rate",
            "0",
        ]
        command = [sys.executable, "-c", record, *args, "-o", str(out)]
        with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as child:
            assert child.stderr is not None
            for line in child.stderr:
                if "period 2/24" in line:
                    child.send_signal(signal.SIGTERM)
                    break
            rest = child.stderr.read()
        assert child.returncode == 143, rest
        assert "periods kept" in rest and "SIGTERM" in rest
        kept = sorted(p.name for p in (out / "periods").iterdir())
        assert kept[:3] == ["000000", "000001", "000002"] and not [k for k in kept if k.startswith(".")]
        _record(url, out, str(len(kept) + 1) + "h")
    assert len(list((out / "periods").iterdir())) >= len(kept) + 1


def test_a_rerun_with_another_period_exits_2(recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    day = _copy(recording, tmp_path)
    with _day().serve() as url, pytest.raises(SystemExit) as exit_:
        record_main(["--endpoint", url, "--insecure", "--every", "5m", "-o", str(day)])
    assert exit_.value.code == 2
    assert "recorded every 3600 s, not 300 s; use the same --every" in capsys.readouterr().err


def test_without_an_eventstore_a_warning_and_loads(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sim = Simulator.from_state(SMALL, clock_rate=RATE, epoch=EPOCH)  # no day: no EventStore
    with sim.serve() as url:
        _record(url, tmp_path / "day", "2h")
    assert "warning: no EventStore" in capsys.readouterr().err
    assert json.loads((tmp_path / "day" / "recording.json").read_text())["EventStore"] is False
    doc, _ = _timeline(tmp_path / "day")
    assert doc["State"]["Nodes"] and doc["Duration"] > 0


def test_services_deleted_created_and_a_node_enabled(tmp_path: Path) -> None:
    """SF's ServiceDeleted/ServiceCreated carried (the created one without replicas: the replay places
    them); a node enabled again, which SF has no event for, inferred from the next period."""
    sim = Simulator.from_state(SMALL, clock_rate=RATE, epoch=EPOCH)
    sid = sorted(sim.served.service_partitions)[0]
    schedule = [
        Scheduled(1800.0, DayKind.SERVICE_DELETED, sid),
        Scheduled(2000.0, DayKind.DEACTIVATE, "N1"),
        Scheduled(2600.0, DayKind.ACTIVATE, "N1"),
        Scheduled(5400.0, DayKind.SERVICE_CREATED, sid),
    ]
    sim.live_day(schedule)
    with sim.serve() as url:
        _record(url, tmp_path / "day", "2h")
    doc, report = _timeline(tmp_path / "day")
    kinds = {e["Kind"]: e for e in doc["Events"] if e["Kind"] != "LoadReport"}
    assert list(kinds) == ["ServiceDeleted", "NodeDisabled", "NodeEnabled", "ServiceCreated"]
    assert kinds["ServiceCreated"]["Service"]["ServiceName"] == kinds["ServiceDeleted"]["ServiceName"]
    assert all(p["Replicas"] == [] for p in kinds["ServiceCreated"]["Partitions"])
    assert "inferred from the periods (no event said it): NodeEnabled 1" in report


def test_a_deactivated_node_shows_its_intent(tmp_path: Path) -> None:
    """A node the day deactivated is listed Disabled with its NodeDeactivationInfo, as the import reads it."""
    sim = Simulator.from_state(SMALL, clock_rate=RATE, epoch=EPOCH)
    sim.live_day([Scheduled(0.0, DayKind.DEACTIVATE, "N1", Intent.REMOVE_DATA)])
    with sim.serve() as url:
        while sim.now() < 1.0:
            time.sleep(0.01)
        dump_cluster(Client(url, insecure=True), tmp_path / "dump")
    state, _ = import_dump(str(tmp_path / "dump"))
    node = next(n for n in state["Nodes"] if n["NodeName"] == "N1")
    assert (node["NodeStatus"], node["DeactivationIntent"]) == ("Disabled", "RemoveData")


def test_without_events_a_deactivation_is_inferred_with_its_intent(tmp_path: Path) -> None:
    sim = Simulator.from_state(SMALL, clock_rate=RATE, epoch=EPOCH)
    sim.live_day([Scheduled(1800.0, DayKind.DEACTIVATE, "N1", Intent.RESTART)])
    with sim.serve() as url:
        _record(url, tmp_path / "day", "1h")
    shutil.rmtree(tmp_path / "day" / "events")
    doc, report = _timeline(tmp_path / "day")
    disabled = [e for e in doc["Events"] if e["Kind"] == "NodeDisabled"]
    assert [(e["NodeName"], e["Intent"]) for e in disabled] == [("N1", "Restart")]
    assert "inferred from the periods (no event said it): NodeDisabled 1" in report


def test_a_folder_of_periodic_dumps_imports(recording: Path, tmp_path: Path) -> None:
    """Dumps an operator kept (e.g. from cron), each folder named by its time: a timeline of loads."""
    times = []
    for index in range(3):
        period = recording / "periods" / f"{index:06d}"
        time = json.loads((period / "period.json").read_text())["Time"]
        times.append(_period_time(period).replace(second=0, microsecond=0))
        shutil.copytree(
            period, tmp_path / "dumps" / time.replace(":", "")[:15], ignore=shutil.ignore_patterns("period.json")
        )
    doc, report = _timeline(tmp_path / "dumps")
    # the periods' own times (a loaded machine records them late), to the minute the folder names keep
    assert report[0].startswith("recording: 3 periods")
    assert doc["Duration"] == (times[-1] - times[0]).total_seconds()


def _period_time(period: Path) -> datetime:
    """When a recorded period was taken, as its period.json says."""
    return datetime.fromisoformat(json.loads((period / "period.json").read_text())["Time"].replace("Z", "+00:00"))


def _copy(recording: Path, tmp_path: Path) -> Path:
    out = tmp_path / "day"
    shutil.copytree(recording, out)
    return out


def _events(day: Path, index: int) -> tuple[Path, dict]:
    path = day / "events" / f"{index:06d}.json"
    return path, json.loads(path.read_text())


def test_a_missing_period_and_one_cut_short_are_reported(recording: Path, tmp_path: Path) -> None:
    day = _copy(recording, tmp_path)
    shutil.rmtree(day / "periods" / "000002")
    (day / "periods" / "000005" / "period.json").unlink()
    (day / "periods" / "000005").rename(day / "periods" / ".partial-000005")
    doc, report = _timeline(day)
    assert any(line.startswith("gap: 1 period(s) missing") for line in report)
    assert any("000005: a period cut short" in line for line in report)
    assert doc["Events"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("node", "Events[0].NodeName: 'N99' is not a node of any recorded period"),
        ("service", "Events[0].ServiceId: 'fabric:/Shop/Gone' is not a service of any recorded period"),
        ("order", "goes back before the previous window's end"),
        ("window", "is outside the window"),
    ],
)
def test_bad_events_exit_2_with_one_line(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture, change: str, message: str
) -> None:
    day = _copy(recording, tmp_path)
    path, doc = _events(day, 4)
    down = {"Kind": "NodeDown", "EventInstanceId": "x", "TimeStamp": doc["To"], "NodeName": "N99"}
    if change == "node":
        doc["Events"] = [down]
    elif change == "service":
        doc["Events"] = [
            {"Kind": "ServiceCreated", "EventInstanceId": "y", "TimeStamp": doc["To"], "ServiceId": "Shop~Gone"}
        ]
    elif change == "order":
        doc["From"] = _events(day, 2)[1]["From"]
    else:
        doc["Events"] = [down | {"NodeName": "N0", "TimeStamp": "2025-01-01T00:00:00Z"}]
    path.write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as exit_:
        import_main([str(day), "-o", str(tmp_path / "timeline.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and message in err[0]
    assert not (tmp_path / "timeline.json").exists()


def test_the_import_writes_sf_observed_day_beside_the_timeline(tmp_path: Path) -> None:
    """Each period's state on the timeline's clock, in timeline.sf-day.json (or --observed's file)."""
    day = ROOT / "examples" / "recorded-day" / "day"
    import_main([str(day), "-o", str(tmp_path / "timeline.json")])
    timeline = json.loads((tmp_path / "timeline.json").read_text())
    observed = json.loads((tmp_path / "timeline.sf-day.json").read_text())
    periods = observed["Periods"]
    assert len(periods) == len(list((day / "periods").iterdir())) == 9
    assert periods[0]["Time"] == 0 and periods[-1]["Time"] == timeline["Duration"]
    assert periods[0]["State"] == timeline["State"] and periods[0]["Utc"].startswith("2026-01-01T00:00")
    assert set(timeline) == {"SchemaVersion", "State", "Duration", "Events"}
    moved = [p["State"]["Partitions"] for p in periods]
    assert any(a != b for a, b in zip(moved, moved[1:], strict=False))  # SF's placement changed over the day
    import_main([str(day), "-o", str(tmp_path / "t.json"), "--observed", str(tmp_path / "sf.json")])
    assert json.loads((tmp_path / "sf.json").read_text()) == observed


def test_observed_of_one_dump_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        import_main([str(ROOT / "tests/data/sf-dump/small"), "-o", str(tmp_path / "s.json"), "--observed", "x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and err[0].startswith("plbjax-import: --observed:")


def test_periods_out_of_time_order_exit_2(recording: Path, tmp_path: Path) -> None:
    day = _copy(recording, tmp_path)
    late = day / "periods" / "000003" / "period.json"
    late.write_text(json.dumps({"Time": "2025-01-01T00:00:00Z"}))
    with pytest.raises(SystemExit) as exit_:
        import_main([str(day), "-o", str(tmp_path / "t.json")])
    assert exit_.value.code == 2


@pytest.mark.slow
def test_record_import_replay_on_loopback(recording: Path, tmp_path: Path) -> None:
    """The chain as an operator runs it: the recording imported, then replayed by plbjax-replay
    beside SF's observed day."""
    timeline, observed = tmp_path / "timeline.json", tmp_path / "timeline.sf-day.json"
    import_main([str(recording), "-o", str(timeline)])
    out = tmp_path / "replay"
    replay = "from plbjax.console_scripts import plbjax_replay; raise SystemExit(plbjax_replay())"
    command = [sys.executable, "-c", replay, f"timeline={timeline}", f"observed={observed}", f"out={out}"]
    command.append("search.steps=50")
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["SimulatedSeconds"] > 6 * 3600 - 60
    assert [e["Kind"] for e in summary["ClusterEvents"]] == ["NodeDown", "NodeUp"]
    periods = len(json.loads(observed.read_text())["Periods"])
    assert summary["VersusSF"]["Periods"] == periods == len((out / "sf-series.csv").read_text().splitlines()) - 1
    assert summary["VersusSF"]["To"] == summary["SimulatedSeconds"] and (out / "versus-sf.png").is_file()
