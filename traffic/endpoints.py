"""Servers as traffic sees them, and the next hop a frame to a destination must take.

Frames go out on raw sockets, which bypass routing and ARP, so the sender asks the
namespace's kernel (via pyroute2 netlink) which interface and next-hop MAC it would use.
"""

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traffic.nsproc import inside

_USABLE_NUD = 0x02 | 0x04 | 0x08 | 0x10 | 0x80  # reachable, stale, delay, probe, permanent
_DISCARD_PORT = 9


@dataclass(frozen=True)
class Endpoint:
    """A server (rank): its name, network namespace (a name or a path) and RoCE address."""

    name: str
    netns: str
    ip: str


@dataclass(frozen=True)
class NextHop:
    """Where frames from a namespace to one destination go out: interface and MACs."""

    iface: str
    src_mac: str
    dst_mac: str


Resolver = Callable[[str, str], NextHop]


def _neighbours(ipr: Any) -> dict[tuple[int, str], str]:
    """The namespace's usable neighbour entries: (interface index, address) -> MAC."""
    found = {}
    for entry in ipr.get_neighbours():
        mac, ip = entry.get("NDA_LLADDR"), entry.get("NDA_DST")
        if mac and ip and entry["state"] & _USABLE_NUD:
            found[(entry["ifindex"], ip)] = mac
    return found


def _probe(dst_ip: str) -> None:
    """Make the kernel resolve the next hop: one empty datagram to the discard port (from the
    namespace this thread is in)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"", (dst_ip, _DISCARD_PORT))


class NextHops:
    """A `Resolver` keeping one netlink socket per namespace, opened inside it from the calling
    thread (no process per lookup); `close` them when done (or use it as a context manager).

    Raises ``LookupError`` when a next hop does not answer ARP within ``timeout_s``. For a
    multipath route the kernel's pick for (source, destination) is used.
    """

    def __init__(self, timeout_s: float = 3.0) -> None:
        self.timeout_s = timeout_s
        self._sockets: dict[str, Any] = {}
        self._links: dict[str, dict[int, tuple[str, str]]] = {}
        self._neighbours: dict[str, dict[tuple[int, str], str]] = {}

    def _ipr(self, netns: str) -> Any:
        if netns not in self._sockets:
            from pyroute2 import IPRoute

            with inside(netns):
                self._sockets[netns] = IPRoute()
            self._links[netns] = {
                link["index"]: (link.get("IFLA_IFNAME"), link.get("IFLA_ADDRESS"))
                for link in self._sockets[netns].get_links()
            }
            self._neighbours[netns] = _neighbours(self._sockets[netns])
        return self._sockets[netns]

    def __call__(self, netns: str, dst_ip: str) -> NextHop:
        """Interface and MACs ``netns`` uses toward ``dst_ip``, resolving ARP if needed."""
        ipr = self._ipr(netns)
        route = ipr.route("get", dst=dst_ip)[0]
        ifindex = route.get("RTA_OIF")
        gateway = route.get("RTA_GATEWAY") or dst_ip
        iface, src_mac = self._links[netns][ifindex]
        deadline = time.monotonic() + self.timeout_s
        known = self._neighbours[netns]
        if (ifindex, gateway) not in known:  # resolved since it was read (`warm`)?
            known.update(_neighbours(ipr))
        if (ifindex, gateway) not in known:
            # Probe the next hop itself: on a multipath route a datagram to dst_ip may hash
            # to another next hop than the one route-get named.
            with inside(netns):
                _probe(gateway)
        while (ifindex, gateway) not in known:
            if time.monotonic() > deadline:
                raise LookupError(f"{netns}: next hop {gateway} on {iface} does not answer ARP")
            time.sleep(0.02)
            known.update(_neighbours(ipr))
        return NextHop(iface, src_mac, known[(ifindex, gateway)])

    def warm(self, netns: str, gateways: list[str]) -> None:
        """Have ``netns`` resolve the gateways it has no neighbour entry for, all at once,
        so that the lookups after wait for ARP once, not once each."""
        self._ipr(netns)
        known = {ip for _, ip in self._neighbours[netns]}
        missing = [ip for ip in gateways if ip not in known]
        if missing:
            with inside(netns):
                for ip in missing:
                    _probe(ip)

    def close(self) -> None:
        """Close every namespace's socket."""
        for ipr in self._sockets.values():
            ipr.close()
        self._sockets.clear()
        self._links.clear()
        self._neighbours.clear()

    def __enter__(self) -> "NextHops":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def next_hop(netns: str, dst_ip: str, timeout_s: float = 3.0) -> NextHop:
    """Interface and MACs ``netns`` uses toward ``dst_ip``, resolving ARP if needed (one
    lookup; `NextHops` keeps its sockets for many)."""
    with NextHops(timeout_s) as hops:
        return hops(netns, dst_ip)
