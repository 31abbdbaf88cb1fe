"""Hydra configuration, shipped in the package as plbjax.conf (see pyproject.toml)."""
