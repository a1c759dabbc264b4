"""An ECMP probe on a wall-clock twin (netns, clab): thousands of UDP 5-tuples over a few
address pairs, sent from servers into their leaves, so that each leaf's multipath hash picks
an uplink per tuple (the uplinks' tx_packets count where they went).

Each pair is one sender job on the source server's NIC facing the leaf, its frames addressed
to that leaf's MAC: the server's own ECMP over its NICs is bypassed, so every tuple enters the
fabric at the leaf it probes. Frames are plain UDP to port 4791 of the destination, where the
receivers hold a UDP socket (no ICMP port-unreachable comes back through the fabric); they are
shorter than a RoCE frame, so the receivers count them as other packets, not as flows.
"""

from __future__ import annotations

import struct
from ipaddress import IPv4Address

from labs.backend import Phase, ProbePair
from labs.flows import Servers
from traffic.checksums import fold
from traffic.endpoints import NextHop, NextHops, Resolver, next_hop
from traffic.frames import FixedFrame
from traffic.layout import ETH_P_IP, ROCE_UDP_PORT
from traffic.pacing import ConstantRate
from traffic.sender import SendJob
from twin.errors import LabError

PAYLOAD = bytes(8)
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
_DF = 0x4000
_TTL = 64
_UDP_PROTO = 17


def frame(hop: NextHop, src_ip: str, dst_ip: str, sport: int, dscp: int) -> bytes:
    """One probe frame: Ethernet to the next hop, IPv4 (DF), UDP `sport` -> 4791, 8 zero bytes
    (UDP checksum 0: none, as IPv4 allows).

    >>> hop = NextHop("nic0", "02:00:00:00:00:01", "02:00:00:00:00:02")
    >>> f = frame(hop, "10.2.0.3", "10.2.1.3", 0xC000, 26)
    >>> header = struct.unpack("!10H", f[14:34])
    >>> len(f), f[15] >> 2, int.from_bytes(f[34:36], "big"), fold(sum(header))
    (50, 26, 49152, 0)
    """
    udp = _UDP.pack(sport, ROCE_UDP_PORT, _UDP.size + len(PAYLOAD), 0) + PAYLOAD
    src, dst = IPv4Address(src_ip).packed, IPv4Address(dst_ip).packed
    fields = [0x45, dscp << 2, _IPV4.size + len(udp), 0, _DF, _TTL, _UDP_PROTO, 0, src, dst]
    words = struct.unpack("!10H", _IPV4.pack(*fields))
    fields[7] = fold(sum(words))
    eth = bytes.fromhex(hop.dst_mac.replace(":", "") + hop.src_mac.replace(":", ""))
    return eth + ETH_P_IP.to_bytes(2, "big") + _IPV4.pack(*fields) + udp


def _address(where: Servers, server: str) -> str:
    return str(where.hosts[server]["address"]).split("/")[0]


def job(where: Servers, phase: Phase, pair: ProbePair, resolve: Resolver = next_hop) -> SendJob:
    """The sender job of one pair: its tuples round-robin at `pps` each, out of its NIC (the
    host file's interface whose `nic`, else `name`, is the pair's)."""
    ns = where.netns[pair.src]
    nics = {i.get("nic", i["name"]): i for i in where.hosts[pair.src]["interfaces"]}
    iface, gateway = nics[pair.nic]["name"], nics[pair.nic]["gateway"]
    hop = resolve(ns, gateway)
    if hop.iface != iface:
        raise LabError(f"{pair.src}: the gateway of {pair.nic} is reached over {hop.iface}")
    src_ip, dst_ip = _address(where, pair.src), _address(where, pair.dst)
    dscp = phase.dscp[pair.src]
    frames = tuple(
        FixedFrame(frame(hop, src_ip, dst_ip, sport, dscp), pair.flow_id)
        for sport in range(pair.sport, pair.sport + pair.flows)
    )
    rate = float(phase.pps or 0) * pair.flows
    return SendJob(ns, iface, frames, ConstantRate(rate), duration_s=phase.duration, lab=where.lab)


def jobs(where: Servers, phase: Phase) -> list[SendJob]:
    """One sender job per pair of the probe (one netlink socket per namespace for them all)."""
    with NextHops() as hops:
        return [job(where, phase, pair, hops) for pair in phase.probe]
