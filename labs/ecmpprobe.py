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

from labs.backend import Phase, ProbePair
from labs.flows import Servers
from traffic.endpoints import NextHop, NextHops, Resolver, next_hop
from traffic.frames import FixedFrame
from traffic.headers import eth_ipv4_udp
from traffic.layout import ROCE_UDP_PORT
from traffic.pacing import ConstantRate
from traffic.sender import SendJob
from twin.errors import LabError

PAYLOAD = bytes(8)
_TTL = 64


def frame(hop: NextHop, src_ip: str, dst_ip: str, sport: int, dscp: int) -> bytes:
    """One probe frame: Ethernet to the next hop, IPv4 (DF), UDP `sport` -> 4791, 8 zero bytes
    (UDP checksum 0: none, as IPv4 allows).

    >>> hop = NextHop("nic0", "02:00:00:00:00:01", "02:00:00:00:00:02")
    >>> f = frame(hop, "10.2.0.3", "10.2.1.3", 0xC000, 26)
    >>> len(f), f[15] >> 2, int.from_bytes(f[34:36], "big"), f[-8:] == PAYLOAD
    (50, 26, 49152, True)
    """
    macs, addresses = (hop.dst_mac, hop.src_mac), (src_ip, dst_ip)
    ports, tos = (sport, ROCE_UDP_PORT), dscp << 2
    header = eth_ipv4_udp(macs, addresses, ports, tos=tos, ident=0, ttl=_TTL, udp_payload=8)
    return header + PAYLOAD


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
        for pair in phase.probe:
            gateways = [i["gateway"] for i in where.hosts[pair.src]["interfaces"]]
            hops.warm(where.netns[pair.src], gateways)
        return [job(where, phase, pair, hops) for pair in phase.probe]
