"""Forwarding tables (FIBs): the neutral types, longest-prefix match, and their JSON.

A `Fib` maps every node (switch or server) to its routes: prefix -> next hops, each a
`NextHop(node, port)`: the neighbour the packet goes to next (switch or server: the first
physical hop) and the egress port (a port or PortChannel; for a VLAN, its member toward
that neighbour). An empty tuple drops. Several sources produce this type, so the same checks
run on any of them: `twin.model.routing.Routing` (what a lab's configs converge to) and every
backend's observer (a live twin's FIB, saved with a run as `to_json` writes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Address, IPv4Network
from typing import NamedTuple


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


def applied(fib: Fib, delta: FibDelta) -> Fib:
    """The FIB once a delta (`Routing.after`) is applied, `fib` left as it was.

    >>> p = IPv4Network("10.0.0.0/8")
    >>> applied({"a": {p: ()}}, {"a": {p: None}}), applied({"a": {}}, {"a": {p: ()}})
    ({'a': {}}, {'a': {IPv4Network('10.0.0.0/8'): ()}})
    """
    after = {node: dict(routes) for node, routes in fib.items()}
    for node, changes in delta.items():
        for prefix, hops in changes.items():
            if hops is None:
                after.setdefault(node, {}).pop(prefix, None)
            else:
                after.setdefault(node, {})[prefix] = hops
    return after


def to_json(fib: Fib) -> dict[str, dict[str, list[dict[str, str]]]]:
    """A FIB in the observations' JSON: node -> prefix -> [{"node", "port"}] ([] drops).

    >>> to_json({"leaf1": {IPv4Network("10.2.0.0/24"): (NextHop("spine1", "Ethernet0"),)}})
    {'leaf1': {'10.2.0.0/24': [{'node': 'spine1', 'port': 'Ethernet0'}]}}
    """
    return {
        node: {
            str(prefix): [{"node": h.node, "port": h.port} for h in hops]
            for prefix, hops in sorted(routes.items(), key=lambda r: (r[0].prefixlen, r[0]))
        }
        for node, routes in sorted(fib.items())
    }


def from_json(data: Mapping[str, Mapping[str, list[Mapping[str, str]]]]) -> Fib:
    """The FIB `to_json` wrote.

    >>> fib = {"s": {IPv4Network("10.0.0.0/8"): (NextHop("a", "p1"),)}}
    >>> fib["s"][IPv4Network("0.0.0.0/0")] = ()
    >>> from_json(to_json(fib)) == fib
    True
    """
    return {
        node: {
            IPv4Network(prefix): tuple(NextHop(h["node"], h["port"]) for h in hops)
            for prefix, hops in routes.items()
        }
        for node, routes in data.items()
    }
