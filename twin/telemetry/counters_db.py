"""A switch's COUNTERS_DB as operators have it, read into neutral form.

The forms read: `sonic-db-dump -n COUNTERS_DB -y` (what `show techsupport` saves as
`dump/COUNTERS_DB_<n>.json`: each key `{"type": "hash", "value": {...}, "ttl": T,
"expireat": E}`, read at E - T), and a plain redis dump (`{"KEY": {field: value}}`, no read
times: sonic-utilities' tests/mock_tables). The name maps (`COUNTERS_PORT_NAME_MAP`,
`COUNTERS_QUEUE_NAME_MAP` with `COUNTERS_QUEUE_TYPE_MAP`, `COUNTERS_PG_NAME_MAP`) resolve
`COUNTERS:oid:...` to ports, unicast queues and priority groups; multicast queues are left
out. Watermarks (`COUNTERS:`, `PERIODIC_`, `PERSISTENT_`, `USER_WATERMARKS:`) are maxima,
never counters: each queue's and PG's is kept as the largest any of them holds, an upper
bound of its occupancy since someone cleared it (../shared/reference/telemetry.md). The
counter names are SAI's (sonic-swss e6b0c5b, `orchagent/flexcounterorch.cpp`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin import safeio
from twin.errors import InputError

DUMP_BYTES = 256 << 20
"""The largest dump read (a 34-port device's is 1.2 MB)."""
WATERMARK_TABLES = ("COUNTERS", "PERIODIC_WATERMARKS", "PERSISTENT_WATERMARKS", "USER_WATERMARKS")
WATERMARKS = (
    "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES",
    "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES",
    "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES",
)
Key = tuple[str, int]
"""(port, index) of a queue or a priority group."""


@dataclass
class Dump:
    """One COUNTERS_DB snapshot of one switch: counters by port, unicast queue and PG."""

    path: str
    ports: dict[str, dict[str, int]] = field(default_factory=dict)
    queues: dict[Key, dict[str, int]] = field(default_factory=dict)
    pgs: dict[Key, dict[str, int]] = field(default_factory=dict)
    queue_watermarks: dict[Key, int] = field(default_factory=dict)
    pg_watermarks: dict[Key, int] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    """When each counter key was read (empty in a dump without read times)."""

    @property
    def first(self) -> float | None:
        """When its first key was read."""
        return min(self.times) if self.times else None

    @property
    def last(self) -> float | None:
        """When its last key was read."""
        return max(self.times) if self.times else None


def _hash(entry: Any) -> tuple[dict[str, Any], float | None] | None:
    """A key's fields and read time, in the `-y` form or the plain one (None: not a hash)."""
    if isinstance(entry, dict) and entry.get("type") == "hash" and "value" in entry:
        value, ttl, expire = entry["value"], entry.get("ttl"), entry.get("expireat")
        if not isinstance(value, dict):
            return None
        numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (ttl, expire))
        return value, float(expire) - float(ttl) if numbers else None  # type: ignore[arg-type]
    if isinstance(entry, dict):
        return entry, None
    return None


def _numbers(fields: dict[str, Any]) -> dict[str, int]:
    """The fields that are decimal counters (a platform's `N/A` and the like left out)."""
    return {k: int(v) for k, v in fields.items() if isinstance(v, str) and v.isdigit()}


def _split(name: str, where: str, key: str) -> Key:
    port, _, index = name.rpartition(":")
    if not port or not index.isdigit():
        raise InputError(where, key, f"{name!r} is not PORT:INDEX")
    return port, int(index)


def parse(data: Any, where: str) -> Dump:
    """A COUNTERS_DB dump already parsed from JSON, or one line naming what is wrong."""
    if not isinstance(data, dict):
        raise InputError(where, "", "not a COUNTERS_DB dump (a JSON object of keys)")
    hashes: dict[str, tuple[dict[str, Any], float | None]] = {}
    for key, entry in data.items():
        got = _hash(entry)
        if got is not None:
            hashes[key] = got

    def name_map(key: str) -> dict[str, str]:
        fields = hashes.get(key, ({}, None))[0]
        return {k: v for k, v in fields.items() if k and isinstance(v, str) and v}

    ports = name_map("COUNTERS_PORT_NAME_MAP")
    if not ports:
        raise InputError(where, "COUNTERS_PORT_NAME_MAP", "missing: not a COUNTERS_DB dump")
    types = name_map("COUNTERS_QUEUE_TYPE_MAP")
    dump = Dump(where)
    for port, oid in ports.items():
        fields, read = hashes.get(f"COUNTERS:{oid}", ({}, None))
        dump.ports[port] = _numbers(fields)
        if read is not None:
            dump.times.append(read)
    for kind, table, marks in (
        ("queue", dump.queues, dump.queue_watermarks),
        ("pg", dump.pgs, dump.pg_watermarks),
    ):
        names = name_map(f"COUNTERS_{kind.upper()}_NAME_MAP")
        for name, oid in names.items():
            if kind == "queue" and types.get(oid, "SAI_QUEUE_TYPE_UNICAST") != (
                "SAI_QUEUE_TYPE_UNICAST"
            ):
                continue
            key = _split(name, where, f"COUNTERS_{kind.upper()}_NAME_MAP")
            table[key] = _numbers(hashes.get(f"COUNTERS:{oid}", ({}, None))[0])
            seen = [
                _numbers(hashes.get(f"{t}:{oid}", ({}, None))[0]).get(w, 0)
                for t in WATERMARK_TABLES
                for w in WATERMARKS
            ]
            marks[key] = max(seen, default=0)
    return dump


def read(path: Path) -> Dump:
    """Read a dump file (bounded), or one line naming the file and what is wrong."""
    raw = safeio.read(path, DUMP_BYTES)
    if raw is None:
        raise InputError(str(path), "", "no such file")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(str(path), "", f"not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise InputError(str(path), "", f"not readable JSON: {exc}") from None
    return parse(data, str(path))
