"""Prometheus metrics of a twin, with SONiC-like names and labels (docs/metrics.md): a live
endpoint while a twin runs (`twin run --metrics`, `twin deploy --metrics`) and a run's
observations in the OpenMetrics text format (`twin report --openmetrics`).

Names follow SONiC's counters as its Prometheus exporters publish them (`sonic_` prefix;
COUNTERS_DB's port, PFC, queue and priority-group counters and watermarks), labelled by
`switch`, `port` and `priority`, `queue` or `pg`; the `sonic-exporter` flavour renames them as
the common SONiC exporter writes them (`FLAVOURS`). What a backend cannot observe is absent,
never zero: a live netns twin has no PFC or queues; a simulator run has no BGP.

prometheus_client is imported here only, by the verbs that serve or export metrics.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from labs.backend import COUNTER_FIELDS, Observer, Session
from twin import safeio
from twin.errors import InputError
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.scenario.observations import Observations
from twin.scenario.occupancy import peak

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


EXPORTER: dict[str, tuple[str, str, dict[str, str]]] = {
    "sonic_interface_receive_packets": (
        "sonic_interface_receive_packets",
        "counter",
        {"method": "ucast"},
    ),
    "sonic_interface_transmit_packets": (
        "sonic_interface_transmit_packets",
        "counter",
        {"method": "ucast"},
    ),
    "sonic_interface_receive_dropped_packets": (
        "sonic_interface_receive_errs",
        "counter",
        {"type": "discard"},
    ),
    "sonic_interface_transmit_dropped_packets": (
        "sonic_interface_transmit_errs",
        "counter",
        {"type": "discard"},
    ),
    "sonic_queue_watermark_bytes": (
        "sonic_queue_watermark_bytes",
        "counter",
        {"type": "persistent", "watermark": "shared"},
    ),
}
"""The `sonic-exporter` flavour: a twin metric -> the name, type and added labels the common
SONiC exporter (vinted/sonic-exporter, internal/collector/interface_collector.go and
queue_collector.go) gives the same counter; every `port` label becomes its `device`."""

FLAVOURS = ("twin", "sonic-exporter")
"""Names and labels: the twin's own (docs/metrics.md), or the common SONiC exporter's."""


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
    subnets: Mapping[str, tuple[str, ...]] | None = None
    """Per switch, the server subnets it routes to (not its own: a connected route)."""
    pfc: list[dict[str, Any]] | None = None
    watermarks: dict[str, dict[str, dict[str, int]]] | None = None
    """'queues'/'pgs' -> `node:port` -> index -> the highest occupancy in bytes."""
    verdict: list[dict[str, Any]] | None = None
    at: float | None = None
    """The timestamp of every sample but the counters' (a run's end); None: now (live)."""
    since: float | None = None
    """A run's start: the simulator's counts (PFC, ECN, drops) are also exported there, at
    0, so that `increase()` finds two samples."""
    up: bool | None = None
    """A live twin: whether its counters' last read succeeded; None for a run."""
    reads: Mapping[str, float] | None = None
    """A live twin: part ('counters', 'bgp', 'fib') -> when its values were read (seconds
    since the epoch, when the read began)."""


COUNTERS_S = 1.0
"""Seconds between two reads of a live twin's counters."""

ROUTING_S = 5.0
"""Seconds between two reads of a live twin's BGP sessions, and of its FIBs (vtysh and
`ip route` in every switch: slower reads, slower changes)."""


def _port(key: str) -> tuple[str, str]:
    node, _, port = key.partition(":")
    return node, port


def families(snap: Snapshot, flavour: str = "twin") -> Iterator[Metric]:
    """The metric families of a snapshot, with the names and labels of `flavour`; each
    family holds all its series, and each series its samples in time order."""
    for metric in _families(snap):
        yield metric if flavour == "twin" else _as_exporter(metric)


def _as_exporter(metric: Metric) -> Metric:
    name, kind, added = EXPORTER.get(metric.name, (metric.name, metric.type, {}))
    renamed = Metric(name, metric.documentation, kind)
    suffix = "_total" if kind == "counter" else ""
    for s in metric.samples:
        labels = {("device" if k == "port" else k): v for k, v in s.labels.items()}
        renamed.add_sample(name + suffix, {**labels, **added}, s.value, s.timestamp)
    return renamed


def _families(snap: Snapshot) -> Iterator[Metric]:
    at = snap.at
    info = GaugeMetricFamily(
        "twin_info", "the twin the metrics come from", labels=["lab", "backend"]
    )
    info.add_metric([snap.lab, snap.backend], 1, timestamp=at)
    yield info
    if snap.up is not None:
        up = GaugeMetricFamily("twin_up", "1 when the twin's counters were last read")
        up.add_metric([], 1 if snap.up else 0)
        yield up
    if snap.reads is not None:
        reads = GaugeMetricFamily(
            "twin_read_timestamp_seconds",
            "when the values of a part (counters, bgp, fib) were read",
            labels=["part"],
        )
        for part, began in sorted(snap.reads.items()):
            reads.add_metric([part], began)
        yield reads
    keys = sorted({k for _, sample in snap.counters for k in sample})
    keys = [k for k in keys if _port(k)[0] in snap.switches]
    for i, field in enumerate(COUNTER_FIELDS):
        name, text = PORT_METRICS[field]
        family = CounterMetricFamily(name, text, labels=["switch", "port"])
        for key in keys:
            for when, sample in snap.counters:
                if key in sample:
                    family.add_metric([*_port(key)], sample[key][i], timestamp=when)
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
                    peaks.add_metric([*_port(key), str(index)], peak, timestamp=at)
            yield peaks
    if snap.sessions is not None:
        yield from _bgp(snap.sessions, at)
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
                passed.add_metric([str(r["validator"]), str(r["scope"])], value, timestamp=at)
        yield passed


def _pfc(snap: Snapshot) -> Iterator[Metric]:
    rows = [r for r in snap.pfc or [] if _port(str(r["port"]))[0] in snap.switches]
    for field, (name, text) in PFC_METRICS.items():
        label = "queue" if field == "ecn_marks" else "priority"
        family = CounterMetricFamily(name, text, labels=["switch", "port", label])
        for r in rows:
            labels = [*_port(str(r["port"])), str(r["priority"])]
            for t, value in _counted(snap, float(r[field])):
                family.add_metric(labels, value, timestamp=t)
        yield family
    drops = CounterMetricFamily(
        "sonic_port_dropped_packets",
        "packets the port dropped, by reason",
        labels=["switch", "port", "priority", "reason"],
    )
    for r in rows:
        for reason, n in sorted(r["drops"].items()):
            labels = [*_port(str(r["port"])), str(r["priority"]), reason]
            for t, value in _counted(snap, float(n)):
                drops.add_metric(labels, value, timestamp=t)
    yield drops


def _counted(snap: Snapshot, total: float) -> list[tuple[float | None, float]]:
    """A count over a run: 0 at its start (when in another millisecond), the total at its
    end; live, the total now."""
    if snap.since is None or snap.at is None or round(snap.at * 1e3) <= round(snap.since * 1e3):
        return [(snap.at, total)]
    return [(snap.since, 0.0), (snap.at, total)]


def _bgp(sessions: list[Session], at: float | None) -> Iterator[Metric]:
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
        labels = [s.node, s.peer, s.name]
        up.add_metric(labels, 1 if s.state == "Established" else 0, timestamp=at)
        prefixes.add_metric(labels, s.prefixes, timestamp=at)
    yield up
    yield prefixes


def _ecmp(snap: Snapshot) -> Metric:
    text = "next hops of the route to another leaf's server subnet"
    family = GaugeMetricFamily("sonic_route_ecmp_width", text, labels=["switch", "prefix"])
    for node, routes in sorted((snap.fib or {}).items()):
        for subnet in (snap.subnets or {}).get(node, ()):
            width = len(routes.get(IPv4Network(subnet), ()))
            family.add_metric([node, subnet], width, timestamp=snap.at)
    return family


def _subnets(lab: Lab) -> dict[str, tuple[str, ...]]:
    """Per switch, the server subnets of the leaves but its own."""
    subnets = {n: str(lab.graph.nodes[n]["subnet"]) for n in lab.nodes("leaf")}
    return {s: tuple(sorted(set(subnets.values()) - {subnets.get(s, "")})) for s in lab.switches()}


class Source(Protocol):
    """What a live endpoint reads: the backend of a running twin (`labs.lifecycle.Managed`)."""

    @property
    def name(self) -> str:
        """The backend's name."""
        ...

    @property
    def capabilities(self) -> frozenset[str]:
        """What it observes ('bgp', 'fib', ...)."""
        ...

    def observer(self, lab: Lab) -> Observer:
        """A reader of the running twin's state."""
        ...


class Live(Collector):
    """A running twin's metrics, read in the background (`start`): its counters every
    COUNTERS_S, its BGP sessions and its FIBs every ROUTING_S, each part by its own thread,
    which also renders the exposition after its read, so that a scrape only sends bytes
    already made and never waits on the twin. A part whose read fails (the twin destroyed)
    is dropped: a scrape then has `twin_up 0` and none of its values."""

    def __init__(self, lab: Lab, backend: Source, flavour: str = "twin") -> None:
        self.lab, self.backend, self.flavour = lab, backend, flavour
        self.switches, self.subnets = set(lab.switches()), _subnets(lab)
        self._lock = threading.Lock()
        self._parts: dict[str, tuple[float, Any]] = {}
        """part -> (when its read began, seconds since the epoch; what it read)."""
        self._up = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)
        self._rendered = self._render()
        self.on_render: Callable[[dict[bool, tuple[bytes, str]]], None] | None = None
        """Called with each exposition rendered (`Server` hands it to its serving process)."""

    def rendered(self) -> dict[bool, tuple[bytes, str]]:
        """The exposition as last rendered: OpenMetrics (True) and text (False)."""
        with self._lock:
            return self._rendered

    def start(self) -> None:
        """Read the counters once (a first scrape has them), then keep every part the
        backend observes fresh in the background until `stop`."""
        every = {"counters": COUNTERS_S, "bgp": ROUTING_S, "fib": ROUTING_S}
        parts = [p for p in every if p == "counters" or p in self.backend.capabilities]
        with contextlib.suppress(Exception):  # not deployed yet: read once it is
            self._read("counters", self.backend.observer(self.lab))
        for part in parts:
            first = every[part] if part == "counters" else 0.0
            thread = threading.Thread(
                target=self._keep, args=(part, every[part], first), daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop reading (a read under way is not waited for beyond a second)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=1)

    def _keep(self, part: str, every: float, first: float) -> None:
        observer: Observer | None = None
        if self._stop.wait(first):
            return
        while True:
            read = time.monotonic()
            try:  # the server may start before the twin is deployed (its port taken first)
                observer = observer or self.backend.observer(self.lab)
            except Exception:
                observer = None
            else:
                self._read(part, observer)
            if self._stop.wait(max(0.0, read + every - time.monotonic())):
                return

    def _read(self, part: str, observer: Observer) -> None:
        began = time.time()
        reader = {"counters": observer.counters, "bgp": observer.bgp, "fib": observer.fib}
        try:
            value: Any = reader[part]()
        except Exception:  # the twin torn down, or a read it refused: no values, not stale ones
            with self._lock:
                self._parts.pop(part, None)
                self._up = self._up if part != "counters" else False
        else:
            with self._lock:
                self._parts[part] = (began, value)
                self._up = self._up if part != "counters" else True
        rendered = self._render()
        with self._lock:
            self._rendered = rendered
        if self.on_render is not None:
            self.on_render(rendered)

    def _render(self) -> dict[bool, tuple[bytes, str]]:
        """The exposition of the twin as last read: OpenMetrics (True) and Prometheus's text
        format (False) -> (body, content type)."""
        from prometheus_client import exposition
        from prometheus_client.openmetrics import exposition as om

        return {
            True: (om.generate_latest(self._registry), om.CONTENT_TYPE_LATEST),
            False: (exposition.generate_latest(self._registry), exposition.CONTENT_TYPE_LATEST),
        }

    def exposition(self, openmetrics: bool) -> tuple[bytes, str]:
        """What a scrape is answered: (body, content type) of the twin as last read."""
        return self.rendered()[openmetrics]

    def snapshot(self) -> Snapshot:
        """The twin as last read (what a scrape serialises)."""
        with self._lock:
            parts, up = dict(self._parts), self._up
        counters: dict[str, list[int]] = parts["counters"][1] if "counters" in parts else {}
        return Snapshot(
            self.lab.name,
            self.backend.name,
            self.switches,
            [(None, {k: [float(v) for v in vs] for k, vs in counters.items()})],
            sessions=parts["bgp"][1] if "bgp" in parts else None,
            fib=parts["fib"][1] if "fib" in parts else None,
            subnets=self.subnets,
            up=up,
            reads={part: began for part, (began, _) in parts.items()},
        )

    def collect(self) -> Iterable[Metric]:
        """Called by prometheus_client when rendering."""
        return families(self.snapshot(), self.flavour)


class Server:
    """The HTTP endpoint serving a live twin's metrics (`/metrics`), until `stop`: the socket
    bound here (a port in use refused before anything starts), the scrapes answered by a
    process of its own (`twin.outputs.metrics_serve`), sent each exposition `Live` renders."""

    def __init__(
        self, lab: Lab, backend: Source, host: str, port: int, flavour: str = "twin"
    ) -> None:
        from prometheus_client import exposition
        from prometheus_client.openmetrics import exposition as om

        self.live = Live(lab, backend, flavour)
        listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listening.bind((host, port))
            listening.listen(64)
        except OSError as exc:
            listening.close()
            raise InputError(
                "--metrics", "", f"cannot serve on {host}:{port}: {exc.strerror}"
            ) from None
        with listening:
            self._serving = subprocess.Popen(
                [
                    sys.executable, "-I", "-m", "twin.outputs.metrics_serve",
                    str(listening.fileno()), om.CONTENT_TYPE_LATEST, exposition.CONTENT_TYPE_LATEST,
                ],
                stdin=subprocess.PIPE,
                pass_fds=[listening.fileno()],
            )  # fmt: skip
            self.url = f"http://{host}:{listening.getsockname()[1]}/metrics"
        self._lock = threading.Lock()
        self._send(self.live.rendered())
        self.live.on_render = self._send
        self.live.start()

    def _send(self, rendered: dict[bool, tuple[bytes, str]]) -> None:
        """Hand an exposition to the serving process (gone: nothing to do)."""
        om, text = rendered[True][0], rendered[False][0]
        pipe = self._serving.stdin
        with self._lock, contextlib.suppress(OSError, ValueError):
            if pipe is not None:
                pipe.write(b"%d %d\n%s%s" % (len(om), len(text), om, text))
                pipe.flush()

    def stop(self) -> None:
        """Close the endpoint: the serving process ends with its input."""
        self.live.stop()
        with self._lock, contextlib.suppress(OSError):
            if self._serving.stdin is not None:
                self._serving.stdin.close()
        try:
            self._serving.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._serving.kill()
            self._serving.wait()


def of_run(obs: Observations, lab: Lab, epoch: float | None = None) -> Snapshot:
    """A run's observations (and its verdict when reported) as a snapshot, every sample
    timestamped: the counters at their sample times, everything else (the last BGP sessions
    and FIB, what the simulator counted, the verdict) at the run's end. A live or hybrid run
    is on its own clock; a simulator run's seconds start at `epoch` (default: when its
    run.json was written). Prometheus keeps milliseconds: of the samples within one, the
    last."""
    started = float(obs.run["started"])
    shift = 0.0
    if started < 1e9:  # a simulator's own clock, with no date
        written = (obs.path / "run.json").stat().st_mtime
        shift = (written if epoch is None else epoch) - started
    by_ms = {round((float(s["t"]) + shift) * 1e3): s for s in obs.counters["samples"]}
    counters = [(ms / 1e3, s["c"]) for ms, s in by_ms.items()]
    occupancy = obs.extra("queues")
    watermarks = None
    if occupancy:
        watermarks = {
            kind: {k: {i: peak(v) for i, v in by.items()} for k, by in occupancy[kind].items()}
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
        at=max([float(obs.run["ended"]) + shift, *(t for t, _ in counters)]),
        since=started + shift,
    )


def _json_results(path: Path) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(path.read_text())
    results: list[dict[str, Any]] = data.get("results", [])
    return results


def openmetrics(snap: Snapshot, flavour: str = "twin") -> bytes:
    """A snapshot in the OpenMetrics text format (ends with `# EOF`)."""
    from prometheus_client.openmetrics.exposition import generate_latest

    class Fixed(Collector):
        def collect(self) -> Iterable[Metric]:
            return families(snap, flavour)

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
