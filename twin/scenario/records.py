"""The records of a run directory, typed: what `twin.scenario.observations` writes and reads
and docs/observations.md describes, key by key.

A backend fills them (`labs.backend.Played`), the player saves them, the hybrid run adds the
simulator's to a live run's. JSON is the format on disk: a record is the object of its file
(`RunRecord` is run.json, `Counters` counters.json, a `FlowRecord` one element of
flows.json, an `Event` one line of events.jsonl). Backends may add keys they document; the
keys here are the ones every reader may rely on (`NotRequired`: present when the backend or
the run has it). `SCHEMA` versions them: a reader refuses a run of a newer major version.
They live apart from the module that writes and reads them so that `labs.backend`, which
that module imports, can type `Played` with them.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, cast

SCHEMA = "1.2"
"""`MAJOR.MINOR` of the records: a new minor adds keys older readers may ignore; a new major
changes or removes some. Runs saved before run.json named it are 1.0."""


class PhaseFlow(TypedDict):
    """A flow of a traffic phase."""

    flow_id: int
    src: str
    dst: str
    qp: int


PhaseRecord = TypedDict(
    "PhaseRecord",
    {
        "index": int,
        "label": str,
        "kind": str,
        "class": str,
        "start": float,
        "end": float,
        "pps_per_flow": float | None,
        "dscp": dict[str, int],
        "flows": list[PhaseFlow],
        "sent": NotRequired[dict[str, int]],
        "probe": NotRequired[list[dict[str, Any]]],
        "analytical": NotRequired[dict[str, float] | None],
        "gbps_per_flow": NotRequired[float | None],
        "iterations": NotRequired[int],
    },
)
"""A traffic phase as played: its flows, when it ran, what each flow id sent."""


class FaultRecord(TypedDict):
    """A fault the run fired: the event the backend logged, its index and when the run fired
    it (`began`). Which of the optional keys it has depends on its kind."""

    index: int
    began: float
    t: float
    event: str
    fault: str
    link: NotRequired[str]
    ends: NotRequired[list[str]]
    node: NotRequired[str]
    daemon: NotRequired[str]
    percent: NotRequired[float]
    mbit: NotRequired[float]
    period: NotRequired[float]
    count: NotRequired[int]
    priority: NotRequired[int]
    duration: NotRequired[float]
    delay_ms: NotRequired[float]
    backend: NotRequired[str]


class DataPlane(TypedDict):
    """In a hybrid run: the simulator that played the data plane and on which FIBs."""

    backend: str
    time_scale: float
    fibs: list[str]


class RunRecord(TypedDict):
    """run.json."""

    schema: str
    lab: str
    lab_dir: str
    """The lab directory, absolute (relative in runs saved before `lab_from_run`)."""
    lab_from_run: NotRequired[str]
    """The lab directory relative to the run directory: found when both were copied or
    downloaded together (a CI artifact)."""
    backend: str
    capabilities: list[str]
    scenario: str
    started: float
    ended: float
    fault_margin: float
    phases: list[PhaseRecord]
    faults: list[FaultRecord]
    fibs: dict[str, float]
    """Snapshot label -> time taken; each is `fib/LABEL.json`."""
    fib_faults: dict[str, int]
    """Snapshot label -> the index of the fault it was taken after (start and end: none)."""
    servers: list[str]
    uplinks: dict[str, list[str]]
    stamp: dict[str, str]
    """What played the run (`twin.version.stamp`)."""
    data_plane: NotRequired[DataPlane]


class Sample(TypedDict):
    """Cumulative counters of every `node:port` at time `t`, in the order of `fields`."""

    t: float
    c: dict[str, list[int]]


class Counters(TypedDict):
    """counters.json."""

    interval: float
    fields: list[str]
    samples: list[Sample]


FlowRecord = TypedDict(
    "FlowRecord",
    {
        "flow_id": int,
        "src": str,
        "dst": str,
        "qp": int,
        "phase": str,
        "class": str,
        "dscp_sent": int,
        "pps": float,
        "sent": int,
        "received": int,
        "lost": int,
        "tail_lost": int,
        "reordered": int,
        "gaps": list[list[float]],
        "dscp_received": dict[str, int],
        "ecn_received": dict[str, int],
        "latency_us": NotRequired[dict[str, float]],
        "bytes_sent": NotRequired[int],
        "bytes_delivered": NotRequired[int],
        "bytes_dropped": NotRequired[int],
        "cnps": NotRequired[int],
        "completed": NotRequired[bool],
        "active_s": NotRequired[float],
        "transport": NotRequired[str],
        "retransmitted": NotRequired[int],
        "timeouts": NotRequired[int],
        "goodput_bps": NotRequired[float],
    },
)
"""One flow of flows.json (the simulator adds the byte counts, CNPs, completion and, for a
flow a transport made reliable, what it resent, its timeouts and its goodput)."""


class Event(TypedDict):
    """A line of events.jsonl: the lab's event log during the run, and in a hybrid run the
    simulator's own events (`sim_t`: simulated seconds; `t` the live time it stands for)."""

    t: float
    event: str
    scenario: NotRequired[str]
    fault: NotRequired[str]
    link: NotRequired[str]
    ends: NotRequired[list[str]]
    node: NotRequired[str]
    port: NotRequired[str]
    priority: NotRequired[int]
    detail: NotRequired[str]
    cycle: NotRequired[list[str]]
    peer: NotRequired[str]
    state: NotRequired[str]
    reason: NotRequired[str]
    prefix: NotRequired[str]
    paths: NotRequired[int]
    was: NotRequired[int]
    backend: NotRequired[str]
    sim_t: NotRequired[float]
    daemon: NotRequired[str]
    pid: NotRequired[int]
    watched: NotRequired[int]
    interval: NotRequired[float]


def fib_label(fault: int | None, kind: str = "") -> str:
    """The label of a FIB snapshot: `start` and `end` (`fault` None, `kind` naming which),
    else `fault<N>-<kind>` taken after the fault of index `fault` (N = index + 1).

    >>> fib_label(None, "start"), fib_label(0, "link-down")
    ('start', 'fault1-link-down')
    """
    return kind if fault is None else f"fault{fault + 1}-{kind}"


def logged(fault: FaultRecord) -> Event:
    """The event a fault logged: its record without the run's index and firing time."""
    return cast(Event, {k: v for k, v in fault.items() if k not in ("index", "began")})
