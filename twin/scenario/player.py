"""Play a scenario on a running twin and save the observations (see `twin.scenario.observations`).

The timeline runs on threads against one clock: every traffic phase starts its senders at its
`at` and stops them after its `duration`; every fault fires at its `at`, followed by a FIB
snapshot; a sampler reads every interface counter each `sample_interval`; the monitor logs BGP
and route changes. Receivers run in every server for the whole run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from labs import events
from labs.netns import counters, probes
from labs.netns import lifecycle as netns
from labs.netns.faults import Faults, resolve_link
from labs.netns.monitor import Monitor
from labs.netns.plan import build, netns_name
from labs.netns.processes import lab_env
from traffic import collectives
from traffic.collectives import Flow
from traffic.endpoints import Endpoint, next_hop
from traffic.jobs import FlowFactory, TrafficClass, flow_id
from traffic.pacing import ConstantRate, PeriodicBursts
from traffic.receiver import Receiver, start_receiver
from traffic.roce import ECT0
from traffic.sender import SendJob, run_senders
from twin.errors import LabError
from twin.labdir import Lab
from twin.scenario import model as scenarios
from twin.scenario.model import Fault, Scenario, Traffic

Progress = Callable[[str], None]
CAPABILITIES = ["bgp", "ecmp", "fib", "interface-counters", "flows", "link-faults", "dscp"]
SCHEDULES = {
    ("all_reduce", "ring"): collectives.ring_all_reduce,
    ("all_reduce", "halving_doubling"): collectives.halving_doubling_all_reduce,
    ("all_gather", "ring"): collectives.ring_all_gather,
    ("reduce_scatter", "ring"): collectives.ring_reduce_scatter,
    ("all_to_all", "ring"): collectives.all_to_all,
}


def _quiet(_: str) -> None:
    """Progress sink that says nothing."""


def ranks(lab: Lab, phase: Traffic) -> list[str]:
    """A collective's ranks in order: as listed, or interleaved across leaf groups so that
    consecutive ranks sit behind different leaves."""
    servers = lab.nodes("server") if phase.servers == "all" else list(phase.servers)
    if phase.order == "natural":
        return servers
    groups: dict[int, list[str]] = {}
    for server in servers:
        groups.setdefault(lab.graph.nodes[server]["group"], []).append(server)
    columns = list(groups.values())
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def analytical(lab: Lab, phase: Traffic) -> dict[str, float] | None:
    """A collective's completion bound at a server's NIC bandwidth (all its NICs), and
    nccl-tests' algbw and
    busbw at that bound (Gb/s), for `message` bytes per rank."""
    if phase.kind not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return None
    build = SCHEDULES.get((phase.kind, phase.algorithm), SCHEDULES[(phase.kind, "ring")])
    schedule = build(ranks(lab, phase), phase.message, phase.qps)
    link_bps = lab.fabric.servers.nic_speed * lab.fabric.servers.nics * 1e6
    bound = schedule.completion_bound_s(link_bps)
    return {
        "message_bytes": phase.message,
        "link_gbps": link_bps / 1e9,
        "bound_s": round(bound, 6),
        "algbw_gbps": round(8 * schedule.algbw(bound) / 1e9, 2),
        "busbw_gbps": round(8 * schedule.busbw(bound) / 1e9, 2),
    }


def phase_flows(lab: Lab, phase: Traffic) -> list[Flow]:
    """The (src, dst, qp) flows of a phase; a collective's are those of its schedule."""
    if phase.kind in ("backup", "micro_bursts"):
        assert isinstance(phase.src, str) and phase.dst
        return [Flow(phase.src, phase.dst, 0, qp) for qp in range(phase.qps)]
    if phase.kind == "incast":
        assert isinstance(phase.src, list) and phase.dst
        return [Flow(s, phase.dst, 0, qp) for s in phase.src for qp in range(phase.qps)]
    build = SCHEDULES.get((phase.kind, phase.algorithm), SCHEDULES[(phase.kind, "ring")])
    schedule = build(ranks(lab, phase), 1 << 20, phase.qps)
    unique = {(f.src, f.dst, f.qp): f for step in schedule.steps for f in step}
    return list(unique.values())


def uplinks(lab: Lab) -> dict[str, list[str]]:
    """Per leaf, the Linux names of its ports facing spines (one per routed bundle)."""
    result: dict[str, list[str]] = {}
    for veth in build(lab).veths:
        for here, here_if, there in ((veth.a, veth.a_if, veth.b), (veth.b, veth.b_if, veth.a)):
            roles = (lab.graph.nodes[here]["role"], lab.graph.nodes[there]["role"])
            if roles == ("leaf", "spine"):
                result.setdefault(here, []).append(here_if)
    return result


def host_dscp(lab: Lab, server: str, phase: Traffic) -> int:
    """The DSCP a server marks a phase's class with: RoCE as its RDMA settings say, other
    classes as its marking rules say, else the fabric policy's; a phase override wins."""
    if phase.dscp is not None:
        return phase.dscp
    host = lab.host(server)
    if phase.traffic_class == "roce":
        return int(host["rdma"]["dscp"])
    for mark in host.get("dscp_marking", []):
        if mark["class"] == phase.traffic_class:
            return int(mark["dscp"])
    return lab.fabric.qos.classes[phase.traffic_class].dscp


def _jobs(lab: Lab, phase: Traffic, flows: list[Flow]) -> list[SendJob]:
    """One sender job per source server and NIC, paced at `pps` per flow; the server's other
    NICs stand by, as a bond's members do."""
    endpoints = [
        Endpoint(s, netns_name(lab.name, s), lab.host(s)["address"].split("/")[0])
        for s in lab.nodes("server")
    ]
    by_source: dict[str, list[Flow]] = {}
    for f in flows:
        by_source.setdefault(f.src, []).append(f)
    jobs = []
    for src, own in by_source.items():
        tc = TrafficClass(host_dscp(lab, src, phase), ECT0, phase.payload, phase.qps)
        factory = FlowFactory(endpoints, tc)
        ns = netns_name(lab.name, src)
        by_nic: dict[str, list[Flow]] = {}
        for f in own:
            by_nic.setdefault(factory.hop(f.src, f.dst).iface, []).append(f)
        for iface, nic_flows in by_nic.items():
            frames = tuple(factory.flow(f.src, f.dst, f.qp) for f in nic_flows)
            rate = phase.pps * len(nic_flows)
            pacing = (
                PeriodicBursts(phase.period, phase.burst, rate)
                if phase.kind == "micro_bursts"
                else ConstantRate(rate)
            )
            gateways = [(i["gateway"], i["name"]) for i in lab.host(src)["interfaces"]]
            standby = tuple(next_hop(ns, gw) for gw, nic in gateways if nic != iface)
            jobs.append(
                SendJob(ns, iface, frames, pacing, duration_s=phase.duration, standby=standby)
            )
    return jobs


def _fib_snapshot(lab: Lab) -> dict[str, Any]:
    snapshot = {}
    for switch in lab.switches():
        done = subprocess.run(
            ["ip", "-n", netns_name(lab.name, switch), "-j", "route", "show"],
            capture_output=True,
            text=True,
            check=False,
        )
        snapshot[switch] = json.loads(done.stdout or "[]")
    return snapshot


def start_captures(lab: Lab, links: list[str], out: Path) -> list[subprocess.Popen[bytes]]:
    """tcpdump on one end of each link into RUN/capture/<link>.pcap (Wireshark opens them)."""
    if not links:
        return []
    plan = build(lab)
    (out / "capture").mkdir()
    started = []
    for spec in links:
        end, _ = resolve_link(lab, plan, spec)
        pcap = out / "capture" / f"{end.node}_{end.ifname}.pcap"
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
    """Stop the captures this run started (by their process, never by name)."""
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bgp_sessions(lab: Lab) -> list[dict[str, Any]]:
    """Every switch's BGP sessions; a switch whose bgpd does not answer (killed by a fault)
    reports each session the design gives it as down, so the run is still saved."""
    try:
        return netns.bgp_sessions(lab)
    except LabError:
        pass
    sessions: list[dict[str, Any]] = []
    for node in lab.switches():
        others = [n for n in lab.switches() if n != node]
        try:
            sessions += netns.bgp_sessions(lab, skip=others)
        except LabError as exc:
            reason = str(exc).rsplit(": ", 1)[-1]
            peers = {
                str(e["b_ip" if e["a"] == node else "a_ip"]).split("/")[0]: str(peer)
                for _, peer, e in lab.graph.edges(node, data=True)
                if e["kind"] in ("fabric", "superfabric")  # one session per routed bundle
            }
            sessions += [
                {
                    "node": node,
                    "peer": ip,
                    "name": peer,
                    "state": f"Down ({reason})",
                    "prefixes": 0,
                    "uptime_ms": 0,
                }
                for ip, peer in sorted(peers.items())
            ]
    return sessions


class _Sampler(threading.Thread):
    """Reads every interface counter of the lab each interval."""

    def __init__(self, lab: Lab, interval: float) -> None:
        super().__init__(name="sampler", daemon=True)
        self.names = {netns_name(lab.name, n): n for n in lab.graph.nodes}
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.stopped = threading.Event()

    def sample(self) -> None:
        t = time.time()
        read = counters.read(list(self.names))
        flat = {f"{self.names[ns]}:{i}": v for ns, ifs in read.items() for i, v in ifs.items()}
        self.samples.append({"t": round(t, 4), "c": flat})

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stopped.is_set():
            self.sample()
            next_at += self.interval
            self.stopped.wait(max(0.0, next_at - time.monotonic()))
        self.sample()


class Player:
    """One run of a scenario on a running twin."""

    def __init__(self, lab: Lab, scenario: Scenario, out: Path, progress: Progress) -> None:
        self.lab, self.scenario, self.out, self.progress = lab, scenario, out, progress
        self.phases: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []
        self.fibs: dict[str, float] = {}
        self.errors: list[str] = []
        self.snapshots: list[threading.Thread] = []
        self.lock = threading.Lock()

    def snapshot(self, label: str) -> None:
        """Save every switch's FIB under a label, in the background (timeline keeps time)."""

        def take(t: float) -> None:
            (self.out / "fib" / f"{label}.json").write_text(json.dumps(_fib_snapshot(self.lab)))
            with self.lock:
                self.fibs[label] = t

        (self.out / "fib").mkdir(parents=True, exist_ok=True)
        thread = threading.Thread(target=take, args=(time.time(),), daemon=True)
        thread.start()
        self.snapshots.append(thread)

    def guarded(self, target: Callable[..., None], *args: Any) -> None:
        """Run a timeline thread's work, keeping its error for the run to raise."""
        try:
            target(*args)
        except Exception as exc:  # raised by play() once every thread has ended
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def play_phase(
        self, index: int, phase: Traffic, flows: list[Flow], jobs: list[SendJob], t0: float
    ) -> None:
        """Wait for the phase's start, then send its prepared jobs for its duration."""
        time.sleep(max(0.0, t0 + phase.at - time.time()))
        self.progress(f"t={time.time() - t0:5.1f}s  {phase.label}: {len(flows)} flows")
        start = time.time()
        results = run_senders(jobs)
        end = time.time()
        ids = [
            {"flow_id": flow_id(f.src, f.dst, f.qp), "src": f.src, "dst": f.dst, "qp": f.qp}
            for f in flows
        ]
        record = {
            "index": index,
            "label": phase.label,
            "kind": phase.kind,
            "start": start,
            "end": end,
            "pps_per_flow": phase.pps,
            "dscp": {src: host_dscp(self.lab, src, phase) for src in {f.src for f in flows}},
            "class": phase.traffic_class,
            "flows": ids,
            "analytical": analytical(self.lab, phase),
            "sent": {str(fid): n for r in results for fid, n in r.flow_packets.items()},
        }
        with self.lock:
            self.phases.append(record)

    def play_fault(self, index: int, fault: Fault, faults: Faults, t0: float) -> None:
        """Fire one fault at its time, then snapshot the FIBs."""
        time.sleep(max(0.0, t0 + fault.at - time.time()))
        self.progress(f"t={time.time() - t0:5.1f}s  fault {fault.fault} {fault.link or fault.node}")
        began = time.time()
        record = _fire(faults, fault)
        with self.lock:
            self.faults.append({"index": index, "began": began, **record})
        time.sleep(0.5)
        self.snapshot(f"fault{index + 1}-{fault.fault}")

    def play_faults(self, faults: Faults, t0: float) -> None:
        """Fire the scenario's faults in time order."""
        for index, fault in enumerate(sorted(self.scenario.faults, key=lambda f: f.at)):
            self.play_fault(index, fault, faults, t0)


def _fire(f: Faults, fault: Fault) -> dict[str, Any]:
    match fault.fault:
        case "link-down" | "link-up":
            return f.link(str(fault.link), up=fault.fault == "link-up")
        case "link-flap":
            return f.flap(str(fault.link), fault.period, fault.count)
        case "node-down" | "node-up":
            return f.node(str(fault.node), up=fault.fault == "node-up")
        case "daemon-kill" | "daemon-restart":
            return f.daemon(str(fault.node), fault.daemon, up=fault.fault == "daemon-restart")
        case "loss":
            return f.loss(str(fault.link), float(fault.percent or 0))
        case "rate":
            return f.rate(str(fault.link), float(fault.mbit or 0))
        case _:
            return f.clear(str(fault.link))


def _flow_records(player: Player, received: dict[str, Any]) -> list[dict[str, Any]]:
    records = []
    for phase in player.phases:
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


def play(lab: Lab, scenario: Scenario, progress: Progress = _quiet) -> Path:
    """Run the scenario on the lab's running twin; returns the run directory."""
    if not netns.is_running(lab):
        raise LabError(f"lab {lab.name} is not running (twin deploy {lab.path})")
    out = lab.path / "runs" / datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    out.mkdir(parents=True)
    (out / "scenario.yaml").write_text(scenarios.dump(scenario))
    player = Player(lab, scenario, out, progress)
    faults = Faults(lab)
    servers = lab.nodes("server")
    receivers: dict[str, Receiver] = {}
    captures: list[subprocess.Popen[bytes]] = []
    sampler = _Sampler(lab, scenario.sample_interval)
    bgp_start = bgp_sessions(lab)
    try:
        for s in servers:
            receivers[s] = start_receiver(netns_name(lab.name, s), drain_s=2.0)
        progress(f"preparing {len(scenario.traffic)} traffic phases")
        prepared = []
        for phase in scenario.traffic:
            flows = phase_flows(lab, phase)
            prepared.append((phase, flows, _jobs(lab, phase, flows)))
        captures = start_captures(lab, scenario.capture, out)
        player.snapshot("start")
        with Monitor(lab):
            t0 = time.time()
            events.append(lab.path, "run-start", scenario=scenario.name, run=out.name)
            sampler.start()
            threads = [
                threading.Thread(
                    target=player.guarded,
                    args=(player.play_phase, i, phase, flows, jobs, t0),
                    daemon=True,
                )
                for i, (phase, flows, jobs) in enumerate(prepared)
            ]
            faulting = threading.Thread(
                target=player.guarded, args=(player.play_faults, faults, t0), daemon=True
            )
            for thread in [*threads, faulting]:
                thread.start()
            for thread in [*threads, faulting]:
                thread.join()
            time.sleep(max(0.0, t0 + scenario.duration - time.time()))
            sampler.stopped.set()
            sampler.join()
            t1 = time.time()
        if player.errors:
            raise LabError(f"scenario {scenario.name} failed: " + "; ".join(player.errors))
        received = {s: r.stop().flows for s, r in receivers.items()}
        receivers.clear()
        stop_captures(captures)
        player.snapshot("end")
        if {"reachability", "mtu"} & set(scenario.validate_):
            progress("probing every server pair (reachability, jumbo frames with DF)")
            (out / "probes.json").write_text(json.dumps(probes.ping_all(lab), indent=1))
        for thread in player.snapshots:
            thread.join()
    finally:
        for r in receivers.values():
            r.close()
        stop_captures(captures)
        sampler.stopped.set()
        faults.close()
    bgp_end = bgp_sessions(lab)
    run = {
        "lab": lab.name,
        "lab_dir": str(lab.path),
        "backend": "netns",
        "capabilities": CAPABILITIES,
        "scenario": scenario.name,
        "started": t0,
        "ended": t1,
        "phases": sorted(player.phases, key=lambda p: p["index"]),
        "faults": sorted(player.faults, key=lambda f: f["index"]),
        "fibs": player.fibs,
        "servers": lab.nodes("server"),
        "uplinks": uplinks(lab),
    }
    (out / "run.json").write_text(json.dumps(run, indent=1))
    (out / "counters.json").write_text(
        json.dumps(
            {
                "interval": scenario.sample_interval,
                "fields": counters.FIELDS,
                "samples": sampler.samples,
            }
        )
    )
    (out / "flows.json").write_text(json.dumps(_flow_records(player, received), indent=1))
    (out / "bgp.json").write_text(json.dumps({"start": bgp_start, "end": bgp_end}))
    (out / "events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events.read(lab.path, since=t0))
    )
    shutil.copyfile(lab.path / "fabric.yaml", out / "fabric.yaml")
    return out
