"""The kernel's route lookup for a UDP 5-tuple, asked in-process over netlink.

The question `ip route get DST from SRC [iif IN] ipproto udp sport S dport D` asks, as an
RTM_GETROUTE message on a netlink socket opened inside the node's namespace (pyroute2 does
not know the port attributes): many lookups are sent at once and their answers read back,
with no process per lookup, so tracing flows stays quick on a loaded machine. The answer is
the egress interface, or None where the packet is delivered locally or has no route.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from dataclasses import dataclass

from labs.netns.netlink import inside
from twin.errors import LabError

RTM_NEWROUTE, RTM_GETROUTE, NLMSG_ERROR = 24, 26, 2
NLM_F_REQUEST = 1
RTA_DST, RTA_SRC, RTA_IIF, RTA_OIF = 1, 2, 3, 4
RTA_IP_PROTO, RTA_SPORT, RTA_DPORT = 27, 28, 29
RTN_UNICAST = 1
IPPROTO_UDP = 17
HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, protocol, scope,
# type, flags


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
    return struct.pack("=HH", length, kind) + value + bytes(-length % 4)


class Lookups:
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

    def get(self, netns: str, queries: list[Query]) -> list[str | None]:
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
            try:
                data = sock.recv(1 << 20)
            except TimeoutError as exc:
                raise LabError(f"{netns}: no answer to {len(queries)} route lookups") from exc
            at = 0
            while at + HEADER.size <= len(data):
                length, kind, _, seq, _ = HEADER.unpack_from(data, at)
                if kind == RTM_NEWROUTE:
                    answers[seq] = self._egress(data[at + HEADER.size : at + length], names)
                elif kind == NLMSG_ERROR:
                    answers[seq] = None
                at += (length + 3) & ~3
        return [answers.get(seq) for seq in range(1, len(queries) + 1)]

    @staticmethod
    def _egress(message: bytes, names: dict[int, str]) -> str | None:
        """The egress interface of a unicast route, None for any other kind."""
        if RTMSG.unpack_from(message)[7] != RTN_UNICAST:
            return None
        at = RTMSG.size
        while at + 4 <= len(message):
            length, kind = struct.unpack_from("=HH", message, at)
            if kind == RTA_OIF:
                return names.get(struct.unpack_from("=I", message, at + 4)[0])
            at += (length + 3) & ~3
        return None

    def close(self) -> None:
        """Close every socket."""
        for sock, _, _ in self.sockets.values():
            sock.close()
        self.sockets.clear()
