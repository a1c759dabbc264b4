"""RoCEv2 frames built with scapy: one template per flow, plus CNPs.

Build a flow's template once with scapy (milliseconds), then stamp frames from it with
:class:`traffic.frames.RoceFlow` (microseconds each).

>>> spec = RoceFlowSpec("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
...                     src_qpn=0x11, dst_qpn=0x22, flow_id=7, payload_len=64)
>>> spec.sport, len(roce_flow(spec).frame(seq=1, ts_ns=0))
(49730, 122)
"""

from dataclasses import dataclass

from scapy.contrib.roce import BTH, cnp
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from traffic.frames import PSN_MASK, RoceFlow
from traffic.layout import PAYLOAD_HEADER, PAYLOAD_MAGIC, ROCE_UDP_PORT

ROCE_DSCP = 26  # AF31: host RoCE default (ToS 106 with ECT(0)), switch priority 3
CNP_DSCP = 48  # NIC default for CNPs, switch priority 6
BULK_DSCP = 8  # CS1: background/bulk class
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3

RC_SEND_ONLY = 0x04
RC_RDMA_WRITE_MIDDLE = 0x07
CNP_OPCODE = 0x81
# Opcodes whose payload follows the BTH directly (no RETH/DETH/AETH/immediate).
PLAIN_OPCODES = frozenset(
    transport | op for transport in (0x00, 0x20) for op in (0x00, 0x01, 0x02, 0x04, 0x07, 0x08)
)

QPN_MASK = 0xFFFFFF
UDP_SPORT_MIN = 0xC000
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
    """One RoCEv2 data flow (a QP pair) from a source to its next hop toward ``dst_ip``."""

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
    opcode: int = RC_RDMA_WRITE_MIDDLE
    psn0: int = 0
    ttl: int = 64

    def __post_init__(self) -> None:
        _tos(self.dscp, self.ecn)
        if not (0 < self.src_qpn <= QPN_MASK and 0 < self.dst_qpn <= QPN_MASK):
            raise ValueError("QPNs must be 24-bit and non-zero")
        if self.payload_len < PAYLOAD_HEADER.size or self.payload_len % 4:
            raise ValueError(f"payload_len must be a multiple of 4, >= {PAYLOAD_HEADER.size}")
        if self.opcode not in PLAIN_OPCODES:
            raise ValueError(f"opcode {self.opcode:#x} needs extension headers")
        if not (0 <= self.psn0 <= PSN_MASK and 0 <= self.flow_id < 2**32):
            raise ValueError("psn0 must be 24-bit and flow_id 32-bit")

    @property
    def sport(self) -> int:
        """UDP source port of this QP pair."""
        return udp_sport(self.src_qpn, self.dst_qpn)

    def packet(self, seq: int = 0, ts_ns: int = 0) -> Packet:
        """The scapy packet for frame ``seq`` (slow; use :func:`roce_flow` for many)."""
        header = PAYLOAD_HEADER.pack(PAYLOAD_MAGIC, self.flow_id, seq, ts_ns)
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
            / BTH(opcode=self.opcode, dqpn=self.dst_qpn, psn=(self.psn0 + seq) & PSN_MASK)
            / Raw(header.ljust(self.payload_len, b"\0"))
        )


def roce_flow(spec: RoceFlowSpec) -> RoceFlow:
    """Fast frame factory for ``spec`` (scapy builds the template once)."""
    return RoceFlow(bytes(spec.packet()))


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
