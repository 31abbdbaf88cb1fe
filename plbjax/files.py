"""Output files written atomically: a reader sees the old file or the whole new one, never a part;
the new file gets the mode an ordinary write would (0666 less the user's umask), not mkstemp's 0600."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_partial: set[str] = set()  # temporary files being written now


@contextmanager
def atomic_path(path: str | Path, executable: bool = False) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix) to write to; renamed onto `path` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    _partial.add(tmp)
    try:
        yield Path(tmp)
        os.chmod(tmp, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp, path)
    finally:
        _partial.discard(tmp)
        if os.path.exists(tmp):
            os.unlink(tmp)


def discard_partial_files() -> None:
    """Remove the temporary files being written now (a process about to exit at once)."""
    for tmp in list(_partial):
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    """The process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str, executable: bool = False) -> None:
    with atomic_path(path, executable) as tmp:
        tmp.write_text(text)


def write_figure(path: str | Path, fig, dpi: int = 110) -> None:
    """A matplotlib figure, laid out, saved as `path` (its suffix names the format), then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
