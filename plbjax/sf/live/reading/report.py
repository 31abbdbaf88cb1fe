"""The import report: what was read, what was left out, and one line of what the state holds.

What may change placement or balancing comes first, a line each: a field plbjax does not model (once
per kind of file, ``service-descriptions/*.json: ScalingPolicies``, with how many times it was seen)
and a value that was left out or changed (a dropped replica, a refused setting). Fields of no bearing
on placement (`fields.Info`: addresses, versions, health) are counted per kind of file; the full
report (``plbjax-import -r``) names each of them as well.
"""

from __future__ import annotations

from plbjax.sf.live.reading.fields import Info

# A shape says, per key of an SF object, what becomes of it: True = carried over, a string = why
# not, a dict = the shape of the nested object (or of each object in a nested list).
Shape = dict


class Report:
    """Lines for the user; `lines()` gives them in the order first seen."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}
        self.dropped: dict[tuple[str, str], list] = {}
        self.notes: list[str] = []
        self.summary = ""  # one line: what the state holds

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

    def lines(self, every_field: bool = False) -> list[str]:
        """The report; `every_field`: with a line for each informational field too."""
        read = ", ".join(f"{n} {kind}" for kind, n in self.read.items())
        matter = [
            f"  {kind}: {field}: {why}{_times(n)}"
            for (kind, field), (why, n) in self.dropped.items()
            if not isinstance(why, Info)
        ]
        matter += [f"  {line}" for line in self.notes]
        kinds: dict[str, list[str]] = {}
        for (kind, field), (why, _) in self.dropped.items():
            if isinstance(why, Info):
                kinds.setdefault(kind, []).append(field.removeprefix("Items[]."))
        out = [f"read: {read}"]
        if matter:
            out += [f"not carried, may change placement or balancing ({len(matter)}):", *matter]
        if kinds:
            out.append("not carried, no bearing on placement (addresses, versions, health, derived values):")
            out += [f"  {kind}: {len(names)} field(s): {_some(names)}" for kind, names in kinds.items()]
        if every_field and kinds:
            out.append("every field of no bearing on placement:")
            out += [
                f"  {kind}: {field}: {why}{_times(n)}"
                for (kind, field), (why, n) in self.dropped.items()
                if isinstance(why, Info)
            ]
        return out + ([self.summary] if self.summary else [])


def _times(n: int) -> str:
    return f" ({n} times)" if n > 1 else ""


def _some(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
