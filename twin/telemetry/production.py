"""`twin import`: production telemetry of a fabric as a run directory of kind `production`,
from each switch's snapshots (`twin.telemetry.sources` reads them).

With two snapshots a figure is the difference over the window between them (from the latest
key read in the first to the earliest in the second: each key carries its own read time); a
counter that went down was reset (a new object, a reboot), and its value since is taken, the
reset recorded. With one snapshot, figures are totals since the counters were created.
Watermarks are kept as upper bounds, never differenced. Paused time comes from
`SAI_PORT_STAT_PFC_n_RX_PAUSE_DURATION_US` (what received pause quanta asked for), else the
watchdog's estimate `EST_..._US`, else none: each row says which (`paused_source`).

The run directory holds what every reader takes (run.json with `kind: production`,
counters.json with a sample at each end of the window, flows.json and bgp.json empty) and
`pfc.json` in the simulator's row format (docs/observations.md), so `twin report`, `twin
compare` and the plots read it like any run; `watermarks.json` holds the bounds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, cast

from labs.backend import COUNTER_FIELDS, Played
from twin.errors import InputError
from twin.lab.directory import Lab
from twin.scenario import observations
from twin.scenario.records import SCHEMA, Counters, RunRecord
from twin.telemetry import qos_maps
from twin.telemetry.counters_db import Dump
from twin.version import version

PAUSED_SOURCES = (
    ("SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US", "pause quanta"),
    ("EST_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US", "watchdog estimate"),
)
CAPABILITIES = ["counters", "pfc"]
SCENARIO = "name: production\nsettle: 0\ntraffic: []\nvalidate: {}\n"
"""A production run's scenario.yaml: no traffic played, nothing but the static checks."""
PG_DROPS = "SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS"
ACTIVITY = ("pause_sent", "pause_received", "ecn_marks", "tx_bytes")


def _delta(
    first: dict[str, int], second: dict[str, int], resets: list[str], where: str
) -> dict[str, int]:
    """second - first per field; a field that went down was reset: its value since."""
    out: dict[str, int] = {}
    for name, value in second.items():
        before = first.get(name, 0)
        if value < before:
            resets.append(f"{where} {name}")
            out[name] = value
        else:
            out[name] = value - before
    return out


def _window(dumps: list[Dump]) -> tuple[float, float, bool]:
    """(start, end, differenced) of a switch's snapshots."""
    if len(dumps) == 2:
        start, end = dumps[0].last, dumps[1].first
        if start is not None and end is not None and end > start:
            return start, end, True
        return 0.0, 0.0, True
    return 0.0, dumps[0].last or 0.0, False


def _rows(
    lab: Lab, switch: str, dumps: list[Dump], resets: list[str]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, dict[str, int]]]]:
    """The switch's pfc.json rows and watermark bounds."""
    maps = qos_maps.of(lab, switch)
    last = dumps[-1]
    before = dumps[0] if len(dumps) == 2 else Dump(last.path)
    for port in sorted(last.ports, key=lambda p: (len(p), p)):
        if port not in maps.ports:
            raise InputError(last.path, port, f"{switch} has no port {port} in lab {lab.name}")
    peers: dict[str, str] = {}
    for _, _, e in lab.graph.edges(switch, data=True):
        mine, theirs = ("a", "b") if e["a"] == switch else ("b", "a")
        peers[e[f"{mine}_port"]] = f"{e[theirs]}:{e[f'{theirs}_port']}"
    rows: list[dict[str, Any]] = []
    marks: dict[str, dict[str, dict[str, int]]] = {"queues": {}, "pgs": {}}
    for port in sorted(last.ports, key=lambda p: (len(p), p)):
        stats = _delta(before.ports.get(port, {}), last.ports[port], resets, f"{switch}:{port}")
        lossless = maps.lossless.get(port, frozenset())
        for p in qos_maps.PRIORITIES:
            queue = (port, maps.queue.get(p, p))
            pg = (port, maps.pg.get(p, 0))
            here = f"{switch}:{port}"
            q = _delta(before.queues.get(queue, {}), last.queues.get(queue, {}), resets, here)
            g = _delta(before.pgs.get(pg, {}), last.pgs.get(pg, {}), resets, here)
            paused, source = 0.0, "none"
            for name, label in PAUSED_SOURCES:
                if name.format(p=p) in stats:
                    paused, source = stats[name.format(p=p)] / 1e6, label
                    break
            # A queue's or PG's counts go to the lowest priority it holds (a lab's maps give
            # each lossless priority its own queue and PG).
            q_own = p == min(maps.priorities_of_queue(queue[1]), default=p)
            g_own = p == min(maps.priorities_of_pg(pg[1]), default=p)
            drops = {
                "lossless": g.get(PG_DROPS, 0) * (g_own and p in lossless),
                "lossy": q.get("SAI_QUEUE_STAT_DROPPED_PACKETS", 0) * (q_own and p not in lossless),
                "ttl": 0,
                "no_route": 0,
                "link": 0,
                "watchdog": (
                    q.get("PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS", 0)
                    + q.get("PFC_WD_QUEUE_STATS_RX_DROPPED_PACKETS", 0)
                )
                * q_own,
            }
            row = {
                "port": f"{switch}:{port}",
                "logical": f"{switch}:{maps.bundle.get(port, port)}",
                "peer": peers.get(port, ""),
                "priority": p,
                "pause_sent": stats.get(f"SAI_PORT_STAT_PFC_{p}_TX_PKTS", 0),
                "pause_received": stats.get(f"SAI_PORT_STAT_PFC_{p}_RX_PKTS", 0),
                "paused_s": paused,
                "paused_source": source,
                "ecn_marks": q.get("SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", 0) * q_own,
                "tx_bytes": q.get("SAI_QUEUE_STAT_BYTES", 0) * q_own,
                "drops": drops,
            }
            if any(row[k] for k in ACTIVITY) or any(drops.values()):
                rows.append(row)
            if q_own and last.queue_watermarks.get(queue):
                marks["queues"].setdefault(f"{switch}:{port}", {})[str(p)] = last.queue_watermarks[
                    queue
                ]
            if g_own and last.pg_watermarks.get(pg):
                marks["pgs"].setdefault(f"{switch}:{port}", {})[str(p)] = last.pg_watermarks[pg]
    return rows, marks


def _port_counters(lab: Lab, switch: str, dump: Dump) -> dict[str, list[int]]:
    """A snapshot's port counters in counters.json's fields, bundles summed from members."""
    maps = qos_maps.of(lab, switch)
    names = {
        "rx_packets": ("SAI_PORT_STAT_IF_IN_UCAST_PKTS", "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS"),
        "tx_packets": ("SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS"),
        "rx_bytes": ("SAI_PORT_STAT_IF_IN_OCTETS",),
        "tx_bytes": ("SAI_PORT_STAT_IF_OUT_OCTETS",),
        "rx_dropped": ("SAI_PORT_STAT_IF_IN_DISCARDS",),
        "tx_dropped": ("SAI_PORT_STAT_IF_OUT_DISCARDS",),
    }
    out: dict[str, list[int]] = {}
    for port, stats in dump.ports.items():
        key = f"{switch}:{maps.bundle.get(port, port)}"
        values = [sum(stats.get(n, 0) for n in names[f]) for f in COUNTER_FIELDS]
        kept = out.setdefault(key, [0] * len(COUNTER_FIELDS))
        out[key] = [a + b for a, b in zip(kept, values, strict=True)]
    return out


def write(lab: Lab, switches: dict[str, list[Dump]], out: Path, given: list[str]) -> Path:
    """Write the production run directory `out` from each switch's snapshots."""
    for switch in switches:
        if switch not in lab.switches():
            raise InputError(str(lab.path), switch, f"lab {lab.name} has no switch {switch}")
    resets: list[str] = []
    rows: list[dict[str, Any]] = []
    marks: dict[str, dict[str, dict[str, int]]] = {"queues": {}, "pgs": {}}
    windows = {}
    samples: list[Any] = [{"t": 0.0, "c": {}}, {"t": 0.0, "c": {}}]
    for switch, dumps in sorted(switches.items()):
        got, bounds = _rows(lab, switch, dumps, resets)
        rows += got
        for kind in marks:
            marks[kind].update(bounds[kind])
        windows[switch] = _window(dumps)
        first = dumps[0] if len(dumps) == 2 else Dump(dumps[0].path)
        samples[0]["c"].update(_port_counters(lab, switch, first))
        samples[1]["c"].update(_port_counters(lab, switch, dumps[-1]))
    started = max(w[0] for w in windows.values())
    ended = min(w[1] for w in windows.values())
    samples[0]["t"], samples[1]["t"] = started, max(ended, started)
    run: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "production",
        "lab": lab.name,
        "lab_dir": str(lab.path.resolve()),
        "lab_from_run": os.path.relpath(lab.path.resolve(), out.resolve()),
        "backend": "production",
        "capabilities": CAPABILITIES,
        "scenario": "production",
        "started": started,
        "ended": max(ended, started),
        "fault_margin": 0.0,
        "phases": [],
        "faults": [],
        "fibs": {},
        "fib_faults": {},
        "servers": [],
        "uplinks": {},
        "differenced": all(w[2] for w in windows.values()),
        "windows": {s: {"start": w[0], "end": w[1]} for s, w in windows.items()},
        "resets": sorted(set(resets)),
        "sources": given,
        "stamp": {"twin_version": version(), "backend": "production", "imported": time.time()},
    }
    counters: Counters = {"interval": 0.0, "fields": list(COUNTER_FIELDS), "samples": samples}
    played = Played(
        run["started"], run["ended"], [], [], [], counters, {}, {"start": [], "end": []}, [],
        extra={"pfc": rows, "watermarks": marks}, fault_margin=0.0,
    )  # fmt: skip
    observations.save_scenario(out, SCENARIO)
    observations.save(out, cast(RunRecord, run), played, lab.path / "fabric.yaml")
    return out
