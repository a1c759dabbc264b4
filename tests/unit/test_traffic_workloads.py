"""Pacing schedules, flow/job building and burst patterns (no namespaces needed)."""

import pytest

from traffic.endpoints import Endpoint, NextHop
from traffic.frames import FrameSource, RoceFlow
from traffic.jobs import QPN_BASE, FlowFactory, TrafficClass
from traffic.layout import BTH_OFF, IP_TOS, UDP_OFF
from traffic.pacing import ConstantRate, PeriodicBursts, Unpaced
from traffic.roce import udp_sport

EPS = [Endpoint(f"s{i}", f"ns{i}", f"10.0.{i}.1") for i in range(4)]


def fake_resolve(netns: str, dst_ip: str) -> NextHop:
    return NextHop(f"eth-{netns}", "02:00:00:00:00:01", "02:00:00:00:00:fe")


def template(source: FrameSource) -> bytes:
    assert isinstance(source, RoceFlow)
    return source.template


def dscp_of(source: FrameSource) -> int:
    return template(source)[IP_TOS] >> 2


def test_constant_rate_and_from_bps() -> None:
    rate = ConstantRate.from_bps(1e9, frame_bytes=1250)
    assert rate.pps == 100_000
    assert [rate.offset_s(i) for i in (0, 1, 100_000)] == [0, 1e-5, 1.0]
    assert rate.scaled(0.5).pps == 50_000
    with pytest.raises(ValueError):
        ConstantRate(0)


def test_periodic_bursts_stay_inside_their_windows() -> None:
    p = PeriodicBursts(period_s=0.01, burst_s=0.001, pps=100_000)
    assert p.per_burst == 100
    offsets = [p.offset_s(i) for i in range(1000)]
    assert offsets == sorted(offsets)
    assert all(round(t * 1e6) % 10_000 < 1_000 for t in offsets)  # in the first ms of 10
    assert p.offset_s(100) == 0.01
    assert p.scaled(2).per_burst == 200
    with pytest.raises(ValueError):
        PeriodicBursts(period_s=0.001, burst_s=0.01, pps=1)


def test_unpaced_is_always_now() -> None:
    assert Unpaced().offset_s(10**6) == 0
    assert Unpaced().scaled(3) == Unpaced()


def test_flow_factory_numbers_qps_like_a_nic() -> None:
    factory = FlowFactory(EPS, TrafficClass(qps_per_peer=2), resolve=fake_resolve)
    f = factory.flow("s1", "s3", qp=1)
    sport = int.from_bytes(f.template[UDP_OFF : UDP_OFF + 2], "big")
    dqpn = int.from_bytes(f.template[BTH_OFF + 5 : BTH_OFF + 8], "big")
    assert dqpn == QPN_BASE + 1 * 2 + 1
    assert sport == udp_sport(QPN_BASE + 3 * 2 + 1, dqpn)
    with pytest.raises(ValueError):
        factory.flow("s1", "s3", qp=2)
