"""RoCEv2 flows between named servers, numbered like a NIC numbers its queue pairs.

QP numbers follow a NIC-like scheme: a server's QP toward the peer with index ``j``
(its place in the endpoint list) on channel ``qp`` is ``0x100 + j * qps + qp``; the UDP
source port then follows from the QP pair as Linux derives it. Flow ids hash the
(source, destination, qp) names, so they stay distinct across concurrent senders. A QP's
first PSN and its remote key come from its flow id too (the low 24 and all 32 bits): as
arbitrary as the random ones a NIC picks, and the same from run to run.

>>> eps = [Endpoint("s0", "ns0", "10.0.0.1"), Endpoint("s1", "ns1", "10.0.1.1")]
>>> fake = lambda netns, ip: NextHop("eth0", "02:00:00:00:00:01", "02:00:00:00:00:fe")
>>> factory = FlowFactory(eps, TrafficClass(payload_len=1000, qps_per_peer=2), resolve=fake)
>>> iface, flows = factory.pair("s0", "s1")
>>> iface, len(flows), len({f.flow_id for f in flows})
('eth0', 2, 2)
"""

from collections.abc import Sequence
from dataclasses import dataclass

from traffic.collectives import flow_id
from traffic.endpoints import Endpoint, NextHop, Resolver, next_hop
from traffic.frames import PSN_MASK, RoceFlow
from traffic.roce import ECT0, MESSAGE_PACKETS, ROCE_DSCP, RoceFlowSpec, roce_flow

QPN_BASE = 0x100


@dataclass(frozen=True)
class TrafficClass:
    """How a workload's frames are marked and cut: DSCP, ECN, payload size, QPs per peer,
    packets per RDMA WRITE message."""

    dscp: int = ROCE_DSCP
    ecn: int = ECT0
    payload_len: int = 1024
    qps_per_peer: int = 1
    message_packets: int = MESSAGE_PACKETS


ROCE = TrafficClass()


class FlowFactory:
    """Builds RoceFlows between ``endpoints`` in traffic class ``tc``, resolving each
    (source, destination) next hop once."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        tc: TrafficClass = ROCE,
        *,
        resolve: Resolver = next_hop,
    ) -> None:
        self.endpoints = {e.name: e for e in endpoints}
        self.index = {e.name: i for i, e in enumerate(endpoints)}
        self.tc = tc
        self._resolve = resolve
        self._hops: dict[tuple[str, str], NextHop] = {}

    def hop(self, src: str, dst: str) -> NextHop:
        """Next hop from server ``src`` toward server ``dst``."""
        key = (src, dst)
        if key not in self._hops:
            self._hops[key] = self._resolve(self.endpoints[src].netns, self.endpoints[dst].ip)
        return self._hops[key]

    def flow(self, src: str, dst: str, qp: int = 0) -> RoceFlow:
        """The ``qp``-th QP's frame factory from ``src`` to ``dst``."""
        qps = self.tc.qps_per_peer
        if not 0 <= qp < qps:
            raise ValueError(f"qp {qp} outside 0..{qps - 1}")
        hop = self.hop(src, dst)
        fid = flow_id(src, dst, qp)
        spec = RoceFlowSpec(
            hop.src_mac,
            hop.dst_mac,
            self.endpoints[src].ip,
            self.endpoints[dst].ip,
            src_qpn=QPN_BASE + self.index[dst] * qps + qp,
            dst_qpn=QPN_BASE + self.index[src] * qps + qp,
            flow_id=fid,
            dscp=self.tc.dscp,
            ecn=self.tc.ecn,
            payload_len=self.tc.payload_len,
            message_packets=self.tc.message_packets,
            psn0=fid & PSN_MASK,
            rkey=fid,
        )
        return roce_flow(spec)

    def pair(self, src: str, dst: str) -> tuple[str, tuple[RoceFlow, ...]]:
        """Interface and all QPs' frame factories from ``src`` to ``dst``."""
        flows = tuple(self.flow(src, dst, qp) for qp in range(self.tc.qps_per_peer))
        return self.hop(src, dst).iface, flows
