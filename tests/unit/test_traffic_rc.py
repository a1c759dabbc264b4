"""RC exchanges: RDMA WRITE First/Middle/Last/Only messages, PSNs, RETH, and the ACKs a
responder sends back (dissected with scapy)."""

import socket

import pytest
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from traffic.checksums import icrc_ok, ipv4_checksum_ok
from traffic.flowstats import Tally
from traffic.frames import BUFFER_SLOTS, RoceFlow
from traffic.layout import (
    RC_ACKNOWLEDGE,
    RC_WRITE_FIRST,
    RC_WRITE_LAST,
    RC_WRITE_MIDDLE,
    RC_WRITE_ONLY,
)
from traffic.responder import AETH_ACK, Responder, ack_packet
from traffic.roce import CE, ECT0, NOT_ECT, RETH, RoceFlowSpec, roce_flow, udp_sport

REQUESTER, RESPONDER = "10.1.0.1", "10.2.0.1"
F, M, L, ONLY = RC_WRITE_FIRST, RC_WRITE_MIDDLE, RC_WRITE_LAST, RC_WRITE_ONLY


def spec(**kw: int) -> RoceFlowSpec:
    fields: dict[str, int] = {
        "src_qpn": 0x123,
        "dst_qpn": 0x456,
        "flow_id": 42,
        "payload_len": 64,
        "rkey": 0xCAFE,
    } | kw
    return RoceFlowSpec("02:00:00:00:00:01", "02:00:00:00:00:02", REQUESTER, RESPONDER, **fields)


def dissect(flow: RoceFlow, count: int, start: int = 0) -> list[Ether]:
    return [Ether(f) for f in flow.frames(count, start_seq=start, ts_ns=5)]


@pytest.mark.parametrize(
    ("packets", "opcodes"),
    [
        (1, [ONLY] * 4),
        (2, [F, L, F, L]),
        (3, [F, M, L, F, M, L, F]),
        (5, [F, M, M, M, L, F, M]),
    ],
)
def test_messages_are_first_middle_last_or_only(packets: int, opcodes: list[int]) -> None:
    pkts = dissect(roce_flow(spec(message_packets=packets)), len(opcodes))
    assert [p[BTH].opcode for p in pkts] == opcodes
    assert [p[BTH].ackreq for p in pkts] == [int(op in (L, ONLY)) for op in opcodes]
    assert [RETH in p for p in pkts] == [op in (F, ONLY) for op in opcodes]


def test_first_and_only_carry_the_reth_of_the_message() -> None:
    flow = roce_flow(spec(message_packets=4, va=0x1000))
    firsts = dissect(flow, 4 * (BUFFER_SLOTS + 1))[::4]
    assert {(p[RETH].rkey, p[RETH].dlen) for p in firsts} == {(0xCAFE, 4 * 64)}
    vas = [p[RETH].va for p in firsts]
    assert vas == [0x1000 + 256 * k for k in range(BUFFER_SLOTS)] + [0x1000]  # a ring of slots
    only = Ether(roce_flow(spec(message_packets=1)).frame(3, 0))
    assert (only[RETH].rkey, only[RETH].dlen) == (0xCAFE, 64)


def test_psns_continue_across_messages_and_wrap() -> None:
    flow = roce_flow(spec(message_packets=3, psn0=0xFFFFFD))
    pkts = dissect(flow, 7)
    assert [p[BTH].psn for p in pkts] == [0xFFFFFD, 0xFFFFFE, 0xFFFFFF, 0, 1, 2, 3]
    assert [p[BTH].opcode for p in pkts][3] == F  # the wrap is mid-stream, not a new QP
    later = dissect(flow, 2, start=0x1000003)
    assert [p[BTH].psn for p in later] == [0, 1]


@pytest.mark.parametrize("packets", [1, 2, 7])
def test_every_frame_keeps_a_valid_icrc_and_checksum(packets: int) -> None:
    frames = roce_flow(spec(message_packets=packets, psn0=0xFFFFF0)).frames(40, start_seq=3)
    assert all(icrc_ok(f) and ipv4_checksum_ok(f) for f in frames)
    for f in frames[:8]:  # scapy recomputes the ICRC over BTH, RETH and payload
        pkt = Ether(f)
        del pkt[BTH].icrc
        assert bytes(pkt) == f


def test_ack_packet_is_what_scapy_builds() -> None:
    ack = ack_packet(
        socket.inet_aton(RESPONDER),
        socket.inet_aton(REQUESTER),
        26 << 2 | ECT0,
        udp_sport(0x456, 0x123),
        dqpn=0x123,
        psn=0xFFFFFF,
        msn=9,
        ip_id=77,
    )
    reference = (
        IP(src=RESPONDER, dst=REQUESTER, tos=26 << 2 | ECT0, id=77, flags="DF", ttl=64)
        / UDP(sport=udp_sport(0x456, 0x123), dport=4791, chksum=0)
        / BTH(opcode=RC_ACKNOWLEDGE, dqpn=0x123, psn=0xFFFFFF)
        / AETH(syndrome=AETH_ACK, msn=9)
    )
    assert ack == bytes(reference)
    pkt = IP(ack)
    assert (pkt[BTH].opcode, pkt[BTH].ackreq, pkt[AETH].msn) == (RC_ACKNOWLEDGE, 0, 9)
    assert icrc_ok(bytes(14) + ack)


class Wire:
    """Stands in for the raw IPv4 socket: keeps what was sent, refuses some destinations."""

    def __init__(self, unreachable: str = "") -> None:
        self.sent: list[tuple[bytes, str]] = []
        self.unreachable = unreachable

    def sendto(self, data: bytes, address: tuple[str, int]) -> int:
        if address[0] == self.unreachable:
            raise OSError(101, "Network is unreachable")
        self.sent.append((data, address[0]))
        return len(data)

    def close(self) -> None:
        pass


def respond(frames: list[bytes], peers: list[str], wire: Wire) -> tuple[Tally, Responder]:
    tally, responder = Tally(), Responder(peers, sock=wire)  # type: ignore[arg-type]
    for f in frames:
        if tally.add(f, rx_ns=10):
            responder.answer(f)
    return tally, responder


def test_one_ack_per_message_to_the_requesters_qp() -> None:
    flow = roce_flow(spec(message_packets=4, psn0=0xFFFFFE, ecn=CE))
    wire = Wire()
    _, responder = respond(flow.frames(10, ts_ns=0), [REQUESTER], wire)
    assert (responder.sent, responder.withheld) == (2, 0)  # packets 3 and 7 end messages
    acks = [IP(data) for data, _ in wire.sent]
    assert {to for _, to in wire.sent} == {REQUESTER}
    assert [(a.src, a.dst) for a in acks] == [(RESPONDER, REQUESTER)] * 2
    assert [a[BTH].psn for a in acks] == [1, 5]  # the PSNs of the Last packets, wrapped
    assert [a[AETH].msn for a in acks] == [1, 2]
    assert {(a[BTH].opcode, a[BTH].dqpn, a[AETH].syndrome) for a in acks} == {
        (RC_ACKNOWLEDGE, 0x123, AETH_ACK)
    }
    assert {(a.tos >> 2, a.tos & 3) for a in acks} == {(26, ECT0)}  # CE data, ECT(0) ACK
    assert {a[UDP].sport for a in acks} == {udp_sport(0x123, 0x456)}
    assert all(icrc_ok(bytes(14) + data) for data, _ in wire.sent)


def test_no_ack_leaves_the_lab_and_failures_are_counted() -> None:
    flow = roce_flow(spec(message_packets=1, ecn=NOT_ECT))
    wire = Wire()
    _, outside = respond(flow.frames(3), ["10.9.9.9"], wire)
    assert (outside.sent, outside.withheld, wire.sent) == (0, 3, [])
    _, refused = respond(flow.frames(3), [REQUESTER], Wire(unreachable=REQUESTER))
    assert (refused.sent, refused.withheld) == (0, 3)
    respond(flow.frames(1), [REQUESTER], wire)
    assert IP(wire.sent[0][0]).tos & 3 == NOT_ECT


def test_acks_are_counted_apart_from_data() -> None:
    flow = roce_flow(spec(message_packets=4))
    wire = Wire()
    respond(flow.frames(8), [REQUESTER], wire)
    requester = Tally()
    for data, _ in wire.sent:
        assert not requester.add(bytes(12) + b"\x08\x00" + data, rx_ns=1)
    result = requester.result()
    assert (result.flows, result.packets, result.other_packets) == ({}, 0, 0)
    assert (result.acks.packets, result.acks.dscp, result.acks.ecn) == (2, {26: 2}, {ECT0: 2})


@pytest.mark.parametrize("packets", [1, 3, 16])
def test_data_figures_do_not_depend_on_the_message_size(packets: int) -> None:
    """Loss, gaps, reordering and marks from the same arrivals, whatever the messages."""
    seqs = [0, 1, 2, 5, 4, 7, 9, 8, 30, 31]
    tally = Tally()
    flow = roce_flow(spec(message_packets=packets))
    for seq in seqs:
        tally.add(flow.frame(seq, ts_ns=0), rx_ns=seq)
    s = tally.result().flows[42]
    assert (s.packets, s.min_seq, s.max_seq, s.lost, s.reordered) == (10, 0, 31, 22, 2)
    assert s.gaps == [(5, 2), (7, 1), (9, 1), (30, 20)]
    assert (s.dscp, s.ecn) == ({26: 10}, {ECT0: 10})
