"""The simulator's reliable transports: a lost RoCE packet costs a NAK and a go-back-N
retransmission (or the local ACK timeout when nothing follows it), a TCP-like flow halves its
window on a loss and backs off under steady loss where an open-loop source does not, DCTCP
holds a marked queue at full throughput without a drop, and all of it is the same for a seed."""

from __future__ import annotations

import dataclasses
import math

import pytest

from labs.sim import (
    Experiment,
    ExperimentError,
    Flow,
    Monitor,
    PacketLoss,
    QosProfile,
    QueueParams,
    Result,
    Transports,
    simulate,
)
from labs.sim.fabrics import dumbbell
from labs.sim.loader import experiment

PACKET = 4096
TRACE = Transports(trace=True)


def one_flow(flow: Flow, *faults: PacketLoss, **changes: object) -> Experiment:
    """One sender s0 to r across switches a and b (40 Gb/s, 1 us links)."""
    exp = dumbbell(1)
    settings: dict[str, object] = {"transports": TRACE, "duration": 0.05, **changes}
    return dataclasses.replace(exp, flows=[flow], faults=list(faults), **settings)  # type: ignore[arg-type]


def rc_flow(size: int = 4_000_000) -> Flow:
    return Flow("q", "s0", "r", size=size, transport="rc")


def trace(result: Result, kind: str) -> list[str]:
    return [e.detail or "" for e in result.events_of(kind) if e.flow]


def test_a_lost_roce_packet_is_resent_by_go_back_n() -> None:
    clean = simulate(one_flow(rc_flow()))
    # the first data frame reaching switch b after 100 us is lost on the wire
    result = simulate(one_flow(rc_flow(), PacketLoss("b:Ethernet0", start=100e-6, count=1)))
    f, c = result.flow("q"), clean.flow("q")
    assert result.port("b:Ethernet0").priorities[3].drops_link == 1
    assert f.bytes_dropped == PACKET
    assert f.bytes_delivered == f.size and f.completion is not None  # reliable
    (nak,) = trace(result, "transport_nak")  # one NAK, then the receiver drops silently
    psn = int(nak.split()[1])
    assert f.naks == 1 and f.timeouts == 0
    # the NAKed PSN is the lost one: everything before it had arrived 100 us in
    assert 100e-6 * 40e9 / 8 / (PACKET + 82) * 0.9 < psn < 100e-6 * 40e9 / 8 / (PACKET + 82)
    # go-back-N resent the lost packet and every one sent after it before the NAK came back
    assert 1 < f.retransmitted_packets < 20
    assert f.retransmitted_bytes == f.retransmitted_packets * PACKET
    assert f.bytes_sent == f.size  # the highest byte sent: retransmissions counted apart
    assert c.retransmitted_packets == 0 and c.naks == 0 and not trace(clean, "transport_nak")
    # the collective's step stretches by the round trip and the resent packets
    assert f.fct is not None and c.fct is not None
    assert c.fct < f.fct < c.fct + 20e-6
    assert result.total("drops_lossless") == 0


def test_a_lost_last_roce_packet_waits_for_the_local_ack_timeout() -> None:
    # a one-packet message lost: no later packet shows the gap, so no NAK; the requester
    # resends when the local ACK timeout (4.096 us x 2^4 = 65.5 us here) expires
    quick = Transports(rc_timeout_exponent=4, trace=True)
    exp = one_flow(rc_flow(PACKET), PacketLoss("b:Ethernet0", count=1), transports=quick)
    f = simulate(exp).flow("q")
    assert (f.timeouts, f.naks, f.retransmitted_packets) == (1, 0, 1)
    assert f.bytes_delivered == PACKET and f.fct is not None
    assert quick.rc_timeout < f.fct < quick.rc_timeout + 10e-6


def test_open_transport_loses_what_is_lost() -> None:
    flow = dataclasses.replace(rc_flow(), transport="open")
    f = simulate(one_flow(flow, PacketLoss("b:Ethernet0", start=100e-6, count=1))).flow("q")
    assert f.size is not None and f.bytes_delivered == f.size - PACKET
    assert f.retransmitted_packets == 0 and f.naks == 0


def tcp_flow(size: int | None = 20_000_000, ecn: bool = False) -> Flow:
    return Flow("t", "s0", "r", size=size, cc="none", dscp=0, transport="tcp", ecn_capable=ecn)


def test_a_tcp_flow_halves_its_window_on_a_loss() -> None:
    result = simulate(one_flow(tcp_flow(), PacketLoss("b:Ethernet0", start=200e-6, count=1)))
    f = result.flow("t")
    (cut,) = trace(result, "fast_retransmit")  # three duplicate ACKs, one halving
    before, after = (int(x) for x in cut.split()[1::2])
    assert after == pytest.approx(before / 2, abs=1)
    assert f.fast_retransmits == 1 and f.timeouts == 0
    assert f.bytes_delivered == f.size and f.retransmitted_packets >= 1
    assert f.cwnd is not None and f.cwnd >= after  # additive increase since


def long_path(flow: Flow, loss: float) -> Experiment:
    """A 40 Gb/s path of 50 us links (a round trip of about 300 us) losing `loss` of the
    data frames at switch b."""
    exp = one_flow(flow, PacketLoss("b:Ethernet0", probability=loss), duration=0.1)
    return dataclasses.replace(exp, links=[dataclasses.replace(x, delay=50e-6) for x in exp.links])


def test_tcp_backs_off_under_loss_where_an_open_source_does_not() -> None:
    tcp = simulate(long_path(tcp_flow(None), 0.01)).flow("t")
    blind = simulate(long_path(dataclasses.replace(tcp_flow(None), transport="open"), 0.01))
    line = blind.flow("t").bytes_sent * 8 / 0.1
    assert line > 35e9  # the open-loop source keeps sending at line rate into the loss
    # Mathis et al.: rate ~ MSS / RTT x 1.22 / sqrt(p), 1.3 Gb/s here; go-back-N resends
    # the window behind each loss, so it does no better than that
    mathis = PACKET * 8 / 300e-6 * 1.22 / math.sqrt(0.01)
    assert 0.1 * mathis < tcp.goodput < 1.5 * mathis < 0.1 * line
    assert tcp.fast_retransmits > 10 and tcp.retransmitted_packets > tcp.fast_retransmits
    lost = blind.flow("t").bytes_dropped / blind.flow("t").bytes_sent
    assert 0.008 < lost < 0.012  # the loss fault's 1 %


def test_dctcp_holds_a_marked_queue_without_loss() -> None:
    # two ECN-capable TCP flows into one 40 Gb/s port marked above K = 65 packets, DCTCP's
    # 10 Gb/s setting scaled (Alizadeh et al., SIGCOMM'10): full throughput, no drop, the
    # queue near K, windows cut by alpha / 2
    k = 65 * (PACKET + 62)
    mark = QueueParams(ecn=True, kmin=k, kmax=k + 1, pmax=1.0, max_bytes=4 * k)
    exp = dumbbell(2, qos=QosProfile(queues={0: mark, 6: QueueParams(strict=True)}))
    flows = [
        dataclasses.replace(tcp_flow(None, ecn=True), name=f"t{i}", src=f"s{i}") for i in (0, 1)
    ]
    exp = dataclasses.replace(
        exp, flows=flows, transports=TRACE, duration=0.02, monitor=Monitor(interval=10e-6)
    )
    result = simulate(exp)
    assert result.total("drops_lossy") == 0 and result.total("ecn_marks") > 0
    goodput = sum(f.goodput for f in result.flows)
    assert goodput > 0.9 * 40e9 * PACKET / (PACKET + 82)
    assert all(f.fast_retransmits == 0 and f.timeouts == 0 for f in result.flows)
    assert trace(result, "ecn_cut")
    # alpha near sqrt(2 / W) (W ~ 35 packets per flow here): marks on a fraction of a window
    assert all(0.05 < f.alpha < 0.5 for f in result.flows)
    assert result.mean_queue("a:Ethernet8", 0, 5e-3, 20e-3) < 1.5 * k


def test_transports_are_deterministic_for_a_seed() -> None:
    exp = long_path(tcp_flow(None), 0.02)
    a, b, c = simulate(exp, 3), simulate(exp, 3), simulate(exp, 4)
    assert a.to_json() == b.to_json()
    assert a.flow("t").retransmitted_packets != c.flow("t").retransmitted_packets


def test_experiment_files_choose_the_transport_and_the_loss() -> None:
    exp = experiment(
        {
            "hosts": ["h1", "h2"],
            "switches": [{"name": "sw"}],
            "links": [["h1:eth0", "sw:Ethernet0", "100G"], ["h2:eth0", "sw:Ethernet4", "100G"]],
            "flows": [{"name": "f", "src": "h1", "dst": "h2", "size": "1MB", "transport": "rc"}],
            "faults": [{"loss": "sw:Ethernet0", "count": 2, "start": "10us"}],
            "transports": {"rc_ack_every": 4, "rc_timeout_exponent": 10},
        }
    )
    assert exp.flows[0].transport == "rc" and exp.transports.rc_ack_every == 4
    assert exp.faults == [PacketLoss("sw:Ethernet0", start=10e-6, count=2)]
    f = simulate(exp).flow("f")
    assert f.bytes_delivered == 1_000_000 and f.naks >= 1
    with pytest.raises(ExperimentError, match="transport"):
        experiment({"flows": [{"name": "f", "src": "a", "dst": "b", "transport": "udp"}]})
    bad = dataclasses.replace(exp, flows=[dataclasses.replace(exp.flows[0], transport="tcp")])
    with pytest.raises(ExperimentError, match="own congestion control"):
        simulate(bad)
