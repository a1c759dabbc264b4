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


def _neighbour_mac(ipr: Any, ifindex: int, ip: str) -> str | None:
    for entry in ipr.get_neighbours(ifindex=ifindex):
        if entry.get("NDA_DST") == ip and entry["state"] & _USABLE_NUD:
            mac: str | None = entry.get("NDA_LLADDR")
            if mac:
                return mac
    return None


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

    def _ipr(self, netns: str) -> Any:
        if netns not in self._sockets:
            from pyroute2 import IPRoute

            with inside(netns):
                self._sockets[netns] = IPRoute()
        return self._sockets[netns]

    def __call__(self, netns: str, dst_ip: str) -> NextHop:
        """Interface and MACs ``netns`` uses toward ``dst_ip``, resolving ARP if needed."""
        ipr = self._ipr(netns)
        route = ipr.route("get", dst=dst_ip)[0]
        ifindex = route.get("RTA_OIF")
        gateway = route.get("RTA_GATEWAY") or dst_ip
        link = ipr.get_links(ifindex)[0]
        iface, src_mac = link.get("IFLA_IFNAME"), link.get("IFLA_ADDRESS")
        deadline = time.monotonic() + self.timeout_s
        mac = _neighbour_mac(ipr, ifindex, gateway)
        if mac is None:
            # Probe the next hop itself: on a multipath route a datagram to dst_ip may hash
            # to another next hop than the one route-get named.
            with inside(netns):
                _probe(gateway)
        while mac is None:
            if time.monotonic() > deadline:
                raise LookupError(f"{netns}: next hop {gateway} on {iface} does not answer ARP")
            time.sleep(0.02)
            mac = _neighbour_mac(ipr, ifindex, gateway)
        return NextHop(iface, src_mac, mac)

    def close(self) -> None:
        """Close every namespace's socket."""
        for ipr in self._sockets.values():
            ipr.close()
        self._sockets.clear()

    def __enter__(self) -> "NextHops":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def next_hop(netns: str, dst_ip: str, timeout_s: float = 3.0) -> NextHop:
    """Interface and MACs ``netns`` uses toward ``dst_ip``, resolving ARP if needed (one
    lookup; `NextHops` keeps its sockets for many)."""
    with NextHops(timeout_s) as hops:
        return hops(netns, dst_ip)
