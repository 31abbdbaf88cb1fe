"""The state document against ``schemas/state.schema.json``: a fast conformance check, a plain copy.

`fast_conforms` decides the schema's keywords the state schema uses, several times faster than
jsonschema on big states (which only names the problem it finds, `describe`); `plain_copy` is the
document deep-copied with string keys, its numbers finite and within `LARGEST`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, cast, overload

from plbjax.errors import BadInput
from plbjax.sf._state.cluster import LARGEST


@cache
def state_schema() -> dict:
    """state.schema.json with every $ref replaced by its definition (the schema is not recursive)."""
    text = (Path(__file__).parents[2] / "schemas" / "state.schema.json").read_text("utf-8")
    schema = json.loads(text)
    definitions = schema.pop("$defs")

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: inline(v) for k, v in node.items()}
            ref = node.pop("$ref", None)
            return node if ref is None else inline(definitions[ref.removeprefix("#/$defs/")]) | node
        return [inline(v) for v in node] if isinstance(node, list) else node

    return inline(schema)


@cache
def schema_validator():
    """jsonschema's validator of the state schema, where "integer" means a JSON integer (jsonschema
    would also take 3.0, e.g. as a ReplicaId)."""
    import jsonschema.validators

    base = jsonschema.Draft202012Validator
    strict = base.TYPE_CHECKER.redefine("integer", lambda _, v: _TYPES["integer"](v))
    return jsonschema.validators.extend(base, type_checker=strict)(state_schema())


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def fast_conforms(schema: dict, value: Any) -> bool:
    """True only if `value` is valid against the inlined `schema`; False also when unsure.

    Handles just the keywords our schema uses; several times faster than jsonschema on big states.
    """
    is_dict, is_number = isinstance(value, dict), _TYPES["number"](value)
    for key, arg in schema.items():
        if key in ("description", "title", "$schema", "$id"):
            continue
        if key == "type":
            ok = any(_TYPES[t](value) for t in ([arg] if isinstance(arg, str) else arg))
        elif key == "enum":
            ok = any(_same(value, option) for option in arg)
        elif key == "const":
            ok = _same(value, arg)
        elif key == "required":
            ok = not is_dict or all(k in value for k in arg)
        elif key == "properties":
            ok = not is_dict or all(k not in value or fast_conforms(sub, value[k]) for k, sub in arg.items())
        elif key == "additionalProperties":
            known = schema.get("properties", {})
            extra = [v for k, v in cast(dict, value).items() if k not in known] if is_dict else []
            ok = all(fast_conforms(arg, v) for v in extra) if isinstance(arg, dict) else arg or not extra
        elif key == "propertyNames":
            ok = not is_dict or all(fast_conforms(arg, k) for k in value)
        elif key == "items":
            ok = not isinstance(value, list) or all(fast_conforms(arg, v) for v in value)
        elif key == "minimum":
            ok = not is_number or value >= arg
        elif key == "maximum":
            ok = not is_number or value <= arg
        elif key == "exclusiveMaximum":
            ok = not is_number or value < arg
        elif key == "minLength":
            ok = not isinstance(value, str) or len(value) >= arg
        else:
            return False
        if not ok:
            return False
    return True


_IDENTIFIERS = (".ReplicaId", ".PartitionId", ".InstanceId")


@overload
def plain_copy(value: Mapping, where: str) -> dict: ...
@overload
def plain_copy(value: object, where: str) -> object: ...
def plain_copy(value: object, where: str) -> object:
    """Deep copy with string keys (YAML may give integer keys, e.g. ReplicaIds in History).

    Rejects NaN and infinities, which would pass the schema's range checks.
    """
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if type(key) is int:
                key = str(key)
            if not isinstance(key, str):
                raise BadInput(f"{where or 'top level'}: key {key!r} is not a string")
            out[key] = plain_copy(item, _join(where, key))
        return out
    if isinstance(value, (list, tuple)):
        return [plain_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"{where}: {value} is not a finite number")
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and abs(value) > LARGEST
        and not where.endswith(_IDENTIFIERS)
    ):
        shown = (
            f"{value:.6g}"
            if isinstance(value, float) or abs(value) < 1e30
            else f"an integer of {len(str(abs(value)))} digits"
        )
        raise BadInput(f"{where}: {shown} is beyond the largest number plbjax can search with ({LARGEST:g})")
    return value


def _join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def describe(error) -> str:
    """One line naming the path of the offending key or value."""
    where = ""
    for part in error.absolute_path:
        where = _join(where, part)
    where = where or "top level"
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties", {})
        extra = next(k for k in error.instance if k not in known)
        return f"{where}: unknown key {extra!r}"
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        return f"{where}: missing required key {missing!r}"
    return f"{where}: {error.message}"
