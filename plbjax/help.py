"""What `--help` says of the config: every key of a command's schema with its value (the default,
or what the command line and presets make it) and its meaning, the comment beside its field in
plbjax/config.py or plbjax/sf/_phases/search_config.py. Hydra's help templates (conf/hydra/help/*.yaml) read it
as `${plbjax_keys:plbjax}`; a misspelled key gets its nearest spelling from `keys`."""

from __future__ import annotations

import functools
import inspect
import re

from omegaconf import DictConfig, OmegaConf

from plbjax.config import ReplayConfig, RunConfig, schema_keys

SCHEMAS = {"plbjax": RunConfig, "plbjax-replay": ReplayConfig}


@functools.cache
def meanings(cls: type) -> dict[str, str]:
    """Field name -> the comment beside it in `cls`'s source."""
    found = (re.match(r"\s+(\w+): [^#]*#\s*(.+)", line) for line in inspect.getsource(cls).splitlines())
    return {m[1]: m[2] for m in found if m}


def _fields(schema: type) -> list[tuple[str, str]]:
    """(dotted key, meaning) of every key of `schema`."""
    return [(key, meanings(owner).get(key.rsplit(".", 1)[-1], "")) for key, owner in schema_keys(schema).items()]


def keys(command: str) -> list[str]:
    """Every dotted config key of `command` (plbjax, plbjax-replay)."""
    return [key for key, _ in _fields(SCHEMAS[command])]


def key_table(command: str, *, _root_: DictConfig) -> str:
    """One line per key: `key=value  meaning`, the value as composed (`???`: required)."""
    rows = []
    for key, meaning in _fields(SCHEMAS[command]):
        value = "???" if OmegaConf.is_missing(_root_, key) else OmegaConf.select(_root_, key)
        shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        if isinstance(value, DictConfig):
            shown = "{}" if not value else OmegaConf.to_yaml(value, resolve=True).strip().replace("\n", ", ")
        rows.append((f"{key}={shown}", meaning))
    width = max(len(left) for left, _ in rows)
    return "\n".join(f"  {left.ljust(width)}  {meaning}".rstrip() for left, meaning in rows)


def register() -> None:
    """Make `${plbjax_keys:COMMAND}` known to OmegaConf (Hydra resolves help templates with it)."""
    if not OmegaConf.has_resolver("plbjax_keys"):
        OmegaConf.register_new_resolver("plbjax_keys", key_table)
