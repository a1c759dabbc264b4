"""Active probes between servers: reachability and jumbo frames with DF set, every pair.

Each server's namespace gets one raw ICMP socket, opened from a thread that entered it (no
process per probe): it sends every other server an echo request of 56 bytes (reachability)
and one filling the host MTU with DF set (path MTU), all at once, then reads the answers until
`WAIT_S` passes with none (ping's `-W`). A hop whose MTU is too small answers "fragmentation
needed" (ICMP 3/4), naming itself and its MTU; a NIC whose own MTU is too small refuses the
send locally (EMSGSIZE), and the kernel's path MTU toward the destination is read back, as
ping reports it. Routers send such errors at a limited rate
(`net.ipv4.icmp_ratelimit`), so under a small-MTU hop some pairs fail unnamed, as with ping.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labs.netns.plan import netns_name
from traffic.checksums import fold
from traffic.nsproc import inside
from twin.lab.directory import Lab

ICMP_OVERHEAD = 28
SMALL = 56
WAIT_S = 0.5
ECHO_REQUEST, ECHO_REPLY, UNREACHABLE, FRAG_NEEDED = 8, 0, 3, 4
IP_MTU_DISCOVER, IP_PMTUDISC_DO, IP_MTU = 10, 2, 14
SOL_RAW, ICMP_FILTER, SO_RCVBUFFORCE = 255, 1, 33
KEEP = ~((1 << ECHO_REPLY) | (1 << UNREACHABLE)) & 0xFFFFFFFF
"""ICMP types the socket drops (the bits set): all but echo replies and unreachables, so the
other servers' requests to this one (answered by the kernel) do not fill its buffer."""
RECEIVE_BUFFER = 16 << 20
"""Room for every answer at once: 49 jumbo replies alone are 441 KB, twice the default."""
_ICMP = struct.Struct("!BBHHH")  # type, code, checksum, id, sequence
_IDENT = 0x7477  # "tw": every namespace has a socket of its own, so one id serves


def _echo(seq: int, size: int) -> bytes:
    """An ICMP echo request with `size` bytes of data; its checksum makes the sum fold to 0.

    >>> packet = _echo(3, 57)
    >>> len(packet), packet[0], fold(sum(struct.unpack("!32H", packet[:64])) + (packet[64] << 8))
    (65, 8, 0)
    """
    data = bytes(size)
    words = _ICMP.pack(ECHO_REQUEST, 0, 0, _IDENT, seq) + data
    total = sum(struct.unpack(f"!{len(words) // 2}H", words[: len(words) // 2 * 2]))
    if len(words) % 2:
        total += words[-1] << 8
    return _ICMP.pack(ECHO_REQUEST, 0, fold(total), _IDENT, seq) + data


def _local_mtu(dst: str) -> int:
    """The kernel's path MTU toward `dst` from this thread's namespace (what ping prints)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((dst, 9))
        return int(probe.getsockopt(socket.IPPROTO_IP, IP_MTU))


def _answers(sock: socket.socket, waiting: set[int], results: dict[int, dict[str, Any]]) -> None:
    """Read echo replies and fragmentation-needed errors into `results` by sequence number
    until every probe in `waiting` is answered or `WAIT_S` passes without news."""
    deadline = time.monotonic() + WAIT_S
    while waiting and (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            break
        packet, (sender, _) = sock.recvfrom(65535)
        icmp = packet[(packet[0] & 0x0F) * 4 :]
        kind, code, _, ident, seq = _ICMP.unpack_from(icmp)
        if kind == ECHO_REPLY and ident == _IDENT and seq in waiting:
            results[seq]["ok"] = True
        elif kind == UNREACHABLE and code == FRAG_NEEDED:
            inner = icmp[8:]
            original = inner[(inner[0] & 0x0F) * 4 :]
            if len(original) < _ICMP.size:
                continue
            _, _, _, ident, seq = _ICMP.unpack_from(original)
            if ident != _IDENT or seq not in waiting:
                continue
            results[seq].update(frag_from=sender, mtu=struct.unpack_from("!H", icmp, 6)[0])
        else:
            continue
        waiting.discard(seq)
        deadline = time.monotonic() + WAIT_S


def probe(netns: str, targets: list[str], jumbo: int) -> list[dict[str, Any]]:
    """From namespace `netns`: each target pinged small and jumbo (`jumbo` bytes of data, DF
    set); per target whether each was answered, and who refused the jumbo one, with its MTU."""
    results: dict[int, dict[str, Any]] = {
        seq: {"ok": False, "frag_from": None, "mtu": None} for seq in range(2 * len(targets))
    }
    with inside(netns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    with sock:
        sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        sock.setsockopt(SOL_RAW, ICMP_FILTER, struct.pack("=I", KEEP))
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        waiting: set[int] = set()
        for i, ip in enumerate(targets):
            for seq, size in ((2 * i, SMALL), (2 * i + 1, jumbo)):
                try:
                    sock.sendto(_echo(seq, size), (ip, 0))
                    waiting.add(seq)
                except OSError as exc:
                    if exc.errno != errno.EMSGSIZE:
                        continue  # no route: unanswered, as ping's "unreachable"
                    with inside(netns):
                        results[seq].update(frag_from="local", mtu=_local_mtu(ip))
        _answers(sock, waiting, results)
    return [
        {
            "dst_ip": ip,
            "reachable": results[2 * i]["ok"],
            "jumbo_ok": results[2 * i + 1]["ok"],
            "size": jumbo + ICMP_OVERHEAD,
            "frag_from": results[2 * i + 1]["frag_from"],
            "mtu": results[2 * i + 1]["mtu"],
        }
        for i, ip in enumerate(targets)
    ]


def ping_all(lab: Lab) -> list[dict[str, Any]]:
    """Probe every ordered pair of servers; one result per pair."""
    addresses = {s: lab.host(s)["address"].split("/")[0] for s in lab.nodes("server")}
    names = {ip: s for s, ip in addresses.items()}

    def one(src: str) -> list[dict[str, Any]]:
        jumbo = int(lab.host(src)["mtu"]) - ICMP_OVERHEAD
        targets = [ip for s, ip in addresses.items() if s != src]
        found = probe(netns_name(lab.name, src), targets, jumbo)
        return [{"src": src, **r, "dst": names.get(r["dst_ip"], r["dst_ip"])} for r in found]

    with ThreadPoolExecutor(16) as pool:
        return [r for rs in pool.map(one, addresses) for r in rs]
