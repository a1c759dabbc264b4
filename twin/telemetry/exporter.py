"""Prometheus forms of SONiC's counters read into `counters_db.Dump`s: a scrape of the common
SONiC exporter (the text exposition, or OpenMetrics), and a range query's answer
(`/api/v1/query_range` JSON, `resultType: matrix`).

Names and labels are those of vinted/sonic-exporter (3759410, `internal/collector/
interface_collector.go`, `queue_collector.go`): `sonic_interface_{receive,transmit}_
{bytes,packets}_total{device[,method]}`, `..._errs_total{device,type}`, `sonic_queue_
{packets,bytes,dropped_packets,dropped_bytes}_total{device,queue}` and the queue watermarks;
and the twin's own metrics (docs/metrics.md, either flavour: `port` or `device`), which add
PFC frames per priority, ECN marks per queue and drops by reason. Each maps back to the SAI
counter it was made from (`PORT_FIELDS`, `QUEUE_FIELDS`); drops by reason go to the
priority's PG (lossless) or queue (lossy, watchdog) through the lab's maps.

A series' switch is its `switch` label (examples/grafana/prometheus.yml sets it on
production's targets), else the switch the source was given for (`SWITCH=FILE`). A series
with two samples or more (a range query, or an export whose samples carry timestamps) gives
two snapshots: its first value and its first value plus its increase (a value that went
down was a reset, counted from 0 as `increase()` does); a series sampled once counts from 0
over the window. Watermarks are maxima: the largest sample, never differenced. A scrape
without timestamps is one snapshot (two scrape files: `SWITCH=FIRST,SECOND`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from twin.errors import InputError
from twin.telemetry.counters_db import Dump, Key
from twin.telemetry.qos_maps import SwitchMaps

PORT_FIELDS: dict[tuple[str, str], str] = {
    ("sonic_interface_receive_bytes", ""): "SAI_PORT_STAT_IF_IN_OCTETS",
    ("sonic_interface_transmit_bytes", ""): "SAI_PORT_STAT_IF_OUT_OCTETS",
    ("sonic_interface_receive_packets", ""): "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
    ("sonic_interface_receive_packets", "ucast"): "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
    ("sonic_interface_receive_packets", "broadcast"): "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS",
    ("sonic_interface_receive_packets", "multicast"): "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS",
    ("sonic_interface_transmit_packets", ""): "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
    ("sonic_interface_transmit_packets", "ucast"): "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
    ("sonic_interface_transmit_packets", "broadcast"): "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS",
    ("sonic_interface_transmit_packets", "multicast"): "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS",
    ("sonic_interface_receive_errs", "discard"): "SAI_PORT_STAT_IF_IN_DISCARDS",
    ("sonic_interface_receive_errs", "error"): "SAI_PORT_STAT_IF_IN_ERRORS",
    ("sonic_interface_transmit_errs", "discard"): "SAI_PORT_STAT_IF_OUT_DISCARDS",
    ("sonic_interface_transmit_errs", "error"): "SAI_PORT_STAT_IF_OUT_ERRORS",
    ("sonic_interface_receive_dropped_packets", ""): "SAI_PORT_STAT_IF_IN_DISCARDS",
    ("sonic_interface_transmit_dropped_packets", ""): "SAI_PORT_STAT_IF_OUT_DISCARDS",
    ("sonic_pfc_pause_frames_sent", ""): "SAI_PORT_STAT_PFC_{priority}_TX_PKTS",
    ("sonic_pfc_pause_frames_received", ""): "SAI_PORT_STAT_PFC_{priority}_RX_PKTS",
}
"""(metric without `_total`, its `method` or `type` label) -> the port's SAI counter."""
QUEUE_FIELDS = {
    "sonic_queue_packets": "SAI_QUEUE_STAT_PACKETS",
    "sonic_queue_bytes": "SAI_QUEUE_STAT_BYTES",
    "sonic_queue_dropped_packets": "SAI_QUEUE_STAT_DROPPED_PACKETS",
    "sonic_queue_dropped_bytes": "SAI_QUEUE_STAT_DROPPED_BYTES",
    "sonic_queue_ecn_marked_packets": "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS",
}
QUEUE_WATERMARKS = (
    "sonic_queue_watermark_bytes",
    "sonic_queue_shared_watermark_bytes",
)
PG_WATERMARK = "sonic_pg_watermark_bytes"
DROPS = "sonic_port_dropped_packets"
DROP_FIELDS = {
    "lossless": ("pg", "SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS"),
    "lossy": ("queue", "SAI_QUEUE_STAT_DROPPED_PACKETS"),
    "watchdog": ("queue", "PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS"),
}
"""A drop reason -> where SONiC counts it (the priority's PG or queue) and the counter."""
KNOWN = frozenset(
    [*(name for name, _ in PORT_FIELDS), *QUEUE_FIELDS, *QUEUE_WATERMARKS, PG_WATERMARK, DROPS]
)
"""The metrics read."""


@dataclass
class Series:
    """One series: its metric (without `_total`), labels and samples (time or None, value)."""

    name: str
    labels: dict[str, str]
    samples: list[tuple[float | None, float]] = field(default_factory=list)


def looks_like_range(data: Any) -> bool:
    """Whether parsed JSON is a Prometheus query answer."""
    return isinstance(data, dict) and "status" in data and isinstance(data.get("data"), dict)


def from_range(data: Any, where: str) -> list[Series]:
    """The series of a `/api/v1/query_range` answer (a matrix; a vector is one sample)."""
    if data.get("status") != "success":
        raise InputError(where, "status", f"{data.get('status')!r}, not a successful query")
    answer = data["data"]
    kind = answer.get("resultType")
    if kind not in ("matrix", "vector"):
        raise InputError(where, "data.resultType", f"{kind!r}: give a range query's matrix")
    out: list[Series] = []
    for result in answer.get("result") or []:
        labels = result.get("metric") if isinstance(result, dict) else None
        points = result.get("values", [result.get("value")]) if isinstance(result, dict) else None
        if not isinstance(labels, dict) or not isinstance(points, list):
            raise InputError(where, "data.result", "a result without metric and values")
        try:
            samples: list[tuple[float | None, float]] = [(float(t), float(v)) for t, v in points]
        except (TypeError, ValueError):
            raise InputError(where, "data.result.values", "not [time, value] pairs") from None
        name = str(labels.get("__name__", "")).removesuffix("_total")
        out.append(Series(name, {k: str(v) for k, v in labels.items()}, samples))
    return out


def from_text(text: str, where: str) -> list[Series]:
    """The series of a scrape (Prometheus text exposition, or OpenMetrics: ends `# EOF`)."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
    from prometheus_client.parser import text_string_to_metric_families as plain

    parser = om if text.rstrip().endswith("# EOF") else plain
    by_key: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
    try:
        for family in parser(text):
            for s in family.samples:
                if s.name.endswith(("_created", "_info")):
                    continue
                name = s.name.removesuffix("_total")
                key = (name, tuple(sorted(s.labels.items())))
                series = by_key.setdefault(key, Series(name, dict(s.labels)))
                t = float(s.timestamp) if s.timestamp is not None else None
                series.samples.append((t, float(s.value)))
    except ValueError as exc:
        raise InputError(where, "", f"not a Prometheus scrape: {exc}") from None
    if not by_key:
        raise InputError(where, "", "not a Prometheus scrape: no samples")
    return list(by_key.values())


def _increase(values: list[float]) -> float:
    """What a counter's samples added up to, a drop being a reset (as increase() does)."""
    return sum(b - a if b >= a else b for a, b in pairwise(values))


def _port_order(port: str) -> tuple[int, str]:
    return len(port), port


def _place(dump: Dump, s: Series, value: int, maps: SwitchMaps) -> None:
    """Add a series' value to the dump's port, queue or PG counter it was made from."""
    port = s.labels.get("device", s.labels.get("port", ""))
    sub = s.labels.get("method", s.labels.get("type", ""))
    if (s.name, sub) in PORT_FIELDS:
        members = sorted((m for m, b in maps.bundle.items() if b == port), key=_port_order)
        port = members[0] if members else port  # a PortChannel's, on its first member
        name = PORT_FIELDS[(s.name, sub)].format(priority=s.labels.get("priority", ""))
        stats = dump.ports.setdefault(port, {})
        stats[name] = stats.get(name, 0) + value
        return
    index = s.labels.get("queue", s.labels.get("pg", s.labels.get("priority", "")))
    if not index.isdigit():
        return  # a metric of no counter here (BGP, ECMP, the twin's own)
    key: Key = (port, int(index))
    if s.name in QUEUE_FIELDS:
        stats = dump.queues.setdefault(key, {})
        stats[QUEUE_FIELDS[s.name]] = stats.get(QUEUE_FIELDS[s.name], 0) + value
    elif s.name == DROPS and s.labels.get("reason") in DROP_FIELDS:
        kind, name = DROP_FIELDS[s.labels["reason"]]
        p = int(index)
        table = dump.pgs if kind == "pg" else dump.queues
        key = (port, maps.pg.get(p, 0) if kind == "pg" else maps.queue.get(p, p))
        stats = table.setdefault(key, {})
        stats[name] = stats.get(name, 0) + value
    elif s.name in QUEUE_WATERMARKS:
        dump.queue_watermarks[key] = max(dump.queue_watermarks.get(key, 0), value)
    elif s.name == PG_WATERMARK:
        dump.pg_watermarks[key] = max(dump.pg_watermarks.get(key, 0), value)


def dumps(
    series: Iterable[Series],
    where: str,
    switch: str | None,
    maps: Callable[[str], SwitchMaps],
) -> dict[str, list[Dump]]:
    """Each switch's snapshots (one, or two when a series has two samples or more)."""
    by_switch: dict[str, list[Series]] = {}
    for s in series:
        if s.name not in KNOWN:
            continue  # the exporter's other metrics, the twin's BGP, ECMP and verdict
        name = s.labels.get("switch", switch)
        if name is None:
            raise InputError(where, s.name, "no switch label: give the source as SWITCH=FILE")
        if switch is None or name == switch:
            by_switch.setdefault(name, []).append(s)
    out: dict[str, list[Dump]] = {}
    for name, group in by_switch.items():
        first, last = Dump(where), Dump(where)
        switch_maps = maps(name)
        for s in group:
            kept = [(t, v) for t, v in s.samples if math.isfinite(v) and v >= 0]
            values = [v for _, v in kept]
            times = [t for t, _ in kept if t is not None]
            if not values:
                continue
            watermark = s.name in (*QUEUE_WATERMARKS, PG_WATERMARK)
            if len(values) > 1 and not watermark:
                _place(first, s, int(values[0]), switch_maps)
                _place(last, s, int(values[0] + _increase(values)), switch_maps)
                first.times.extend(times[:1])
            else:
                _place(last, s, int(max(values)), switch_maps)
            last.times.extend(times[-1:])
        two = bool(first.ports or first.queues or first.pgs)
        out[name] = [first, last] if two else [last]
    return out


def read_text(raw: bytes, where: str) -> list[Series]:
    """A scrape's series from the file's bytes."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InputError(where, "", "not a Prometheus scrape: not UTF-8") from None
    return from_text(text, where)
