"""Times as SF's REST API writes them (ISO 8601 UTC, e.g. ``2026-01-01T05:00:00.000Z``), to and from Unix seconds."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime


def iso(moment: float) -> str:
    """SF's ISO 8601 UTC form of Unix seconds (milliseconds, a trailing Z)."""
    whole = math.floor(moment)
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int(round((moment - whole) * 1000)) % 1000:03d}Z"
    )


def parse_utc(text: str) -> float:
    """Unix seconds of an ISO 8601 time (a trailing Z or an offset; none: UTC); ValueError if it is not one."""
    moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
