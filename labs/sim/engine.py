"""simulate(): build the core from an experiment, run it, read the outputs back."""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from labs.sim import native
from labs.sim.build import Built, Layout, build
from labs.sim.flows import CollectiveStats, FlowStats, Replay, Ring
from labs.sim.model import NPRIO, Experiment
from labs.sim.result import Event, FlowResult, Occupancy, PortResult, PriorityCounters, Result

LOG_KINDS = (
    "link_down",
    "link_up",
    "storm_start",
    "storm_end",
    "pause_storm",
    "watchdog_detect",
    "watchdog_restore",
    "deadlock",
    "lossless_drop",
    "transport_nak",
    "transport_timeout",
    "fast_retransmit",
    "ecn_cut",
)
"""The core's LogKind values, in order."""


def simulate(
    exp: Experiment,
    seed: int = 1,
    prepare: Callable[[Built], None] | None = None,
    dense: bool = True,
    check_routes: bool = False,
) -> Result:
    """Run `exp` with random choices (ECN marks, ECMP hashes) drawn from `seed`; `prepare`
    may add to the built core (timed route tables, rate changes) before it runs. The core
    runs in a thread of its own, without the GIL, so that SIGINT and SIGTERM stop the command
    while it runs (in the calling thread, a C call holds the signal's handler back). The
    occupancy series come as lists of every sample (`Result.queues`, `pgs`), or when not
    `dense` as their changes only (`Result.occupancy`). `check_routes`: the core takes each
    route it took ahead of an arrival again when it uses it (`Result.routes_checked`)."""
    lib = native.library()
    built = build(exp, seed)
    if check_routes:
        lib.sim_check_routes(built.handle)
    ran: list[int | BaseException] = []  # the core's answer (stopped on a deadlock) or error
    cpu: list[float] = []  # the core thread's CPU seconds in sim_run

    def run_core() -> None:
        try:
            start = time.thread_time()
            ran.append(lib.sim_run(built.handle, exp.duration, int(exp.stop_when_done)))
            cpu.append(time.thread_time() - start)
        except BaseException as exc:  # raised again in the calling thread
            ran.append(exc)

    core = threading.Thread(target=run_core, name="sim-core", daemon=True)
    try:
        if prepare is not None:
            prepare(built)
        core.start()
        core.join()  # a signal's handler (`twin.cli.signals`) raises here while the core runs
        if isinstance(ran[0], BaseException):
            raise ran[0]
        result, n_samples, changes = _collect(lib, built, exp, seed, bool(ran[0]), cpu[0])
    finally:
        if core.ident is None or ran:  # else stopped: the command exits without waiting for
            lib.sim_free(built.handle)  # the core, nor frees what its thread holds under it
    # the occupancy series once the core is freed: with the table's results, the largest outputs
    if not dense:
        return dataclasses.replace(result, occupancy=_changes(built.layout, n_samples, changes))
    queues, pgs = _occupancy(built.layout, n_samples, changes)
    return dataclasses.replace(result, queues=queues, pgs=pgs)


def _collect(
    lib: ctypes.CDLL, built: Built, exp: Experiment, seed: int, stopped: bool, core_cpu: float
) -> tuple[Result, int, npt.NDArray[np.int32]]:
    """What the core holds: the result but its occupancy series, and the samples and
    (sample, column, value) changes they come from (a copy); `core_cpu`: its run's CPU."""
    h, layout = built.handle, built.layout
    counts = (native.I64 * native.COUNTS)()
    lib.sim_counts(h, counts)
    n_samples, n_log, n_cycles, n_changes = counts[2], counts[3], counts[4], counts[6]
    changes = np.zeros((0, 3), np.int32)
    if n_changes:
        changes = np.ctypeslib.as_array(lib.sim_samples(h), shape=(n_changes, 3)).copy()
    delivered = np.zeros((0, len(layout.flows)), np.int64)
    if layout.flow_series and n_samples:  # a view of the core's samples, read before it is freed
        delivered = np.ctypeslib.as_array(
            lib.sim_flow_samples(h), shape=(n_samples, len(layout.flows))
        )
    flows, table = _flows(lib, h, layout, exp, delivered, lib.sim_now(h))
    events = _events(lib, h, layout, n_log, n_cycles)
    return (
        Result(
            experiment=exp.name,
            seed=seed,
            end_time=lib.sim_now(h),
            deadlocked=any(e.kind == "deadlock" for e in events) or stopped,
            flows=flows,
            ports=_ports(lib, h, layout),
            sample_interval=_interval(lib, h, exp),
            queues={},
            pgs={},
            events=events,
            packet_hops=counts[1],
            events_processed=counts[0],
            table=table,
            collectives=[_made(lib, h, i, c) for i, c in enumerate(exp.collectives)],
            routes_checked=(counts[8], counts[9]),
            core_cpu=core_cpu,
        ),
        n_samples,
        changes,
    )


def _interval(lib: ctypes.CDLL, h: int, exp: Experiment) -> float:
    """The interval between the run's samples: the monitor's, times 2 for each halving."""
    given = exp.monitor.interval
    return given * round(lib.sim_sample_interval(h) / given) if given > 0 else given


def _columns(
    layout: Layout, changes: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int32], list[tuple[str, bool, int, int, int]]]:
    """The core's (sample, column, value) changes sorted by column (in time within one),
    and per column its port, whether it is a queue (else a PG), its priority, and its rows
    [a, b) of the sorted changes."""
    by_column = changes[np.argsort(changes[:, 1], kind="stable")]
    columns, starts = np.unique(by_column[:, 1], return_index=True)
    ends = [*starts[1:].tolist(), len(by_column)] if len(starts) else []
    out = []
    for column, a, b in zip(columns.tolist(), starts.tolist(), ends, strict=True):
        k, j = divmod(column, 2 * NPRIO)
        out.append((":".join(layout.ports[layout.sampled_ports[k]]), j < NPRIO, j % NPRIO, a, b))
    return by_column, out


def _occupancy(
    layout: Layout, n_samples: int, changes: npt.NDArray[np.int32]
) -> tuple[dict[str, dict[int, list[int]]], dict[str, dict[int, list[int]]]]:
    """Per sampled port, the series of its queues and PGs that held anything, from the
    core's (sample, column, value) changes."""
    queues: dict[str, dict[int, list[int]]] = {}
    pgs: dict[str, dict[int, list[int]]] = {}
    by_column, columns = _columns(layout, changes)
    for name, queue, prio, a, b in columns:
        at, values = by_column[a:b, 0], by_column[a:b, 2]
        series = np.zeros(n_samples, np.int64)
        series[at[0] :] = np.repeat(values, np.diff(np.append(at, n_samples)))
        (queues if queue else pgs).setdefault(name, {})[prio] = series.tolist()
    return queues, pgs


def _changes(layout: Layout, n_samples: int, changes: npt.NDArray[np.int32]) -> Occupancy:
    """The occupancy series as their changes (`Occupancy`): each a view of one array of
    [sample, bytes, ...] pairs, no Python integer made for them (a 1,024-server run's 5.8 M)."""
    out = Occupancy(n_samples, {}, {})
    by_column, columns = _columns(layout, changes)
    flat = np.ascontiguousarray(by_column[:, 0::2]).reshape(-1)
    for name, queue, prio, a, b in columns:
        (out.queues if queue else out.pgs).setdefault(name, {})[prio] = flat[2 * a : 2 * b]
    return out


def _seconds(ps: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Picoseconds to seconds, negative (never) to nan."""
    return np.where(ps < 0, np.nan, ps * 1e-12)


def _rows(
    lib: ctypes.CDLL, h: int, first: int, n: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The core's figures of flows [first, first + n): stats, transport, first drop."""
    stats = np.zeros((max(n, 1), native.FLOW_FIELDS))
    lib.sim_flow_stats(h, first, n, stats.ctypes.data_as(native.PF64))
    transport = np.zeros((max(n, 1), native.TRANSPORT_FIELDS))
    lib.sim_flow_transport(h, first, n, transport.ctypes.data_as(native.PF64))
    dropped_at = np.zeros(max(n, 1))
    lib.sim_flow_drops(h, first, n, dropped_at.ctypes.data_as(native.PF64))
    return stats, transport, dropped_at


CHUNK = 1 << 16
"""Flows read back at a time (a table's rows are read in chunks, to keep memory low)."""


_COLUMNS = {
    "size": ("stats", 0),
    "bytes_sent": ("stats", 1),
    "bytes_delivered": ("stats", 2),
    "bytes_dropped": ("stats", 3),
    "cnps": ("stats", 4),
    "ecn_marks": ("stats", 5),
    "start": ("time", 6),
    "completion": ("time", 7),
    "first_drop": ("drop", 0),
    "retransmitted_packets": ("transport", 0),
    "timeouts": ("transport", 2),
}
"""FlowStats' columns: where the core's read-back holds them (times in picoseconds)."""


def _table(lib: ctypes.CDLL, h: int, first: int, n: int) -> FlowStats:
    """The results of the rows of a table, its first row the core's flow `first`."""
    columns: dict[str, Any] = {
        name: np.empty(n, np.float64 if source in ("time", "drop") else np.int64)
        for name, (source, _) in _COLUMNS.items()
    }
    for at in range(0, n, CHUNK):
        size = min(CHUNK, n - at)
        stats, transport, dropped_at = _rows(lib, h, first + at, size)
        sources = {
            "stats": stats,
            "time": stats,
            "transport": transport,
            "drop": dropped_at[:, None],
        }
        for name, (source, index) in _COLUMNS.items():
            column = sources[source][:size, index]
            counted = source in ("stats", "transport")
            columns[name][at : at + size] = column if counted else _seconds(column)
    return FlowStats(**columns)


def _flows(
    lib: ctypes.CDLL,
    h: int,
    layout: Layout,
    exp: Experiment,
    cumulative: npt.NDArray[np.int64],
    end: float,
) -> tuple[list[FlowResult], FlowStats | None]:
    """The listed flows' results, and the table's rows' as columns."""
    listed = len(exp.flows)
    stats, transport, dropped_at = _rows(lib, h, 0, listed)
    table = None if exp.table is None else _table(lib, h, listed, len(exp.table))
    interval = _interval(lib, h, exp)
    flows = []
    for i, flow in enumerate(exp.flows):
        row = stats[i].tolist()
        size, sent, delivered, dropped, cnps, ce, t_start, t_done, rate, alpha = row
        start = None if t_start < 0 else t_start * 1e-12
        span = ((t_done * 1e-12 if t_done >= 0 else end) - start) if start is not None else 0.0
        series: list[float] = []
        if len(cumulative):
            column = cumulative[:, i].tolist()
            series = [(b - a) * 8 / interval for a, b in itertools.pairwise(column)]
        first_drop = float(dropped_at[i])
        result = FlowResult(
            name=flow.name,
            src=flow.src,
            dst=flow.dst,
            size=None if size < 0 else int(size),
            bytes_sent=int(sent),
            bytes_delivered=int(delivered),
            bytes_dropped=int(dropped),
            start=start,
            completion=None if t_done < 0 else t_done * 1e-12,
            cnps=int(cnps),
            ecn_marks=int(ce),
            rate=rate,
            alpha=alpha,
            rate_series=series,
            first_drop=None if first_drop < 0 else first_drop * 1e-12,
            goodput=delivered * 8 / span if span > 0 else 0.0,
        )
        if flow.transport != "open":
            retx, retx_bytes, timeouts, naks, fast, cwnd, srtt = transport[i].tolist()
            result = dataclasses.replace(
                result,
                transport=flow.transport,
                retransmitted_packets=int(retx),
                retransmitted_bytes=int(retx_bytes),
                timeouts=int(timeouts),
                naks=int(naks),
                fast_retransmits=int(fast),
                cwnd=cwnd if flow.transport == "tcp" else None,
                srtt=srtt * 1e-12 if srtt > 0 else None,
            )
        flows.append(result)
    return flows, table


def _made(lib: ctypes.CDLL, h: int, index: int, made: Ring | Replay) -> CollectiveStats:
    """What the core reports of its collective `index`."""
    slots = made.slots
    out = np.zeros(slots * native.COLL_FIELDS + made.iterations + 1, np.int64)
    lib.sim_collective_stats(h, index, out.ctypes.data_as(native.PI64))
    rows = out[: slots * native.COLL_FIELDS].reshape(slots, native.COLL_FIELDS)
    sums = [rows[:, k].copy() for k in range(8)]
    first_start, last_completion, first_drop = (
        _seconds(rows[:, k].astype(np.float64)) for k in (8, 9, 10)
    )
    return CollectiveStats(
        bytes_sent=sums[0],
        bytes_delivered=sums[1],
        bytes_dropped=sums[2],
        cnps=sums[3],
        ecn_marks=sums[4],
        packets_sent=sums[5],
        packets_delivered=sums[6],
        packets_dropped=sums[7],
        first_start=first_start,
        last_completion=last_completion,
        first_drop=first_drop,
        steps_done=rows[:, 11].copy(),
        iteration_ends=_seconds(out[slots * native.COLL_FIELDS : -1].astype(np.float64)),
        held=int(out[-1]),
    )


def _ports(lib: ctypes.CDLL, h: int, layout: Layout) -> list[PortResult]:
    """Per port, the counters of its priorities that counted anything."""
    width = NPRIO * native.PORT_FIELDS
    out = (native.I64 * (width * max(len(layout.ports), 1)))()
    lib.sim_port_stats(h, out)
    stats = np.ctypeslib.as_array(out).reshape(-1, NPRIO, native.PORT_FIELDS).tolist()
    return [
        PortResult(
            node,
            port,
            {
                prio: PriorityCounters(r[0], r[1], r[2] * 1e-12, *r[3:])
                for prio, r in enumerate(by)
                if any(r)
            },
        )
        for (node, port), by in zip(layout.ports, stats, strict=False)
    ]


def _events(lib: ctypes.CDLL, h: int, layout: Layout, n_log: int, n_cycles: int) -> list[Event]:
    cycles = lib.sim_cycles(h)[:n_cycles] if n_cycles else []
    entry = (native.I64 * 5)()
    events = []
    for i in range(n_log):
        lib.sim_log_entry(h, i, entry)
        t, kind, a, b, c = list(entry)
        name = LOG_KINDS[kind]
        time = t * 1e-12
        if name in ("link_down", "link_up"):
            a_end, b_end = layout.links[a]
            node, port = a_end.split(":", 1)
            events.append(Event(time, name, node, port, detail=f"to {b_end}"))
        elif name in ("storm_start", "storm_end"):
            events.append(Event(time, name, *layout.ports[b]))
        elif name == "deadlock":
            members = [(*layout.ports[v // NPRIO], v % NPRIO) for v in cycles[a : a + b]]
            events.append(Event(time, name, cycle=members))
        elif name in ("transport_nak", "transport_timeout"):
            events.append(Event(time, name, detail=f"psn {b}", flow=layout.flows.name(a)))
        elif name in ("fast_retransmit", "ecn_cut"):
            events.append(Event(time, name, detail=f"cwnd {b} -> {c}", flow=layout.flows.name(a)))
        else:
            node, pname = layout.ports[a]
            detail = {1: "drop", 2: "forward"}.get(c) if name == "watchdog_detect" else None
            events.append(Event(time, name, node, pname, b, detail))
    events.sort(key=lambda e: e.time)  # a deadlock is logged at its formation, found later
    return events
