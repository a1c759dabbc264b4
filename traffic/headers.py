"""Ethernet, IPv4 and UDP headers packed by hand (the bytes scapy would build, in
microseconds): what the RoCEv2 frames and the ECMP probe's frames start with."""

import struct
from functools import lru_cache
from ipaddress import IPv4Address

from traffic.checksums import IPV4_WORDS, fold
from traffic.layout import ETH_P_IP, IP_LEN, UDP_LEN

_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
DF = 0x4000
UDP_PROTO = 17


@lru_cache(maxsize=4096)
def _packed(address: str) -> bytes:
    return IPv4Address(address).packed


@lru_cache(maxsize=4096)
def _ethernet(dst_mac: str, src_mac: str) -> bytes:
    return bytes.fromhex(dst_mac.replace(":", "") + src_mac.replace(":", "")) + ETH_P_IP.to_bytes(
        2, "big"
    )


def eth_ipv4_udp(
    macs: tuple[str, str],
    addresses: tuple[str, str],
    ports: tuple[int, int],
    *,
    tos: int,
    ident: int,
    ttl: int,
    udp_payload: int,
) -> bytes:
    """Ethernet (`macs`: destination, source), IPv4 with DF and its checksum (`addresses`:
    source, destination), UDP (`ports`: source, destination; checksum 0, none, as IPv4
    allows) before `udp_payload` bytes.

    >>> h = eth_ipv4_udp(("02:00:00:00:00:02", "02:00:00:00:00:01"), ("10.2.0.3", "10.2.1.3"),
    ...                  (0xC000, 4791), tos=26 << 2, ident=0, ttl=64, udp_payload=8)
    >>> len(h), h[15] >> 2, int.from_bytes(h[34:36], "big"), fold(sum(IPV4_WORDS.unpack(h[14:34])))
    (42, 26, 49152, 0)
    """
    udp_len = UDP_LEN + udp_payload
    src, dst = _packed(addresses[0]), _packed(addresses[1])
    ip = [0x45, tos, IP_LEN + udp_len, ident, DF, ttl, UDP_PROTO, 0, src, dst]
    ip[7] = fold(sum(IPV4_WORDS.unpack(_IPV4.pack(*ip))))
    udp = _UDP.pack(ports[0], ports[1], udp_len, 0)
    return _ethernet(*macs) + _IPV4.pack(*ip) + udp
