"""The old home of `plbjax.sf.live.reading.importer`, kept only until tests/planned.py, tests/cli and
tests/sf/phases name the new one (issue 56); then removed."""

from plbjax.sf.live.reading.importer import import_dump, main

__all__ = ["import_dump", "main"]
