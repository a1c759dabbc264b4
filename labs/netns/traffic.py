"""Traffic on a netns twin: a phase's senders, the servers' receivers, per-flow results and
packet captures.

A phase's flows are sent by one sender job per source server and NIC, paced at `pps` per
flow; a server's other NICs stand by, as a bond's members do. Receivers run in every server
for the whole run; their per-flow tallies become the run's flow records.
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from labs.backend import FlowSpec, Phase
from labs.netns import ecmpprobe
from labs.netns.faults import resolve_link
from labs.netns.plan import build, netns_name, port_names
from labs.netns.processes import lab_env
from traffic.endpoints import Endpoint, next_hop
from traffic.flowstats import FlowStats
from traffic.jobs import FlowFactory, TrafficClass
from traffic.pacing import ConstantRate, PeriodicBursts
from traffic.receiver import Receiver, start_receiver
from traffic.roce import ECT0
from traffic.sender import SenderResult, SendJob, run_senders
from twin.labdir import Lab


def _jobs(lab: Lab, phase: Phase) -> list[SendJob]:
    """One sender job per source server and NIC."""
    endpoints = [
        Endpoint(s, netns_name(lab.name, s), lab.host(s)["address"].split("/")[0])
        for s in lab.nodes("server")
    ]
    qps = 1 + max((f.qp for f in phase.flows), default=0)
    by_source: dict[str, list[FlowSpec]] = {}
    for f in phase.flows:
        by_source.setdefault(f.src, []).append(f)
    jobs = []
    for src, own in by_source.items():
        factory = FlowFactory(endpoints, TrafficClass(phase.dscp[src], ECT0, phase.payload, qps))
        ns = netns_name(lab.name, src)
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
            gateways = [(i["gateway"], i["name"]) for i in lab.host(src)["interfaces"]]
            standby = tuple(next_hop(ns, gw) for gw, nic in gateways if nic != iface)
            jobs.append(
                SendJob(ns, iface, frames, pacing, duration_s=phase.duration, standby=standby)
            )
    return jobs


class PhaseTraffic:
    """`labs.backend.Traffic` of one phase: its jobs prepared, sent on a thread when started
    (the senders stop by themselves after the phase's duration)."""

    def __init__(self, lab: Lab, phase: Phase) -> None:
        self.jobs = ecmpprobe.jobs(lab, phase) if phase.probe else _jobs(lab, phase)
        self.results: list[SenderResult] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._send, name=f"phase{phase.index}", daemon=True)

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


def start_receivers(lab: Lab) -> dict[str, Receiver]:
    """A receiver in every server, counting every flow that reaches it and ACKing its
    messages to the lab's servers (and nowhere else)."""
    servers = lab.nodes("server")
    addresses = [lab.host(s)["address"].split("/")[0] for s in servers]
    receivers: dict[str, Receiver] = {}
    try:
        for s in servers:
            receivers[s] = start_receiver(netns_name(lab.name, s), drain_s=2.0, answer=addresses)
    except BaseException:
        for r in receivers.values():
            r.close()
        raise
    return receivers


def flow_records(
    phases: list[dict[str, Any]], received: dict[str, dict[int, FlowStats]]
) -> list[dict[str, Any]]:
    """Per flow of every phase: what was sent, and what its destination's receiver counted."""
    records = []
    for phase in phases:
        for f in phase["flows"]:
            stats = received.get(f["dst"], {}).get(f["flow_id"])
            sent = int(phase["sent"].get(str(f["flow_id"]), 0))
            got = asdict(stats) if stats else {}
            records.append(
                {
                    **f,
                    "phase": phase["label"],
                    "class": phase["class"],
                    "dscp_sent": phase["dscp"][f["src"]],
                    "pps": phase["pps_per_flow"],
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
    return records


def start_captures(lab: Lab, links: list[str], out: Path) -> list[subprocess.Popen[bytes]]:
    """tcpdump on one end of each link into OUT/capture/<node>_<port>.pcap (Wireshark opens
    them); in immediate mode, so frames of the run's last second are not left in its buffer."""
    if not links:
        return []
    plan = build(lab)
    (out / "capture").mkdir(parents=True, exist_ok=True)
    started = []
    for spec in links:
        end, _ = resolve_link(lab, plan, spec)
        port = port_names(lab, end.node).get(end.ifname, end.ifname)
        pcap = out / "capture" / f"{end.node}_{port}.pcap"
        started.append(
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    netns_name(lab.name, end.node),
                    "tcpdump",
                    "-q",
                    "-U",
                    "--immediate-mode",
                    "-i",
                    end.ifname,
                    "-w",
                    str(pcap),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=lab_env(lab.name),
            )
        )
    return started


def stop_captures(started: list[subprocess.Popen[bytes]]) -> None:
    """Stop the captures a run started (by their process, never by name)."""
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
