"""A simulation's outputs as the run's observations (`labs.backend.Played`, docs/observations.md).

Times are simulated seconds from the run's start. Ports are physical SONiC ports in the
simulator's own files (`pfc`, `queues`) and counted on their PortChannel in `counters.json`,
as every backend does. What only the simulator observes goes to `extra`:

- `pfc.json`: per port and priority with any activity: pause frames sent and received,
  seconds paused, ECN marks, drops by cause, bytes sent;
- `queues.json`: egress queue and ingress PG occupancy (bytes) every `interval` seconds, per
  port and queue or PG that held anything;
- `iterations.json`: per collective phase, each iteration's time (None: never finished) and
  the analytical bound of one iteration;
- `sim.json`: seed, packet hops, wall seconds and the core's CPU seconds, the FIB epochs
  applied, what was not modelled.

Events (in `events.jsonl`): the faults, then the simulator's own: `pause_storm` (a priority
paused longer than the scenario's `sim.pause_storm`), `watchdog_detect`/`watchdog_restore`,
`storm_start`/`storm_end` (an injected PFC storm), `lossless_drop` (first on a port and
priority), `deadlock` (with its `cycle` of `node:port:priority`), `link_down`/`link_up`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import fields
from typing import Any

import numpy as np
import numpy.typing as npt

from labs.backend import COUNTER_FIELDS, Played, Timeline
from labs.failures import CHANGES_ROUTING, Network, fault_record
from labs.sim.flows import TRANSPORTS, CollectiveStats, FlowStats
from labs.sim.result import Result
from labs.sim.timeline import Plan
from twin.model.wiring import Wiring
from twin.scenario.records import Counters, Event, FlowRecord, PhaseRecord, logged

ECT0, CE = 2, 3


def _stats(result: Result) -> FlowStats:
    if result.table is None:  # a timeline without flows
        empty: Any = np.zeros(0)
        return FlowStats(*[empty] * len(fields(FlowStats)))
    return result.table


def _made(plan: Plan, result: Result, phase: int) -> CollectiveStats | None:
    """What the core reports of a phase it made, a ring or a replay (None: played as rows)."""
    found = plan.collectives.get(phase)
    return None if found is None else result.collectives[found[0]]


def _phase_records(timeline: Timeline, plan: Plan, result: Result) -> list[PhaseRecord]:
    stats = _stats(result)
    records: list[PhaseRecord] = []
    for p in timeline.phases:
        made = _made(plan, result, p.index)
        if made is None:
            mine = plan.phase_of == p.index
            both = np.concatenate([stats.start[mine], stats.completion[mine]])
        else:
            both = np.concatenate([made.first_start, made.last_completion])
        times = both[~np.isnan(both)].tolist()
        records.append(
            {
                "index": p.index,
                "label": p.label,
                "kind": p.kind,
                "start": min(times, default=p.at),
                "end": max(times, default=p.at + p.duration),
                "pps_per_flow": None,
                "gbps_per_flow": p.gbps,
                "iterations": p.iterations,
                "dscp": dict(p.dscp),
                "class": p.traffic_class,
                "flows": [
                    {"flow_id": f.flow_id, "src": f.src, "dst": f.dst, "qp": f.qp} for f in p.flows
                ],
            }
        )
    return records


def _table_rows(
    plan: Plan, stats: FlowStats, packet: int, end: float
) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[Any]]]:
    """Per table row that carries a phase's flow: its (phase, flow id) key and its figures
    (times nan-free: inf for never as a first time, the run's end for a last one)."""
    rows = np.flatnonzero(plan.flow_of >= 0)
    keys = plan.phase_of[rows].astype(np.int64) << 32 | plan.flow_of[rows].astype(np.int64)
    completion = stats.completion[rows]
    table = plan.experiment.table
    columns = {
        "bytes_sent": stats.bytes_sent[rows],
        "bytes_delivered": stats.bytes_delivered[rows],
        "bytes_dropped": stats.bytes_dropped[rows],
        "unique": -(-stats.bytes_sent[rows] // packet),
        "retransmitted": stats.retransmitted_packets[rows],
        "received": -(-stats.bytes_delivered[rows] // packet),
        "dropped": -(-stats.bytes_dropped[rows] // packet),
        "first_drop": np.nan_to_num(stats.first_drop[rows], nan=math.inf),
        "cnps": stats.cnps[rows],
        "ce": stats.ecn_marks[rows],
        "first": np.nan_to_num(stats.start[rows], nan=math.inf),
        "last": np.where(np.isnan(completion) | (completion == 0), end, completion),
        "timeouts": stats.timeouts[rows],
        "undone": np.isnan(completion).astype(np.int64),
        "transport": table.transport[rows] if table is not None else np.zeros(0, np.int8),
    }
    return keys, columns


def _made_rows(
    plan: Plan, result: Result, end: float
) -> list[tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[Any]]]]:
    """As `_table_rows`, a row per slot of each collective the core made (its steps' sums;
    open loop)."""
    out = []
    for phase, (index, ids) in plan.collectives.items():
        made = result.collectives[index]
        flow_ids = np.array(ids, np.int64)
        carries = flow_ids >= 0
        zeros = np.zeros(int(carries.sum()), np.int64)
        # a slot with a step not done: undone until the run's end, as its table rows would be
        steps = plan.experiment.collectives[index].steps
        undone = (made.steps_done[carries] < steps).astype(np.int64)
        last = np.nan_to_num(made.last_completion[carries], nan=end)
        columns = {
            "bytes_sent": made.bytes_sent[carries],
            "bytes_delivered": made.bytes_delivered[carries],
            "bytes_dropped": made.bytes_dropped[carries],
            "unique": made.packets_sent[carries],
            "retransmitted": zeros,
            "received": made.packets_delivered[carries],
            "dropped": made.packets_dropped[carries],
            "first_drop": np.nan_to_num(made.first_drop[carries], nan=math.inf),
            "cnps": made.cnps[carries],
            "ce": made.ecn_marks[carries],
            "first": np.nan_to_num(made.first_start[carries], nan=math.inf),
            "last": np.where(undone > 0, end, last),
            "timeouts": zeros,
            "undone": undone,
            "transport": zeros.astype(np.int8),
        }
        out.append((np.int64(phase) << 32 | flow_ids[carries], columns))
    return out


def _sums(
    plan: Plan, result: Result, packet: int, end: float
) -> dict[tuple[int, int], dict[str, Any]]:
    """Per (phase, flow id): the sums, first and last times of the engine flows it ran."""
    parts = [_table_rows(plan, _stats(result), packet, end), *_made_rows(plan, result, end)]
    keys = np.concatenate([k for k, _ in parts])
    groups, group = np.unique(keys, return_inverse=True)
    group = group.reshape(-1)
    n = len(groups)

    def column(name: str) -> npt.NDArray[Any]:
        return np.concatenate([c[name] for _, c in parts])

    def total(name: str) -> list[int]:
        return [int(x) for x in np.bincount(group, weights=column(name), minlength=n)]

    def extreme(ufunc: np.ufunc, name: str, start: float) -> list[float]:
        out = np.full(n, start)
        ufunc.at(out, group, column(name))
        return [float(x) for x in out]

    first_row = np.full(n, len(keys))
    np.minimum.at(first_row, group, np.arange(len(keys)))
    transport = column("transport")[first_row] if n else np.zeros(0)
    undone = total("undone")
    sums = ("bytes_sent", "bytes_delivered", "bytes_dropped", "unique", "retransmitted")
    columns: dict[str, list[Any]] = {
        **{name: total(name) for name in sums},
        "received": total("received"),
        "dropped": total("dropped"),
        "first_drop": extreme(np.minimum, "first_drop", math.inf),
        "cnps": total("cnps"),
        "ce": total("ce"),
        "first": extreme(np.minimum, "first", math.inf),
        "last": extreme(np.maximum, "last", 0.0),
        "timeouts": total("timeouts"),
    }
    acc: dict[tuple[int, int], dict[str, Any]] = {}
    for g, key in enumerate(groups.tolist()):
        r = {name: values[g] for name, values in columns.items()}
        r["sent"] = r["unique"] + r["retransmitted"]
        r["done"] = undone[g] == 0
        r["transport"] = TRANSPORTS[int(transport[g])]
        acc[(key >> 32, key & 0xFFFFFFFF)] = r
    return acc


def _flows(timeline: Timeline, plan: Plan, result: Result, packet: int) -> list[FlowRecord]:
    """One record per flow of a phase, summed over the engine flows (steps, bursts) it ran.

    Packets are not numbered: `lost` counts the dropped ones as one gap that begins at the
    flow's first drop (`[first drop + lost / pps, lost]`, the neutral form), so the validators
    can tell a fault's drops from others; `tail_lost` is what was neither delivered nor
    dropped by the end (held in a paused or deadlocked queue). With a reliable `transport`
    (rc, tcp) `sent` counts retransmissions too, `lost` is still what the fabric dropped
    (which the sender resent: `retransmitted` packets, `timeouts`), `tail_lost` what never
    arrived, and `goodput_bps` is bytes delivered in order over the active time.
    """
    phases = {p.index: p for p in timeline.phases}
    acc = _sums(plan, result, packet, result.end_time)
    out: list[FlowRecord] = []
    for p in timeline.phases:
        for spec in p.flows:
            if (p.index, spec.flow_id) not in acc:
                continue
            r = acc[(p.index, spec.flow_id)]
            active = r["last"] - r["first"] if r["first"] < math.inf else 0.0
            received, ce = r["received"], min(r["ce"], r["received"])
            pps = max(r["sent"] / active, 1.0) if active > 0 else 1.0
            dropped = r["dropped"]
            dscp = phases[p.index].dscp[spec.src]
            ecn = (
                {str(CE): ce, str(ECT0): received - ce}
                if p.traffic_class == "roce"
                else {"0": received}
            )
            out.append(
                {
                    "flow_id": spec.flow_id,
                    "src": spec.src,
                    "dst": spec.dst,
                    "qp": spec.qp,
                    "phase": p.label,
                    "class": p.traffic_class,
                    "dscp_sent": dscp,
                    "pps": pps,
                    "sent": r["sent"],
                    "received": received,
                    "lost": dropped,
                    "tail_lost": max(
                        0, r["unique"] - received - (dropped if r["transport"] == "open" else 0)
                    ),
                    "reordered": 0,
                    "gaps": [[r["first_drop"] + dropped / pps, dropped]] if dropped else [],
                    "dscp_received": {str(dscp): received} if received else {},
                    "ecn_received": {k: v for k, v in ecn.items() if v},
                    "bytes_sent": r["bytes_sent"],
                    "bytes_delivered": r["bytes_delivered"],
                    "bytes_dropped": r["bytes_dropped"],
                    "cnps": r["cnps"],
                    "completed": r["done"],
                    "active_s": active,
                    "transport": r["transport"],
                    "retransmitted": r["retransmitted"],
                    "timeouts": r["timeouts"],
                    "goodput_bps": r["bytes_delivered"] * 8 / active if active > 0 else 0.0,
                }
            )
    return out


def _counters(result: Result, wiring: Wiring, interval: float) -> Counters:
    """Cumulative counters per logical port at the start and the end of the run."""
    peer = {(a, ap): (b, bp) for (a, ap), (b, bp) in wiring.cable.items()}
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * len(COUNTER_FIELDS))
    col = {name: i for i, name in enumerate(COUNTER_FIELDS)}
    for port in result.ports:
        packets = sum(c.tx_packets for c in port.priorities.values())
        nbytes = sum(c.tx_bytes for c in port.priorities.values())
        dropped = sum(
            c.drops_lossless + c.drops_lossy + c.drops_watchdog + c.drops_link + c.drops_no_route
            for c in port.priorities.values()
        )
        here = f"{port.node}:{wiring.logical(port.node, port.port)}"
        totals[here][col["tx_packets"]] += packets
        totals[here][col["tx_bytes"]] += nbytes
        totals[here][col["rx_dropped"]] += dropped
        far = peer.get((port.node, port.port))
        if far is not None:
            there = f"{far[0]}:{wiring.logical(*far)}"
            totals[there][col["rx_packets"]] += packets
            totals[there][col["rx_bytes"]] += nbytes
    zero = {p: [0] * len(COUNTER_FIELDS) for p in sorted(totals)}
    return {
        "interval": interval,
        "fields": COUNTER_FIELDS,
        "samples": [
            {"t": 0.0, "c": zero},
            {"t": result.end_time, "c": dict(sorted(totals.items()))},
        ],
    }


def _pfc(result: Result, wiring: Wiring) -> list[dict[str, Any]]:
    rows = []
    for port in result.ports:
        far = wiring.cable.get((port.node, port.port))
        for prio, c in sorted(port.priorities.items()):
            rows.append(
                {
                    "port": f"{port.node}:{port.port}",
                    "logical": f"{port.node}:{wiring.logical(port.node, port.port)}",
                    "peer": f"{far[0]}:{far[1]}" if far else "",
                    "priority": prio,
                    "pause_sent": c.pause_sent,
                    "pause_received": c.pause_received,
                    "paused_s": c.paused_time,
                    "ecn_marks": c.ecn_marks,
                    "tx_bytes": c.tx_bytes,
                    "drops": {
                        "lossless": c.drops_lossless,
                        "lossy": c.drops_lossy,
                        "ttl": c.drops_ttl,
                        "no_route": c.drops_no_route,
                        "link": c.drops_link,
                        "watchdog": c.drops_watchdog,
                    },
                }
            )
    return rows


def _held(timeline: Timeline, plan: Plan, result: Result) -> list[str]:
    """What a replayed collective did not play as its table would: starts held back."""
    notes = []
    for p in timeline.phases:
        made = _made(plan, result, p.index)
        if made is not None and made.held:
            notes.append(
                f"{p.label}: {made.held} starts of a step held back until the same step two"
                " iterations before was done (the core keeps a step's flows of two iterations)"
            )
    return notes


def _iterations(timeline: Timeline, plan: Plan, result: Result) -> dict[str, Any]:
    completion = _stats(result).completion
    out = {}
    for p in timeline.phases:
        made = _made(plan, result, p.index)
        rows = plan.barriers.get(p.index)
        ends = made.iteration_ends if made is not None else completion[rows] if rows else None
        if ends is None:
            continue
        times: list[float | None] = []
        start: float | None = p.at
        for done in ends.tolist():
            end = None if math.isnan(done) else done
            times.append(None if end is None or start is None else end - start)
            start = end
        out[p.label] = {
            "phase": p.index,
            "kind": p.kind,
            "algorithm": p.algorithm,
            "ranks": len(p.ranks),
            "message_bytes": p.message,
            "times_s": times,
        }
    return out


def _queues(result: Result, interval: float) -> dict[str, Any]:
    """queues.json: the series as changes (docs/observations.md) when the run kept them so."""
    o = result.occupancy
    if o is None:
        return {"interval": interval, "queues": result.queues, "pgs": result.pgs}
    return {
        "interval": interval,
        "encoding": "changes",
        "samples": o.samples,
        "queues": o.queues,
        "pgs": o.pgs,
    }


def _events(result: Result) -> list[Event]:
    out = []
    for e in result.events:
        record: Event = {"t": e.time, "event": e.kind}
        if e.node is not None:
            record["node"] = e.node
        if e.port is not None:
            record["port"] = e.port
        if e.priority is not None:
            record["priority"] = e.priority
        if e.detail is not None:
            record["detail"] = e.detail
        if e.cycle:
            record["cycle"] = [f"{n}:{p}:{q}" for n, p, q in e.cycle]
        out.append(record)
    return out


def played(timeline: Timeline, plan: Plan, result: Result, base: Network, wall: float) -> Played:
    """The run's record from the simulation's result."""
    wiring = base.wiring
    packet = plan.experiment.packet_bytes
    net = base
    faults = []
    for index, (t, fault) in enumerate(sorted(timeline.faults, key=lambda f: f[0])):
        faults.append(fault_record(net, index, t, fault))
        if fault.kind in CHANGES_ROUTING:
            net = net.after(fault)
    start: Event = {"t": 0.0, "event": "run-start", "scenario": timeline.scenario}
    events = sorted([start, *map(logged, faults), *_events(result)], key=lambda e: e["t"])
    ended = max([result.end_time, *(t for t, _ in timeline.faults), *(t for t, _, _ in plan.fibs)])
    fibs = {label: (t, fib) for t, label, fib in plan.fibs}
    fibs["end"] = (ended, plan.fibs[-1][2])
    interval = result.sample_interval
    extra = {
        "pfc": _pfc(result, wiring),
        "queues": _queues(result, interval),
        "iterations": _iterations(timeline, plan, result),
        "sim": {
            "seed": result.seed,
            "simulated_s": result.end_time,
            "time_scale": float(timeline.sim.get("time_scale", 1.0)),
            "wall_s": round(wall, 3),
            "core_cpu_s": round(result.core_cpu, 3),
            "packet_hops": result.packet_hops,
            "events": result.events_processed,
            "packet_bytes": packet,
            "deadlocked": result.deadlocked,
            "fibs": [[t, label] for t, label, _ in plan.fibs],
            "not_modelled": plan.notes + _held(timeline, plan, result),
            "experiment": {
                "flows": plan.n_flows,
                "links": len(plan.experiment.links),
            },
        },
    }
    return Played(
        fault_margin=0.0,
        started=0.0,
        ended=ended,
        phases=_phase_records(timeline, plan, result),
        faults=faults,
        flows=_flows(timeline, plan, result, packet),
        counters=_counters(result, wiring, timeline.sample_interval),
        fibs=fibs,
        bgp={"start": [], "end": []},
        events=events,
        extra=extra,
    )
