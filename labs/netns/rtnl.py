"""Route lookups and route dumps over rtnetlink, packed and parsed by hand, in-process.

A lookup is the question `ip route get DST from SRC [iif IN] ipproto udp sport S dport D`
asks, as an RTM_GETROUTE message on a netlink socket opened inside the node's namespace
(pyroute2 does not know the port attributes): many lookups are sent at once and their
answers read back, with no process per lookup. The answer is the egress interface, or None
where the packet is delivered locally or has no route.

A dump reads a namespace's IPv4 main table as prefix -> usable next hops (what the twin's
convergence wait and its event monitor poll). Parsing only the few fields used costs about
a twentieth of pyroute2's full decoding, which matters: the monitor polls every leaf four
times a second, and its parsing held the interpreter lock from every other thread of a run.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from traffic.nsproc import inside
from twin.errors import LabError

RTM_NEWROUTE, RTM_GETROUTE, NLMSG_ERROR, NLMSG_DONE = 24, 26, 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 1, 0x300
RTA_DST, RTA_SRC, RTA_IIF, RTA_OIF, RTA_MULTIPATH = 1, 2, 3, 4, 9
RTA_IP_PROTO, RTA_SPORT, RTA_DPORT = 27, 28, 29
RTN_UNICAST = 1
RT_TABLE_MAIN = 254
IPPROTO_UDP = 17
RTNH_F_DEAD, RTNH_F_LINKDOWN = 1, 16
UNUSABLE = RTNH_F_DEAD | RTNH_F_LINKDOWN
"""Next-hop flags of a port just gone down, before zebra reinstalls the route: it does not
forward."""
HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, protocol, scope,
# type, flags
RTNEXTHOP = struct.Struct("=HBBi")  # length, flags, hops, interface index
ATTR = struct.Struct("=HH")  # length, type


@dataclass(frozen=True)
class Query:
    """One lookup: a UDP packet from `src` to `dst`, arriving on `iif` (None: sent here)."""

    dst: str
    src: str
    iif: str | None
    sport: int
    dport: int


def _attr(kind: int, value: bytes) -> bytes:
    length = 4 + len(value)
    return ATTR.pack(length, kind) + value + bytes(-length % 4)


def _attrs(data: bytes, at: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The attributes between `at` and `end`: (type, start of value, end of value)."""
    while at + ATTR.size <= end:
        length, kind = ATTR.unpack_from(data, at)
        if length < ATTR.size:
            return
        yield kind & 0x3FFF, at + ATTR.size, at + length
        at += (length + 3) & ~3


def _messages(data: bytes) -> Iterator[tuple[int, int, int, int]]:
    """The netlink messages of one datagram: (type, sequence, start of body, end)."""
    at = 0
    while at + HEADER.size <= len(data):
        length, kind, _, seq, _ = HEADER.unpack_from(data, at)
        if length < HEADER.size:
            return
        yield kind, seq, at + HEADER.size, at + length
        at += (length + 3) & ~3


def _receive(sock: socket.socket, silence: str) -> bytes:
    """One datagram of answers; `silence` is the error when none comes in time."""
    try:
        return sock.recv(1 << 20)
    except TimeoutError as exc:
        raise LabError(silence) from exc


def _width(data: bytes, start: int, end: int) -> int:
    """Usable next hops of an RTA_MULTIPATH value."""
    width, at = 0, start
    while at + RTNEXTHOP.size <= end:
        length, flags, _, _ = RTNEXTHOP.unpack_from(data, at)
        if length < RTNEXTHOP.size:
            break
        width += not flags & UNUSABLE
        at += (length + 3) & ~3
    return width


class Rtnl:
    """Netlink sockets in the namespaces asked so far; `close` them when done."""

    def __init__(self) -> None:
        self.sockets: dict[str, tuple[socket.socket, dict[str, int], dict[int, str]]] = {}

    def _open(self, netns: str) -> tuple[socket.socket, dict[str, int], dict[int, str]]:
        if netns not in self.sockets:
            with inside(netns):
                sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
                names = dict(socket.if_nameindex())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            sock.settimeout(30)
            sock.bind((0, 0))
            self.sockets[netns] = (sock, {n: i for i, n in names.items()}, names)
        return self.sockets[netns]

    def lookup(self, netns: str, queries: list[Query]) -> list[str | None]:
        """Each query's egress interface in a namespace (None: local, or no route)."""
        sock, index, names = self._open(netns)
        for seq, q in enumerate(queries, 1):
            attrs = _attr(RTA_DST, ipaddress.IPv4Address(q.dst).packed)
            attrs += _attr(RTA_SRC, ipaddress.IPv4Address(q.src).packed)
            if q.iif is not None:
                attrs += _attr(RTA_IIF, struct.pack("=I", index[q.iif]))
            attrs += _attr(RTA_IP_PROTO, bytes([IPPROTO_UDP]))
            attrs += _attr(RTA_SPORT, struct.pack("!H", q.sport))
            attrs += _attr(RTA_DPORT, struct.pack("!H", q.dport))
            body = RTMSG.pack(socket.AF_INET, 32, 32, 0, 0, 0, 0, 0, 0) + attrs
            sock.send(
                HEADER.pack(HEADER.size + len(body), RTM_GETROUTE, NLM_F_REQUEST, seq, 0) + body
            )
        answers: dict[int, str | None] = {}
        while len(answers) < len(queries):
            data = _receive(sock, f"{netns}: no answer to {len(queries)} route lookups")
            for kind, seq, start, end in _messages(data):
                if kind == RTM_NEWROUTE:
                    answers[seq] = self._egress(data[start:end], names)
                elif kind == NLMSG_ERROR:
                    answers[seq] = None
        return [answers.get(seq) for seq in range(1, len(queries) + 1)]

    def widths(self, netns: str) -> dict[str, int]:
        """Prefix -> number of usable next hops of the namespace's IPv4 main-table routes
        (the default route left out)."""
        sock, _, _ = self._open(netns)
        body = RTMSG.pack(socket.AF_INET, 0, 0, 0, 0, 0, 0, 0, 0)
        sock.send(
            HEADER.pack(HEADER.size + len(body), RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
            + body
        )
        routes: dict[str, int] = {}
        while True:
            data = _receive(sock, f"{netns}: no answer to a route dump")
            for kind, _, start, end in _messages(data):
                if kind == NLMSG_DONE:
                    return routes
                if kind == NLMSG_ERROR:
                    raise LabError(f"{netns}: the route dump failed")
                if kind != RTM_NEWROUTE:
                    continue
                family, dst_len, _, _, table, _, _, _, flags = RTMSG.unpack_from(data, start)
                if family != socket.AF_INET or table != RT_TABLE_MAIN:
                    continue
                dst, width = None, 0 if flags & UNUSABLE else 1
                for attr, value, stop in _attrs(data, start + RTMSG.size, end):
                    if attr == RTA_DST:
                        dst = socket.inet_ntoa(data[value:stop])
                    elif attr == RTA_MULTIPATH:
                        width = _width(data, value, stop)
                if dst is not None:
                    routes[f"{dst}/{dst_len}"] = width

    @staticmethod
    def _egress(message: bytes, names: dict[int, str]) -> str | None:
        """The egress interface of a unicast route, None for any other kind."""
        if RTMSG.unpack_from(message)[7] != RTN_UNICAST:
            return None
        for kind, start, _ in _attrs(message, RTMSG.size, len(message)):
            if kind == RTA_OIF:
                return names.get(struct.unpack_from("=I", message, start)[0])
        return None

    def close(self) -> None:
        """Close every socket."""
        for sock, _, _ in self.sockets.values():
            sock.close()
        self.sockets.clear()
