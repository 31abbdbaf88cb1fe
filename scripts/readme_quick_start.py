"""README's Quick start block as `plbjax state=examples/small.yaml` prints it on this commit.

    python scripts/readme_quick_start.py           # print the block
    python scripts/readme_quick_start.py --write   # and put it into README.md (its seconds figure kept)

The run directory's path is shown as outputs/.../plan.json; tests/cli/test_readme.py compares the
block with the command's output, the timing figure aside.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMAND = "plbjax state=examples/small.yaml"
BLOCK = re.compile(r"(## Quick start\n\n```console\n)(.*?)(```\n)", re.S)


def printed() -> list[str]:
    """What the command prints on stdout (progress goes to stderr), the plan's path as README shows it."""
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(
            [sys.executable, "-m", "plbjax.cli", f"state={ROOT / 'examples' / 'small.yaml'}"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
    return [
        re.sub(r"^plan written to .*plan\.json$", "plan written to outputs/.../plan.json", line)
        for line in done.stdout.splitlines()
    ]


def block(lines: list[str]) -> str:
    return "\n".join([f"$ {COMMAND}", *lines]) + "\n"


def in_readme() -> str:
    """The Quick start block README shows now."""
    found = BLOCK.search(README.read_text())
    assert found, "README.md has no Quick start console block"
    return found[2]


def comparable(text: str) -> list[str]:
    """`text`'s lines with the run's seconds (the summary's first line ends with them) left out."""
    return [re.sub(r"; [\d.]+ s$", "; ... s", line) for line in text.splitlines()]


def with_seconds_of(text: str, shown: str) -> str:
    """`text` with the run's seconds that `shown` gives (they depend on the machine, its load and
    the compilation cache, not on the commit)."""
    seconds = re.search(r"; ([\d.]+) s$", shown, re.M)
    return re.sub(r"; [\d.]+ s$", f"; {seconds[1]} s", text, count=1, flags=re.M) if seconds else text


def main() -> None:
    text = block(printed())
    print(text, end="")
    if "--write" in sys.argv[1:]:  # README keeps its seconds figure
        text = with_seconds_of(text, in_readme())
        README.write_text(BLOCK.sub(lambda m: m[1] + text + m[3], README.read_text(), count=1))


if __name__ == "__main__":
    main()
