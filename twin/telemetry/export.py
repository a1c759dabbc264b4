"""`twin export RUN --format sonic-db`: a run's counters as each switch's COUNTERS_DB would
hold them, in `sonic-db-dump -n COUNTERS_DB -y`'s form: `DIR/<switch>/COUNTERS_DB_1.json`
at the run's start and `COUNTERS_DB_2.json` at its end, as `show techsupport` saves them, so
`twin import DIR/*` reads them back (and a production tool reads them as a switch's).

Per port (`COUNTERS_PORT_NAME_MAP`): `SAI_PORT_STAT_PFC_n_{RX,TX}_PKTS` and
`SAI_PORT_STAT_PFC_n_RX_PAUSE_DURATION_US` from pfc.json, the IF_{IN,OUT} packets, octets and
discards from counters.json (a PortChannel's on its first member: the import sums members
back); per unicast queue (`COUNTERS_QUEUE_NAME_MAP`, typed in `COUNTERS_QUEUE_TYPE_MAP`) of
each priority's queue (the lab's `TC_TO_QUEUE_MAP`): bytes, ECN marks, lossy and watchdog
drops; per priority group (the lab's `TC_TO_PRIORITY_GROUP_MAP`): lossless drops; the
largest occupancy of queues.json as each queue's and PG's `PERSISTENT_WATERMARKS`. Object ids
are made up, stable per port (the lab's PORT order). A simulated run's times are seconds from
its start: they are put on `epoch` (the run's own times for a live one).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from twin import safeio
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from twin.scenario.occupancy import peak
from twin.telemetry import qos_maps

EPOCH = 1_800_000_000.0
"""Where a simulated run's time 0 is put (2027-01-15), unless given."""
QUEUES = 8
COUNTER_NAMES = {
    "rx_packets": "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
    "tx_packets": "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
    "rx_bytes": "SAI_PORT_STAT_IF_IN_OCTETS",
    "tx_bytes": "SAI_PORT_STAT_IF_OUT_OCTETS",
    "rx_dropped": "SAI_PORT_STAT_IF_IN_DISCARDS",
    "tx_dropped": "SAI_PORT_STAT_IF_OUT_DISCARDS",
}
PG_WATERMARK = "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES"
Values = dict[str, int]


def _key(value: dict[str, str], read: float) -> dict[str, Any]:
    return {"expireat": round(read + 0.001, 6), "ttl": -0.001, "type": "hash", "value": value}


def _snapshot(
    ports: list[str], values: dict[str, tuple[Values, dict[int, Values], dict[int, Values]]],
    marks: dict[str, tuple[dict[int, int], dict[int, int]]], read: float,
) -> dict[str, Any]:  # fmt: skip
    """One COUNTERS_DB dump: name maps, counters, watermarks, every key read at `read`."""
    dump: dict[str, Any] = {}
    names: dict[str, str] = {}
    queue_names: dict[str, str] = {}
    queue_types: dict[str, str] = {}
    pg_names: dict[str, str] = {}
    for i, port in enumerate(ports):
        oid = f"oid:0x1000000{i:09x}"
        names[port] = oid
        port_values, queues, pgs = values.get(port, ({}, {}, {}))
        queue_marks, pg_marks = marks.get(port, ({}, {}))
        dump[f"COUNTERS:{oid}"] = _key({k: str(v) for k, v in port_values.items()}, read)
        for q in range(QUEUES):
            qoid = f"oid:0x15000{i:06x}{q:04x}"
            queue_names[f"{port}:{q}"], queue_types[qoid] = qoid, "SAI_QUEUE_TYPE_UNICAST"
            stats = {"SAI_QUEUE_STAT_PACKETS": 0, "SAI_QUEUE_STAT_BYTES": 0,
                     "SAI_QUEUE_STAT_DROPPED_PACKETS": 0,
                     "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": 0, **queues.get(q, {})}  # fmt: skip
            dump[f"COUNTERS:{qoid}"] = _key({k: str(v) for k, v in stats.items()}, read)
            mark = {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(queue_marks.get(q, 0))}
            dump[f"PERSISTENT_WATERMARKS:{qoid}"] = _key(mark, read)
        for g in range(QUEUES):
            goid = f"oid:0x1a000{i:06x}{g:04x}"
            pg_names[f"{port}:{g}"] = goid
            stats = {"SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS": 0, **pgs.get(g, {})}
            dump[f"COUNTERS:{goid}"] = _key({k: str(v) for k, v in stats.items()}, read)
            mark = {PG_WATERMARK: str(pg_marks.get(g, 0))}
            dump[f"PERSISTENT_WATERMARKS:{goid}"] = _key(mark, read)
    dump["COUNTERS_PORT_NAME_MAP"] = _key(names, read)
    dump["COUNTERS_QUEUE_NAME_MAP"] = _key(queue_names, read)
    dump["COUNTERS_QUEUE_TYPE_MAP"] = _key(queue_types, read)
    dump["COUNTERS_PG_NAME_MAP"] = _key(pg_names, read)
    return dump


def _add(into: Values, more: Values) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _values(
    lab: Lab, switch: str, obs: Observations, sample: dict[str, list[int]], end: bool
) -> dict[str, tuple[Values, dict[int, Values], dict[int, Values]]]:
    """Per port of `switch`: its port, queue and PG counters, from a counters `sample` and,
    at the `end` of the run, pfc.json's figures (0 at its start)."""
    maps = qos_maps.of(lab, switch)
    fields = obs.counters["fields"]
    out: dict[str, tuple[Values, dict[int, Values], dict[int, Values]]] = {}
    first_member: dict[str, str] = {}
    for port in sorted(maps.ports, key=lambda p: (len(p), p)):
        first_member.setdefault(maps.bundle.get(port, port), port)
        out[port] = ({}, defaultdict(dict), defaultdict(dict))
    for logical, port in first_member.items():
        counts = sample.get(f"{switch}:{logical}")
        if counts is not None:
            out[port][0].update({COUNTER_NAMES[f]: int(counts[i]) for i, f in enumerate(fields)})
    if not end:
        return out
    for row in obs.extra("pfc") or []:
        node, _, port = str(row["port"]).partition(":")
        if node != switch or port not in out:
            continue
        p = int(row["priority"])
        port_values, queues, pgs = out[port]
        _add(port_values, {
            f"SAI_PORT_STAT_PFC_{p}_RX_PKTS": int(row["pause_received"]),
            f"SAI_PORT_STAT_PFC_{p}_TX_PKTS": int(row["pause_sent"]),
            f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US": round(float(row["paused_s"]) * 1e6),
        })  # fmt: skip
        drops = row.get("drops", {})
        _add(queues[maps.queue.get(p, p)], {
            "SAI_QUEUE_STAT_BYTES": int(row.get("tx_bytes", 0)),
            "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": int(row.get("ecn_marks", 0)),
            "SAI_QUEUE_STAT_DROPPED_PACKETS": int(drops.get("lossy", 0)),
            "PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS": int(drops.get("watchdog", 0)),
        })  # fmt: skip
        _add(pgs[maps.pg.get(p, 0)], {
            "SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS": int(drops.get("lossless", 0)),
        })  # fmt: skip
    return out


def _marks(
    lab: Lab, switch: str, obs: Observations
) -> dict[str, tuple[dict[int, int], dict[int, int]]]:
    """Per port: the largest occupancy of each queue and PG (queues.json, by priority)."""
    maps = qos_maps.of(lab, switch)
    seen = obs.extra("queues") or {}
    out: dict[str, tuple[dict[int, int], dict[int, int]]] = {}
    for kind, index, slot in (("queues", maps.queue, 0), ("pgs", maps.pg, 1)):
        for key, series in (seen.get(kind) or {}).items():
            node, _, port = str(key).partition(":")
            if node != switch:
                continue
            here = out.setdefault(port, ({}, {}))[slot]
            for priority, values in series.items():
                at = index.get(int(priority), int(priority) if kind == "queues" else 0)
                here[at] = max(here.get(at, 0), int(peak(values)))
    return out


def write(run: Path, lab: Lab, out: Path, epoch: float = EPOCH) -> list[Path]:
    """Write each switch's two dumps under `out`; the switch directories written."""
    obs = Observations.open(run)
    live = obs.run["backend"] != "sim" and float(obs.run["started"]) > 1e9
    shift = 0.0 if live else epoch
    samples = obs.counters["samples"]
    start = samples[0]["c"] if samples else {}
    end = samples[-1]["c"] if samples else {}
    times = (float(obs.run["started"]) + shift, float(obs.run["ended"]) + shift)
    written = []
    for switch in lab.switches():
        ports = sorted(qos_maps.of(lab, switch).ports, key=lambda p: (len(p), p))
        marks = _marks(lab, switch, obs)
        for n, (sample, read) in enumerate(((start, times[0]), (end, times[1])), 1):
            values = _values(lab, switch, obs, sample, n == 2)
            dump = _snapshot(ports, values, marks if n == 2 else {}, read)
            safeio.write(out / switch / f"COUNTERS_DB_{n}.json", json.dumps(dump, indent=1))
        written.append(out / switch)
    return written
