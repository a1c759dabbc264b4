"""The event log of a lab: faults and state changes, one JSON object per line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"


def append(lab_dir: Path, event: str, **fields: Any) -> dict[str, Any]:
    """Append an event with a timestamp (seconds since the epoch) and return it."""
    record = {"t": round(time.time(), 6), "event": event, **fields}
    with open(lab_dir / EVENTS_FILE, "a") as log:
        log.write(json.dumps(record) + "\n")
    return record


def read(lab_dir: Path, since: float = 0.0) -> list[dict[str, Any]]:
    """Events at or after `since`."""
    path = lab_dir / EVENTS_FILE
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["t"] >= since]
