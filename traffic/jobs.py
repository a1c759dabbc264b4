"""Turn flows between named servers into sender jobs of RoCEv2 frames.

QP numbers follow a NIC-like scheme: a server's QP toward the peer with index ``j``
(its place in the endpoint list) on channel ``qp`` is ``0x100 + j * qps + qp``; the UDP
source port then follows from the QP pair as Linux derives it. Flow ids hash the
(source, destination, qp) names, so they stay distinct across concurrent jobs.

>>> from traffic.collectives import Flow
>>> eps = [Endpoint("s0", "ns0", "10.0.0.1"), Endpoint("s1", "ns1", "10.0.1.1")]
>>> fake = lambda netns, ip: NextHop("eth0", "02:00:00:00:00:01", "02:00:00:00:00:fe")
>>> factory = FlowFactory(eps, TrafficClass(payload_len=1000, qps_per_peer=2), resolve=fake)
>>> [(j.netns, j.iface, len(j.flows), j.count)
...  for j in factory.jobs([Flow("s0", "s1", 5000, 0), Flow("s0", "s1", 5000, 1)])]
[('ns0', 'eth0', 2, 5)]
"""

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from traffic.collectives import Flow
from traffic.endpoints import Endpoint, NextHop, Resolver, next_hop
from traffic.frames import RoceFlow
from traffic.layout import FRAME_OVERHEAD
from traffic.pacing import Pacing, Unpaced
from traffic.roce import ECT0, ROCE_DSCP, RoceFlowSpec, roce_flow
from traffic.sender import SendJob

QPN_BASE = 0x100


def flow_id(src: str, dst: str, qp: int) -> int:
    """32-bit flow id of the ``qp``-th QP from ``src`` to ``dst``."""
    return zlib.crc32(f"{src}>{dst}/{qp}".encode())


@dataclass(frozen=True)
class TrafficClass:
    """How a workload's frames are marked and cut: DSCP, ECN, payload size, QPs per peer."""

    dscp: int = ROCE_DSCP
    ecn: int = ECT0
    payload_len: int = 1024
    qps_per_peer: int = 1


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

    @property
    def frame_len(self) -> int:
        """Bytes of one data frame."""
        return FRAME_OVERHEAD + self.tc.payload_len

    def frames_for(self, nbytes: int) -> int:
        """Frames needed to carry ``nbytes`` of payload."""
        return math.ceil(nbytes / self.tc.payload_len)

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
        spec = RoceFlowSpec(
            hop.src_mac,
            hop.dst_mac,
            self.endpoints[src].ip,
            self.endpoints[dst].ip,
            src_qpn=QPN_BASE + self.index[dst] * qps + qp,
            dst_qpn=QPN_BASE + self.index[src] * qps + qp,
            flow_id=flow_id(src, dst, qp),
            dscp=self.tc.dscp,
            ecn=self.tc.ecn,
            payload_len=self.tc.payload_len,
        )
        return roce_flow(spec)

    def pair(self, src: str, dst: str) -> tuple[str, tuple[RoceFlow, ...]]:
        """Interface and all QPs' frame factories from ``src`` to ``dst``."""
        flows = tuple(self.flow(src, dst, qp) for qp in range(self.tc.qps_per_peer))
        return self.hop(src, dst).iface, flows

    def jobs(self, flows: Iterable[Flow], pacing: Pacing | None = None) -> list[SendJob]:
        """Jobs carrying ``flows`` (e.g. one collective step): one per source interface
        and frame count, each paced by ``pacing``."""
        groups: dict[tuple[str, str, int], list[RoceFlow]] = {}
        for f in flows:
            key = (f.src, self.hop(f.src, f.dst).iface, self.frames_for(f.bytes))
            groups.setdefault(key, []).append(self.flow(f.src, f.dst, f.qp))
        return [
            SendJob(self.endpoints[src].netns, iface, tuple(rf), pacing or Unpaced(), count=n)
            for (src, iface, n), rf in groups.items()
        ]
