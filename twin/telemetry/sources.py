"""The sources `twin import` reads, each into switches' COUNTERS_DB snapshots in time order:

- `SWITCH=FIRST[,SECOND]`: files of one switch, each a `sonic-db-dump -n COUNTERS_DB -y` file
  or a plain dump (`counters_db`), a gnmic or pygnmi answer (`gnmi`), a scrape or a range
  query of the exporter (`exporter`: only the switch's series);
- a directory holding `COUNTERS_DB_<n>.json` (directly or under `dump/`): `show techsupport`'s
  extracted `sonic_dump_<host>_<time>/`, or what `twin export --format sonic-db` writes; the
  switch is the directory's name, or the `<host>` of a `sonic_dump_` one;
- a `show techsupport` archive `sonic_dump_<host>_<time>.tar[.gz]` (its
  `dump/COUNTERS_DB_<n>.json` are read from the archive, never extracted);
- any other file: a Prometheus range query or scrape of several switches (`switch` label).

Every file is read bounded, refusing links (`safeio`).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from twin import safeio
from twin.errors import InputError
from twin.lab.directory import Lab
from twin.telemetry import counters_db, exporter, gnmi, qos_maps
from twin.telemetry.counters_db import Dump

SNAPSHOT = re.compile(r"(?:^|/)(?:dump/)?COUNTERS_DB_(\d+)\.json$")
ARCHIVE_HOST = re.compile(r"^sonic_dump_(.+)_\d{8}_\d{6}(?:\.tar(?:\.gz)?)?$")


def _archive(path: Path) -> list[Dump]:
    """The COUNTERS_DB snapshots of a techsupport archive, in order, read from the archive."""
    found: dict[int, Dump] = {}
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                m = SNAPSHOT.search(member.name)
                if not m or not member.isfile():
                    continue
                if member.size > counters_db.DUMP_BYTES:
                    raise InputError(str(path), member.name, "larger than a COUNTERS_DB dump")
                raw = tar.extractfile(member)
                data = json.load(io.TextIOWrapper(raw)) if raw else None
                found[int(m[1])] = counters_db.parse(data, f"{path}:{member.name}")
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise InputError(str(path), "", f"not a readable techsupport archive: {exc}") from None
    return [found[n] for n in sorted(found)]


def _directory(path: Path) -> list[Dump]:
    snapshots = sorted(
        (int(m[1]), p)
        for p in [*path.glob("COUNTERS_DB_*.json"), *path.glob("dump/COUNTERS_DB_*.json")]
        if (m := SNAPSHOT.search(p.as_posix()))
    )
    return [counters_db.read(p) for _, p in snapshots]


def _host(name: str) -> str:
    m = ARCHIVE_HOST.match(name)
    return m[1] if m else name


def _file(path: Path) -> Dump | list[exporter.Series]:
    """A file of any form: a Dump (COUNTERS_DB, gNMI) or the series of a Prometheus source."""
    where = str(path)
    raw = safeio.read(path, counters_db.DUMP_BYTES)
    if raw is None:
        raise InputError(where, "", "no such file")
    if raw.lstrip()[:1] not in (b"{", b"["):
        return exporter.read_text(raw, where)
    try:
        data: Any = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(where, "", f"not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise InputError(where, "", f"not readable JSON: {exc}") from None
    if gnmi.looks_like(data):
        return gnmi.parse(data, where)
    if exporter.looks_like_range(data):
        return exporter.from_range(data, where)
    return counters_db.parse(data, where)


def _maps(lab: Lab) -> Callable[[str], qos_maps.SwitchMaps]:
    def of(switch: str) -> qos_maps.SwitchMaps:
        if switch not in lab.switches():
            raise InputError(str(lab.path), switch, f"lab {lab.name} has no switch {switch}")
        return qos_maps.of(lab, switch)

    return of


def _switch_files(switch: str, files: list[str], lab: Lab) -> list[Dump]:
    dumps: list[Dump] = []
    for name in files:
        got = _file(Path(name))
        if isinstance(got, Dump):
            dumps.append(got)
        else:
            dumps += exporter.dumps(got, name, switch, _maps(lab)).get(switch, [])
    return dumps


def read(given: Iterable[str], lab: Lab) -> dict[str, list[Dump]]:
    """Each switch's snapshots, in time order, from the command line's sources."""
    switches: dict[str, list[Dump]] = {}
    for source in given:
        path = Path(source)
        if "=" in source and not path.exists():
            switch, _, files = source.partition("=")
            found = {switch: _switch_files(switch, [f for f in files.split(",") if f], lab)}
        elif path.is_dir():
            found = {_host(path.name): _directory(path)}
        elif path.is_file() and tarfile.is_tarfile(path):
            found = {_host(path.name): _archive(path)}
        elif path.is_file():
            got = _file(path)
            if isinstance(got, Dump):
                raise InputError(source, "", "one switch's dump: give it as SWITCH=FILE")
            found = exporter.dumps(got, source, None, _maps(lab))
        else:
            raise InputError(
                source, "", "not SWITCH=FILE[,FILE], a file, a directory or an archive"
            )
        for switch, dumps in found.items():
            if not 1 <= len(dumps) <= 2:
                raise InputError(source, "", f"{len(dumps)} COUNTERS_DB snapshots (give 1 or 2)")
            if switch in switches:
                raise InputError(source, "", f"switch {switch} given twice")
            switches[switch] = dumps
    if not switches:
        raise InputError("twin import", "SOURCE", "no source given")
    return switches
