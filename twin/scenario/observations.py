"""Observations: what a scenario run recorded, backend-neutral, saved with the run.

The one module that writes a run directory (`save`, `save_scenario`, `add`: the player and
the hybrid run, every file through `twin.safeio`) and reads it back (`Observations`), in
the typed records of `twin.scenario.records`. Every file of a run directory and its schema
is in docs/observations.md. Nodes are design names and ports SONiC names (`Ethernet8`,
`PortChannel101`) whichever backend ran; a report can be rebuilt from these files alone, and
two runs compared.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from labs.backend import Played, Session
from twin import safeio
from twin.errors import InputError, LabError
from twin.intent.inputs import RUN_FILE_BYTES, parse_json, parse_model, read_file
from twin.jsonio import dumps
from twin.lab.directory import Stat, version
from twin.model.fib import Fib
from twin.scenario import fibfiles, occupancy
from twin.scenario.records import (
    SCHEMA,
    Counters,
    Event,
    FaultRecord,
    FlowRecord,
    PhaseRecord,
    RunRecord,
    fib_label,
)

FILES: dict[str, type | None] = {
    "scenario.yaml": None,
    "fabric.yaml": None,
    "run.json": RunRecord,
    "counters.json": Counters,
    "flows.json": FlowRecord,
    "bgp.json": None,
    "events.jsonl": Event,
    "fib/LABEL.json": None,
    "probes.json": None,
    "failover_probes.json": None,
    "capture/NODE_PORT.pcap": None,
    "KEY.json": None,
}
"""Every file of a run directory (docs/observations.md's table), with the typed record of
one its JSON holds (run.json, counters.json: the whole file; flows.json: an element;
events.jsonl: a line). `failover_probes.json` and `KEY.json` are a backend's `extra`, the
captures its own."""
T = TypeVar("T")
FABRIC_BYTES = 16 << 20
"""The largest fabric.yaml copied into a run directory."""


class _Sample(BaseModel):
    t: float
    c: dict[str, list[float]]


class _Counters(BaseModel):
    """What `counters.json` holds (docs/observations.md), as its readers take it."""

    interval: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    fields: list[str]
    samples: list[_Sample]

    @model_validator(mode="after")
    def _columns(self) -> _Counters:
        for i, sample in enumerate(self.samples):
            for port, values in sample.c.items():
                if len(values) != len(self.fields):
                    raise ValueError(f"samples.{i}.c.{port}: {len(values)} values, not one a field")
        return self


Number = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Gap = Annotated[list[Number | None], Field(min_length=3, max_length=3)]
"""[first lost packet sent, packets lost, next arrival: null when nothing arrived again]."""


class _ProbeFlow(BaseModel):
    """A probe flow of `failover_probes.json`, the keys `failover` reads."""

    model_config = ConfigDict(extra="allow", strict=True)

    src: str
    dst: str
    sport: int
    crossed: str
    pps: Positive
    gaps: list[Gap]


class _Restore(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    back: Number | None


class _ProbeRecord(BaseModel):
    """A fault's record of `failover_probes.json` (docs/observations.md), the keys `failover`
    reads."""

    model_config = ConfigDict(extra="allow", strict=True)

    index: int
    element: str
    pps: Positive
    flows: list[_ProbeFlow]
    why: str | None = None
    started: Number | None = None
    ends: Number | None = None
    until: Number | None = None
    restore: _Restore | None = None


class _PhaseFlow(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    flow_id: int
    src: str
    dst: str
    qp: int


class _Phase(BaseModel):
    """The keys of a phase (`PhaseRecord`) every run has."""

    model_config = ConfigDict(extra="allow", strict=True)

    index: int
    label: str
    kind: str
    traffic_class: str = Field(alias="class")
    start: Number
    end: Number
    pps_per_flow: Number | None
    dscp: dict[str, int]
    flows: list[_PhaseFlow]


class _Fault(BaseModel):
    """The keys of a fault (`FaultRecord`) every run has."""

    model_config = ConfigDict(extra="allow", strict=True)

    index: int
    began: Number
    t: Number
    event: str
    fault: str


class _RunKeys(BaseModel):
    """The phases and faults of run.json, and the keys only some runs have, of the types
    their readers take."""

    model_config = ConfigDict(extra="allow", strict=True)

    phases: list[_Phase]
    faults: list[_Fault]
    fault_margin: Number = 0.0
    fibs: dict[str, Number] = {}
    fib_faults: dict[str, int] = {}
    servers: list[str] = []
    uplinks: dict[str, list[str]] = {}


EXTRA: dict[str, type[BaseModel]] = {"failover_probes": _ProbeRecord}
"""The `extra` files whose records are checked as they are read (a list of such records)."""


class _Flow(BaseModel):
    """The keys of a flow record that validators read (backends add more)."""

    model_config = ConfigDict(extra="allow")

    flow_id: int
    src: str
    dst: str
    phase: str
    traffic_class: str = Field(alias="class")
    dscp_sent: int
    pps: float
    sent: float
    received: float
    lost: float
    tail_lost: float
    gaps: list[list[float]]
    dscp_received: dict[str, float]


RUN_KEYS: dict[str, type | tuple[type, ...]] = {
    "lab": str,
    "lab_dir": str,
    "backend": str,
    "scenario": str,
    "capabilities": list,
    "started": (int, float),
    "ended": (int, float),
    "phases": list,
    "faults": list,
}
"""The keys of run.json every run has (the player writes them), and their JSON types."""


def save_scenario(out: Path, text: str) -> None:
    """The scenario with every default written out, before it is played."""
    safeio.write(out / "scenario.yaml", text)


def save(out: Path, run: RunRecord, played: Played, fabric: Path) -> None:
    """Write a played run's observations: run.json, the backend's record and a copy of the
    lab's intent."""
    write(out, files(run, played, safeio.read(fabric, FABRIC_BYTES) or b""))


def write(out: Path, content: Mapping[str, str | bytes], lab: Path | None = None) -> None:
    """A run directory's files (name -> content: `files`) written to `out`; with `lab`, its
    run.json made to name that lab directory (a run played on a copy of it: a drill's
    worker), so that `twin report` finds it."""
    if lab is not None:
        run = json.loads(content["run.json"])
        run["lab_dir"] = str(lab.resolve())
        run["lab_from_run"] = os.path.relpath(lab.resolve(), out.resolve())
        content = {**content, "run.json": json.dumps(run, indent=1)}
    for name, data in content.items():
        safeio.write(out / name, data)


def files(run: RunRecord, played: Played, fabric: bytes) -> dict[str, str | bytes]:
    """A played run's observations as the files of its run directory (name -> content)
    but scenario.yaml: what `save` writes, what `Held` reads without a disk."""
    out: dict[str, str | bytes] = {
        "run.json": json.dumps(run, indent=1),
        "counters.json": dumps(played.counters),
        "flows.json": dumps(played.flows),
    }
    bgp = {when: [asdict(s) for s in sessions] for when, sessions in played.bgp.items()}
    out["bgp.json"] = dumps(bgp)
    out["events.jsonl"] = _lines(played.events)
    base: tuple[str, Fib] | None = None
    for label, (_, fib) in played.fibs.items():  # the first in full, the others as changes
        data = fibfiles.encode(fib, base[1], base[0]) if base else fibfiles.encode(fib)
        out[f"fib/{label}.json"] = dumps(data)
        base = base or (label, fib)
    if played.probes is not None:
        out["probes.json"] = json.dumps(played.probes, indent=1)
    out.update((f"{key}.json", dumps(value)) for key, value in played.extra.items())
    out["fabric.yaml"] = fabric
    return out


def add(out: Path, run: RunRecord, files: Mapping[str, Any], events: list[Event]) -> None:
    """Add to a saved run: more files (`KEY.json`), events, and its run.json rewritten."""
    _files(out, files)
    if events:
        safeio.append(out / "events.jsonl", _lines(events))
    safeio.write(out / "run.json", json.dumps(run, indent=1))


def _files(out: Path, files: Mapping[str, Any]) -> None:
    for key, value in files.items():
        safeio.write(out / f"{key}.json", dumps(value))


def _lines(events: Iterable[Event]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def snapshot_faults(faults: list[FaultRecord], labels: Iterable[str]) -> dict[str, int]:
    """Which fault each FIB snapshot was taken after: label -> the fault's index (the
    snapshot `fib_label` names after it; a flap's after its last change)."""
    after = {fib_label(f["index"], f["fault"].removesuffix("-done")): f["index"] for f in faults}
    return {label: after[label] for label in labels if label in after}


def _schema(path: Path, value: Any) -> None:
    """Refuse a run of a newer major schema, or a version that is not one."""
    major, _, minor = str(value).partition(".")
    if not (isinstance(value, str) and major.isdigit() and minor.isdigit()):
        raise InputError(str(path), "schema", f"{value!r} is not MAJOR.MINOR")
    if int(major) > int(SCHEMA.split(".")[0]):
        raise InputError(
            str(path), "schema", f"{value} is newer than this twin reads ({SCHEMA}): upgrade twin"
        )


@dataclass
class Observations:
    """A run directory, read lazily."""

    path: Path
    _fibs: dict[str, tuple[Stat, Fib]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _fibs_read: dict[bytes, Fib] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _extra: dict[str, tuple[Stat, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _extra_read: dict[str, tuple[bytes, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _reading: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    """FIB snapshots being read (a change file's base is read first)."""
    _derived: dict[Hashable, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def open(cls, path: Path) -> Observations:
        """Open a run directory or say what is missing."""
        if not (path / "run.json").is_file():
            raise LabError(f"{path}: not a run directory (run.json missing)")
        return cls(path)

    def _json(self, name: str, shape: type = dict) -> Any:
        """A file of the run, refused in one line when it is not JSON of the `shape` its
        readers take (a run killed while writing, or an edited file)."""
        return _shaped(parse_json(self.path / name, self._raw(name)), shape, self.path / name)

    def _has(self, name: str) -> bool:
        """Whether the run has this file."""
        return (self.path / name).exists()

    def _raw(self, name: str) -> bytes:
        """A file's bytes, or one line saying it is missing, not a regular file or larger
        than `RUN_FILE_BYTES`."""
        return read_file(self.path / name, RUN_FILE_BYTES)

    @cached_property
    def run(self) -> RunRecord:
        """Lab, backend, capabilities, times, phases and faults; each key every reader takes
        there and of its type, else refused in one line (a run saved before run.json had a
        `schema` is 1.0)."""
        data: dict[str, Any] = self._json("run.json")
        _schema(self.path / "run.json", data.setdefault("schema", "1.0"))
        for key, kind in RUN_KEYS.items():
            if key not in data:
                raise InputError(str(self.path / "run.json"), key, "missing")
            if not isinstance(data[key], kind) or isinstance(data[key], bool):
                what = "a string" if kind is str else "an array" if kind is list else "a number"
                raise InputError(str(self.path / "run.json"), key, f"not {what}")
        if not all(isinstance(c, str) for c in data["capabilities"]):
            raise InputError(str(self.path / "run.json"), "capabilities", "not all strings")
        parse_model(_RunKeys, data, str(self.path / "run.json"))
        if "fib_faults" not in data:
            data["fib_faults"] = snapshot_faults(data["faults"], data.get("fibs", {}))
        return cast(RunRecord, data)

    @cached_property
    def counters(self) -> Counters:
        """Counter samples over time."""
        data: dict[str, Any] = self._json("counters.json")
        parse_model(_Counters, data, str(self.path / "counters.json"))
        return cast(Counters, data)

    @cached_property
    def flows(self) -> list[FlowRecord]:
        """Per-flow results."""
        data: list[dict[str, Any]] = self._json("flows.json", list)
        _records(_Flow, data, self.path / "flows.json")
        return cast(list[FlowRecord], data)

    @cached_property
    def events(self) -> list[Event]:
        """Faults and state changes, in time order."""
        path = self.path / "events.jsonl"
        lines = _text(path, self._raw("events.jsonl")).splitlines() if self._has(path.name) else []
        events = []
        for number, line in enumerate(lines, 1):
            try:
                event = json.loads(line) if line.strip() else None
            except json.JSONDecodeError as exc:
                raise InputError(
                    str(path), f"line {number}", f"not valid JSON: {exc.msg}"
                ) from None
            if event is not None:
                events.append(_shaped(event, dict, path, f"line {number}"))
        return cast(list[Event], events)

    @cached_property
    def bgp(self) -> dict[str, list[Session]]:
        """BGP sessions at `start` and `end`."""
        data: dict[str, list[dict[str, Any]]] = self._json("bgp.json")
        try:
            return {when: [Session(**s) for s in sessions] for when, sessions in data.items()}
        except TypeError:
            raise InputError(str(self.path / "bgp.json"), "", "not BGP sessions by time") from None

    @property
    def capabilities(self) -> set[str]:
        """What the backend that played the run can observe."""
        return set(self.run.get("capabilities", []))

    @cached_property
    def probes(self) -> list[dict[str, Any]] | None:
        """Pairwise probe results, or None when the run did not probe."""
        if not self._has("probes.json"):
            return None
        data: list[dict[str, Any]] = self._json("probes.json", list)
        return data

    @property
    def duration(self) -> float:
        """Seconds the run lasted."""
        return float(self.run["ended"]) - float(self.run["started"])

    def fib(self, label: str) -> Fib:
        """Every node's FIB at a snapshot (`start`, `end`, `fault1-link-down`...), read
        again only when its file changed (`twin.lab.directory.version`); files of the same bytes
        (snapshots where no route changed) are one `Fib` for the life of `self`, which
        callers never change."""
        path = self.path / "fib" / f"{label}.json"
        kept, cached = self._kept(path, self._fibs.get(label))
        if cached is not None:
            return cast(Fib, cached)
        raw = self._raw(f"fib/{label}.json")
        digest = _digest(raw)
        if digest not in self._fibs_read:
            data = _shaped(parse_json(path, raw), dict, path)
            if label in self._reading:
                raise InputError(str(path), "base", "snapshots based on each other")
            self._reading.add(label)
            try:
                self._fibs_read[digest] = fibfiles.decode(data, self.fib, str(path))
            finally:
                self._reading.discard(label)
        if kept is not None:
            self._fibs[label] = (kept, self._fibs_read[digest])
        return self._fibs_read[digest]

    def extra(self, key: str) -> Any:
        """What only some backends observe (`KEY.json`: pfc, queues, iterations, sim), None
        when the run has no such file; read again only when the file changed (queues.json
        runs to tens of MB), and parsed again only when its bytes did (a file just written,
        whose `version` cannot tell: the run `twin run` judges as it saved it); callers never
        change it."""
        path = self.path / f"{key}.json"
        if not self._has(path.name):
            return None
        kept, cached = self._kept(path, self._extra.get(key))
        if cached is not None:
            return cached
        raw = self._raw(path.name)
        digest = _digest(raw)
        read = self._extra_read.get(key)
        if read is None or read[0] != digest:
            data = parse_json(path, raw)
            if key == "queues":
                data = occupancy.dense(data, str(path))
            if key in EXTRA:
                _records(EXTRA[key], data, path)
            read = self._extra_read[key] = (digest, data)
        if kept is not None:
            self._extra[key] = (kept, read[1])
        return read[1]

    def _kept(self, path: Path, cached: tuple[Stat, Any] | None) -> tuple[Stat | None, Any]:
        """A file's `version` (None: missing or just written), and what was read from it
        when that version was (else None)."""
        try:
            kept = version(path, time.time_ns())
        except OSError:
            return None, None
        return kept, cached[1] if kept is not None and cached and cached[0] == kept else None

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """What validators compute from this run and share (the buffer dependency graphs
        of its FIB snapshots), made once per `key`, which names all else it depends on."""
        if key not in self._derived:
            self._derived[key] = make()
        made: T = self._derived[key]
        return made

    def fib_labels(self) -> list[str]:
        """Snapshot labels in time order."""
        return [label for label, _ in sorted(self.run.get("fibs", {}).items(), key=lambda i: i[1])]

    def series(self, key: str, field: str) -> list[tuple[float, int]]:
        """(time, counter) samples of one `node:port` counter field."""
        column = self.counters["fields"].index(field)
        return [(s["t"], s["c"][key][column]) for s in self.counters["samples"] if key in s["c"]]

    def delta(self, key: str, field: str, start: float, end: float) -> int:
        """How much a counter grew between two times (nearest samples inside the window)."""
        points = [(t, v) for t, v in self.series(key, field) if start <= t <= end]
        return points[-1][1] - points[0][1] if len(points) > 1 else 0

    def phase(self, label: str) -> PhaseRecord:
        """A traffic phase by label."""
        for phase in self.run["phases"]:
            if phase["label"] == label:
                return phase
        raise LabError(f"{self.path}: no phase {label!r}")


def _records(model: type[BaseModel], data: Any, path: Path) -> None:
    """Refuse in one line a file that is not a list of `model` records."""
    _shaped(data, list, path)
    for i, record in enumerate(data):
        _shaped(record, dict, path, str(i))
        try:
            parse_model(model, record, "")
        except InputError as exc:
            key = ".".join(k for k in (str(i), exc.key) if k)
            raise InputError(str(path), key, exc.problem) from None


def _digest(raw: bytes) -> bytes:
    """What tells a file's bytes from another's, for what is kept by content."""
    return hashlib.blake2b(raw, digest_size=16).digest()


def _text(path: Path, raw: bytes) -> str:
    """A file's UTF-8 text, or one line saying it is not."""
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"byte {exc.start}", "not UTF-8 text") from None


def _shaped(data: Any, shape: type, path: Path, key: str = "") -> Any:
    """`data` if it is a JSON object (`dict`) or array (`list`) as `shape` says."""
    if not isinstance(data, shape):
        kind = "an object" if shape is dict else "an array"
        raise InputError(str(path), key, f"must be {kind}, not {type(data).__name__}")
    return data


@dataclass
class Held(Observations):
    """A run's observations held in memory (`files`: name -> content, as `save` would write
    them under `path`), read as a run directory is: the same parsing and the same checks,
    no disk."""

    content: Mapping[str, str | bytes] = field(default_factory=dict, repr=False, compare=False)

    def _has(self, name: str) -> bool:
        return name in self.content

    def _raw(self, name: str) -> bytes:
        if name not in self.content:
            raise InputError(str(self.path / name), "", "missing")
        value = self.content[name]
        return value.encode() if isinstance(value, str) else value

    def _kept(self, path: Path, cached: tuple[Stat, Any] | None) -> tuple[Stat | None, Any]:
        """Held files never change: whatever was read from one is kept."""
        return HELD, cached[1] if cached else None


HELD: Stat = (0, 0, 0)
"""The `version` of every held file."""
