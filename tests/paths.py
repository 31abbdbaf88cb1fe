"""Where the tests find the repository: its root, the bundled examples, and the tests' own data."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
EXAMPLES = ROOT / "examples"
DATA = TESTS / "data"
