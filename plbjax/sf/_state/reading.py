"""Reading the cluster state document: `load_state` (JSON or YAML) and `parse_state`.

A document is checked against ``schemas/state.schema.json`` (`schema_check`; its Partitions by
column where they are plain, `columns`) and against Service Fabric's rules (`building`), and
becomes a frozen `ClusterState`. Every problem is one `BadInput` naming the offending key or value,
e.g. ``small.yaml: Nodes[3].FaultDomain: 5 is not of type 'string'``. The input is never modified.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import yaml

from plbjax.errors import BadInput
from plbjax.sf._state.building import build_state
from plbjax.sf._state.cluster import ClusterState
from plbjax.sf._state.columns import Columns, head_schema
from plbjax.sf._state.schema_check import describe, fast_conforms, plain_copy, schema_validator, state_schema


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (then back as it was).

    Reading a large state creates millions of containers, none of them garbage; each allocation
    burst otherwise sets off collections that walk every object made so far (at a million replicas
    they took three quarters of the time to read, validate and encode)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_state(path: str | Path) -> ClusterState:
    """Read and validate the state document at `path`: .json, .yaml/.yml, or sniffed."""
    path = Path(path)
    with gc_paused():
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadInput(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"{path}: cannot read: {exc}") from None
        suffix = path.suffix.lower()
        if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip().startswith("{")):
            doc = _load_json(text, path)
        else:
            doc = _load_yaml(text, path)
        del text
        # the document read here is referenced nowhere else: the state may keep it as its `document`
        return parse_document(doc, str(path), owned=True)


def _load_json(text: str, path: Path) -> object:
    def pairs(items: list[tuple[str, object]]) -> dict:
        out = dict(items)
        if len(out) == len(items):
            return out
        out = {}
        for key, value in items:
            if key in out:
                raise BadInput(f"{path}: invalid JSON: duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> float:
        raise BadInput(f"{path}: invalid JSON: {name} is not a number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader: _YamlLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            break  # construct_mapping reports it
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_YamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str, path: Path) -> object:
    try:
        return yaml.load(text, Loader=_YamlLoader)  # a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise BadInput(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: invalid YAML: {exc}") from None


# ------------------------------------------------------------------------------- validation


def parse_state(doc: Mapping, source: str = "<state>") -> ClusterState:
    """Validate a parsed state document and build its ClusterState; `doc` is not modified."""
    with gc_paused():
        return parse_document(doc, source, owned=False)


def parse_document(doc: object, source: str, owned: bool) -> ClusterState:
    """parse_state; with `owned`, nothing else references `doc` and the state may keep parts of it."""
    try:
        if not isinstance(doc, Mapping):
            got = "empty" if doc is None else f"a {type(doc).__name__}"
            raise BadInput(f"the document must be a mapping at the top level; it is {got}")
        state = _parse_columns(doc, owned)
        if state is not None:
            return state
        doc = plain_copy(doc, "")
        schema = state_schema()
        if not fast_conforms(schema, doc):  # fast path; jsonschema names the problem
            import jsonschema.exceptions  # only for the message: the fast path needs none

            error = jsonschema.exceptions.best_match(schema_validator().iter_errors(doc))
            if error is not None:
                raise BadInput(describe(error))
        return build_state(doc)
    except BadInput as exc:
        raise BadInput(f"{source}: {exc}") from None


def _parse_columns(doc: Mapping, owned: bool) -> ClusterState | None:
    """The state of `doc` with its Partitions checked by column; None where the general path must
    decide (anything unusual, or anything wrong: the general path names it)."""
    if type(doc) is not dict or type(doc.get("Partitions")) is not list:
        return None
    try:
        head = {k: v for k, v in doc.items() if k != "Partitions"}
        head_doc = plain_copy(head, "")
        if not fast_conforms(head_schema(), head_doc):
            return None
        columns = Columns.read(doc["Partitions"])
        if columns is None:
            return None
        copies = doc["Partitions"] if owned else columns.copy()
        # the state shares parts of head_doc: its document needs a copy of its own (an owned
        # document is that copy when reading it did not change it, as for any JSON document)
        kept = head if owned and head == head_doc else plain_copy(head_doc, "")
        document = {k: copies if k == "Partitions" else kept[k] for k in doc}
        return build_state(head_doc, document, columns)
    except (BadInput, TypeError, ValueError, KeyError):  # the general path names the problem
        return None
