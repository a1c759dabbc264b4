"""gNMI answers of sonic-gnmi's COUNTERS_DB paths, as gnmic and pygnmi print them, read into
a `counters_db.Dump`.

sonic-gnmi (5ec1c20, `sonic_data_client/virtual_db.go`, its testdata) serves COUNTERS_DB under
paths keyed by port name, no oids: `COUNTERS/Ethernet68` (the port's fields),
`COUNTERS/Ethernet*` (port -> fields), `COUNTERS/Ethernet*/<FIELD>`, `COUNTERS/Ethernet*/Queues`
and `/Pfcwd` ("Ethernet68:1" -> the queue's fields, "Ethernet68:1:periodic" -> its periodic
watermark), `PERIODIC_WATERMARKS/Ethernet*/PriorityGroups` ("Ethernet16:5" -> the PG's
watermarks). PG counters (the lossless drops) have no such path: they are read from the
table paths `COUNTERS_PG_NAME_MAP` ("Ethernet0:3" -> oid) and `COUNTERS/oid:...` (the PG's
fields). Values come as `json_ietf_val`. The two client shapes:

- gnmic (`get`, `subscribe --format json`): a notification `{"source", "timestamp" (ns),
  "time", "prefix", "target", "updates": [{"Path": P, "values": {P: value}}]}`, or a list of
  them;
- pygnmi `get()`: `{"notification": [{"timestamp", "prefix", "alias", "atomic", "update":
  [{"path": P, "val": value}]}]}`.

Every notification's timestamp (the server's read time) is a read time of the snapshot.
Multicast queues cannot be told apart here (no type map): queues are taken as they come.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from twin.errors import InputError
from twin.telemetry.counters_db import WATERMARKS, Dump, Key

PG_NAMES = "COUNTERS_PG_NAME_MAP"
TABLES = ("COUNTERS", "PERIODIC_WATERMARKS", "PERSISTENT_WATERMARKS", "USER_WATERMARKS", PG_NAMES)
"""The COUNTERS_DB tables read; a path's elements before one of them (a target) are left out."""


def looks_like(data: Any) -> bool:
    """Whether parsed JSON is a gnmic or pygnmi answer."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, dict) and ("updates" in first or "notification" in first)


def _updates(data: Any, where: str) -> Iterator[tuple[float | None, str, Any]]:
    """(read time, path, value) of every update, whichever client printed it."""
    notes = data if isinstance(data, list) else data.get("notification", [data])
    for note in notes:
        if not isinstance(note, dict):
            raise InputError(where, "", "a gNMI notification is not a JSON object")
        ts = note.get("timestamp")
        read = ts / 1e9 if isinstance(ts, int | float) and not isinstance(ts, bool) else None
        prefix = note.get("prefix") if isinstance(note.get("prefix"), str) else ""
        for update in note.get("updates", note.get("update", [])) or []:
            if not isinstance(update, dict):
                raise InputError(where, "update", "not a JSON object")
            if "values" in update and isinstance(update["values"], dict):  # gnmic
                for path, value in update["values"].items():
                    yield read, f"{prefix}/{path}", value
            else:  # pygnmi
                yield (
                    read,
                    f"{prefix}/{update.get('path', update.get('Path', ''))}",
                    update.get("val"),
                )


def _elements(path: str, where: str) -> list[str]:
    """The path from its table on: [table, port or pattern, sub-path...]."""
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        if part in TABLES:
            return parts[i:]
    raise InputError(where, path, f"not a path of {', '.join(TABLES)}")


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _numbers(fields: Any) -> dict[str, int]:
    if not isinstance(fields, dict):
        return {}
    return {k: int(v) for k, v in fields.items() if isinstance(v, str) and v.isdigit()}


def _index(name: str, where: str) -> tuple[Key, bool]:
    """("Ethernet68", 1) of "Ethernet68:1", and whether it is a ":periodic" watermark entry."""
    periodic = name.endswith(":periodic")
    port, _, index = name.removesuffix(":periodic").rpartition(":")
    if not port or not index.isdigit():
        raise InputError(where, name, "is not PORT:INDEX")
    return (port, int(index)), periodic


def _add(dump: Dump, elements: list[str], value: Any, where: str, raw: dict[str, Any]) -> None:
    """Add an update's value to the dump; a name map's and an oid's to `raw`."""
    table, pattern, sub = elements[0], elements[1] if len(elements) > 1 else "", elements[2:]
    value = _decoded(value)
    if table == PG_NAMES or pattern.startswith("oid:"):
        raw[pattern or table] = value
        return
    if sub and sub[0] in ("Queues", "Pfcwd", "PriorityGroups"):
        if not isinstance(value, dict):
            raise InputError(where, "/".join(elements), "not a map of PORT:INDEX entries")
        pg = sub[0] == "PriorityGroups"
        for name, fields in value.items():
            key, periodic = _index(name, where)
            stats = _numbers(fields)
            marks = dump.pg_watermarks if pg else dump.queue_watermarks
            mark = max((stats.get(w, 0) for w in WATERMARKS), default=0)
            marks[key] = max(marks.get(key, 0), mark)
            if table == "COUNTERS" and not periodic:
                table_of = dump.pgs if pg else dump.queues
                table_of.setdefault(key, {}).update(stats)
        return
    if table != "COUNTERS":
        return  # port-level watermarks: none in COUNTERS_DB
    if "*" not in pattern:  # one port: its fields, or one field's bare value
        fields = {sub[0]: value} if sub and not isinstance(value, dict) else value
        value = {pattern: fields}
    if not isinstance(value, dict):
        raise InputError(where, "/".join(elements), "not a map of ports")
    for port, fields in value.items():
        dump.ports.setdefault(port, {}).update(_numbers(fields))


def parse(data: Any, where: str) -> Dump:
    """A gnmic or pygnmi answer already parsed from JSON, or one line naming what is wrong."""
    if not looks_like(data):
        raise InputError(where, "", "not a gnmic or pygnmi answer")
    dump = Dump(where)
    raw: dict[str, Any] = {}
    for read, path, value in _updates(data, where):
        _add(dump, _elements(path, where), value, where, raw)
        if read is not None:
            dump.times.append(read)
    names = raw.get(PG_NAMES)
    for name, oid in names.items() if isinstance(names, dict) else ():
        if oid in raw:
            dump.pgs[_index(name, where)[0]] = _numbers(raw[oid])
    if not dump.ports and not dump.queues and not dump.pgs:
        raise InputError(where, "", "no COUNTERS of a port, queue or PG in the gNMI answer")
    return dump
