"""The journal of a plan carried out: per step, its status, times, attempts and why, beside the plan.

Written atomically at every change, and a step's state before its request is sent (write-ahead), so a
rerun knows which steps are done (never sent again), which were sent (watched, not sent twice) and
which are to be tried again. A journal belongs to one plan, by the SHA-256 of its bytes.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.files import write_text

STATUSES = ("pending", "issued", "done", "skipped", "failed", "timed-out")
AGAIN = ("skipped", "failed", "timed-out")  # tried again on a rerun, precondition first


def now() -> str:
    """The UTC time, ISO 8601 to the second (2026-11-27T15:40:01Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Journal:
    """Per plan action (its index in Actions): Status, Attempts, Issued, Finished, Reason, Error."""

    def __init__(self, path: Path, document: dict) -> None:
        self.path, self.document, self.lock = path, document, threading.Lock()
        self.entries: dict[int, dict] = {e["Index"]: e for e in document["Steps"]}
        self.lines = {i: json.dumps(e) for i, e in self.entries.items()}  # each step's line, kept until it changes

    @classmethod
    def open(cls, path: str | Path, plan: str, endpoint: str, actions: list[dict]) -> Journal:
        """The journal at `path` (resumed) or a new one; BadInput if it is another plan's."""
        path, digest = Path(path), sha256(plan)
        if path.exists():
            try:
                document = json.loads(path.read_text())
                known = document["PlanSha256"]
            except (OSError, ValueError, KeyError, TypeError):
                raise BadInput(f"--journal: {path} is not a plbjax-apply journal") from None
            if known != digest:
                raise BadInput(f"--journal: {path} is the journal of another plan (SHA-256 {known[:12]}...)")
            return cls(path, document)
        steps = [_entry(i, a) for i, a in enumerate(actions)]
        document = {"Plan": str(plan), "PlanSha256": digest, "Endpoint": endpoint, "Started": now(), "Steps": steps}
        return cls(path, document)

    def status(self, index: int) -> str:
        return self.entries[index]["Status"]

    def set(self, index: int, **fields: object) -> None:
        """Change action `index`'s entry and write the journal at once."""
        with self.lock:
            self.entries[index].update(fields)
            self.lines[index] = json.dumps(self.entries[index])
            self.write()

    def write(self) -> None:
        """The whole journal, atomically: its header, then a line per step."""
        self.document["Updated"] = now()
        head = json.dumps({k: v for k, v in self.document.items() if k != "Steps"}, indent=1)
        write_text(self.path, head[:-2] + ',\n "Steps": [\n  ' + ",\n  ".join(self.lines.values()) + "\n ]\n}\n")


def _entry(index: int, action: dict) -> dict:
    keys = ("Action", "ServiceName", "PartitionId", "SourceNode", "TargetNode")
    return {"Index": index, **{k: action.get(k) for k in keys}, "Status": "pending", "Attempts": 0}
