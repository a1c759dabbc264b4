"""Pacing schedules, flow/job building and burst patterns (no namespaces needed)."""

import pytest

from traffic.bursts import BULK, backup_bulk, incast, micro_bursts
from traffic.collectives import Flow, all_to_all
from traffic.endpoints import Endpoint, NextHop
from traffic.frames import FrameSource, RoceFlow
from traffic.jobs import QPN_BASE, ROCE, FlowFactory, TrafficClass
from traffic.layout import BTH_OFF, IP_TOS, UDP_OFF
from traffic.pacing import ConstantRate, PeriodicBursts, Unpaced
from traffic.roce import BULK_DSCP, ROCE_DSCP, udp_sport

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


def test_jobs_for_a_collective_step() -> None:
    calls: list[tuple[str, str]] = []

    def resolve(netns: str, dst_ip: str) -> NextHop:
        calls.append((netns, dst_ip))
        return fake_resolve(netns, dst_ip)

    names = [e.name for e in EPS]
    factory = FlowFactory(EPS, TrafficClass(payload_len=1024, qps_per_peer=2), resolve=resolve)
    jobs = factory.jobs(all_to_all(names, 4 * 1024 * 1024, qps_per_peer=2).steps[0])
    assert sorted(j.netns for j in jobs) == ["ns0", "ns1", "ns2", "ns3"]
    assert all(len(j.flows) == 6 and j.count == 512 for j in jobs)
    assert len({f.flow_id for j in jobs for f in j.flows}) == 24
    assert len(calls) == len(set(calls)) == 12  # each (source, destination) resolved once


def test_jobs_split_flows_of_different_sizes() -> None:
    factory = FlowFactory(EPS, resolve=fake_resolve)
    jobs = factory.jobs([Flow("s0", "s1", 1024), Flow("s0", "s2", 4096)])
    assert sorted(j.count or 0 for j in jobs) == [1, 4]


def test_backup_bulk_defaults_to_bulk_class_and_can_be_mismarked() -> None:
    job = backup_bulk(EPS[0], EPS[1], 10 * 1024 * 1024, rate_bps=10e9, resolve=fake_resolve)
    assert (job.netns, job.iface, job.count) == ("ns0", "eth-ns0", 10 * 1024)
    assert dscp_of(job.flows[0]) == BULK_DSCP == BULK.dscp
    assert isinstance(job.pacing, ConstantRate)
    wrong = backup_bulk(EPS[0], EPS[1], 1024, rate_bps=1e9, tc=ROCE, resolve=fake_resolve)
    assert dscp_of(wrong.flows[0]) == ROCE_DSCP


def test_micro_bursts_job() -> None:
    job = micro_bursts(
        EPS[0],
        EPS[1],
        period_s=0.01,
        burst_s=0.001,
        burst_bps=8.656e9,
        duration_s=1.0,
        resolve=fake_resolve,
    )
    assert job.duration_s == 1.0 and job.count is None
    assert isinstance(job.pacing, PeriodicBursts)
    assert job.pacing.per_burst == 1000


def test_incast_one_job_per_source_all_to_one_destination() -> None:
    jobs = incast(
        EPS[:3],
        EPS[3],
        64 * 1024,
        rate_bps=1e9,
        tc=TrafficClass(qps_per_peer=2),
        resolve=fake_resolve,
    )
    assert sorted(j.netns for j in jobs) == ["ns0", "ns1", "ns2"]
    assert all(len(j.flows) == 2 and j.count == 32 for j in jobs)
    dst_ips = {template(f)[30:34] for j in jobs for f in j.flows}
    assert dst_ips == {bytes([10, 0, 3, 1])}
