"""Hydra help templates of plbjax and plbjax-replay."""
