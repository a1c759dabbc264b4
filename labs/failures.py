"""A lab under failures, as the routing model sees it: which links, nodes and daemons faults
took down, the FIB the routing model gives for that state, and faults as runs record them.
Shared by the backends that compute their FIBs (fake, sim), whose twin keeps its failures in
the lab directory (`failures.json`), so that every verb sees them.

A link is taken down by its physical links (`node:peer` fails every link between the two, a
PortChannel its members); a node down fails all its links; a killed bgpd or zebra takes the
switch's routed links out of routing (its sessions drop; its connected routes stay), bfdd
changes nothing. Loss and rate are recorded, not modelled.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from functools import cached_property
from ipaddress import IPv4Address
from typing import Any, cast

from labs import events
from labs.backend import Fault, LinkState, Status
from twin import safeio
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.model.fib import Fib, Hops, Link, Lookup, applied
from twin.model.routing import Routing
from twin.model.wiring import Wiring, links, shared
from twin.scenario.records import FaultRecord

STATE = "failures.json"
CHANGES_ROUTING = ("link-down", "link-up", "node-down", "node-up", "daemon-kill", "daemon-restart")
"""Faults that change the FIBs."""
ROUTED = ("bgpd", "zebra")


@dataclass
class Failures:
    """What is down now."""

    links: list[Link] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    daemons: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, lab: Lab) -> Failures:
        """The failures the lab's fake twin holds (none when none was recorded)."""
        path = lab.path / STATE
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        return cls([tuple(x) for x in data["links"]], data["nodes"], data["daemons"])

    def save(self, lab: Lab) -> None:
        """Record them in the lab directory."""
        safeio.write(lab.path / STATE, json.dumps(asdict(self)))


def resolve(lab: Lab, wiring: Wiring, spec: str) -> list[Link]:
    """The physical links named `NODE:PORT` (a port, PortChannel or NIC) or `NODE:PEER`."""
    node, _, port = spec.partition(":")
    if node not in lab.graph.nodes or not port:
        raise LabError(f"link {spec!r}: write NODE:PORT or NODE:PEER (e.g. leaf1:spine1)")
    members = set(wiring.physical(node, port))
    found = []
    for link in links(lab):
        a, a_port, b, b_port = link
        for here, here_port, there in ((a, a_port, b), (b, b_port, a)):
            if here == node and (here_port in members or there == port):
                found.append(link)
    if not found:
        raise LabError(f"link {spec!r}: {node} has no port or neighbour {port}")
    return found


class Network:
    """The lab's routing under some failures (`routing`: the intact one, to share)."""

    def __init__(self, lab: Lab, failures: Failures, routing: Routing | None = None) -> None:
        self.lab, self.failures = lab, failures
        self.routing = routing or Routing(shared(lab))
        self.wiring = self.routing.w

    def after(self, fault: Fault) -> Network:
        """The network once a fault fired."""
        return Network(self.lab, self.fire(fault), self.routing)

    def failed(self) -> set[Link]:
        """Every physical link out of service: down, or at a node down or without routing."""
        out = {tuple(link) for link in self.failures.links}
        routed_off = {n for n, ds in self.failures.daemons.items() if set(ds) & set(ROUTED)}
        for link in links(self.lab):
            a, _, b, _ = link
            if {a, b} & set(self.failures.nodes) or (
                {a, b} & routed_off
                and {
                    self.lab.graph.nodes[a]["role"],
                    self.lab.graph.nodes[b]["role"],
                }
                != {"leaf", "server"}
            ):
                out.add(link)
        return out  # type: ignore[return-value]

    @cached_property
    def fib(self) -> Fib:
        """Every node's FIB under the failures."""
        return applied(self.routing.fib, self.routing.after(self.failed()))

    @cached_property
    def lookup(self) -> Lookup:
        """Longest-prefix match per node."""
        return Lookup(self.fib)

    def hops(self, node: str, address: IPv4Address) -> Hops | None:
        """Where `node` sends a packet for `address` (None: no route)."""
        return self.lookup(node, int(address))

    def fire(self, fault: Fault) -> Failures:
        """The failures after a fault."""
        now = self.failures
        f = Failures(list(now.links), list(now.nodes), dict(now.daemons))
        if fault.delay_ms:
            raise LabError("the routing model has no detection delay: give delay_ms 0")
        match fault.kind:
            case "link-down":
                named = resolve(self.lab, self.wiring, str(fault.link))
                f.links += [x for x in named if x not in f.links]
            case "link-up":
                gone = set(resolve(self.lab, self.wiring, str(fault.link)))
                f.links = [x for x in f.links if tuple(x) not in gone]
            case "node-down" | "node-up":
                node = str(fault.node)
                if node not in self.lab.graph.nodes:
                    raise LabError(f"lab {self.lab.name} has no node {node}")
                f.nodes = [n for n in f.nodes if n != node]
                if fault.kind == "node-down":
                    f.nodes.append(node)
                f.daemons.pop(node, None)
            case "daemon-kill":
                node, daemon = str(fault.node), fault.daemon or "bgpd"
                if node not in self.lab.switches():
                    raise LabError(f"{node} runs no {daemon} (daemons: none)")
                f.daemons[node] = sorted({*f.daemons.get(node, []), daemon})
            case "daemon-restart":
                f.daemons.pop(str(fault.node), None)
            case "link-flap" | "loss" | "rate" | "clear":
                resolve(self.lab, self.wiring, str(fault.link))  # named right, else refused
            case _:
                raise LabError(f"the fake backend cannot inject {fault.kind}")
        return f


def fault_record(net: Network, index: int, t: float, fault: Fault) -> FaultRecord:
    """A fault as the run saves it (`ends` of a link by node and SONiC port)."""
    fields = {k: v for k, v in vars(fault).items() if v is not None and k != "kind"}
    if fault.kind not in ("link-flap",):
        fields.pop("period", None)
        fields.pop("count", None)
    if fault.kind != "pfc-storm":
        fields.pop("priority", None)
    if not fault.delay_ms:
        fields.pop("delay_ms", None)
    if fault.link:
        a, a_port, b, b_port = resolve(net.lab, net.wiring, fault.link)[0]
        w = net.wiring
        fields["ends"] = [f"{a}:{w.logical(a, a_port)}", f"{b}:{w.logical(b, b_port)}"]
    kind = "link-flap-done" if fault.kind == "link-flap" else fault.kind
    record = {"index": index, "began": t, "t": t, "event": "fault", "fault": kind, **fields}
    return cast(FaultRecord, record)


def inject(lab: Lab, fault: Fault) -> dict[str, Any]:
    """Apply a fault to the failures a twin holds and log it: the event it logged."""
    net = Network(lab, Failures.load(lab))
    net.fire(fault).save(lab)
    record = fault_record(net, 0, time.time(), fault)
    fields = {k: v for k, v in record.items() if k not in ("index", "began", "t", "event", "fault")}
    return events.append(lab.path, "fault", fault=record["fault"], **fields)


def status(lab: Lab, backend: str, running: bool) -> Status:
    """Nodes up or down and links as the failures a twin holds leave them (no sessions)."""
    net = Network(lab, Failures.load(lab))
    failed = net.failed()
    nodes = {n: "down" if n in net.failures.nodes else "up" for n in lab.graph.nodes}
    for node, daemons in net.failures.daemons.items():
        nodes[node] = "down: " + ",".join(daemons)
    states = [LinkState(a, ap, b, bp, (a, ap, b, bp) not in failed) for a, ap, b, bp in links(lab)]
    return Status(lab.name, backend, running, nodes, states, [])
