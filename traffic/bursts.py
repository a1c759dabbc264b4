"""Background traffic patterns: bulk backup transfers, periodic micro-bursts, N-to-1 incast.

Every pattern is RoCEv2-framed so the receiver can count it per flow. Run the returned
jobs with :func:`traffic.sender.run_senders` (jobs given together start together).

>>> from traffic.endpoints import NextHop
>>> fake = lambda netns, ip: NextHop("eth0", "02:00:00:00:00:01", "02:00:00:00:00:fe")
>>> eps = [Endpoint(f"s{i}", f"ns{i}", f"10.0.{i}.1") for i in range(4)]
>>> [len(j.flows) for j in incast(eps[:3], eps[3], 10_240, resolve=fake)]
[1, 1, 1]
>>> job = backup_bulk(eps[0], eps[1], 1_024_000, rate_bps=1e9, resolve=fake)
>>> job.count, round(job.pacing.offset_s(1) * 1e6, 2), job.flows[0].template[15] >> 2
(1000, 8.66, 8)
"""

import math
from collections.abc import Sequence

from traffic.collectives import Flow
from traffic.endpoints import Endpoint, Resolver, next_hop
from traffic.jobs import ROCE, FlowFactory, TrafficClass
from traffic.pacing import ConstantRate, PeriodicBursts
from traffic.roce import BULK_DSCP, NOT_ECT
from traffic.sender import SendJob

BULK = TrafficClass(dscp=BULK_DSCP, ecn=NOT_ECT)


def backup_bulk(
    src: Endpoint,
    dst: Endpoint,
    total_bytes: int,
    rate_bps: float,
    *,
    tc: TrafficClass = BULK,
    resolve: Resolver = next_hop,
) -> SendJob:
    """A backup transfer of ``total_bytes`` at ``rate_bps``, spread over ``tc``'s QPs.

    ``tc`` defaults to a bulk class; ``ROCE`` (the lossless RoCE DSCP)
    reproduces a backup job wrongly marked lossless, competing with the GPUs' traffic.
    """
    factory = FlowFactory([src, dst], tc, resolve=resolve)
    iface, flows = factory.pair(src.name, dst.name)
    count = factory.frames_for(math.ceil(total_bytes / len(flows)))
    pacing = ConstantRate.from_bps(rate_bps, factory.frame_len)
    return SendJob(src.netns, iface, flows, pacing, count=count)


def micro_bursts(
    src: Endpoint,
    dst: Endpoint,
    *,
    period_s: float,
    burst_s: float,
    burst_bps: float,
    duration_s: float,
    tc: TrafficClass = ROCE,
    resolve: Resolver = next_hop,
) -> SendJob:
    """Every ``period_s``, ``burst_s`` seconds at ``burst_bps``, for ``duration_s``."""
    factory = FlowFactory([src, dst], tc, resolve=resolve)
    iface, flows = factory.pair(src.name, dst.name)
    pps = ConstantRate.from_bps(burst_bps, factory.frame_len).pps
    pacing = PeriodicBursts(period_s, burst_s, pps)
    return SendJob(src.netns, iface, flows, pacing, duration_s=duration_s)


def incast(
    sources: Sequence[Endpoint],
    dst: Endpoint,
    bytes_per_source: int,
    *,
    rate_bps: float | None = None,
    tc: TrafficClass = ROCE,
    resolve: Resolver = next_hop,
) -> list[SendJob]:
    """N-to-1 incast: every source sends ``bytes_per_source`` to ``dst`` at once, each
    at ``rate_bps`` (unpaced if None); run the jobs together."""
    factory = FlowFactory([*sources, dst], tc, resolve=resolve)
    qps = tc.qps_per_peer
    flows = [
        Flow(s.name, dst.name, math.ceil(bytes_per_source / qps), qp)
        for s in sources
        for qp in range(qps)
    ]
    pacing = None if rate_bps is None else ConstantRate.from_bps(rate_bps, factory.frame_len)
    return factory.jobs(flows, pacing)
