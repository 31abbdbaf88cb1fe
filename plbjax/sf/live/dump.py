"""The old home of `plbjax.sf.live.reading.dump`, kept only until tests/planned.py, tests/cli and
scripts/bench_apply.py name the new one (issue 56); then removed."""

from plbjax.sf.live.reading.dump import dump_cluster, main

__all__ = ["dump_cluster", "main"]
