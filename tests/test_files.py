"""Files people can use: every output written atomically gets the mode an ordinary write would give
(0666, 0777 for a script, less the user's umask), not the temporary file's 0600."""

from __future__ import annotations

import os

from replay_fakes import OneMove, cluster, probe

from plbjax.sf.replay import parse_timeline, replay, write_outputs


def test_replay_records_keep_the_users_umask(tmp_path):
    quiet = replay(parse_timeline({"State": cluster({"N0": 1, "N1": 1}, {}), "Events": []}), OneMove(), probe, 0)
    previous = os.umask(0o022)
    try:
        out = write_outputs(quiet, tmp_path / "run")
    finally:
        os.umask(previous)
    written = sorted(p for p in out.iterdir() if p.is_file())
    assert written and all(p.stat().st_mode & 0o777 == 0o644 for p in written), [
        (p.name, oct(p.stat().st_mode)) for p in written
    ]
