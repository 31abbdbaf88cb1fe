"""The journal of a plan carried out: per step, its status, times, attempts and why, beside the plan.

Written atomically at every change, and a step's state before its request is sent (write-ahead), so a
rerun knows which steps are done (never sent again), which were sent (watched, not sent twice) and
which are to be tried again. A journal belongs to one plan, by the SHA-256 of its bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from plbjax.errors import BadInput
from plbjax.files import write_text
from plbjax.sf import Action, ActionKind


class Status(StrEnum):
    """Where a step stands (`CHECKING` only in a run, never in the journal)."""

    PENDING = "pending"
    CHECKING = "checking"
    ISSUED = "issued"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


FINAL = (Status.DONE, Status.SKIPPED, Status.FAILED, Status.TIMED_OUT)
AGAIN = (Status.SKIPPED, Status.FAILED, Status.TIMED_OUT)  # tried again on a rerun, precondition first


def now() -> str:
    """The UTC time, ISO 8601 to the second (2026-11-27T15:40:01Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Entry:
    """One plan action's line in the journal: what it is, where it stands, and why."""

    index: int  # in the plan's Actions
    action: ActionKind
    service: str
    partition: str | int
    source: str | None
    target: str | None
    status: Status = Status.PENDING
    attempts: int = 0
    step: int | None = None  # its position in this run's order, from 1
    started: str | None = None
    issued: str | None = None
    finished: str | None = None
    reason: str | None = None
    error: str | None = None

    @classmethod
    def of(cls, index: int, action: Action) -> Entry:
        return cls(index, action.kind, action.service, action.partition, action.source, action.target)

    @classmethod
    def from_document(cls, fields: dict[str, object]) -> Entry:
        """An entry as the journal file writes it (its keys: `_KEYS`)."""
        known = {name: fields[key] for name, key in _KEYS.items() if key in fields}
        return cls(**known | {"action": ActionKind(fields["Action"]), "status": Status(known["status"])})  # pyright: ignore[reportArgumentType]

    def document(self) -> dict[str, object]:
        """The journal file's line: the action's fields, its status and attempts, the rest once set."""
        fields = {key: getattr(self, name) for name, key in _KEYS.items()}
        return {k: v for k, v in fields.items() if k in _ALWAYS or v is not None}


_KEYS = {  # Entry's field -> the journal's key (the action's kind: "Action")
    "index": "Index",
    "action": "Action",
    "service": "ServiceName",
    "partition": "PartitionId",
    "source": "SourceNode",
    "target": "TargetNode",
    "status": "Status",
    "attempts": "Attempts",
    "step": "Step",
    "started": "Started",
    "issued": "Issued",
    "finished": "Finished",
    "reason": "Reason",
    "error": "Error",
}
_ALWAYS = ("Index", "Action", "ServiceName", "PartitionId", "SourceNode", "TargetNode", "Status", "Attempts")


class Journal:
    """Per plan action (its index in Actions), its `Entry`; written whole at every change."""

    def __init__(self, path: Path, head: dict[str, object], entries: list[Entry]) -> None:
        self.path, self.head, self.lock = path, head, threading.Lock()
        self.entries = {e.index: e for e in entries}
        self.lines = {e.index: json.dumps(e.document()) for e in entries}  # each step's line, kept until it changes

    @classmethod
    def open(cls, path: str | Path, plan: str, endpoint: str, actions: list[Action]) -> Journal:
        """The journal at `path` (resumed) or a new one; BadInput if it is another plan's."""
        path, digest = Path(path), sha256(plan)
        if path.exists():
            try:
                document = json.loads(path.read_text())
                known = document["PlanSha256"]
                entries = [Entry.from_document(e) for e in document.pop("Steps")]
            except (OSError, ValueError, KeyError, TypeError):
                raise BadInput(f"--journal: {path} is not a plbjax-apply journal") from None
            if known != digest:
                raise BadInput(f"--journal: {path} is the journal of another plan (SHA-256 {known[:12]}...)")
            return cls(path, document, entries)
        head: dict[str, object] = {"Plan": str(plan), "PlanSha256": digest, "Endpoint": endpoint, "Started": now()}
        return cls(path, head, [Entry.of(i, a) for i, a in enumerate(actions)])

    def status(self, index: int) -> Status:
        return self.entries[index].status

    def set(self, index: int, **fields: object) -> None:
        """Change action `index`'s entry (`Entry`'s fields) and write the journal at once."""
        with self.lock:
            self.entries[index] = dataclasses.replace(self.entries[index], **fields)  # pyright: ignore[reportArgumentType]
            self.lines[index] = json.dumps(self.entries[index].document())
            self.write()

    def write(self) -> None:
        """The whole journal, atomically: its header, then a line per step."""
        self.head["Updated"] = now()
        head = json.dumps(self.head, indent=1)
        write_text(self.path, head[:-2] + ',\n "Steps": [\n  ' + ",\n  ".join(self.lines.values()) + "\n ]\n}\n")
