"""Prometheus metrics of a twin, with SONiC-like names and labels (docs/metrics.md): a live
endpoint while a twin runs (`twin run --metrics`, `twin deploy --metrics`) and a run's
observations in the OpenMetrics text format (`twin report --openmetrics`).

Names follow SONiC's counters as its Prometheus exporters publish them (`sonic_` prefix;
COUNTERS_DB's port, PFC, queue and priority-group counters and watermarks), labelled by
`switch`, `port` and `priority`, `queue` or `pg`. What a backend cannot observe is absent,
never zero: a live netns twin has no PFC or queues; a simulator run has no BGP.

prometheus_client is imported here only, by the verbs that serve or export metrics.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from labs.backend import COUNTER_FIELDS, Session
from labs.lifecycle import Managed
from twin import safeio
from twin.errors import InputError
from twin.labdir import Lab
from twin.model.fib import Fib
from twin.scenario.observations import Observations

PORT_METRICS = {
    "rx_packets": ("sonic_interface_receive_packets", "packets received on the port"),
    "tx_packets": ("sonic_interface_transmit_packets", "packets sent on the port"),
    "rx_bytes": ("sonic_interface_receive_bytes", "bytes received on the port"),
    "tx_bytes": ("sonic_interface_transmit_bytes", "bytes sent on the port"),
    "rx_dropped": ("sonic_interface_receive_dropped_packets", "packets dropped on receive"),
    "tx_dropped": ("sonic_interface_transmit_dropped_packets", "packets dropped on send"),
}
"""COUNTER_FIELDS -> (metric, help)."""

PFC_METRICS = {
    "pause_sent": ("sonic_pfc_pause_frames_sent", "PFC pause frames the port sent"),
    "pause_received": ("sonic_pfc_pause_frames_received", "PFC pause frames the port received"),
    "paused_s": ("sonic_pfc_paused_seconds", "seconds the port was paused by its peer"),
    "ecn_marks": ("sonic_queue_ecn_marked_packets", "packets the queue marked ECN CE"),
}
"""pfc.json fields -> (counter metric, help), per switch, port and priority."""


@dataclass
class Snapshot:
    """What the metrics are made of, whichever source: a live twin now, or a run."""

    lab: str
    backend: str
    switches: set[str]
    counters: Sequence[tuple[float | None, Mapping[str, Sequence[float]]]]
    """(timestamp or None, `node:port` -> COUNTER_FIELDS values) in time order."""
    sessions: list[Session] | None = None
    fib: Fib | None = None
    subnets: tuple[str, ...] = ()
    pfc: list[dict[str, Any]] | None = None
    watermarks: dict[str, dict[str, dict[str, int]]] | None = None
    """'queues'/'pgs' -> `node:port` -> index -> the highest occupancy in bytes."""
    verdict: list[dict[str, Any]] | None = None


CACHE_S = 1.0
"""Seconds a live snapshot is served again (a dashboard's panels scrape together)."""


def _port(key: str) -> tuple[str, str]:
    node, _, port = key.partition(":")
    return node, port


def families(snap: Snapshot) -> Iterator[Metric]:
    """The metric families of a snapshot."""
    info = GaugeMetricFamily(
        "twin_info", "the twin the metrics come from", labels=["lab", "backend"]
    )
    info.add_metric([snap.lab, snap.backend], 1)
    yield info
    for i, field in enumerate(COUNTER_FIELDS):
        name, text = PORT_METRICS[field]
        family = CounterMetricFamily(name, text, labels=["switch", "port"])
        for t, sample in snap.counters:
            for key, values in sorted(sample.items()):
                node, port = _port(key)
                if node in snap.switches:
                    family.add_metric([node, port], values[i], timestamp=t)
        yield family
    if snap.pfc is not None:
        yield from _pfc(snap)
    if snap.watermarks is not None:
        for kind, label in (("queues", "queue"), ("pgs", "pg")):
            name = "sonic_queue_watermark_bytes" if kind == "queues" else "sonic_pg_watermark_bytes"
            peaks = GaugeMetricFamily(
                name, f"highest {label} occupancy", labels=["switch", "port", label]
            )
            for key, by_index in sorted(snap.watermarks.get(kind, {}).items()):
                for index, peak in sorted(by_index.items()):
                    peaks.add_metric([*_port(key), str(index)], peak)
            yield peaks
    if snap.sessions is not None:
        yield from _bgp(snap.sessions)
    if snap.fib is not None:
        yield _ecmp(snap)
    if snap.verdict is not None:
        passed = GaugeMetricFamily(
            "twin_validator_passed",
            "1 pass, 0 fail, -1 not observable",
            labels=["validator", "scope"],
        )
        for r in snap.verdict:
            value = {"pass": 1, "fail": 0}.get(str(r["status"]), -1)
            if r["status"] != "info":
                passed.add_metric([str(r["validator"]), str(r["scope"])], value)
        yield passed


def _pfc(snap: Snapshot) -> Iterator[Metric]:
    rows = [r for r in snap.pfc or [] if _port(str(r["port"]))[0] in snap.switches]
    for field, (name, text) in PFC_METRICS.items():
        label = "queue" if field == "ecn_marks" else "priority"
        family = CounterMetricFamily(name, text, labels=["switch", "port", label])
        for r in rows:
            family.add_metric([*_port(str(r["port"])), str(r["priority"])], float(r[field]))
        yield family
    drops = CounterMetricFamily(
        "sonic_port_dropped_packets",
        "packets the port dropped, by reason",
        labels=["switch", "port", "priority", "reason"],
    )
    for r in rows:
        for reason, n in sorted(r["drops"].items()):
            drops.add_metric([*_port(str(r["port"])), str(r["priority"]), reason], float(n))
    yield drops


def _bgp(sessions: list[Session]) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "sonic_bgp_session_established",
        "1 when the BGP session is Established",
        labels=["switch", "peer", "peer_name"],
    )
    prefixes = GaugeMetricFamily(
        "sonic_bgp_prefixes_received",
        "prefixes received from the peer",
        labels=["switch", "peer", "peer_name"],
    )
    for s in sessions:
        up.add_metric([s.node, s.peer, s.name], 1 if s.state == "Established" else 0)
        prefixes.add_metric([s.node, s.peer, s.name], s.prefixes)
    yield up
    yield prefixes


def _ecmp(snap: Snapshot) -> Metric:
    text = "next hops of the route to a server subnet"
    family = GaugeMetricFamily("sonic_route_ecmp_width", text, labels=["switch", "prefix"])
    for node, routes in sorted((snap.fib or {}).items()):
        if node not in snap.switches:
            continue
        for subnet in snap.subnets:
            family.add_metric([node, subnet], len(routes.get(IPv4Network(subnet), ())))
    return family


def _subnets(lab: Lab) -> tuple[str, ...]:
    return tuple(sorted({str(lab.graph.nodes[n]["subnet"]) for n in lab.nodes("leaf")}))


class Live(Collector):
    """A running twin's metrics, read from its backend at each scrape (at most once every
    CACHE_S: a scrape within it gets the same values)."""

    def __init__(self, lab: Lab, backend: Managed) -> None:
        self.lab, self.backend = lab, backend
        self._lock = threading.Lock()
        self._last: tuple[float, Snapshot] | None = None

    def snapshot(self) -> Snapshot:
        """The twin now (cached for CACHE_S)."""
        with self._lock:
            if self._last is None or time.monotonic() - self._last[0] > CACHE_S:
                observer = self.backend.observer(self.lab)
                capabilities = set(getattr(self.backend, "capabilities", ()))
                counters = observer.counters()
                snap = Snapshot(
                    self.lab.name,
                    self.backend.name,
                    set(self.lab.switches()),
                    [(None, {k: [float(v) for v in vs] for k, vs in counters.items()})],
                    sessions=observer.bgp() if "bgp" in capabilities else None,
                    fib=observer.fib() if "fib" in capabilities else None,
                    subnets=_subnets(self.lab),
                )
                self._last = (time.monotonic(), snap)
            return self._last[1]

    def collect(self) -> Iterable[Metric]:
        """Called by prometheus_client at each scrape."""
        try:
            yield from families(self.snapshot())
        except Exception:  # a twin torn down between scrapes: an empty scrape
            return


class Server:
    """The HTTP endpoint serving a live twin's metrics (`/metrics`), until `stop`."""

    def __init__(self, lab: Lab, backend: Managed, host: str, port: int) -> None:
        from prometheus_client import start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(Live(lab, backend))
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise InputError(
                "--metrics", "", f"cannot serve on {host}:{port}: {exc.strerror}"
            ) from None
        self.url = f"http://{host}:{self._server.server_port}/metrics"

    def stop(self) -> None:
        """Close the endpoint."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def of_run(obs: Observations, lab: Lab) -> Snapshot:
    """A run's observations (and its verdict when reported) as a snapshot: every counter
    sample with its time (live clocks only; a simulator's own clock has no date), the last
    BGP sessions and FIB, and what the simulator counted."""
    live = float(obs.run["started"]) > 1e9
    samples = obs.counters["samples"]
    counters = [(float(s["t"]) if live else None, s["c"]) for s in samples]
    if not live:
        counters = counters[-1:]
    occupancy = obs.extra("queues")
    watermarks = None
    if occupancy:
        watermarks = {
            kind: {k: {i: max(v) for i, v in by.items()} for k, by in occupancy[kind].items()}
            for kind in ("queues", "pgs")
            if occupancy.get(kind)
        }
    bgp = "bgp" in obs.capabilities and (obs.path / "bgp.json").exists()
    report = obs.path / "report.json"
    return Snapshot(
        obs.run["lab"],
        obs.run["backend"],
        set(lab.switches()),
        counters,
        sessions=obs.bgp.get("end") if bgp else None,
        fib=obs.fib("end") if "end" in obs.run.get("fibs", {}) else None,
        subnets=_subnets(lab),
        pfc=obs.extra("pfc"),
        watermarks=watermarks,
        verdict=_json_results(report) if report.exists() else None,
    )


def _json_results(path: Path) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(path.read_text())
    results: list[dict[str, Any]] = data.get("results", [])
    return results


def openmetrics(snap: Snapshot) -> bytes:
    """A snapshot in the OpenMetrics text format (ends with `# EOF`)."""
    from prometheus_client.openmetrics.exposition import generate_latest

    class Fixed(Collector):
        def collect(self) -> Iterable[Metric]:
            return families(snap)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    data: bytes = generate_latest(registry)
    return data


def write(path: Path, data: bytes) -> None:
    """Write an export (refusing a directory or a symlink)."""
    if path.is_symlink() or path.is_dir():
        raise InputError(
            "--openmetrics", "", f"{path} is not a regular file: will not overwrite it"
        )
    safeio.write(path, data)
