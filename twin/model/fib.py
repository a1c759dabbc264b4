"""Forwarding tables (FIBs): the neutral types, longest-prefix match, and a live twin's FIB.

A `Fib` maps every node (switch or server) to its routes: prefix -> next hops, each a
`NextHop(node, port)`: the neighbour the packet goes to next (switch or server: the first
physical hop) and the egress port (a port or PortChannel; for a VLAN, its member toward
that neighbour). An empty tuple drops. Two sources produce this type, so the same checks
run on either: `twin.routing.Routing` (what a lab's configs converge to) and
`from_snapshot` (a live twin's `ip -j route`).
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Address, IPv4Network
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from twin.model.wiring import Wiring


class NextHop(NamedTuple):
    """Where a packet goes next: the neighbour and the egress port toward it."""

    node: str
    port: str


Hops = tuple[NextHop, ...]
Routes = dict[IPv4Network, Hops]
Fib = dict[str, Routes]
FibDelta = dict[str, dict[IPv4Network, Hops | None]]
"""FIB changes per node: the new next hops of a prefix, or None when its route is gone."""
Link = tuple[str, str, str, str]
"""A physical link (node, port, node, port), as in the design graph."""


def lookup(routes: Mapping[IPv4Network, Hops], address: IPv4Address) -> Hops | None:
    """Longest-prefix match (None when no route covers the address).

    >>> r = {IPv4Network("10.0.0.0/8"): (NextHop("a", "p1"),), IPv4Network("10.1.0.0/16"): ()}
    >>> lookup(r, IPv4Address("10.1.2.3")), lookup(r, IPv4Address("10.2.0.1"))
    ((), (NextHop(node='a', port='p1'),))
    """
    return Lpm(routes)(int(address))


class Lpm:
    """Fast longest-prefix match over a fixed table, on integer addresses."""

    def __init__(self, routes: Mapping[IPv4Network, Hops]) -> None:
        self.tables: dict[int, dict[int, Hops]] = {}
        for prefix, hops in routes.items():
            shift = 32 - prefix.prefixlen
            self.tables.setdefault(shift, {})[int(prefix.network_address) >> shift] = hops
        self.shifts = sorted(self.tables)

    def __call__(self, address: int) -> Hops | None:
        for shift in self.shifts:
            hops = self.tables[shift].get(address >> shift)
            if hops is not None:
                return hops
        return None


def from_snapshot(wiring: Wiring, snapshot: Mapping[str, list[dict[str, Any]]]) -> Fib:
    """The FIB of a live twin: each switch's `ip -j route` (as `twin.scenario.observations`
    saves it), servers' routes from their host files (the snapshot does not hold them).

    A device name maps back to its port through `ifmap.json`; a next hop is the neighbour
    cabled to that port; next hops flagged `linkdown` or `dead` are left out, as the kernel
    ignores them.
    """
    fib: Fib = {h: wiring.host_routes(h, wiring.admin_down) for h in wiring.hosts}
    for switch, entries in snapshot.items():
        ports = {names["netns"]: port for port, names in wiring.lab.ifmap.get(switch, {}).items()}
        routes: Routes = {}
        for entry in entries:
            dst = entry.get("dst", "")
            if ":" in dst or entry.get("type", "unicast") not in ("unicast", "blackhole"):
                continue
            prefix = IPv4Network("0.0.0.0/0" if dst == "default" else dst)
            hops = []
            for hop in entry.get("nexthops") or (
                [] if entry.get("type") == "blackhole" else [entry]
            ):
                port = wiring.logical(switch, ports.get(hop.get("dev", ""), hop.get("dev", "")))
                far = wiring.far(switch, port)
                if far and not {"linkdown", "dead"} & set(hop.get("flags", [])):
                    hops.append(NextHop(far[0], port))
            if hops or entry.get("type") == "blackhole":
                routes[prefix] = tuple(hops)
        fib[switch] = routes
    return fib
