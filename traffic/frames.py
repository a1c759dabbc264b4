"""Fast per-frame patching of prebuilt RoCEv2 templates (no scapy needed here).

A :class:`RoceFlow` holds one queue pair's templates (the First, Middle and Last packet of
an RDMA WRITE message, or its Only packet) and stamps copies of them with a sequence
number, the matching PSN, IP identification and remote address, and a send timestamp,
then recomputes the IPv4 checksum and the ICRC incrementally from precomputed pieces.
"""

import struct
import time
import zlib
from dataclasses import dataclass
from typing import Protocol

from traffic.checksums import IPV4_WORDS, PSEUDO_SHIFT, fold, icrc_ok, masked_headers
from traffic.layout import (
    BTH_OPCODE,
    BTH_PSN,
    IP_CSUM,
    IP_ID,
    IP_OFF,
    PAYLOAD_HEADER,
    PAYLOAD_MAGIC,
    PAYLOAD_SEQ,
    RETH,
    RETH_OFF,
    payload_at,
)

PSN_MASK = 0xFFFFFF
BUFFER_SLOTS = 8
"""Slots of the remote buffer a QP writes into, one message each, in turn (NCCL's
``NCCL_STEPS``): message k writes at ``va + (k % 8) * dma_length``."""

_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
_SEQ_TS = struct.Struct("!QQ")
_ICRC = struct.Struct("<I")
_ID_AT = IP_ID - PSEUDO_SHIFT
_PSN_AT = BTH_PSN - PSEUDO_SHIFT


class FrameSource(Protocol):
    """Anything the sender can ask for the frame with a given sequence number."""

    @property
    def flow_id(self) -> int:
        """Flow id carried in the payload header (or -1 for frames without one)."""
        ...

    def frame(self, seq: int, ts_ns: int) -> bytes:
        """Frame number ``seq`` stamped with send time ``ts_ns``."""
        ...


@dataclass(frozen=True)
class FixedFrame:
    """A frame sent unchanged every time (CNPs, replayed captures)."""

    data: bytes
    flow_id: int = -1

    def frame(self, seq: int, ts_ns: int) -> bytes:
        """The same bytes whatever ``seq`` and ``ts_ns`` are."""
        return self.data


class _Stamp:
    """One template and the pieces of its checksums that do not change from frame to frame."""

    __slots__ = ("crc_head", "ip_sum", "masked_mid", "psn_word", "reth", "seq_at", "template")

    def __init__(self, template: bytes) -> None:
        if not icrc_ok(template):
            raise ValueError("template is not a RoCEv2 data frame with a valid ICRC")
        at = payload_at(template[BTH_OPCODE])
        if not at or len(template) < at + PAYLOAD_HEADER.size + 4:
            raise ValueError(f"template opcode {template[BTH_OPCODE]:#x} is not an RDMA WRITE")
        if template[at : at + 4] != PAYLOAD_MAGIC:
            raise ValueError("template payload does not start with the TWIN header")
        self.template = template
        self.seq_at = at + PAYLOAD_SEQ
        self.reth = at != RETH_OFF
        self.psn_word = _U32.unpack_from(template, BTH_PSN - 1)[0] & ~PSN_MASK
        words = list(IPV4_WORDS.unpack_from(template, IP_OFF))
        words[(IP_ID - IP_OFF) // 2] = words[(IP_CSUM - IP_OFF) // 2] = 0
        self.ip_sum = sum(words)
        pseudo = masked_headers(template)
        self.crc_head = zlib.crc32(pseudo[:_ID_AT])
        self.masked_mid = pseudo[_ID_AT + 2 : _PSN_AT]


class RoceFlow:
    """Stamps the frames of one QP's RDMA WRITE messages; see :func:`traffic.roce.roce_flow`.

    ``templates`` are the frames with sequence numbers 0, 1 and ``message_packets - 1`` (the
    First, a Middle and the Last packet; for shorter messages the same frame may repeat).
    Frame ``seq`` is packet ``seq % message_packets`` of message ``seq // message_packets``,
    with PSN ``psn0 + seq`` (mod 2**24).
    """

    __slots__ = (
        "_first",
        "_last",
        "_middle",
        "dma_len",
        "flow_id",
        "message_packets",
        "psn0",
        "src_qpn",
        "templates",
        "va0",
    )

    def __init__(self, templates: tuple[bytes, bytes, bytes], message_packets: int) -> None:
        if message_packets < 1:
            raise ValueError("message_packets must be at least 1")
        first, middle, last = (_Stamp(bytes(t)) for t in templates)
        if not first.reth or (message_packets > 1 and last.reth):
            raise ValueError("templates are not the First, a Middle and the Last of a message")
        self.templates = templates
        self.message_packets = message_packets
        self._first, self._middle, self._last = first, middle, last
        _, flow_id, _, _, src_qpn = PAYLOAD_HEADER.unpack_from(
            first.template, first.seq_at - PAYLOAD_SEQ
        )
        self.flow_id: int = flow_id
        self.src_qpn: int = src_qpn
        self.psn0 = _U32.unpack_from(first.template, BTH_PSN - 1)[0] & PSN_MASK
        self.va0, _, self.dma_len = RETH.unpack_from(first.template, RETH_OFF)

    def __reduce__(self) -> tuple[type["RoceFlow"], tuple[tuple[bytes, bytes, bytes], int]]:
        return (RoceFlow, (self.templates, self.message_packets))

    @property
    def template(self) -> bytes:
        """The message's first frame as built (sequence 0)."""
        return self._first.template

    def frame(self, seq: int, ts_ns: int) -> bytes:
        """Frame ``seq``: PSN ``psn0 + seq``, IP id ``seq`` mod 2**16, opcode by its place in
        its message, and on a First/Only packet the address of the message's buffer slot."""
        m = self.message_packets
        pos = seq % m
        st = self._first if pos == 0 else self._last if pos == m - 1 else self._middle
        buf = bytearray(st.template)
        ip_id = seq & 0xFFFF
        _U16.pack_into(buf, IP_ID, ip_id)
        _U16.pack_into(buf, IP_CSUM, fold(st.ip_sum + ip_id))
        _U32.pack_into(buf, BTH_PSN - 1, st.psn_word | ((self.psn0 + seq) & PSN_MASK))
        if st.reth:
            _U64.pack_into(buf, RETH_OFF, self.va0 + (seq // m) % BUFFER_SLOTS * self.dma_len)
        _SEQ_TS.pack_into(buf, st.seq_at, seq, ts_ns)
        crc = zlib.crc32(buf[IP_ID : IP_ID + 2], st.crc_head)
        crc = zlib.crc32(memoryview(buf)[BTH_PSN:-4], zlib.crc32(st.masked_mid, crc))
        _ICRC.pack_into(buf, len(buf) - 4, crc)
        return bytes(buf)

    def frames(self, count: int, start_seq: int = 0, ts_ns: int | None = None) -> list[bytes]:
        """``count`` consecutive frames; each stamped with the current time unless ``ts_ns``."""
        now = time.time_ns
        return [
            self.frame(seq, now() if ts_ns is None else ts_ns)
            for seq in range(start_seq, start_seq + count)
        ]
