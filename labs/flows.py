"""The flows of a wall-clock twin (netns, clab): a phase's senders, the servers' receivers,
per-flow results.

A phase's flows are sent by one sender job per source server and NIC, paced at `pps` per
flow; a server's other NICs stand by, as a bond's members do. Receivers run in every server
for the whole run; their per-flow tallies become the run's flow records. A backend says
where its servers are (`Servers`: each one's network namespace, by name or by path, and host
file); every worker process carries the lab's tag.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from labs.backend import FlowSpec, Phase
from traffic.endpoints import Endpoint, NextHops
from traffic.flowstats import FlowStats
from traffic.jobs import FlowFactory, TrafficClass
from traffic.pacing import ConstantRate, PeriodicBursts
from traffic.receiver import Receiver
from traffic.roce import ECT0
from traffic.sender import SenderResult, SendJob, run_senders
from twin.scenario.records import FlowRecord, PhaseRecord


@dataclass(frozen=True)
class Servers:
    """Where a twin's servers send and receive: the lab's tag, each server's network
    namespace (a name, or a path such as a container's `/proc/<pid>/ns/net`) and host file
    (its address, and its NICs with their gateways)."""

    lab: str
    netns: dict[str, str]
    hosts: dict[str, dict[str, Any]]


def jobs(where: Servers, phase: Phase) -> list[SendJob]:
    """A phase's sender jobs: one per source server and NIC (next hops looked up over one
    netlink socket per namespace)."""
    with NextHops() as hops:
        return _jobs(where, phase, hops)


def _jobs(where: Servers, phase: Phase, hops: NextHops) -> list[SendJob]:
    endpoints = [
        Endpoint(s, ns, where.hosts[s]["address"].split("/")[0]) for s, ns in where.netns.items()
    ]
    qps = 1 + max((f.qp for f in phase.flows), default=0)
    by_source: dict[str, list[FlowSpec]] = {}
    for f in phase.flows:
        by_source.setdefault(f.src, []).append(f)
    for src in by_source:
        hops.warm(where.netns[src], [i["gateway"] for i in where.hosts[src]["interfaces"]])
    jobs = []
    for src, own in by_source.items():
        tc = TrafficClass(phase.dscp[src], ECT0, phase.payload, qps)
        factory = FlowFactory(endpoints, tc, resolve=hops)
        ns = where.netns[src]
        by_nic: dict[str, list[FlowSpec]] = {}
        for f in own:
            by_nic.setdefault(factory.hop(f.src, f.dst).iface, []).append(f)
        for iface, nic_flows in by_nic.items():
            frames = tuple(factory.flow(f.src, f.dst, f.qp) for f in nic_flows)
            rate = float(phase.pps or 0) * len(nic_flows)
            pacing = (
                PeriodicBursts(float(phase.period or 1.0), float(phase.burst or 0.1), rate)
                if phase.kind == "micro_bursts"
                else ConstantRate(rate)
            )
            gateways = [(i["gateway"], i["name"]) for i in where.hosts[src]["interfaces"]]
            standby = tuple(hops(ns, gw) for gw, nic in gateways if nic != iface)
            jobs.append(
                SendJob(
                    ns,
                    iface,
                    frames,
                    pacing,
                    duration_s=phase.duration,
                    standby=standby,
                    lab=where.lab,
                )
            )
    return jobs


class PhaseTraffic:
    """`labs.backend.Traffic` of one phase (its `index`): its sender jobs, prepared, sent on a
    thread when started (the senders stop by themselves after the phase's duration)."""

    def __init__(self, jobs: list[SendJob], index: int) -> None:
        self.jobs = jobs
        self.results: list[SenderResult] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._send, name=f"phase{index}", daemon=True)

    def _send(self) -> None:
        try:
            self.results = run_senders(self.jobs)
        except BaseException as exc:  # raised again by stop()
            self.error = exc

    def start(self) -> None:
        """Start sending."""
        self.thread.start()

    def stop(self) -> dict[int, int]:
        """Wait for the senders to end; packets sent per flow id."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return {fid: n for r in self.results for fid, n in r.flow_packets.items()}


def start_receivers(where: Servers) -> dict[str, Receiver]:
    """A receiver in every server, counting every flow that reaches it and ACKing its
    messages to the lab's servers (and nowhere else); all started, then waited for."""
    addresses = [host["address"].split("/")[0] for host in where.hosts.values()]
    receivers: dict[str, Receiver] = {}
    try:
        for s, ns in where.netns.items():
            receivers[s] = Receiver(ns, drain_s=2.0, answer=addresses, lab=where.lab, wait=False)
        for r in receivers.values():
            r.ready()
    except BaseException:
        for r in receivers.values():
            r.close()
        raise
    return receivers


def stop_receivers(receivers: dict[str, Receiver]) -> dict[str, dict[int, FlowStats]]:
    """Tell every receiver to stop, then collect each one's per-flow tallies: they drain
    side by side, not one after another. The dict is emptied as they are collected."""
    for r in receivers.values():
        r.tell_stop()
    received = {}
    for server in list(receivers):
        received[server] = receivers.pop(server).result().flows
    return received


def flow_records(
    phases: list[PhaseRecord], received: dict[str, dict[int, FlowStats]]
) -> list[FlowRecord]:
    """Per flow of every phase: what was sent, and what its destination's receiver counted."""
    out: list[FlowRecord] = []
    for phase in phases:
        for f in phase["flows"]:
            stats = received.get(f["dst"], {}).get(f["flow_id"])
            sent = int(phase["sent"].get(str(f["flow_id"]), 0))
            got = asdict(stats) if stats else {}
            out.append(
                {
                    "flow_id": f["flow_id"],
                    "src": f["src"],
                    "dst": f["dst"],
                    "qp": f["qp"],
                    "phase": phase["label"],
                    "class": phase["class"],
                    "dscp_sent": phase["dscp"][f["src"]],
                    "pps": phase["pps_per_flow"] or 0,
                    "sent": sent,
                    "received": got.get("packets", 0),
                    "lost": got.get("lost", 0),
                    "tail_lost": max(0, sent - 1 - got.get("max_seq", -1)),
                    "reordered": got.get("reordered", 0),
                    "latency_us": {
                        k: round(got.get(f"latency_{k}_ns", 0) / 1000, 1)
                        for k in ("min", "mean", "max")
                    },
                    "dscp_received": {str(k): v for k, v in got.get("dscp", {}).items()},
                    "ecn_received": {str(k): v for k, v in got.get("ecn", {}).items()},
                    "gaps": [[round(t / 1e9, 4), n] for t, n in got.get("gaps", [])],
                }
            )
    return out
