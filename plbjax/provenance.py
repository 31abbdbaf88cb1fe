"""How a plan was made, for its `Provenance` object: plbjax's version with its commit, the Python,
jax, jaxlib, numpy, equinox and hydra that ran it, the host, the backend and devices, the input
(path and SHA-256 of its bytes), the whole resolved configuration, the command line and the seed.
Two plans made from the same input, config and seed on the same code and host have equal records."""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CHUNK = 1 << 20  # bytes hashed at a time
PACKAGES = (("Numpy", "numpy"), ("Equinox", "equinox"), ("Hydra", "hydra-core"))  # versions recorded


def input_record(path: str | Path) -> dict[str, str]:
    """{Path: absolute path, Sha256: hex digest of the file's bytes}."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return {"Path": str(Path(path).absolute()), "Sha256": digest.hexdigest()}


def environment() -> dict[str, Any]:
    """{Python, Jax, Jaxlib, Numpy, Equinox, Hydra, Backend, Devices, Host}: what ran the search
    (Devices: one kind per device; Host: the machine's network name)."""
    import jax
    import jaxlib.version

    return {
        "Python": platform.python_version(),
        "Jax": jax.__version__,
        "Jaxlib": jaxlib.version.__version__,
        **{
            name: _version(package)
            for name, package in (("Numpy", "numpy"), ("Equinox", "equinox"), ("Hydra", "hydra-core"))
        },
        "Backend": jax.default_backend(),
        "Devices": [device.device_kind for device in jax.devices()],
        "Host": platform.node(),
    }


def _version(package: str) -> str:
    """An installed package's version ("" when it is not installed)."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def provenance(
    version: str,
    environment: Mapping[str, Any],
    input_path: str | Path,
    config: Mapping[str, Any],
    command: Sequence[str],
    seed: int,
) -> dict[str, Any]:
    """The plan's `Provenance`: {Version, Python, Jax, Jaxlib, Numpy, Equinox, Hydra, Backend,
    Devices, Host, Input, Config, Command, Seed}; `config` is the resolved configuration, every key."""
    return {
        "Version": version,
        **environment,
        "Input": input_record(input_path),
        "Config": dict(config),
        "Command": list(command),
        "Seed": seed,
    }
