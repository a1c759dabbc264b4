"""Real traffic between network namespaces: sender, receiver, next-hop resolution.

Namespaces are named ``twtest-<pid>-<x>`` and always removed, pass or fail.
"""

import os
import subprocess
from collections.abc import Iterator

import pytest
from pyroute2 import IPRoute, netns

from traffic.endpoints import Endpoint, NextHops, next_hop
from traffic.frames import FixedFrame
from traffic.jobs import ROCE, FlowFactory, TrafficClass
from traffic.nsproc import ChildError
from traffic.pacing import ConstantRate
from traffic.receiver import Receiver
from traffic.roce import CNP_DSCP, ECT0, ROCE_DSCP, cnp_frame
from traffic.sender import run_sender

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creating network namespaces needs root"),
]

SANE_LATENCY_NS = 1_000_000_000


def _ns(suffix: str) -> str:
    return f"twtest-{os.getpid()}-{suffix}"


def _address(ns: str, ifname: str, address: str, gateway: str | None = None) -> None:
    with IPRoute(netns=ns, flags=0) as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add", index=index, address=address, prefixlen=24)
        ipr.link("set", index=index, state="up")
        if gateway:
            ipr.route("add", dst="0.0.0.0/0", gateway=gateway)


def _veth(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    with IPRoute(netns=ns_a, flags=0) as ipr:
        ipr.link("add", ifname=if_a, kind="veth", peer={"ifname": if_b, "net_ns_fd": ns_b})


@pytest.fixture
def namespaces() -> Iterator[list[str]]:
    """Empty namespaces a, b and r for one test; removed afterwards whatever happens."""
    names = [_ns(x) for x in "abr"]
    try:
        for name in names:
            netns.create(name)
        yield names
    finally:
        for name in names:
            if name in netns.listnetns():
                netns.remove(name)


@pytest.fixture
def pair(namespaces: list[str]) -> list[Endpoint]:
    """a (10.99.0.1) and b (10.99.0.2) on one veth."""
    a, b, _ = namespaces
    _veth(a, "veth-a", b, "veth-b")
    _address(a, "veth-a", "10.99.0.1")
    _address(b, "veth-b", "10.99.0.2")
    return [Endpoint("sa", a, "10.99.0.1"), Endpoint("sb", b, "10.99.0.2")]


@pytest.fixture
def routed(namespaces: list[str]) -> list[Endpoint]:
    """a (10.98.1.2) -- r -- b (10.98.2.2), r forwarding between two subnets."""
    a, b, r = namespaces
    _veth(a, "veth-a", r, "veth-ra")
    _veth(b, "veth-b", r, "veth-rb")
    _address(r, "veth-ra", "10.98.1.1")
    _address(r, "veth-rb", "10.98.2.1")
    _address(a, "veth-a", "10.98.1.2", gateway="10.98.1.1")
    _address(b, "veth-b", "10.98.2.2", gateway="10.98.2.1")
    subprocess.run(["ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
    return [Endpoint("sa", a, "10.98.1.2"), Endpoint("sb", b, "10.98.2.2")]


def test_2000_frames_arrive_complete_in_order_with_marks(pair: list[Endpoint]) -> None:
    factory = FlowFactory(pair, TrafficClass(qps_per_peer=4))
    iface, flows = factory.pair("sa", "sb")
    assert iface == "veth-a"
    with Receiver(pair[1].netns, "veth-b") as rx:
        sent = run_sender(pair[0].netns, iface, flows, ConstantRate(20_000), count=500, processes=2)
        got = rx.stop()
    assert sent.packets == 2000 and sent.retries == 0
    assert sent.flow_packets == {f.flow_id: 500 for f in flows}
    assert (got.packets, got.bad_icrc) == (2000, 0)
    assert (got.acks_sent, got.acks_withheld) == (0, 0)  # told no address to answer
    assert sorted(got.flows) == sorted(f.flow_id for f in flows)
    for stats in got.flows.values():
        assert (stats.packets, stats.lost, stats.reordered) == (500, 0, 0)
        assert (stats.min_seq, stats.max_seq) == (0, 499)
        assert stats.dscp == {ROCE_DSCP: 500}
        assert stats.ecn == {ECT0: 500}
        assert 0 < stats.latency_min_ns <= stats.latency_max_ns < SANE_LATENCY_NS


def test_cnps_are_counted_with_their_dscp(pair: list[Endpoint]) -> None:
    hop = next_hop(pair[0].netns, pair[1].ip)
    cnp = cnp_frame(hop.src_mac, hop.dst_mac, pair[0].ip, pair[1].ip, dst_qpn=0x101, src_qpn=0x202)
    with Receiver(pair[1].netns) as rx:  # every interface
        run_sender(pair[0].netns, hop.iface, [FixedFrame(cnp)], count=50)
        got = rx.stop()
    assert (got.cnp.packets, got.cnp.dscp, got.packets) == (50, {CNP_DSCP: 50}, 0)


def test_next_hops_keep_one_socket_per_namespace_and_agree_with_one_off_lookups(
    routed: list[Endpoint],
) -> None:
    """Many lookups over one socket per namespace, opened from this thread inside it: the
    same answers as a lookup of its own, and this thread is back in its own namespace."""
    a, b = routed
    home = os.readlink("/proc/thread-self/ns/net")
    with NextHops() as hops:
        first = hops(a.netns, b.ip)
        again = hops(a.netns, b.ip)
        router = hops(a.netns, "10.98.1.1")
        back = hops(b.netns, a.ip)
        assert sorted(hops._sockets) == sorted({a.netns, b.netns})
    assert first == again == router == next_hop(a.netns, b.ip)
    assert first.iface == "veth-a" and back.iface == "veth-b"
    assert back == next_hop(b.netns, a.ip) and back.src_mac != first.src_mac
    assert os.readlink("/proc/thread-self/ns/net") == home


def test_routed_frames_keep_a_valid_icrc(routed: list[Endpoint]) -> None:
    hop = next_hop(routed[0].netns, routed[1].ip)
    with IPRoute(netns=_ns("r"), flags=0) as ipr:
        router_mac = ipr.get_links(ifname="veth-ra")[0].get("IFLA_ADDRESS")
    assert hop.dst_mac == router_mac
    iface, flows = FlowFactory(routed, ROCE).pair(routed[0].name, routed[1].name)
    with Receiver(routed[1].netns, "veth-b") as rx:
        sent = run_sender(routed[0].netns, iface, flows, ConstantRate(10000), count=300)
        got = rx.stop()
    [stats] = got.flows.values()
    assert sent.packets == stats.packets == 300
    assert (got.bad_icrc, stats.lost) == (0, 0)
    assert stats.dscp == {ROCE_DSCP: 300}


def test_unknown_namespace_is_an_error_not_a_new_namespace() -> None:
    missing = _ns("missing")
    with pytest.raises(ChildError, match="FileNotFoundError"):
        Receiver(missing)
    assert missing not in netns.listnetns()
