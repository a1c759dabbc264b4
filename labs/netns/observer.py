"""Reading a running netns twin in neutral form: FIBs, counters and BGP sessions by design
node and SONiC port name, never by namespace or veth."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from labs.backend import COUNTER_FIELDS, Session
from labs.netns import counters, fibs
from labs.netns import lifecycle as netns
from labs.netns.monitor import Monitor
from labs.netns.plan import netns_name, port_names
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.model.wiring import Wiring, shared

_ORDER = [counters.FIELDS.index(name) for name in COUNTER_FIELDS]


def _session(s: dict[str, Any]) -> Session:
    return Session(
        s["node"], s["peer"], s["name"], str(s["state"]), int(s["prefixes"]), int(s["uptime_ms"])
    )


def sessions(lab: Lab) -> list[Session]:
    """Every switch's BGP sessions; a switch whose bgpd does not answer (killed by a fault)
    reports each session the design gives it as down, so a run is still saved."""
    try:
        return [_session(s) for s in netns.bgp_sessions(lab)]
    except LabError:
        pass
    found: list[Session] = []
    for node in lab.switches():
        others = [n for n in lab.switches() if n != node]
        try:
            found += [_session(s) for s in netns.bgp_sessions(lab, skip=others)]
        except LabError as exc:
            reason = str(exc).rsplit(": ", 1)[-1]
            peers = {
                str(e["b_ip" if e["a"] == node else "a_ip"]).split("/")[0]: str(peer)
                for _, peer, e in lab.graph.edges(node, data=True)
                if e["kind"] in ("fabric", "superfabric")  # one session per routed bundle
            }
            found += [
                Session(node, ip, peer, f"Down ({reason})", 0, 0)
                for ip, peer in sorted(peers.items())
            ]
    return found


class NetnsObserver:
    """`labs.backend.Observer` of a netns twin."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.namespaces = {netns_name(lab.name, n): n for n in lab.graph.nodes}
        self.names = {n: port_names(lab, n) for n in lab.graph.nodes}

    @cached_property
    def wiring(self) -> Wiring:
        """The lab's cabling and configs (to name next hops)."""
        return shared(self.lab)

    def fib(self) -> Fib:
        """Every node's forwarding table now."""
        return fibs.live(self.lab, self.wiring)

    def counters(self) -> dict[str, list[int]]:
        """Per `node:port`, `COUNTER_FIELDS` now (interfaces that are no port left out)."""
        flat = {}
        for ns, ifaces in counters.read(list(self.namespaces)).items():
            node = self.namespaces[ns]
            for ifname, values in ifaces.items():
                port = self.names[node].get(ifname)
                if port is not None:
                    flat[f"{node}:{port}"] = [values[i] for i in _ORDER]
        return flat

    def bgp(self) -> list[Session]:
        """Every switch's BGP sessions now."""
        return sessions(self.lab)

    def watch(self) -> Monitor:
        """Log BGP and route changes while inside (bgpd's log, the leaves' FIBs)."""
        return Monitor(self.lab)
