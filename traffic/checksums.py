"""RoCEv2 ICRC and IPv4 header checksum, computed on raw frame bytes.

The ICRC is a CRC-32 over a pseudo packet: 8 bytes of 0xFF standing for the absent
InfiniBand LRH, the IPv4 header with TOS, TTL and checksum forced to ones, the UDP header
with checksum 0xFFFF, the BTH with its FECN/BECN byte 0xFF, and the payload. It is stored
little-endian as the last 4 bytes of the frame.
"""

import struct
import zlib

from traffic.layout import (
    BTH_FECN_BECN,
    IP_CSUM,
    IP_OFF,
    IP_TOS,
    IP_TTL,
    PAYLOAD_OFF,
    UDP_CSUM,
)

Buffer = bytes | bytearray | memoryview

_LRH_STANDIN = b"\xff" * 8
IPV4_WORDS = struct.Struct("!10H")
# Frame byte k is byte k - PSEUDO_SHIFT of the ICRC pseudo packet.
PSEUDO_SHIFT = IP_OFF - len(_LRH_STANDIN)


def masked_headers(frame: Buffer) -> bytes:
    """Pseudo-LRH plus the masked IPv4/UDP/BTH headers that start the ICRC input."""
    h = bytearray(frame[IP_OFF:PAYLOAD_OFF])
    for off in (IP_TOS, IP_TTL, IP_CSUM, IP_CSUM + 1, UDP_CSUM, UDP_CSUM + 1, BTH_FECN_BECN):
        h[off - IP_OFF] = 0xFF
    return _LRH_STANDIN + bytes(h)


def icrc(frame: Buffer) -> int:
    """ICRC of a full Ether/IPv4/UDP/BTH frame whose last 4 bytes are the ICRC slot."""
    return zlib.crc32(frame[PAYLOAD_OFF:-4], zlib.crc32(masked_headers(frame)))


def icrc_ok(frame: Buffer) -> bool:
    """True when the frame's trailing ICRC matches its contents."""
    return int.from_bytes(frame[-4:], "little") == icrc(frame)


def fold(total: int) -> int:
    """One's-complement checksum (RFC 1071) of a sum of 16-bit words."""
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_checksum(frame: Buffer) -> int:
    """Header checksum the frame's IPv4 header should carry (its own field skipped)."""
    words = IPV4_WORDS.unpack_from(frame, IP_OFF)
    return fold(sum(words) - words[(IP_CSUM - IP_OFF) // 2])


def ipv4_checksum_ok(frame: Buffer) -> bool:
    """True when the IPv4 header checksum is right."""
    return fold(sum(IPV4_WORDS.unpack_from(frame, IP_OFF))) == 0
