"""Failover probes on the fake backend: flows pinned through each faulted element by the
routing model, played across its epochs like the phases' flows.

For a fault the model plays (`MODELLED`: it changes the FIBs), the network just before it
is searched, server pair by server pair (`PORTS` source ports each, a port being the flow's
ECMP key as a queue pair is for a phase's flows), for flows whose way leaves by either end
of the faulted link, or crosses or ends at the faulted node; the first two pairs with
`flows` such flows are probed at `pps` from `LEAD_S` before the fault until the next fault
(or the run's end). A fault followed by the one that gives back what it took (`RESTORES`:
the same link or node) keeps its probes until `BACK_S` after that one, and records whether
their ways cross the element again once it is back (`restore`). A flow loses what it sends
while no way leads to its destination, and its packets are counted on the ports of its way,
as the netns twin's counters count its probes' (`FRAME` bytes each). The records are those
of the netns backend (docs/observations.md, `failover_probes.json`).
"""

from __future__ import annotations

import math
from typing import Any

from labs.backend import RESTORES, FailoverProbes, Fault, FlowSpec
from labs.failures import CHANGES_ROUTING, Network
from labs.fake.simulate import Simulation, path
from twin.scenario.records import FaultRecord

TAKES = ("link-down", "link-flap", "node-down", "daemon-kill", "loss", "rate")
MODELLED = tuple(k for k in TAKES if k in CHANGES_ROUTING)
PORTS = range(20000, 20032)
DPORT = 47000
LEAD_S = 0.5
BACK_S = 2.0
FRAME = 106
"""A probe's frame: Ethernet, IPv4, UDP and the netns probe's 64 bytes (`labs.netns.udpprobe`)."""


def _crosses(hops: list[tuple[str, str]], flow: FlowSpec, record: FaultRecord) -> str | None:
    """Where a way crosses the faulted element (`node:port`, or the node), or None."""
    if "ends" in record:
        return next((f"{n}:{p}" for n, p in hops if f"{n}:{p}" in record["ends"]), None)
    node = str(record["node"])
    if flow.dst == node:
        return node
    return next((f"{n}:{p}" for n, p in hops if n == node), None)


def _pinned(
    sim: Simulation, net: Network, record: FaultRecord, count: int
) -> list[tuple[FlowSpec, list[tuple[str, str]], str]]:
    """Flows of the first two server pairs with `count` flows across the element."""
    servers = sim.lab.nodes("server")
    chosen: list[tuple[FlowSpec, list[tuple[str, str]], str]] = []
    pairs = 0
    for src in servers:
        for dst in servers:
            if src == dst or pairs == 2:
                continue
            found = []
            for sport in PORTS:
                flow = FlowSpec(sport, src, dst, sport)
                hops = path(net, flow, sim.addresses[dst])
                where = _crosses(hops, flow, record) if hops else None
                if where:
                    found.append((flow, hops or [], where))
            if len(found) >= count:
                chosen += found[:count]
                pairs += 1
    return chosen


def _played(
    sim: Simulation, flow: FlowSpec, pps: float, start: float, until: float
) -> tuple[int, int, list[list[Any]]]:
    """Sent, received and gaps (`[first lost sent at, packets, next arrival | None]`) of a
    probe flow over the model's epochs; its packets counted on the ports of its ways."""
    sent = received = 0
    gaps: list[list[Any]] = []
    for lo, hi, net in sim.stretches(start, until):
        n = math.floor(pps * (hi - start) + 1e-9) - math.floor(pps * (lo - start) + 1e-9)
        sent += n
        hops = path(net, flow, sim.addresses[flow.dst])
        sim.count(net, hops or [], pps, lo, hi, FRAME)
        if hops is None:
            if gaps and gaps[-1][2] is None:
                gaps[-1][1] += n
            elif n:
                gaps.append([round(sim.t0 + lo, 4), n, None])
            continue
        if gaps and gaps[-1][2] is None:
            gaps[-1][2] = round(sim.t0 + lo + 1 / pps, 4)
        received += n
    return sent, received, gaps


def probe(sim: Simulation, settings: FailoverProbes) -> list[dict[str, Any]]:
    """The failover probe records of a played timeline."""
    faults = sorted(sim.timeline.faults, key=lambda f: f[0])
    records = []
    for i, ((at, fault), record) in enumerate(zip(faults, sim.faults, strict=True)):
        if fault.kind not in TAKES:
            continue
        until = faults[i + 1][0] if i + 1 < len(faults) else sim.timeline.duration
        restored = i + 1 < len(faults) and _restores(sim, i + 1, i)
        if restored:
            later = faults[i + 2][0] if i + 2 < len(faults) else math.inf
            until = min(until + BACK_S, later)
        out = _record(i, fault, settings, sim.t0 + until)
        records.append(out)
        if fault.kind not in MODELLED:
            out["why"] = f"the fake backend does not model {fault.kind}"
            continue
        pinned = _pinned(sim, sim.epochs[i].net, record, settings.flows)
        if not pinned:
            out["why"] = f"no flow between servers crosses {out['element']} before the fault"
            continue
        start = max(0.0, at - LEAD_S)
        out["started"] = sim.t0 + start
        for flow, hops, where in pinned:
            sent, received, gaps = _played(sim, flow, settings.pps, start, until)
            out["flows"].append(
                {
                    "src": flow.src,
                    "dst": flow.dst,
                    "src_ip": str(sim.addresses[flow.src]),
                    "dst_ip": str(sim.addresses[flow.dst]),
                    "sport": flow.qp,
                    "dport": DPORT,
                    "path": [f"{n}:{p}" for n, p in hops],
                    "crossed": where,
                    "pps": settings.pps,
                    "sent": sent,
                    "received": received,
                    "gaps": gaps,
                }
            )
        if restored:
            out["restore"] = _back(sim, i + 1, record, pinned)
    return records


def _restores(sim: Simulation, index: int, taken: int) -> bool:
    """Whether fault `index` gives back the link or node that fault `taken` took away."""
    fault, before = sim.faults[index], sim.faults[taken]
    if RESTORES.get(fault["fault"]) != before["fault"]:
        return False
    if "ends" in fault or "ends" in before:
        return set(fault.get("ends", [])) == set(before.get("ends", []))
    return bool(fault.get("node") == before.get("node"))


def _back(
    sim: Simulation,
    index: int,
    record: FaultRecord,
    pinned: list[tuple[FlowSpec, list[tuple[str, str]], str]],
) -> dict[str, Any]:
    """Whether the pinned flows cross the element again once fault `index` gave it back."""
    net = sim.epochs[index + 1].net
    back = 0
    for flow, _, _ in pinned:
        hops = path(net, flow, sim.addresses[flow.dst])
        back += bool(hops and _crosses(hops, flow, record))
    restore = sim.faults[index]
    return {
        "index": index,
        "fault": restore["fault"],
        "back": restore["t"] if back else None,
        "flows_back": back,
        "watched_s": 0.0,
        "why": None,
    }


def _record(index: int, fault: Fault, settings: FailoverProbes, until: float) -> dict[str, Any]:
    return {
        "index": index,
        "fault": fault.kind,
        "element": fault.link or fault.node,
        "pps": settings.pps,
        "until": round(until, 4),
        "flows": [],
        "why": None,
    }
