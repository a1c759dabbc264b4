"""Receive accounting: loss, reordering, latency, marks, CNPs, bad frames."""

import json

from traffic.flowstats import Tally
from traffic.frames import RoceFlow
from traffic.roce import CE, ECT0, RoceFlowSpec, cnp_frame, roce_flow


def flow(flow_id: int = 1, **kw: int) -> RoceFlow:
    return roce_flow(
        RoceFlowSpec(
            "02:00:00:00:00:01",
            "02:00:00:00:00:02",
            "10.1.0.1",
            "10.2.0.1",
            src_qpn=0x101,
            dst_qpn=0x202,
            flow_id=flow_id,
            payload_len=64,
            **kw,
        )
    )


def test_gaps_count_as_loss_and_late_packets_as_reordered() -> None:
    f, tally = flow(), Tally()
    for seq in [0, 1, 2, 5, 4, 7, 9, 8]:
        tally.add(f.frame(seq, ts_ns=0), rx_ns=10)
    s = tally.result().flows[1]
    assert (s.packets, s.min_seq, s.max_seq) == (8, 0, 9)
    assert s.lost == 2  # 3 and 6
    assert s.reordered == 2  # 4 after 5, 8 after 9
    assert s.bytes == 8 * 122 + 16  # the first (seq 0) is a WRITE First, with a RETH


def test_latency_from_payload_timestamp() -> None:
    f, tally = flow(), Tally()
    for seq, (sent, arrived) in enumerate([(100, 150), (200, 400), (300, 330)]):
        tally.add(f.frame(seq, ts_ns=sent), rx_ns=arrived)
    s = tally.result().flows[1]
    assert (s.latency_min_ns, s.latency_max_ns, s.latency_mean_ns) == (30, 200, 280 / 3)


def test_marks_as_received_per_flow() -> None:
    tally = Tally()
    for seq in range(3):
        tally.add(flow(1, dscp=26, ecn=ECT0).frame(seq, 0), rx_ns=1)
    tally.add(flow(1, dscp=26, ecn=CE).frame(3, 0), rx_ns=1)
    tally.add(flow(2, dscp=8, ecn=0).frame(0, 0), rx_ns=1)
    flows = tally.result().flows
    assert flows[1].dscp == {26: 4}
    assert flows[1].ecn == {ECT0: 3, CE: 1}
    assert (flows[2].dscp, flows[2].ecn) == ({8: 1}, {0: 1})


def test_cnps_bad_icrc_and_foreign_frames_are_kept_apart() -> None:
    tally = Tally()
    cnp = cnp_frame(
        "02:00:00:00:00:02",
        "02:00:00:00:00:01",
        "10.2.0.1",
        "10.1.0.1",
        dst_qpn=0x101,
        src_qpn=0x202,
    )
    tally.add(cnp, rx_ns=0)
    tally.add(cnp, rx_ns=0)
    corrupt = bytearray(flow().frame(0, 0))
    corrupt[60] ^= 0xFF
    tally.add(corrupt, rx_ns=0)
    tally.add(b"\xff" * 12 + b"\x08\x06" + bytes(46), rx_ns=0)  # ARP
    result = tally.result()
    assert result.flows == {}
    assert (result.cnp.packets, result.cnp.dscp, result.cnp.ecn) == (2, {48: 2}, {ECT0: 2})
    assert (result.bad_icrc, result.other_packets, result.packets) == (1, 1, 0)


def test_result_serializes_to_json() -> None:
    tally = Tally()
    tally.add(flow(9).frame(0, 5), rx_ns=7)
    data = json.loads(tally.result().to_json())
    assert data["flows"]["9"]["packets"] == 1
    assert data["flows"]["9"]["latency_min_ns"] == 2
    assert data["cnp"]["packets"] == 0
