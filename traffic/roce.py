"""RoCEv2 frames: one QP's RDMA WRITE messages, plus CNPs.

A queue pair sends messages of ``message_packets`` packets: RDMA WRITE First, Middle...,
Last (or one WRITE Only), PSNs counting on across messages. scapy's layers describe each
frame (`RoceFlowSpec.packet`: the reference, milliseconds to build); a flow's templates are
packed by hand to the same bytes (`frame_bytes`: microseconds; tests hold the two equal),
then frames are stamped from them with :class:`traffic.frames.RoceFlow`.

>>> spec = RoceFlowSpec("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
...                     src_qpn=0x11, dst_qpn=0x22, flow_id=7, payload_len=64,
...                     message_packets=3)
>>> from traffic.layout import BTH_OPCODE
>>> flow = roce_flow(spec)
>>> [(f[BTH_OPCODE], len(f)) for f in flow.frames(4, ts_ns=0)]
[(6, 138), (7, 122), (8, 122), (6, 138)]
>>> spec.sport
49730
"""

import struct
from dataclasses import dataclass
from typing import Any, ClassVar

from scapy.contrib.roce import BTH, cnp
from scapy.fields import IntField, XIntField, XLongField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from traffic.checksums import icrc
from traffic.frames import BUFFER_SLOTS, PSN_MASK, RoceFlow
from traffic.headers import eth_ipv4_udp
from traffic.layout import (
    ACKREQ_BIT,
    ICRC_LEN,
    PAYLOAD_HEADER,
    PAYLOAD_MAGIC,
    RC_WRITE_FIRST,
    RC_WRITE_LAST,
    RC_WRITE_MIDDLE,
    RC_WRITE_ONLY,
    ROCE_UDP_PORT,
    UDP_SPORT_MIN,
)
from traffic.layout import CE as CE
from traffic.layout import ECT0 as ECT0
from traffic.layout import ECT1 as ECT1
from traffic.layout import NOT_ECT as NOT_ECT
from traffic.layout import RETH as RETH_HEADER

ROCE_DSCP = 26  # AF31: host RoCE default (ToS 106 with ECT(0)), switch priority 3
CNP_DSCP = 48  # NIC default for CNPs, switch priority 6
BULK_DSCP = 8  # CS1: background/bulk class
MESSAGE_PACKETS = 16
"""Packets per RDMA WRITE message unless told (16 KiB messages of 1 KiB packets)."""
REMOTE_VA = 0x7F00_0000_0000
"""Start of the remote buffer a QP writes into (a user-space address, as ibverbs gives)."""
_BTH = struct.Struct("!BBHII")  # opcode, SE/M/pad/version, P_Key, FECN/BECN/DestQP, AckReq/PSN


class RETH(Packet):
    """RDMA Extended Transport Header (16 B after the BTH of WRITE First/Only): remote
    virtual address, R_Key, DMA length of the whole message. scapy has no layer for it."""

    name = "RETH"
    fields_desc: ClassVar[list[Any]] = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dlen", 0),
    ]


bind_layers(BTH, RETH, opcode=RC_WRITE_FIRST)
bind_layers(BTH, RETH, opcode=RC_WRITE_ONLY)

QPN_MASK = 0xFFFFFF
_FLOW_LABEL_MASK = 0xFFFFF


def flow_label(lqpn: int, rqpn: int) -> int:
    """20-bit flow label Linux derives from a QP pair (``rdma_calc_flow_label``).

    >>> hex(flow_label(0x11, 0x22))
    '0x242'
    """
    v = lqpn * rqpn
    v ^= v >> 20
    v ^= v >> 40
    return v & _FLOW_LABEL_MASK


def udp_sport(lqpn: int, rqpn: int, label: int = 0) -> int:
    """RoCEv2 UDP source port for a QP pair, as Linux ``rdma_get_udp_sport`` picks it.

    A zero ``label`` means "derive it from the QPNs". The result is in 0xC000-0xFFFF.

    >>> udp_sport(0x11, 0x22), udp_sport(0x22, 0x11), hex(udp_sport(1, 1, label=0xFC000))
    (49730, 49730, '0xc03f')
    """
    fl = label or flow_label(lqpn, rqpn)
    low = (fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)
    return (low | UDP_SPORT_MIN) & 0xFFFF


def _tos(dscp: int, ecn: int) -> int:
    if not (0 <= dscp < 64 and 0 <= ecn < 4):
        raise ValueError(f"DSCP {dscp} / ECN {ecn} out of range")
    return dscp << 2 | ecn


@dataclass(frozen=True)
class RoceFlowSpec:
    """One RoCEv2 data flow (an RC queue pair) from a source to its next hop toward ``dst_ip``.

    It sends RDMA WRITE messages of ``message_packets`` packets of ``payload_len`` bytes
    each into ``BUFFER_SLOTS`` slots of the remote buffer at ``va`` (key ``rkey``); its
    first PSN is ``psn0``.
    """

    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    src_qpn: int
    dst_qpn: int
    flow_id: int
    dscp: int = ROCE_DSCP
    ecn: int = ECT0
    payload_len: int = 1024
    message_packets: int = MESSAGE_PACKETS
    psn0: int = 0
    rkey: int = 0x100
    va: int = REMOTE_VA
    ttl: int = 64

    def __post_init__(self) -> None:
        _tos(self.dscp, self.ecn)
        if not (0 < self.src_qpn <= QPN_MASK and 0 < self.dst_qpn <= QPN_MASK):
            raise ValueError("QPNs must be 24-bit and non-zero")
        if self.payload_len < PAYLOAD_HEADER.size or self.payload_len % 4:
            raise ValueError(f"payload_len must be a multiple of 4, >= {PAYLOAD_HEADER.size}")
        if self.message_packets < 1 or self.dma_len >= 2**32:
            raise ValueError("message_packets must be >= 1 and a message under 4 GiB")
        if not (0 <= self.psn0 <= PSN_MASK and 0 <= self.flow_id < 2**32):
            raise ValueError("psn0 must be 24-bit and flow_id 32-bit")
        if not (0 <= self.rkey < 2**32 and 0 <= self.va <= 2**64 - BUFFER_SLOTS * self.dma_len):
            raise ValueError("rkey must be 32-bit and the remote buffer inside 64-bit space")

    @property
    def sport(self) -> int:
        """UDP source port of this QP pair."""
        return udp_sport(self.src_qpn, self.dst_qpn)

    @property
    def dma_len(self) -> int:
        """Bytes of one message (the RETH's DMA length)."""
        return self.message_packets * self.payload_len

    def opcode(self, seq: int) -> int:
        """BTH opcode of frame ``seq``: its place in its message.

        >>> s = RoceFlowSpec("a", "b", "10.0.0.1", "10.0.0.2", 1, 2, 0, message_packets=3)
        >>> from dataclasses import replace
        >>> [s.opcode(i) for i in range(4)], replace(s, message_packets=1).opcode(5)
        ([6, 7, 8, 6], 10)
        """
        m = self.message_packets
        pos = seq % m
        if m == 1:
            return RC_WRITE_ONLY
        return RC_WRITE_FIRST if pos == 0 else RC_WRITE_LAST if pos == m - 1 else RC_WRITE_MIDDLE

    def packet(self, seq: int = 0, ts_ns: int = 0) -> Packet:
        """The scapy packet for frame ``seq`` (slow; use :func:`roce_flow` for many).

        Last and Only packets ask for an ACK (BTH AckReq), First and Only carry the RETH.
        """
        opcode = self.opcode(seq)
        header = PAYLOAD_HEADER.pack(PAYLOAD_MAGIC, self.flow_id, seq, ts_ns, self.src_qpn)
        bth = BTH(
            opcode=opcode,
            dqpn=self.dst_qpn,
            ackreq=int(opcode in (RC_WRITE_LAST, RC_WRITE_ONLY)),
            psn=(self.psn0 + seq) & PSN_MASK,
        )
        if opcode in (RC_WRITE_FIRST, RC_WRITE_ONLY):
            slot = seq // self.message_packets % BUFFER_SLOTS
            bth = bth / RETH(va=self.va + slot * self.dma_len, rkey=self.rkey, dlen=self.dma_len)
        return (
            Ether(src=self.src_mac, dst=self.dst_mac)
            / IP(
                src=self.src_ip,
                dst=self.dst_ip,
                tos=_tos(self.dscp, self.ecn),
                ttl=self.ttl,
                id=seq & 0xFFFF,
                flags="DF",
            )
            / UDP(sport=self.sport, dport=ROCE_UDP_PORT, chksum=0)
            / bth
            / Raw(header.ljust(self.payload_len, b"\0"))
        )


def frame_bytes(spec: RoceFlowSpec, seq: int = 0, ts_ns: int = 0) -> bytes:
    """Frame ``seq`` of ``spec`` packed by hand: the bytes of ``bytes(spec.packet(seq, ts_ns))``
    (scapy's build is the reference, tests hold them equal) in a few microseconds."""
    opcode = spec.opcode(seq)
    reth = b""
    if opcode in (RC_WRITE_FIRST, RC_WRITE_ONLY):
        slot = seq // spec.message_packets % BUFFER_SLOTS
        reth = RETH_HEADER.pack(spec.va + slot * spec.dma_len, spec.rkey, spec.dma_len)
    payload = PAYLOAD_HEADER.pack(PAYLOAD_MAGIC, spec.flow_id, seq, ts_ns, spec.src_qpn)
    ackreq = ACKREQ_BIT if opcode in (RC_WRITE_LAST, RC_WRITE_ONLY) else 0
    bth = _BTH.pack(opcode, 0, 0xFFFF, spec.dst_qpn, ackreq << 24 | (spec.psn0 + seq) & PSN_MASK)
    body = bth + reth + payload.ljust(spec.payload_len, b"\0")
    header = eth_ipv4_udp(
        (spec.dst_mac, spec.src_mac),
        (spec.src_ip, spec.dst_ip),
        (spec.sport, ROCE_UDP_PORT),
        tos=_tos(spec.dscp, spec.ecn),
        ident=seq & 0xFFFF,
        ttl=spec.ttl,
        udp_payload=len(body) + ICRC_LEN,
    )
    frame = header + body + bytes(ICRC_LEN)
    return frame[:-ICRC_LEN] + icrc(frame).to_bytes(ICRC_LEN, "little")


def roce_flow(spec: RoceFlowSpec) -> RoceFlow:
    """Fast frame factory for ``spec`` (the First, a Middle and the Last packed once)."""
    last = spec.message_packets - 1
    seqs = (0, min(1, last), last)
    return RoceFlow(
        (frame_bytes(spec, seqs[0]), frame_bytes(spec, seqs[1]), frame_bytes(spec, seqs[2])),
        spec.message_packets,
    )


def cnp_frame(
    src_mac: str,
    dst_mac: str,
    src_ip: str,
    dst_ip: str,
    *,
    dst_qpn: int,
    src_qpn: int,
    dscp: int = CNP_DSCP,
    ecn: int = ECT0,
) -> bytes:
    """Congestion Notification Packet to the QP ``dst_qpn`` (BTH opcode 0x81, BECN set).

    ``src_qpn`` is the notifying QP; the UDP source port comes from the pair. ECT(0) is
    what ConnectX NICs put on CNPs.

    >>> f = cnp_frame("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.2", "10.0.0.1",
    ...               dst_qpn=0x11, src_qpn=0x22)
    >>> len(f), f[42], f[15] >> 2
    (74, 129, 48)
    """
    return bytes(
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, tos=_tos(dscp, ecn), flags="DF")
        / UDP(sport=udp_sport(src_qpn, dst_qpn), dport=ROCE_UDP_PORT, chksum=0)
        / cnp(dst_qpn)
    )
