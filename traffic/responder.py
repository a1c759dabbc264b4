"""The responder half of an RC queue pair: ACKs back to the requester.

The requester sets AckReq in the BTH of the Last (or Only) packet of each RDMA WRITE
message; the responder answers it with an RC Acknowledge (BTH opcode 0x11 and an AETH:
syndrome and message sequence number, MSN) carrying that packet's PSN. An ACK is
cumulative: it acknowledges every packet up to its PSN, so one ACK per message covers the
First and Middle packets too, and those are not answered one by one. An ACK goes to the
requester's QP (the QP number a real responder keeps in its QP context travels in the
payload header here), with the same UDP source port (the port is a function of the QP
pair), and in the class the data arrived in: the same DSCP, ECT(0) when the data was
ECN-capable.

ACKs leave on a raw IPv4 socket (``IPPROTO_RAW``: send only, the IP header is ours), so
the namespace's kernel routes them and resolves the next hop like any packet it sends.
They go only to the addresses the responder was given (the lab's servers); a data frame
from anywhere else is counted, not answered.
"""

import socket
import struct
from collections.abc import Iterable

from traffic.checksums import Buffer, icrc, ipv4_checksum
from traffic.layout import (
    ACK_LEN,
    ACKREQ_BIT,
    BTH_ACKREQ,
    BTH_OPCODE,
    BTH_PSN,
    ECT0,
    ETH_LEN,
    IP_CSUM,
    IP_DST,
    IP_SRC,
    IP_TOS,
    PAYLOAD_AT,
    PAYLOAD_HEADER,
    RC_ACKNOWLEDGE,
    ROCE_UDP_PORT,
    UDP_SPORT,
)

AETH_ACK = 0x1F
"""AETH syndrome of a plain ACK: type 000 (ACK) and credit count 31, "no credits
advertised" (end-to-end credits matter for SENDs, not for the RDMA WRITEs sent here)."""
PSN_MASK = 0xFFFFFF
_IP_DF = 0x4000
_TTL = 64
_UDP = 17
_PKEY = 0xFFFF
_HEADERS = struct.Struct("!BBHHHBBH4s4sHHHHBBHIII")  # IPv4, UDP, BTH, AETH
_U32 = struct.Struct("!I")
_QPN_AT = PAYLOAD_HEADER.size - 4  # the requester's QPN ends the payload header
_ICRC = struct.Struct("<I")


def ack_packet(
    src: bytes, dst: bytes, tos: int, sport: int, dqpn: int, psn: int, msn: int, ip_id: int
) -> bytes:
    """IPv4 packet of an RC ACK (from IP header to ICRC) for PSN ``psn`` to QP ``dqpn``.

    ``src`` and ``dst`` are packed IPv4 addresses; ``ip_id`` must not be 0 (the kernel
    would replace it, and the ICRC covers it).

    >>> ack = ack_packet(bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1]), 0x6A, 49730, 0x11,
    ...                  psn=7, msn=1, ip_id=1)
    >>> len(ack), ack[20 + 8], ack[-8:-4].hex()
    (48, 17, '1f000001')
    """
    frame = bytearray(ETH_LEN)
    frame += _HEADERS.pack(
        0x45,
        tos,
        ACK_LEN - ETH_LEN,
        ip_id,
        _IP_DF,
        _TTL,
        _UDP,
        0,
        src,
        dst,
        sport,
        ROCE_UDP_PORT,
        ACK_LEN - ETH_LEN - 20,
        0,
        RC_ACKNOWLEDGE,
        0,
        _PKEY,
        dqpn & PSN_MASK,
        psn & PSN_MASK,
        (AETH_ACK << 24) | (msn & PSN_MASK),
    )
    frame += bytes(4)
    struct.pack_into("!H", frame, IP_CSUM, ipv4_checksum(frame))
    _ICRC.pack_into(frame, len(frame) - 4, icrc(frame))
    return bytes(frame[ETH_LEN:])


class Responder:
    """Answers the AckReq packets of a receiver's data frames with ACKs to ``peers`` only."""

    def __init__(self, peers: Iterable[str], sock: socket.socket | None = None) -> None:
        self.peers = frozenset(socket.inet_aton(p) for p in peers)
        if sock is None:  # non-blocking: a full send queue costs an ACK, never the receiver
            sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            sock.setblocking(False)
        self.sock = sock
        self.sent = self.withheld = 0
        self._msn: dict[tuple[bytes, int], int] = {}

    def answer(self, frame: Buffer) -> None:
        """ACK ``frame`` (a data frame the tally counted) if it asks for one."""
        if not frame[BTH_ACKREQ] & ACKREQ_BIT:
            return
        requester = bytes(frame[IP_SRC : IP_SRC + 4])
        if requester not in self.peers:
            self.withheld += 1
            return
        qpn = _U32.unpack_from(frame, PAYLOAD_AT[frame[BTH_OPCODE]] + _QPN_AT)[0]
        msn = (self._msn.get((requester, qpn), 0) + 1) & PSN_MASK
        self._msn[requester, qpn] = msn
        tos = (frame[IP_TOS] & 0xFC) | (ECT0 if frame[IP_TOS] & 3 else 0)
        ack = ack_packet(
            bytes(frame[IP_DST : IP_DST + 4]),
            requester,
            tos,
            int.from_bytes(frame[UDP_SPORT : UDP_SPORT + 2], "big"),
            qpn,
            int.from_bytes(frame[BTH_PSN : BTH_PSN + 3], "big"),
            msn,
            self.sent % 0xFFFF + 1,
        )
        try:
            self.sock.sendto(ack, (socket.inet_ntoa(requester), 0))
        except OSError:  # no route, full queue: the ACK is lost, as a dropped one would be
            self.withheld += 1
            return
        self.sent += 1

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()
