"""How a plan was made, for its `Provenance` object: plbjax's version with its commit, the Python,
jax and jaxlib that ran it, the backend and devices, the input (path and SHA-256 of its bytes), the
whole resolved configuration, the command line and the seed. Two plans made from the same input,
config and seed on the same code have equal records."""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CHUNK = 1 << 20  # bytes hashed at a time


def input_record(path: str | Path) -> dict[str, str]:
    """{Path: absolute path, Sha256: hex digest of the file's bytes}."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return {"Path": str(Path(path).absolute()), "Sha256": digest.hexdigest()}


def environment() -> dict[str, Any]:
    """{Python, Jax, Jaxlib, Backend, Devices}: what ran the search (Devices: one kind per device)."""
    import jax
    import jaxlib.version

    return {
        "Python": platform.python_version(),
        "Jax": jax.__version__,
        "Jaxlib": jaxlib.version.__version__,
        "Backend": jax.default_backend(),
        "Devices": [device.device_kind for device in jax.devices()],
    }


def provenance(
    version: str,
    environment: Mapping[str, Any],
    input_path: str | Path,
    config: Mapping[str, Any],
    command: Sequence[str],
    seed: int,
) -> dict[str, Any]:
    """The plan's `Provenance`: {Version, Python, Jax, Jaxlib, Backend, Devices, Input, Config,
    Command, Seed}; `config` is the resolved configuration, every key."""
    return {
        "Version": version,
        **environment,
        "Input": input_record(input_path),
        "Config": dict(config),
        "Command": list(command),
        "Seed": seed,
    }
