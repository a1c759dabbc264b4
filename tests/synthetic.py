"""Synthetic run directories of a small generated lab (examples/small.yaml, never deployed):
`SyntheticRun` writes every observation file in the format `twin.scenario.observations`
documents and `twin.scenario.player` writes (docs/observations.md), with the flows, probes,
sessions and FIBs a healthy run of that lab observes unless a test says otherwise. Shared by
the validator, verdict, plot and FIB-agreement tests of every tier."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import yaml

from labs.backend import COUNTER_FIELDS as FIELDS
from labs.failures import Failures, Network
from tests.conftest import write_lab
from twin.lab.directory import Lab
from twin.model.fib import Fib, NextHop, to_json
from twin.model.routing import Routing
from twin.model.wiring import Wiring
from twin.scenario.observations import Observations

T0 = 1_800_000_000.0  # the runs' clock: seconds since the epoch
PHASE = "allreduce"
NETNS = {"bgp", "counters", "fib", "flows", "pcap", "probes", "failover-probes"}  # netns observes
SIX = ("bgp_health", "dscp_preserved", "ecmp_spread", "failover", "mtu", "reachability")


def generate_lab(out: Path, name: str) -> Lab:
    """examples/small.yaml under another name, generated into `out` (not deployed)."""
    return Lab.open(write_lab(out, name))


# -- what a healthy run of that lab observes --------------------------------------------------


def uplinks(lab: Lab) -> dict[str, list[str]]:
    """Per leaf, its ports facing spines (SONiC names, as run.json records them)."""
    result: dict[str, list[str]] = {}
    for _, _, e in lab.graph.edges(data=True):
        if e["kind"] != "fabric":
            continue
        side = "a" if lab.graph.nodes[e["a"]]["role"] == "leaf" else "b"
        leaf, port = e[side], e[f"{side}_port"]
        result.setdefault(leaf, []).append(port)
    return {leaf: sorted(ports) for leaf, ports in sorted(result.items())}


def edge(lab: Lab, node: str, peer: str) -> dict[str, Any]:
    """The (first) link between two nodes: the graph is a multigraph."""
    data: dict[str, Any] = next(iter(lab.graph.get_edge_data(node, peer).values()))
    return data


def address(lab: Lab, node: str, peer: str) -> str:
    """The address of `node` on its link to `peer`."""
    e = edge(lab, node, peer)
    side = "a" if e["a"] == node else "b"
    return str(e[f"{side}_ip"]).split("/")[0]


def port(lab: Lab, node: str, peer: str) -> str:
    """The port of `node` on its link to `peer`."""
    e = edge(lab, node, peer)
    return str(e["a_port" if e["a"] == node else "b_port"])


def sessions(lab: Lab, down: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Every leaf-spine session seen from both ends, Established (but `down`: (node, peer))."""
    result = []
    for _, _, e in lab.graph.edges(data=True):
        if e["kind"] != "fabric":
            continue
        for node, peer in ((e["a"], e["b"]), (e["b"], e["a"])):
            state = "Active" if (node, peer) == down else "Established"
            result.append(
                {
                    "node": node,
                    "peer": address(lab, peer, node),
                    "name": peer,
                    "state": state,
                    "prefixes": 4,
                    "uptime_ms": 60000,
                }
            )
    return result


def full_fib(lab: Lab, short: tuple[str, str] | None = None) -> Fib:
    """Each leaf's BGP routes: every other switch's loopback and the remote server subnet, via
    every spine (but `short`: (leaf, prefix) with one next hop only); servers' routes as their
    host files say."""
    wiring = Wiring(lab)
    fib: Fib = {h: wiring.host_routes(h, wiring.admin_down) for h in lab.nodes("server")}
    for leaf in lab.nodes("leaf"):
        spines = [n for n in lab.graph.neighbors(leaf) if lab.graph.nodes[n]["role"] == "spine"]
        hops = tuple(NextHop(s, port(lab, leaf, s)) for s in spines)
        prefixes = [str(lab.graph.nodes[n]["loopback"]) for n in lab.switches() if n != leaf]
        mine = lab.graph.nodes[leaf]["subnet"]
        prefixes += sorted({lab.graph.nodes[o]["subnet"] for o in lab.nodes("leaf")} - {mine})
        fib[leaf] = {IPv4Network(p): hops[:1] if (leaf, p) == short else hops for p in prefixes}
    for spine in lab.nodes("spine"):
        fib[spine] = {}
    return fib


def model_fib(lab: Lab) -> Fib:
    """Every node's FIB as the routing model computes it from the lab's configs: what a
    healthy live twin holds (`fib_agreement` passes it)."""
    return Network(lab, Failures(), Routing(Wiring(lab))).fib


def flow(
    src: str,
    dst: str,
    qp: int = 0,
    *,
    pps: float = 100.0,
    sent: int = 500,
    received: int | None = None,
    gaps: list[tuple[float, int]] | None = None,
    dscp_sent: int = 26,
    dscp_received: dict[int, int] | None = None,
    phase: str = PHASE,
    cls: str = "roce",
    tail_lost: int = 0,
) -> dict[str, Any]:
    """One flows.json record; gaps are (seconds after T0 the next packet arrived, missing)."""
    lost = sum(n for _, n in gaps or [])
    got = sent - lost - tail_lost if received is None else received
    return {
        "flow_id": hash((src, dst, qp)) & 0xFFFFFFFF,
        "src": src,
        "dst": dst,
        "qp": qp,
        "phase": phase,
        "class": cls,
        "dscp_sent": dscp_sent,
        "pps": pps,
        "sent": sent,
        "received": got,
        "lost": lost,
        "tail_lost": tail_lost,
        "reordered": 0,
        "latency_us": {"min": 10.0, "mean": 20.0, "max": 50.0},
        "dscp_received": {str(k): v for k, v in (dscp_received or {dscp_sent: got}).items()},
        "ecn_received": {"2": got},
        "gaps": [[T0 + t, n] for t, n in gaps or []],
    }


def probed(
    index: int,
    element: str,
    crossed: str,
    *gaps: tuple[float, int, float | None],
    flows: int = 2,
    pps: float = 1000.0,
    started: float = 0.5,
    until: float = 10.0,
) -> dict[str, Any]:
    """A fault's failover_probes.json record: `flows` probe flows server2->server3 that
    crossed `crossed`, each with the same gaps (seconds after T0 the first lost packet was
    sent, packets lost, seconds after T0 the next one arrived or None: never), sent from
    `started` until the next fault was due (`until`), seconds after T0."""
    return {
        "index": index,
        "fault": "link-down",
        "element": element,
        "pps": pps,
        "started": T0 + started,
        "until": T0 + until,
        "why": None,
        "flows": [
            {
                "src": "server2",
                "dst": "server3",
                "src_ip": "10.2.0.2",
                "dst_ip": "10.2.0.35",
                "sport": 20000 + i,
                "dport": 47000,
                "path": ["server2:nic0", crossed, "spine1:Ethernet16"],
                "crossed": crossed,
                "pps": pps,
                "sent": 5000,
                "received": 5000 - sum(n for _, n, _ in gaps),
                "gaps": [[T0 + t, n, None if a is None else T0 + a] for t, n, a in gaps],
            }
            for i in range(flows)
        ],
    }


@dataclass
class SyntheticRun:
    """A run directory written by hand: every file `twin.scenario.observations` reads."""

    lab: Lab
    name: str = "synthetic"
    kind: str = "all_reduce"
    duration: float = 5.0
    flows: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    uplink_tx: dict[str, list[int]] = field(default_factory=dict)
    bgp_end: list[dict[str, Any]] | None = None
    fib_start: Fib | None = None
    fib_end: Fib | None = None
    probes: list[dict[str, Any]] | None = None
    failover_probes: list[dict[str, Any]] | None = None
    validate: dict[str, dict[str, Any]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    """Kinds of phases other than PHASE (which is `kind`), by label."""
    capabilities: list[str] = field(default_factory=lambda: sorted(NETNS))

    def fault(self, at: float, fault: str, **fields: Any) -> None:
        """A fault record as the player saves it: logged by `labs.netns.faults` `at` seconds
        after T0, fired by the run then (a flap, logged once over, that long before)."""
        began = T0 + at
        if fault == "link-flap-done":
            began -= 2 * float(fields["period"]) * int(fields["count"])
        self.faults.append(
            {"index": len(self.faults), "began": began, "t": T0 + at, "event": "fault",
             "fault": fault, **fields}
        )  # fmt: skip

    def bgp_down(self, at: float, node: str, peer: str, reason: str = "") -> None:
        """A BGP session of `node` to its neighbour `peer` going down, as the monitor logs it."""
        self.events.append(
            {
                "t": T0 + at,
                "event": "bgp",
                "node": node,
                "peer": address(self.lab, peer, node),
                "state": "down",
                "reason": reason,
            }
        )

    def write(self, runs: Path | None = None) -> Observations:
        """Write the run under LAB/runs/<name> (or `runs`/<name>) and open it."""
        out = (runs or self.lab.path / "runs") / self.name
        if out.exists():
            shutil.rmtree(out)
        (out / "fib").mkdir(parents=True)
        start, end = T0, T0 + self.duration
        labels = list(dict.fromkeys(f["phase"] for f in self.flows)) or [PHASE]
        phases = []
        for index, label in enumerate(labels):
            flows = [f for f in self.flows if f["phase"] == label]
            phases.append(
                {
                    "index": index,
                    "label": label,
                    "kind": self.kind if label == PHASE else self.kinds[label],
                    "start": start,
                    "end": end,
                    "pps_per_flow": flows[0]["pps"] if flows else 100.0,
                    "dscp": {f["src"]: f["dscp_sent"] for f in flows},
                    "class": flows[0]["class"] if flows else "roce",
                    "flows": [{k: f[k] for k in ("flow_id", "src", "dst", "qp")} for f in flows],
                    "sent": {str(f["flow_id"]): f["sent"] for f in flows},
                }
            )
        fib_start = self.fib_start or model_fib(self.lab)
        fib_end = self.fib_end or model_fib(self.lab)
        run = {
            "lab": self.lab.name,
            "lab_dir": str(self.lab.path),
            "backend": "netns",
            "capabilities": self.capabilities,
            "scenario": self.name,
            "started": start,
            "ended": end + 1.0,
            "phases": phases,
            "faults": self.faults,
            "fibs": {"start": start - 0.1, "end": end + 1.5},
            "servers": self.lab.nodes("server"),
            "uplinks": uplinks(self.lab),
        }
        (out / "run.json").write_text(json.dumps(run))
        (out / "flows.json").write_text(json.dumps(self.flows))
        (out / "fib" / "start.json").write_text(json.dumps(to_json(fib_start)))
        (out / "fib" / "end.json").write_text(json.dumps(to_json(fib_end)))
        (out / "bgp.json").write_text(
            json.dumps({"start": sessions(self.lab), "end": self.bgp_end or sessions(self.lab)})
        )
        events: list[dict[str, Any]] = [
            {"t": start, "event": "run-start", "scenario": self.name, "run": self.name}
        ]
        events += [{k: v for k, v in f.items() if k != "index"} for f in self.faults]
        events += self.events
        (out / "events.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in sorted(events, key=lambda e: e["t"]))
        )
        (out / "counters.json").write_text(json.dumps(self.counters(start, end)))
        if self.probes is not None:
            (out / "probes.json").write_text(json.dumps(self.probes))
        if self.failover_probes is not None:
            (out / "failover_probes.json").write_text(json.dumps(self.failover_probes))
        (out / "scenario.yaml").write_text(
            yaml.safe_dump({"name": self.name, "validate": self.validate}, sort_keys=False)
        )
        return Observations.open(out)

    def counters(self, start: float, end: float) -> dict[str, Any]:
        """Counter samples every second: uplink tx packets growing evenly to `uplink_tx`,
        server rx packets growing with the flows' packets."""
        tx = FIELDS.index("tx_packets")
        rx = FIELDS.index("rx_packets")
        steps = max(1, round(end - start))
        received = {s: 0 for s in self.lab.nodes("server")}
        for f in self.flows:
            received[f["dst"]] += f["received"]
        samples = []
        for i in range(steps + 1):
            share = i / steps
            c: dict[str, list[int]] = {}
            for leaf, ports in uplinks(self.lab).items():
                counts = self.uplink_tx.get(leaf, [0] * len(ports))
                for port, n in zip(ports, counts, strict=True):
                    row = [0] * len(FIELDS)
                    row[tx] = round(n * share)
                    c[f"{leaf}:{port}"] = row
            for server, n in received.items():
                row = [0] * len(FIELDS)
                row[rx] = round(n * share)
                c[f"{server}:nic0"] = row
            samples.append({"t": start + i * (end - start) / steps, "c": c})
        return {"interval": 1.0, "fields": list(FIELDS), "samples": samples}


def probe_all(lab: Lab, **override: Any) -> list[dict[str, Any]]:
    """A probe result per ordered server pair, all passing; `override["server1>server3"]`
    replaces fields of one."""
    ips = {s: lab.host(s)["address"].split("/")[0] for s in lab.nodes("server")}
    probes = []
    for src in ips:
        for dst in ips:
            if src != dst:
                probe = {
                    "src": src,
                    "dst": dst,
                    "dst_ip": ips[dst],
                    "reachable": True,
                    "jumbo_ok": True,
                    "size": 9000,
                    "frag_from": None,
                    "mtu": None,
                }
                probes.append({**probe, **override.get(f"{src}>{dst}", {})})
    return probes
