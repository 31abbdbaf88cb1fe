"""Reading a dump directory (layout: shared/spec/sf-dump.md): one JSON file per REST response.

Every problem is one `BadInput` line that names the file, and the key where there is one. A paged
list (``{"ContinuationToken", "Items"}``) is read whether stored as that object or as a JSON array
of those objects in page order (SF's paging: Service Fabric REST API reference, "Paged results").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar, overload

from plbjax.errors import BadInput


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
            return path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"{rel}: cannot read: {exc}") from None

    def json(self, rel: str, needed_for: str = "") -> object:
        """The parsed file; BadInput if it is missing or not JSON."""
        try:
            return json.loads(self.text(rel, needed_for))
        except json.JSONDecodeError as exc:
            raise BadInput(f"{rel}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None

    def object(self, rel: str, needed_for: str = "") -> dict:
        """The file's JSON object; BadInput if it holds something else."""
        value = self.json(rel, needed_for)
        if not isinstance(value, dict):
            raise BadInput(f"{rel}: expected a JSON object, got {type(value).__name__}")
        return value

    def items(self, rel: str, needed_for: str = "") -> list[tuple[str, dict]]:
        """(where, item) for every item of a paged list, pages merged in order."""
        value = self.json(rel, needed_for)
        pages = value if isinstance(value, list) else [value]
        out = []
        for p, page in enumerate(pages):
            at = f"[{p}]." if isinstance(value, list) else ""
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


def at(where: str, key: str) -> str:
    """The location of `key` inside `where` ("file.json:" or "file.json: Items[3]")."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


_T = TypeVar("_T")


@overload
def need(item: dict, key: str, where: str) -> str: ...
@overload
def need(item: dict, key: str, where: str, kind: type[_T]) -> _T: ...
def need(item: dict, key: str, where: str, kind: type = str) -> object:
    """item[key], which must be there and of `kind`; BadInput naming where and key otherwise."""
    if key not in item:
        raise BadInput(f"{at(where, key)}: missing")
    value = item[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise BadInput(f"{at(where, key)}: {value!r} is not a {kind.__name__}")
    return value
