"""Fast per-frame patching of prebuilt RoCEv2 templates (no scapy needed here).

A :class:`RoceFlow` holds one flow's template frame and stamps copies of it with a
sequence number, the matching PSN and IP identification, and a send timestamp, then
recomputes the IPv4 checksum and the ICRC incrementally from precomputed pieces.
"""

import struct
import time
import zlib
from dataclasses import dataclass
from typing import Protocol

from traffic.checksums import IPV4_WORDS, PSEUDO_SHIFT, fold, icrc_ok, masked_headers
from traffic.layout import (
    BTH_PSN,
    FRAME_OVERHEAD,
    IP_CSUM,
    IP_ID,
    IP_OFF,
    PAYLOAD_HEADER,
    PAYLOAD_MAGIC,
    PAYLOAD_OFF,
    PAYLOAD_SEQ,
)

PSN_MASK = 0xFFFFFF

_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
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


class RoceFlow:
    """Stamps copies of one flow's template frame; see :func:`traffic.roce.roce_flow`."""

    __slots__ = ("_crc_head", "_ip_sum", "_masked_mid", "_psn_word", "flow_id", "psn0", "template")

    def __init__(self, template: bytes) -> None:
        if len(template) < FRAME_OVERHEAD + PAYLOAD_HEADER.size or not icrc_ok(template):
            raise ValueError("template is not a RoCEv2 data frame with a valid ICRC")
        magic, flow_id, _, _ = PAYLOAD_HEADER.unpack_from(template, PAYLOAD_OFF)
        if magic != PAYLOAD_MAGIC:
            raise ValueError("template payload does not start with the TWIN header")
        self.template = bytes(template)
        self.flow_id: int = flow_id
        word = _U32.unpack_from(template, BTH_PSN - 1)[0]
        self.psn0 = word & PSN_MASK
        self._psn_word = word & ~PSN_MASK
        words = list(IPV4_WORDS.unpack_from(template, IP_OFF))
        words[(IP_ID - IP_OFF) // 2] = words[(IP_CSUM - IP_OFF) // 2] = 0
        self._ip_sum = sum(words)
        pseudo = masked_headers(template)
        self._crc_head = zlib.crc32(pseudo[:_ID_AT])
        self._masked_mid = pseudo[_ID_AT + 2 : _PSN_AT]

    def __reduce__(self) -> tuple[type["RoceFlow"], tuple[bytes]]:
        return (RoceFlow, (self.template,))

    def frame(self, seq: int, ts_ns: int) -> bytes:
        """Template stamped with ``seq`` (PSN = psn0 + seq, IP id = seq mod 2**16)."""
        buf = bytearray(self.template)
        ip_id = seq & 0xFFFF
        _U16.pack_into(buf, IP_ID, ip_id)
        _U16.pack_into(buf, IP_CSUM, fold(self._ip_sum + ip_id))
        _U32.pack_into(buf, BTH_PSN - 1, self._psn_word | ((self.psn0 + seq) & PSN_MASK))
        _SEQ_TS.pack_into(buf, PAYLOAD_SEQ, seq, ts_ns)
        crc = zlib.crc32(buf[IP_ID : IP_ID + 2], self._crc_head)
        crc = zlib.crc32(memoryview(buf)[BTH_PSN:-4], zlib.crc32(self._masked_mid, crc))
        _ICRC.pack_into(buf, len(buf) - 4, crc)
        return bytes(buf)

    def frames(self, count: int, start_seq: int = 0, ts_ns: int | None = None) -> list[bytes]:
        """``count`` consecutive frames; each stamped with the current time unless ``ts_ns``."""
        now = time.time_ns
        return [
            self.frame(seq, now() if ts_ns is None else ts_ns)
            for seq in range(start_seq, start_seq + count)
        ]
