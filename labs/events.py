"""The event log of a lab: faults and state changes, one JSON object per line.

Written through `twin.safeio` (never through a link planted in the lab directory); read
tolerantly: a line that is not an event (the last one torn by a process killed while writing
it, or anything else written there) is skipped, and the log is read up to `MAX_BYTES`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from twin import safeio

EVENTS_FILE = "events.jsonl"
MAX_BYTES = 256 << 20
"""An event log larger than this was not written by twin."""


def append(lab_dir: Path, event: str, **fields: Any) -> dict[str, Any]:
    """Append an event with a timestamp (seconds since the epoch) and return it."""
    record = {"t": round(time.time(), 6), "event": event, **fields}
    safeio.append(lab_dir / EVENTS_FILE, json.dumps(record) + "\n")
    return record


def _event(line: bytes) -> dict[str, Any] | None:
    """A line as an event (an object with a time and a name), or None."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("event"), str):
        return None
    t = record.get("t")
    return record if type(t) in (int, float) else None


def read(lab_dir: Path, since: float = 0.0) -> list[dict[str, Any]]:
    """Events at or after `since`."""
    data = safeio.read(lab_dir / EVENTS_FILE, MAX_BYTES) or b""
    events = [e for e in map(_event, data.splitlines()) if e is not None]
    return [e for e in events if e["t"] >= since]
