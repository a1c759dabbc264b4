"""A timeline played by the fake backend, at once, in model time from `t0`.

Between two faults the network is fixed, so every flow follows one path: from its source
server, each node forwards by its FIB (longest-prefix match on the destination's address),
picking among ECMP next hops by a hash of the flow's 5-tuple and the node (deterministic).
A flow whose path ends without a route, or loops, loses its packets for that stretch. Every
flow sends `pps` packets per second for its phase; counters are the packets and bytes of
the flows crossing each port; nothing queues, nothing is delayed, nothing is re-marked.
An ECMP probe's tuples enter at their leaf from the pair's NIC and are hashed the same way,
counted on the ports they cross (no flow records: they are judged by the uplink counters).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import asdict, dataclass
from ipaddress import IPv4Address

from labs.backend import COUNTER_FIELDS, FlowSpec, Phase, Played, ProbePair, Timeline
from labs.failures import CHANGES_ROUTING, Network, fault_record
from twin.lab.directory import Lab
from twin.scenario.records import (
    Counters,
    Event,
    FaultRecord,
    FlowRecord,
    PhaseRecord,
    Sample,
    fib_label,
    logged,
)

FRAME_OVERHEAD = 58  # Ethernet, IPv4, UDP, BTH and ICRC around a RoCE payload
PROBE_FRAME = 50  # an ECMP probe's frame: Ethernet, IPv4, UDP and 8 bytes
MAX_HOPS = 64
SNAPSHOT_AFTER = 0.5
ECT0 = 2


@dataclass(frozen=True)
class Epoch:
    """From `start` (model seconds after t0) on, the network is `net`."""

    start: float
    net: Network


def path(
    net: Network, flow: FlowSpec, address: IPv4Address, start: str | None = None
) -> list[tuple[str, str]] | None:
    """The (node, egress port) hops from the flow's source (or node `start`) to its
    destination, or None when it is dropped (no route, or a loop)."""
    node, hops = start or flow.src, list[tuple[str, str]]()
    while node != flow.dst:
        choices = net.hops(node, address)
        if not choices or len(hops) >= MAX_HOPS:
            return None
        key = f"{flow.src}>{flow.dst}/{flow.qp}@{node}".encode()
        digest = hashlib.blake2b(key, digest_size=8).digest()
        hop = choices[int.from_bytes(digest, "big") % len(choices)]
        hops.append((node, hop.port))
        node = hop.node
    return hops


def _sent(pps: float, since: float) -> int:
    """Packets a flow at `pps` has sent `since` seconds after its start."""
    return math.floor(pps * since + 1e-9)


class Simulation:
    """One timeline on one lab, from the failures the fake twin holds."""

    def __init__(self, lab: Lab, timeline: Timeline, net: Network, t0: float) -> None:
        self.lab, self.timeline, self.t0 = lab, timeline, t0
        self.epochs = [Epoch(0.0, net)]
        self.faults: list[FaultRecord] = []
        for index, (at, fault) in enumerate(sorted(timeline.faults, key=lambda f: f[0])):
            self.faults.append(fault_record(self.epochs[-1].net, index, t0 + at, fault))
            if fault.kind in CHANGES_ROUTING:
                self.epochs.append(Epoch(at, self.epochs[-1].net.after(fault)))
            else:
                self.epochs.append(Epoch(at, self.epochs[-1].net))
        self.addresses = {
            s: IPv4Address(lab.host(s)["address"].split("/")[0]) for s in lab.nodes("server")
        }
        self.flows: list[FlowRecord] = []
        self.phases: list[PhaseRecord] = []
        self.rates: list[tuple[str, str, float, float, float, int]] = []
        """(tx node:port, rx node:port, pps, from, to, frame bytes) of every path stretch."""

    def stretches(self, start: float, end: float) -> list[tuple[float, float, Network]]:
        """The (from, to, network) stretches of a time span, split at the faults."""
        out = []
        for i, epoch in enumerate(self.epochs):
            until = self.epochs[i + 1].start if i + 1 < len(self.epochs) else math.inf
            lo, hi = max(start, epoch.start), min(end, until)
            if lo < hi:
                out.append((lo, hi, epoch.net))
        return out

    def flow(self, phase: Phase, flow: FlowSpec) -> FlowRecord:
        """Send one flow through the phase's stretches; its record."""
        pps = float(phase.pps or 0)
        frame = phase.payload + FRAME_OVERHEAD
        received = missing = 0
        gaps: list[list[float]] = []
        for lo, hi, net in self.stretches(phase.at, phase.at + phase.duration):
            n = _sent(pps, hi - phase.at) - _sent(pps, lo - phase.at)
            hops = path(net, flow, self.addresses[flow.dst])
            if hops is None:
                missing += n
                continue
            if missing and n:
                gaps.append([round(self.t0 + lo + 1 / pps, 4), missing])
                missing = 0
            received += n
            self.count(net, hops, pps, lo, hi, frame)
        sent = _sent(pps, phase.duration)
        dscp = phase.dscp[flow.src]
        return {
            "flow_id": flow.flow_id,
            "src": flow.src,
            "dst": flow.dst,
            "qp": flow.qp,
            "phase": phase.label,
            "class": phase.traffic_class,
            "dscp_sent": dscp,
            "pps": phase.pps or 0,
            "sent": sent,
            "received": received,
            "lost": sum(int(n) for _, n in gaps),
            "tail_lost": missing,
            "reordered": 0,
            "latency_us": {"min": 0.0, "mean": 0.0, "max": 0.0},
            "dscp_received": {str(dscp): received} if received else {},
            "ecn_received": {str(ECT0): received} if received else {},
            "gaps": gaps,
        }

    def probe(self, phase: Phase, pair: ProbePair) -> int:
        """Send one pair of an ECMP probe: each tuple (source port) from the pair's NIC into
        its leaf, then hashed like any flow; packets sent."""
        pps = float(phase.pps or 0)
        for lo, hi, net in self.stretches(phase.at, phase.at + phase.duration):
            ways: Counter[tuple[tuple[str, str], ...]] = Counter()
            for sport in range(pair.sport, pair.sport + pair.flows):
                tuple_ = FlowSpec(pair.flow_id, pair.src, pair.dst, sport)
                way = path(net, tuple_, self.addresses[pair.dst], start=pair.leaf)
                ways[((pair.src, pair.nic), *(way or []))] += 1
            for hops, n in ways.items():
                self.count(net, list(hops), pps * n, lo, hi, PROBE_FRAME)
        return _sent(pps, phase.duration) * pair.flows

    def count(
        self,
        net: Network,
        hops: list[tuple[str, str]],
        pps: float,
        lo: float,
        hi: float,
        frame: int,
    ) -> None:
        """Count `pps` packets of `frame` bytes from `lo` to `hi` on each port of a way (tx)
        and at its far end (rx)."""
        for node, port in hops:
            far = net.wiring.far(node, port)
            rx = f"{far[0]}:{far[1]}" if far else ""
            self.rates.append((f"{node}:{port}", rx, pps, lo, hi, frame))

    def run(self) -> None:
        """Play every phase."""
        for phase in self.timeline.phases:
            records = [self.flow(phase, f) for f in phase.flows]
            sent = {str(r["flow_id"]): r["sent"] for r in records}
            sent |= {str(p.flow_id): self.probe(phase, p) for p in phase.probe}
            self.flows += records
            record: PhaseRecord = {
                "index": phase.index,
                "label": phase.label,
                "kind": phase.kind,
                "start": self.t0 + phase.at,
                "end": self.t0 + phase.at + phase.duration,
                "pps_per_flow": phase.pps,
                "dscp": dict(phase.dscp),
                "class": phase.traffic_class,
                "flows": [
                    {"flow_id": f.flow_id, "src": f.src, "dst": f.dst, "qp": f.qp}
                    for f in phase.flows
                ],
                "sent": sent,
            }
            if phase.probe:
                record["probe"] = [asdict(p) for p in phase.probe]
            self.phases.append(record)

    def counters(self) -> Counters:
        """Cumulative port counters every `sample_interval` over the run."""
        interval = self.timeline.sample_interval
        ports = {p for tx, rx, *_ in self.rates for p in (tx, rx) if p}
        columns = {name: i for i, name in enumerate(COUNTER_FIELDS)}
        samples: list[Sample] = []
        for k in range(math.ceil(self.timeline.duration / interval) + 1):
            t = min(k * interval, self.timeline.duration)
            c = {p: [0] * len(COUNTER_FIELDS) for p in sorted(ports)}
            for tx, rx, pps, lo, hi, frame in self.rates:
                packets = _sent(pps, max(0.0, min(t, hi) - lo))
                for port, side in ((tx, "tx"), (rx, "rx")):
                    if port:
                        c[port][columns[f"{side}_packets"]] += packets
                        c[port][columns[f"{side}_bytes"]] += packets * frame
            samples.append({"t": round(self.t0 + t, 4), "c": c})
        return {"interval": interval, "fields": COUNTER_FIELDS, "samples": samples}

    def played(self) -> Played:
        """The run's record."""
        fibs = {"start": (self.t0, self.epochs[0].net.fib)}
        for record, epoch in zip(self.faults, self.epochs[1:], strict=True):
            label = fib_label(record["index"], record["fault"].removesuffix("-done"))
            fibs[label] = (record["t"] + SNAPSHOT_AFTER, epoch.net.fib)
        end = self.t0 + self.timeline.duration
        fibs["end"] = (end, self.epochs[-1].net.fib)
        start: Event = {"t": self.t0, "event": "run-start", "scenario": self.timeline.scenario}
        return Played(
            started=self.t0,
            ended=end,
            phases=self.phases,
            faults=self.faults,
            flows=self.flows,
            counters=self.counters(),
            fibs=fibs,
            bgp={"start": [], "end": []},
            events=[start, *map(logged, self.faults)],
        )
