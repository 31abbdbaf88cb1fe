"""plbjax-dump against a local HTTP server that answers like SF's REST API, with SF's paging."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from paths import TESTS

from plbjax.sf.live.reading.dump import main
from plbjax.sf.live.reading.importer import import_dump

DUMPS = TESTS / "data" / "sf-dump"
VERSIONS = {
    "GetClusterManifest": "6.0",
    "Nodes": "6.3",
    "Applications": "6.1",
    "GetServices": "6.4",
    "GetDescription": "6.0",
    "GetPartitions": "6.4",
    "GetReplicas": "6.0",
    "GetLoadInformation": "6.0",
    "GetDetail": "6.0",
}


def _items(value: object) -> list:
    """The items of a stored paged list (one object, or an array of page objects)."""
    return [i for page in (value if isinstance(value, list) else [value]) for i in page["Items"]]


class FakeCluster(BaseHTTPRequestHandler):
    """Answers GETs from a fixture dump; lists come in pages of MaxResults (default 2) items."""

    root: Path
    seen: list

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        words = [unquote(w) for w in parts.path.strip("/").split("/") if w != "$"]
        self.seen.append((words[-1], query.get("api-version")))
        try:
            body = self._answer(words, query)
        except FileNotFoundError:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _file(self, rel: str, default: object = None) -> object:
        path = self.root / rel
        if not path.exists():
            if default is None:
                raise FileNotFoundError(rel)
            return default
        return json.loads(path.read_text())

    def _answer(self, words: list[str], query: dict) -> object:
        head, last = words[0], words[-1]
        if last == "GetClusterManifest":
            if (self.root / "cluster-manifest.json").exists():
                return self._file("cluster-manifest.json")
            return {"Manifest": (self.root / "cluster-manifest.xml").read_text()}
        if words == ["Nodes"] or words == ["Applications"]:
            return self._page(self._file(f"{head.lower()}.json"), query)
        if last == "GetServices":
            return self._page(self._file(f"services/{words[1]}.json"), query)
        if last == "GetDescription":
            return self._file(f"service-descriptions/{words[1]}.json")
        if head == "Services" and last == "GetPartitions":
            return self._page(self._file(f"partitions/{words[1]}.json"), query)
        if head == "Partitions" and last == "GetReplicas":
            return self._page(self._file(f"replicas/{words[1]}.json"), query)
        if head == "Partitions" and last == "GetLoadInformation":
            return self._file(
                f"partition-load/{words[1]}.json",
                {"PartitionId": words[1], "PrimaryLoadMetricReports": [], "SecondaryLoadMetricReports": []},
            )
        if head == "Nodes" and last == "GetLoadInformation":
            return self._file(f"node-load/{words[1]}.json", {"NodeName": words[1], "NodeLoadMetricInformation": []})
        if last == "GetDetail":
            return self._file(f"replica-load/{words[3]}/{words[5]}.json", {"PartitionId": words[3], "ReportedLoad": []})
        raise FileNotFoundError(self.path)

    @staticmethod
    def _page(stored: object, query: dict) -> dict:
        items = _items(stored)
        start, size = int(query.get("ContinuationToken") or 0), int(query.get("MaxResults") or 2)
        rest = start + size < len(items)
        return {"ContinuationToken": str(start + size) if rest else "", "Items": items[start : start + size]}


@pytest.fixture
def cluster(request):
    """(endpoint, requests seen, fixture root) of a fake cluster serving the fixture named by the parameter."""
    root = DUMPS / request.param
    handler = type("Handler", (FakeCluster,), {"root": root, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", handler.seen, root
    server.shutdown()
    server.server_close()


def _empty(value: object) -> bool:
    """A load answer that reports nothing (the fake cluster's answer where the fixture has no file)."""
    return isinstance(value, dict) and not any(
        value.get(k)
        for k in ("PrimaryLoadMetricReports", "SecondaryLoadMetricReports", "NodeLoadMetricInformation", "ReportedLoad")
    )


def _compare(fixture: Path, written: Path) -> None:
    """Every fixture file was written with the same content (pages merged); extra files report no load."""
    for path in fixture.rglob("*.json"):
        rel = path.relative_to(fixture).as_posix()
        want, got = json.loads(path.read_text()), json.loads((written / rel).read_text())
        if isinstance(want, list) or "Items" in want:
            assert _items(got) == _items(want), rel
        else:
            assert got == want, rel
    for path in written.rglob("*.json"):
        rel = path.relative_to(written).as_posix()
        if not (fixture / rel).exists() and rel != "cluster-manifest.json":
            assert _empty(json.loads(path.read_text())), rel


@pytest.mark.parametrize("cluster, max_results", [("small", 0), ("paged", 1), ("paged", 3)], indirect=["cluster"])
def test_dump_equals_the_fixture(cluster, max_results, tmp_path):
    endpoint, seen, root = cluster
    out = tmp_path / "dump"
    main(["--endpoint", endpoint, "--insecure", "-o", str(out), "--max-results", str(max_results), "--replica-loads"])
    _compare(root, out)
    assert all(version == VERSIONS[call] for call, version in seen)
    assert sum(call == "Nodes" for call, _ in seen) == -(-6 // (max_results or 2))  # every page was asked for
    assert isinstance(json.loads((out / "nodes.json").read_text()), list)  # stored as its pages
    assert import_dump(str(out))[0] == import_dump(str(root))[0]


@pytest.mark.parametrize("cluster", ["small"], indirect=True)
def test_http_needs_insecure_and_errors_exit_2(cluster, tmp_path, capsys):
    endpoint, _, _ = cluster
    for argv, expected in (
        (["--endpoint", endpoint], "add --insecure"),
        (["--endpoint", endpoint + "/nope", "--insecure"], "HTTP 404"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv + ["-o", str(tmp_path / "dump")])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.count("\n") == 1 and expected in err


class RefusingCluster(FakeCluster):
    """Refuses the load calls (HTTP 404), as SF does for a node or replica it cannot reach."""

    def _answer(self, words: list[str], query: dict) -> object:
        if words[-1] in ("GetLoadInformation", "GetDetail"):
            raise FileNotFoundError(self.path)
        return super()._answer(words, query)


class LoopingCluster(FakeCluster):
    """Answers every page of nodes with the same ContinuationToken."""

    def _answer(self, words: list[str], query: dict) -> object:
        if words == ["Nodes"]:
            return {"ContinuationToken": "again", "Items": []}
        return super()._answer(words, query)


def _serve(handler_class: type, name: str):
    handler = type("Handler", (handler_class,), {"root": DUMPS / name, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_refused_load_calls_are_left_out_with_a_warning(tmp_path, capsys):
    server = _serve(RefusingCluster, "small")
    try:
        out = tmp_path / "dump"
        main(["--endpoint", f"http://127.0.0.1:{server.server_port}", "--insecure", "-o", str(out), "--replica-loads"])
    finally:
        server.shutdown()
        server.server_close()
    assert "warning" in capsys.readouterr().err
    assert not (out / "node-load").exists() and not (out / "partition-load").exists()
    doc, _ = import_dump(str(out))
    assert len(doc["Partitions"]) == len(import_dump(str(DUMPS / "small"))[0]["Partitions"])


def test_a_continuation_token_that_repeats_stops_the_dump(tmp_path, capsys):
    server = _serve(LoopingCluster, "small")
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(["--endpoint", f"http://127.0.0.1:{server.server_port}", "--insecure", "-o", str(tmp_path / "d")])
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "came back twice" in err
