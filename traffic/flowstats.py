"""Per-flow receive accounting: packets, bytes, loss, reordering, latency, DSCP/ECN.

:class:`Tally` is fed raw frames (from a socket or a capture) with their arrival times
and produces a :class:`ReceiverResult` of plain, JSON-serializable dataclasses. Only RDMA
WRITE frames count as a flow's data; CNPs and ACKs coming back are counted apart.

>>> from traffic.roce import RoceFlowSpec, roce_flow
>>> spec = RoceFlowSpec("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
...                     src_qpn=1, dst_qpn=2, flow_id=5, payload_len=64)
>>> flow = roce_flow(spec)
>>> tally = Tally()
>>> for seq in (0, 1, 3, 2):
...     _ = tally.add(flow.frame(seq, ts_ns=1_000), rx_ns=1_500)
>>> s = tally.result().flows[5]
>>> s.packets, s.lost, s.reordered, s.latency_mean_ns, s.dscp, s.ecn
(4, 0, 1, 500.0, {26: 4}, {2: 4})
"""

import json
from dataclasses import asdict, dataclass

from traffic.checksums import Buffer, icrc_ok
from traffic.layout import (
    BTH_OPCODE,
    CNP_OPCODE,
    ETH_P_IP,
    FRAME_OVERHEAD,
    IP_OFF,
    IP_PROTO,
    IP_TOS,
    PAYLOAD_AT,
    PAYLOAD_HEADER,
    PAYLOAD_MAGIC,
    RC_ACKNOWLEDGE,
    ROCE_UDP_PORT,
    UDP_DPORT,
)

MAX_GAPS = 256  # sequence gaps kept per flow, each (arrival ns of the frame after it, missing)
_IPV4_NO_OPTIONS = 0x45
_UDP = 17
_ETHERTYPE = ETH_P_IP.to_bytes(2, "big")
_DPORT = ROCE_UDP_PORT.to_bytes(2, "big")
_TAIL = PAYLOAD_HEADER.size + 4  # payload header and ICRC after the payload offset


def _split_tos(tos_counts: dict[int, int]) -> tuple[dict[int, int], dict[int, int]]:
    dscp: dict[int, int] = {}
    ecn: dict[int, int] = {}
    for tos, n in sorted(tos_counts.items()):
        dscp[tos >> 2] = dscp.get(tos >> 2, 0) + n
        ecn[tos & 3] = ecn.get(tos & 3, 0) + n
    return dscp, ecn


def _marks(tos_counts: dict[int, int]) -> "MarkCounts":
    dscp, ecn = _split_tos(tos_counts)
    return MarkCounts(sum(tos_counts.values()), dscp, ecn)


@dataclass(frozen=True)
class MarkCounts:
    """Packets of one kind (CNPs, ACKs) by DSCP and by ECN codepoint as received."""

    packets: int
    dscp: dict[int, int]
    ecn: dict[int, int]


@dataclass(frozen=True)
class FlowStats:
    """What one flow's receiver saw.

    ``lost`` counts sequence numbers missing between the lowest and highest received
    (tail loss needs the sender's count); ``gaps`` says when: for each jump in sequence
    (up to MAX_GAPS), the arrival time of the frame after it and how many were missing;
    ``reordered`` counts packets that arrived
    after a higher sequence number. Latency is arrival time minus the payload's send
    timestamp (same CLOCK_REALTIME on both sides).
    """

    flow_id: int
    packets: int
    bytes: int
    min_seq: int
    max_seq: int
    lost: int
    reordered: int
    latency_min_ns: int
    latency_mean_ns: float
    latency_max_ns: int
    dscp: dict[int, int]
    ecn: dict[int, int]
    gaps: list[tuple[int, int]]


@dataclass(frozen=True)
class ReceiverResult:
    """Everything a receiver counted; ``other_packets`` were not RoCEv2 over IPv4 (or not
    an opcode it counts). ``acks`` are RC ACKs that arrived (answers to this namespace's
    senders); ``acks_sent`` the ACKs it sent back as a responder, ``acks_withheld`` those
    it did not send (requester outside the lab's addresses, or the kernel refused)."""

    flows: dict[int, FlowStats]
    cnp: MarkCounts
    bad_icrc: int
    other_packets: int
    acks: MarkCounts
    acks_sent: int = 0
    acks_withheld: int = 0

    @property
    def packets(self) -> int:
        """Data packets over all flows."""
        return sum(f.packets for f in self.flows.values())

    def to_json(self) -> str:
        """JSON text (integer dictionary keys become strings)."""
        return json.dumps(asdict(self))


class _FlowTally:
    __slots__ = (
        "bytes",
        "gaps",
        "lat_max",
        "lat_min",
        "lat_sum",
        "max_seq",
        "min_seq",
        "packets",
        "reordered",
        "tos",
    )

    def __init__(self, seq: int) -> None:
        self.packets = self.bytes = self.reordered = self.lat_sum = 0
        self.min_seq = self.max_seq = seq
        self.lat_min = 2**63
        self.lat_max = -(2**63)
        self.tos: dict[int, int] = {}
        self.gaps: list[tuple[int, int]] = []

    def add(self, seq: int, nbytes: int, latency_ns: int, tos: int, rx_ns: int) -> None:
        self.packets += 1
        self.bytes += nbytes
        if seq < self.max_seq:
            self.reordered += 1
            self.min_seq = min(self.min_seq, seq)
        else:
            if seq > self.max_seq + 1 and len(self.gaps) < MAX_GAPS:
                self.gaps.append((rx_ns, seq - self.max_seq - 1))
            self.max_seq = seq
        self.lat_sum += latency_ns
        self.lat_min = min(self.lat_min, latency_ns)
        self.lat_max = max(self.lat_max, latency_ns)
        self.tos[tos] = self.tos.get(tos, 0) + 1

    def finish(self, flow_id: int) -> FlowStats:
        dscp, ecn = _split_tos(self.tos)
        return FlowStats(
            flow_id=flow_id,
            packets=self.packets,
            bytes=self.bytes,
            min_seq=self.min_seq,
            max_seq=self.max_seq,
            lost=max(0, self.max_seq - self.min_seq + 1 - self.packets),
            reordered=self.reordered,
            latency_min_ns=self.lat_min,
            latency_mean_ns=self.lat_sum / self.packets,
            latency_max_ns=self.lat_max,
            dscp=dscp,
            ecn=ecn,
            gaps=list(self.gaps),
        )


class Tally:
    """Accumulates frames into per-flow counts; frames with a bad ICRC are dropped."""

    def __init__(self) -> None:
        self._flows: dict[int, _FlowTally] = {}
        self._cnp_tos: dict[int, int] = {}
        self._ack_tos: dict[int, int] = {}
        self._bad_icrc = 0
        self._other = 0

    def add(self, frame: Buffer, rx_ns: int) -> bool:
        """Account one received Ethernet frame that arrived at ``rx_ns`` (CLOCK_REALTIME);
        True when it was a flow's data frame."""
        if (
            len(frame) < FRAME_OVERHEAD
            or frame[12:14] != _ETHERTYPE
            or frame[IP_OFF] != _IPV4_NO_OPTIONS
            or frame[IP_PROTO] != _UDP
            or frame[UDP_DPORT : UDP_DPORT + 2] != _DPORT
        ):
            self._other += 1
            return False
        if not icrc_ok(frame):
            self._bad_icrc += 1
            return False
        tos, opcode = frame[IP_TOS], frame[BTH_OPCODE]
        at = PAYLOAD_AT[opcode]
        if not at or len(frame) < at + _TAIL:
            if opcode == CNP_OPCODE:
                self._cnp_tos[tos] = self._cnp_tos.get(tos, 0) + 1
            elif opcode == RC_ACKNOWLEDGE:
                self._ack_tos[tos] = self._ack_tos.get(tos, 0) + 1
            else:
                self._other += 1
            return False
        magic, flow_id, seq, ts_ns, _ = PAYLOAD_HEADER.unpack_from(frame, at)
        if magic != PAYLOAD_MAGIC:
            self._other += 1
            return False
        tally = self._flows.get(flow_id)
        if tally is None:
            tally = self._flows[flow_id] = _FlowTally(seq)
        tally.add(seq, len(frame), rx_ns - ts_ns, tos, rx_ns)
        return True

    def result(self) -> ReceiverResult:
        """Counts so far."""
        return ReceiverResult(
            flows={fid: t.finish(fid) for fid, t in sorted(self._flows.items())},
            cnp=_marks(self._cnp_tos),
            bad_icrc=self._bad_icrc,
            other_packets=self._other,
            acks=_marks(self._ack_tos),
        )
