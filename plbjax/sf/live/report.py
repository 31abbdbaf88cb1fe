"""The import report: what was read, and every SF field of the dump that the state does not carry.

A field is reported once per kind of file (``replicas/*.json: Items[].Address``) with how many
times it was seen, so that a large cluster gives a short report; a value that is left out
(a dropped replica, a placement policy plbjax does not model) gets a line of its own.
"""

from __future__ import annotations

# A shape says, per key of an SF object, what becomes of it: True = carried over, a string = why
# not, a dict = the shape of the nested object (or of each object in a nested list).
Shape = dict


class Report:
    """Lines for the user; `lines()` gives them in the order first seen."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}
        self.dropped: dict[tuple[str, str], list] = {}
        self.notes: list[str] = []

    def count(self, kind: str) -> None:
        """One more file of `kind` was read."""
        self.read[kind] = self.read.get(kind, 0) + 1

    def drop(self, kind: str, field: str, why: str) -> None:
        """`field` of a `kind` file is not carried over, because `why`."""
        entry = self.dropped.setdefault((kind, field), [why, 0])
        entry[1] += 1

    def note(self, line: str) -> None:
        """A value that was left out or changed, said in full."""
        self.notes.append(line)

    def walk(self, kind: str, obj: object, shape: Shape, path: str = "") -> None:
        """Report every key of `obj` (an SF object, or a list of them) that `shape` does not carry."""
        if isinstance(obj, list):
            for item in obj:
                self.walk(kind, item, shape, f"{path}[]")
            return
        if not isinstance(obj, dict):
            return
        for key, value in obj.items():
            rule = shape.get(key, "unknown to plbjax")
            field = f"{path}.{key}" if path else key
            if isinstance(rule, dict):
                self.walk(kind, value, rule, field)
            elif rule is not True:
                self.drop(kind, field, rule)

    def lines(self) -> list[str]:
        read = ", ".join(f"{n} {kind}" for kind, n in self.read.items())
        out = [f"read: {read}"]
        for (kind, field), (why, n) in self.dropped.items():
            times = f" ({n} times)" if n > 1 else ""
            out.append(f"not carried: {kind}: {field}: {why}{times}")
        return out + [f"note: {line}" for line in self.notes]
