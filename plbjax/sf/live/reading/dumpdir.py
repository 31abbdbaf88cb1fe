"""Reading a dump directory (layout: docs/contract.md): one JSON file per REST response.

Every problem is one `BadInput` line that names the file, and the key where there is one. A paged
list (``{"ContinuationToken", "Items"}``, the token ``""``, ``null`` or absent) is read whether stored
as that object or as a JSON array of those objects in page order (SF's paging: Service Fabric REST
API reference, "Paged results"); a bare JSON array of the items is read too.

Files are read as real tools write them: UTF-8 with or without a byte order mark, and UTF-16 or
UTF-32 with a BOM (Windows PowerShell's ``Out-File`` and ``>`` write UTF-16 LE with a BOM) or
without one (detected as RFC 4627 does, from the NUL bytes). Keys are matched without regard to case,
as SF's own clients read them (microsoft/service-fabric-client-dotnet, Generated/Serialization:
``string.Compare(..., StringComparison.OrdinalIgnoreCase)``), so sfctl's camelCase output reads too:
each key whose lower case is an SF field name (`fields.NAMES`) is given SF's spelling.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import TypeVar, overload

from plbjax.errors import BadInput
from plbjax.sf.live.reading.fields import NAMES, Json

DUMP_FILES = ("cluster-manifest.json", "cluster-manifest.xml", "nodes.json", "applications.json")  # one at least
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode(data: bytes) -> str:
    """The text of a file: by its byte order mark, else UTF-16/32 by the NUL bytes of its first
    characters (json.detect_encoding's rule), else UTF-8; UnicodeDecodeError if it is none of these."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding)
    return data.decode(json.detect_encoding(data) if data[:1] == b"\0" or data[1:2] == b"\0" else "utf-8")


def canonical(value: object) -> object:
    """`value` with every key spelled as SF spells it (keys SF does not have are kept as they are)."""
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict = {}
    for key, item in value.items():
        name = NAMES.get(key.lower(), key) if isinstance(key, str) else key
        out.setdefault(name if name not in out else key, canonical(item))
    return out


class Dump:
    """The files of one dump; `rel` paths are relative to its root and use '/'."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise BadInput(f"{root}: not a directory")

    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def files(self, folder: str) -> list[str]:
        """The rel paths of the .json files under `folder` (recursively), sorted."""
        base = self.root / folder
        return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*.json")) if base.is_dir() else []

    def text(self, rel: str, needed_for: str = "") -> str:
        path = self.root / rel
        if not path.is_file():
            why = f" (needed for {needed_for})" if needed_for else ""
            raise BadInput(f"{rel}: missing{why}")
        try:
            return decode(path.read_bytes())
        except OSError as exc:
            raise BadInput(f"{rel}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise BadInput(f"{rel}: cannot read: not UTF-8, UTF-16 or UTF-32 text ({exc.reason})") from None

    def json(self, rel: str, needed_for: str = "") -> object:
        """The parsed file, keys in SF's spelling; BadInput if it is missing or not JSON."""
        try:
            return canonical(json.loads(self.text(rel, needed_for)))
        except json.JSONDecodeError as exc:
            raise BadInput(f"{rel}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        except RecursionError:
            raise BadInput(f"{rel}: invalid JSON: nested too deeply") from None

    def object(self, rel: str, needed_for: str = "") -> Json:
        """The file's JSON object; BadInput if it holds something else."""
        value = self.json(rel, needed_for)
        if not isinstance(value, dict):
            raise BadInput(f"{rel}: expected a JSON object, got {type(value).__name__}")
        return value

    def items(self, rel: str, needed_for: str = "") -> list[tuple[str, Json]]:
        """(where, item) for every item of a paged list, pages merged in order."""
        value = self.json(rel, needed_for)
        if isinstance(value, list) and value and all(isinstance(v, dict) and not _is_page(v) for v in value):
            value = {"Items": value}  # the items themselves (e.g. sfctl ... --query items)
        pages = value if isinstance(value, list) else [value]
        out = []
        for p, page in enumerate(pages):
            at = f"[{p}]." if isinstance(value, list) else ""
            if isinstance(page, dict) and page.get("Items") is None and "ContinuationToken" in page:
                page = {"Items": []}  # an empty page that leaves Items out, or writes it null
            if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
                raise BadInput(
                    f"{rel}: {at or ''}Items: expected a paged list "
                    '({"ContinuationToken": ..., "Items": [...]}, or an array of them)'
                )
            for i, item in enumerate(page["Items"]):
                if not isinstance(item, dict):
                    raise BadInput(f"{rel}: {at}Items[{i}]: expected a JSON object")
                out.append((f"{rel}: {at}Items[{i}]", item))
        return out


def _is_page(value: Json) -> bool:
    return "Items" in value or "ContinuationToken" in value


def at(where: str, key: str) -> str:
    """The location of `key` inside `where` ("file.json:" or "file.json: Items[3]")."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


_T = TypeVar("_T")


@overload
def need(item: Json, key: str, where: str) -> str: ...
@overload
def need(item: Json, key: str, where: str, kind: type[_T]) -> _T: ...
def need(item: Json, key: str, where: str, kind: type = str) -> object:
    """item[key], which must be there and of `kind`; BadInput naming where and key otherwise."""
    if key not in item:
        raise BadInput(f"{at(where, key)}: missing")
    value = item[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise BadInput(f"{at(where, key)}: {value!r} is not a {kind.__name__}")
    return value


def need_name(item: Json, key: str, where: str) -> str:
    """item[key], a non-empty string; BadInput naming where and key otherwise."""
    value = need(item, key, where)
    if not value.strip():
        raise BadInput(f"{at(where, key)}: empty")
    return value


def need_id(item: Json, key: str, where: str) -> str:
    """An id (SF writes int64 ids as strings; a JSON number is read too) as a string."""
    if key not in item:
        raise BadInput(f"{at(where, key)}: missing")
    value = item[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise BadInput(f"{at(where, key)}: {value!r} is not an id")


def integer(value: object, where: str) -> int:
    """An integer written as a JSON number or as a string of digits; BadInput naming where otherwise."""
    if isinstance(value, bool):
        raise BadInput(f"{where}: {value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BadInput(f"{where}: {value!r} is not an integer")


def number(value: object, where: str) -> float:
    """A finite number written as a JSON number or as a string (SF writes int64 and double loads as
    strings); BadInput naming where otherwise."""
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        try:
            out = float(value)
        except (ValueError, OverflowError):
            pass
        else:
            if out == out and abs(out) != float("inf"):
                return out
    raise BadInput(f"{where}: {value!r} is not a number")


def enum(value: object, values: tuple[str, ...]) -> str | None:
    """`value` as spelled in `values` (compared without regard to case, as SF's clients do), or None."""
    if isinstance(value, str):
        for known in values:
            if known.lower() == value.strip().lower():
                return known
    return None


def flag(value: object) -> bool:
    """A JSON boolean, or "true"/"false" as PowerShell and XML write it."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True
