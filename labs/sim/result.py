"""What a run produces: per-flow and per-port counters, occupancy series and events, as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from labs.sim.flows import CollectiveStats, FlowStats


@dataclass(frozen=True)
class FlowResult:
    """One flow: bytes, timing, congestion signals, and its delivered rate per sample."""

    name: str
    src: str
    dst: str
    size: int | None
    bytes_sent: int
    bytes_delivered: int
    bytes_dropped: int
    start: float | None
    completion: float | None
    """When the last byte was delivered (or accounted as dropped); None if never."""
    cnps: int
    ecn_marks: int
    rate: float
    """The sending rate at the end (DCQCN's current rate, a TCP flow's window per smoothed
    RTT, or the open-loop rate), b/s."""
    alpha: float
    """DCQCN's alpha, or DCTCP's for a tcp flow."""
    rate_series: list[float] = field(default_factory=list)
    """Delivered b/s in each sample interval (the first covers [0, interval))."""
    first_drop: float | None = None
    """When its first packet was dropped (any cause); None if none was."""
    transport: str = "open"
    goodput: float = 0.0
    """Bytes delivered in order, b/s, from its start to its completion (or the run's end)."""
    retransmitted_packets: int = 0
    retransmitted_bytes: int = 0
    timeouts: int = 0
    naks: int = 0
    """NAKs (sequence errors) the sender received (rc)."""
    fast_retransmits: int = 0
    """Window halvings on three duplicate ACKs (tcp)."""
    cwnd: float | None = None
    """The congestion window at the end, bytes (tcp)."""
    srtt: float | None = None
    """The smoothed round-trip time at the end, seconds (tcp, once measured)."""

    @property
    def fct(self) -> float | None:
        """Flow completion time in seconds."""
        if self.completion is None or self.start is None:
            return None
        return self.completion - self.start


@dataclass(frozen=True)
class PriorityCounters:
    """Counters of one port and priority. Pauses 'sent' are XOFF/XON frames this port sent to
    its peer (its ingress was congested); 'received' ones paused this port's egress; drops
    are counted at the ingress port (lossless drops are model violations)."""

    pause_sent: int
    pause_received: int
    paused_time: float
    ecn_marks: int
    tx_bytes: int
    tx_packets: int
    drops_lossless: int
    drops_lossy: int
    drops_ttl: int
    drops_no_route: int
    drops_link: int
    drops_watchdog: int


@dataclass(frozen=True)
class PortResult:
    node: str
    port: str
    priorities: dict[int, PriorityCounters]
    """Only priorities with a non-zero counter."""


@dataclass(frozen=True)
class Event:
    """A notable event: link_down/up, storm_start/end (an injected PFC storm), pause_storm (a
    priority paused longer than the threshold), watchdog_detect/restore, lossless_drop (the
    first on a port and priority), deadlock (with its cycle of (node, port, priority)); with
    Transports.trace, per flow: transport_nak and transport_timeout (detail: the PSN the sender
    goes back to), fast_retransmit and ecn_cut (detail: the window before and after, bytes)."""

    time: float
    kind: str
    node: str | None = None
    port: str | None = None
    priority: int | None = None
    detail: str | None = None
    cycle: list[tuple[str, str, int]] = field(default_factory=list)
    flow: str | None = None


@dataclass(frozen=True)
class Occupancy:
    """Queue and PG occupancy as changes (`simulate(dense=False)`): ``node:port`` -> queue or
    PG -> [sample, bytes, sample, bytes, ...] (an int32 array, written as a JSON list by
    `twin.jsonio.dumps`), each the bytes held from that sample on (0 before the first), over
    `samples` samples; only those that ever held anything."""

    samples: int
    queues: dict[str, dict[int, npt.NDArray[np.int32]]]
    pgs: dict[str, dict[int, npt.NDArray[np.int32]]]


@dataclass(frozen=True)
class Result:
    """The outputs of one run (deterministic for an experiment and a seed, `core_cpu` aside)."""

    experiment: str
    seed: int
    end_time: float
    deadlocked: bool
    """A deadlock was detected (the run stopped on it if the experiment asked)."""
    flows: list[FlowResult]
    ports: list[PortResult]
    sample_interval: float
    queues: dict[str, dict[int, list[int]]]
    """``node:port`` -> egress queue -> bytes at each sample (queues never occupied omitted)."""
    pgs: dict[str, dict[int, list[int]]]
    """``node:port`` -> ingress PG -> bytes held (reserved + shared + headroom) at each sample."""
    events: list[Event]
    packet_hops: int
    events_processed: int
    table: FlowStats | None = None
    """The results of the experiment's `table` rows, as columns (their flows are not in
    `flows`)."""
    occupancy: Occupancy | None = None
    """The occupancy series as changes, instead of `queues` and `pgs` (`simulate(dense=False)`)."""
    collectives: list[CollectiveStats] = field(default_factory=list)
    """Per collective the core made (`Experiment.collectives`), what its slots did over every
    step."""
    routes_checked: tuple[int, int] = (0, 0)
    """With `simulate(check_routes=True)`: the routes the core took ahead of their arrival and
    used, and how many of them the arrival would have taken otherwise (a fault: 0 expected)."""
    core_cpu: float = field(default=0.0, compare=False)
    """The CPU seconds of the core's run (`sim_run`, its thread's): what a packet hop costs the
    core, apart from the build and what reads the results (differs run to run: not compared)."""

    def flow(self, name: str) -> FlowResult:
        for f in self.flows:
            if f.name == name:
                return f
        raise KeyError(name)

    def port(self, name: str) -> PortResult:
        node, _, port = name.partition(":")
        for p in self.ports:
            if (p.node, p.port) == (node, port):
                return p
        raise KeyError(name)

    def total(self, counter: str) -> float:
        """A PriorityCounters field summed over every port and priority."""
        return float(sum(getattr(c, counter) for p in self.ports for c in p.priorities.values()))

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def _window(self, series: Sequence[float], start: float, end: float) -> float:
        """Mean of the samples in [start, end) seconds."""
        window = series[round(start / self.sample_interval) : round(end / self.sample_interval)]
        return float(sum(window)) / len(window) if window else 0.0

    def mean_queue(self, port: str, queue: int, start: float, end: float) -> float:
        """Mean sampled bytes of an egress queue over [start, end) seconds."""
        return self._window(self.queues.get(port, {}).get(queue, []), start, end)

    def mean_rate(self, flow: str, start: float, end: float) -> float:
        """Mean delivered rate of a flow over [start, end) seconds, b/s."""
        return self._window(self.flow(flow).rate_series, start, end)

    def to_json(self) -> str:
        data: dict[str, Any] = asdict(replace(self, table=None, collectives=[]))
        data["table"] = None if self.table is None else self.table.as_lists()
        data["collectives"] = [r.as_lists() for r in self.collectives]
        del data["core_cpu"]  # what the run cost, not what it gave: the same seed, the same JSON
        return json.dumps(data, indent=1) + "\n"

    def summary(self) -> str:
        """A few lines for a person: flows, pauses, drops, events."""
        done = [f for f in self.flows if f.completion is not None]
        lines = [
            f"{self.experiment}: seed {self.seed}, simulated {self.end_time * 1e3:.3f} ms, "
            f"{self.packet_hops} packet hops, {len(done)}/{len(self.flows)} flows completed",
            f"pause frames sent {self.total('pause_sent'):.0f}, "
            f"ECN marks {self.total('ecn_marks'):.0f}, "
            f"drops: lossless {self.total('drops_lossless'):.0f}, "
            f"lossy {self.total('drops_lossy'):.0f}, ttl {self.total('drops_ttl'):.0f}, "
            f"link {self.total('drops_link'):.0f}, watchdog {self.total('drops_watchdog'):.0f}",
        ]
        slowest = max(done, key=lambda f: f.fct or 0.0, default=None)
        if slowest is not None and slowest.fct is not None:
            lines.append(f"slowest flow {slowest.name}: {slowest.fct * 1e3:.3f} ms")
        kinds: dict[str, int] = {}
        for e in self.events:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        if kinds:
            lines.append("events: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
        for e in self.events_of("deadlock")[:1]:
            cycle = " -> ".join(f"{n}:{p}/{q}" for n, p, q in e.cycle)
            lines.append(f"deadlock at {e.time * 1e3:.3f} ms: {cycle}")
        return "\n".join(lines)
