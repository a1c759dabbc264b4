"""Flows as columns: what a list of `Flow` says, one numpy array per field and a row per flow.

The collectives of a scenario are hundreds of thousands to millions of flows (a ring over n
ranks has 2(n-1) x n x queue pairs flows per iteration); as `Flow` objects they cost about a
kilobyte and microseconds each to build, pass and read back, more than the simulation itself
at 200 servers. A `FlowTable` holds them in about 80 bytes a row; the core takes its columns
as they are (`labs.sim.build`) and gives its results back as columns (`FlowStats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

TRANSPORTS = ("open", "rc", "tcp")
"""Flow.transport values, in the core's order (the `transport` column)."""

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class FlowTable:
    """Flows as columns, a row each, with the meaning of `Flow`'s fields (read-only: a
    column of one value is that value repeated, `np.broadcast_to`, taking no memory). Hosts
    are indices into the experiment's hosts; `after` lists rows of this table (no repeats
    within a row), row i's from `after_start[i]` to `after_start[i + 1]`. -1 or 0 where
    `Flow` has None:
    `size` -1 open-ended, `rate` 0 line rate, `stop` inf never, `priority` -1 the source
    host's dscp_to_tc, `packet_bytes` 0 the experiment's, `src_port` -1 one of the source
    host's ports by hash, else its position among the host's ports (in link order)."""

    names: npt.NDArray[np.bytes_]
    src: I32
    dst: I32
    size: I64
    rate: F64
    start: F64
    stop: F64
    after_delay: F64
    dscp: I32
    priority: I32
    dcqcn: B
    ecn_capable: B
    packet_bytes: I32
    ttl: I32
    transport: npt.NDArray[np.int8]
    src_port: I32
    after_start: I64
    after: I32

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def of(
        cls, names: npt.ArrayLike, src: npt.ArrayLike, dst: npt.ArrayLike, **given: Any
    ) -> FlowTable:
        """A table of these rows; columns not given take `Flow`'s defaults (a DCQCN flow of
        DSCP 26, open transport, at line rate from 0, after nothing)."""
        names = np.asarray(names, dtype=np.bytes_)
        labels = np.asarray(names, dtype=np.bytes_)
        n = len(labels)
        defaults: dict[str, Any] = {
            "size": -1,
            "rate": 0.0,
            "start": 0.0,
            "stop": np.inf,
            "after_delay": 0.0,
            "dscp": 26,
            "priority": -1,
            "dcqcn": True,
            "packet_bytes": 0,
            "ttl": 64,
            "transport": 0,
            "src_port": -1,
        }
        types = {
            "size": np.int64,
            "rate": np.float64,
            "start": np.float64,
            "stop": np.float64,
            "after_delay": np.float64,
            "dscp": np.int32,
            "priority": np.int32,
            "dcqcn": np.bool_,
            "ecn_capable": np.bool_,
            "packet_bytes": np.int32,
            "ttl": np.int32,
            "transport": np.int8,
            "src_port": np.int32,
        }
        columns: dict[str, Any] = {}
        for name, dtype in types.items():
            value = given.pop(name, defaults.get(name))
            if value is None:  # ecn_capable: as cc
                value = columns["dcqcn"]
            column: npt.NDArray[Any] = np.broadcast_to(np.asarray(value, dtype=dtype), (n,))
            columns[name] = column if np.ndim(value) == 0 else column.copy()
        after_start = given.pop("after_start", None)
        after = given.pop("after", None)
        if given:
            raise TypeError(f"FlowTable.of: unknown columns {', '.join(given)}")
        return cls(
            names=names,
            src=np.asarray(src, dtype=np.int32),
            dst=np.asarray(dst, dtype=np.int32),
            after_start=np.zeros(n + 1, np.int64)
            if after_start is None
            else np.asarray(after_start, np.int64),
            after=np.zeros(0, np.int32) if after is None else np.asarray(after, np.int32),
            **columns,
        )

    @staticmethod
    def concat(tables: Sequence[FlowTable]) -> FlowTable:
        """The rows of `tables` in order (each one's `after` moved by the rows before it)."""
        if len(tables) == 1:
            return tables[0]
        offsets = np.cumsum([0, *(len(t) for t in tables)])
        columns: dict[str, Any] = {}
        for f in fields(FlowTable):
            parts = [getattr(t, f.name) for t in tables]
            if f.name == "after_start":
                starts = np.cumsum([0, *(len(t.after) for t in tables)])
                parts = [p[:-1] + s for p, s in zip(parts, starts[:-1], strict=True)]
                parts.append(np.array([starts[-1]], np.int64))
            elif f.name == "after":
                parts = [(p + o).astype(np.int32) for p, o in zip(parts, offsets[:-1], strict=True)]
            columns[f.name] = _joined(parts) if parts else np.zeros(0)
        return FlowTable(**columns)

    def name(self, row: int) -> str:
        return bytes(self.names[row]).decode()

    def with_transport(self, transport: str) -> FlowTable:
        """Every row over `transport`."""
        code = TRANSPORTS.index(transport)
        return replace(self, transport=np.full(len(self), code, np.int8))


def _joined(parts: Sequence[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """The parts one after another; one value repeated when every part repeats it."""
    if (
        all(p.strides == (0,) for p in parts)
        and len({p[:1].tobytes() for p in parts if len(p)}) < 2
    ):
        value = next((p[:1] for p in parts if len(p)), parts[0][:0])
        return np.broadcast_to(value, (sum(len(p) for p in parts),))
    return np.concatenate(parts)


@dataclass(frozen=True, eq=False)
class FlowStats:
    """What the core reports for the rows of a `FlowTable`, as `FlowResult` fields: times in
    seconds (nan: never), `size` -1 for an open-ended flow."""

    size: I64
    bytes_sent: I64
    bytes_delivered: I64
    bytes_dropped: I64
    cnps: I64
    ecn_marks: I64
    start: F64
    completion: F64
    first_drop: F64
    retransmitted_packets: I64
    timeouts: I64

    def __len__(self) -> int:
        return len(self.size)

    def as_lists(self) -> dict[str, Any]:
        """Every column as a list (for JSON), nan as None."""
        return as_lists(self)


def as_lists(columns: Any) -> dict[str, Any]:
    """Every column of a dataclass of columns as a list (for JSON), nan as None; any other
    field as it is."""
    out: dict[str, Any] = {}
    for f in fields(columns):
        column = getattr(columns, f.name)
        if not isinstance(column, np.ndarray):
            out[f.name] = column
        elif column.dtype.kind == "f":
            out[f.name] = [None if np.isnan(x) else x for x in column.tolist()]
        else:
            out[f.name] = column.tolist()
    return out


@dataclass(frozen=True, eq=False)
class Ring:
    """A ring collective the core makes step by step (labs/sim/csrc/coll.c): ranks r = 0..n-1
    (host indices `hosts`), `qps` queue pairs each; in step k rank r sends chunk (r - k) mod n
    (`chunks`, split over its QPs, larger parts first) to rank r + 1, once its own step k-1
    and rank r-1's are done; `n_steps` steps, `iterations` times. Its slots are rows
    [`first_row`, `first_row` + n x qps) of the experiment's table, rank-major: the flows of
    step 0 of iteration 0, named `p<phase>.i0.s0.<src>><dst>.<qp>` (later steps' ECMP keys
    follow from their names as the table's would)."""

    first_row: int
    hosts: I32
    qps: int
    n_steps: int
    iterations: int
    phase: int
    chunks: I64

    @property
    def slots(self) -> int:
        return len(self.hosts) * self.qps

    @property
    def steps(self) -> int:
        """The steps each slot runs: every step of every iteration."""
        return self.n_steps * self.iterations


@dataclass(frozen=True, eq=False)
class Replay:
    """Any other schedule the core runs from one iteration's rows (labs/sim/csrc/coll.c): its
    `names` rows (the barrier last, `end`), each from host `src` to host `dst`, given in the
    experiment's table as iterations 0 and 1 from `first_row` (rows of one iteration, then
    the next), run `iterations` (>= 2) times: in an iteration row i waits for `deps[i]` rows
    (the rows in `woken` wait for the iteration before alone). A row's ECMP key follows from
    its name in each iteration, `p<phase>.i<iteration>.<name>`, as the table's would."""

    first_row: int
    names: Sequence[bytes]
    src: I32
    dst: I32
    deps: I32
    woken: I32
    iterations: int
    phase: int

    @property
    def slots(self) -> int:
        return len(self.names)

    @property
    def steps(self) -> int:
        """The steps each slot (row) runs: one an iteration."""
        return self.iterations


@dataclass(frozen=True, eq=False)
class CollectiveStats:
    """What the core reports for a `Ring` or `Replay`: per slot (a ring's, rank-major; a
    replay's row) the sums over the steps it ran (times in seconds, nan: never; packets
    counted per step as `FlowStats` rows would be), and when each iteration ended (nan:
    never)."""

    bytes_sent: I64
    bytes_delivered: I64
    bytes_dropped: I64
    cnps: I64
    ecn_marks: I64
    packets_sent: I64
    packets_delivered: I64
    packets_dropped: I64
    first_start: F64
    last_completion: F64
    first_drop: F64
    steps_done: I64
    """Per slot, the steps it finished (of its collective's `steps` each)."""
    iteration_ends: F64
    held: int = 0
    """A replay's starts held back: a row ready while its run two iterations before still ran
    (the table's run would have overlapped them)."""

    def as_lists(self) -> dict[str, Any]:
        """Every column as a list (for JSON), nan as None."""
        return as_lists(self)
