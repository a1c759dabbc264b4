"""RoCEv2 frames: ICRC, UDP source port, template patching, CNPs (messages: test_traffic_rc)."""

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.contrib.roce import BTH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from traffic.checksums import icrc, icrc_ok, ipv4_checksum, ipv4_checksum_ok
from traffic.frames import FixedFrame, RoceFlow
from traffic.layout import (
    CNP_OPCODE,
    PAYLOAD_HEADER,
    PAYLOAD_MAGIC,
    PAYLOAD_OFF,
    RC_WRITE_ONLY,
    RETH,
)
from traffic.roce import (
    RoceFlowSpec,
    cnp_frame,
    frame_bytes,
    roce_flow,
    udp_sport,
)

# A CNP captured from a ConnectX-4 Lx (scapy's test/contrib/roce.uts): the hardware's ICRC.
CX4_CNP = bytes.fromhex(
    "e41d2dab2bc27cfe90643b32080045c2003c718c400040119161"
    "0a0011010a00120100 0012b700280000 8100ffff40000118 00000000"
    "00000000000000000000000000000000 82fd002a".replace(" ", "")
)

# rdma_get_udp_sport() compiled from the kernel source: (lqpn, rqpn, flow label, sport).
KERNEL_SPORTS = [
    (0x11, 0x22, 0, 49730),
    (0x118, 0x2A7, 0, 59043),
    (0xABCDE, 0x12345, 0, 49849),
    (0xFFFFFF, 0xFFFFFF, 0, 65313),
    (0x100, 0x105, 0, 50436),
    (0x1, 0x2, 0x12345, 58177),
    (0x7, 0x9, 0xFC000, 49215),
]


def spec(**kw: int) -> RoceFlowSpec:
    fields: dict[str, int] = {"src_qpn": 0x123, "dst_qpn": 0x456, "flow_id": 42} | kw
    return RoceFlowSpec("02:00:00:00:00:01", "02:00:00:00:00:02", "10.1.0.1", "10.2.0.1", **fields)


def scapy_icrc(frame: bytes) -> int:
    """The ICRC scapy computes when asked to rebuild the frame, as stored on the wire."""
    pkt = Ether(frame)
    del pkt[BTH].icrc
    return int.from_bytes(bytes(pkt)[-4:], "little")


def test_icrc_of_hardware_cnp() -> None:
    assert len(CX4_CNP) == 74
    assert icrc(CX4_CNP) == int.from_bytes(bytes.fromhex("82fd002a"), "little")
    assert icrc_ok(CX4_CNP)
    assert not icrc_ok(CX4_CNP[:-1] + b"\x00")


def test_icrc_of_scapy_reference_uc_frame() -> None:
    pkt = (
        Ether(dst="24:8a:07:a8:fa:22", src="24:8a:07:a8:fa:22")
        / IP(tos=0x1, id=1144, flags="DF", ttl=64, src="192.168.0.7", dst="192.168.0.7", len=64)
        / UDP(sport=49152, dport=4791, len=44)
        / BTH(opcode="UC_SEND_ONLY", migreq=1, padcount=2, pkey=0xFFFF, dqpn=211, psn=13571856)
        / Raw(b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00")
    )
    frame = pkt.build()  # scapy appends its ICRC: 78 f3 53 f3 on the wire
    assert icrc(frame) == int.from_bytes(bytes.fromhex("78f353f3"), "little")


def test_icrc_ignores_the_fields_routers_rewrite() -> None:
    frame = bytearray(CX4_CNP)
    frame[15] = 0x03  # DSCP 0 / CE
    frame[22] -= 3  # three hops
    frame[24:26] = b"\x12\x34"
    assert icrc_ok(frame)
    frame[30] ^= 1  # destination address is covered
    assert not icrc_ok(frame)


FRAMES = {
    "dscp": st.integers(0, 63),
    "ecn": st.integers(0, 3),
    "payload": st.integers(7, 300).map(lambda n: 4 * n),
    "psn0": st.integers(0, 0xFFFFFF),
    "seq": st.integers(0, 2**40),
    "packets": st.integers(1, 64),
}
"""A frame's fields, as the tests against scapy draw them."""


@given(**FRAMES)
def test_icrc_and_checksum_match_scapy(
    dscp: int, ecn: int, payload: int, psn0: int, seq: int, packets: int
) -> None:
    s = spec(dscp=dscp, ecn=ecn, payload_len=payload, psn0=psn0, message_packets=packets)
    frame = bytes(s.packet(seq, 99))
    assert icrc(frame) == scapy_icrc(frame)
    assert ipv4_checksum(frame) == Ether(frame)[IP].chksum
    assert ipv4_checksum_ok(frame)


@given(
    **FRAMES,
    qpns=st.tuples(st.integers(1, 0xFFFFFF), st.integers(1, 0xFFFFFF)),
    flow_rkey=st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    ttl=st.integers(1, 255),
)
def test_frames_packed_by_hand_are_scapys(
    dscp: int,
    ecn: int,
    payload: int,
    psn0: int,
    seq: int,
    packets: int,
    qpns: tuple[int, int],
    flow_rkey: tuple[int, int],
    ttl: int,
) -> None:
    s = RoceFlowSpec(
        "0a:1b:2c:3d:4e:5f", "02:00:00:00:00:fe", "10.1.2.3", "192.168.200.7",
        src_qpn=qpns[0], dst_qpn=qpns[1], flow_id=flow_rkey[0], rkey=flow_rkey[1],
        dscp=dscp, ecn=ecn, payload_len=payload, psn0=psn0, message_packets=packets, ttl=ttl,
    )  # fmt: skip
    assert frame_bytes(s, seq, 1_700_000_000_123_456_789) == bytes(
        s.packet(seq, 1_700_000_000_123_456_789)
    )


@pytest.mark.parametrize(("lqpn", "rqpn", "label", "sport"), KERNEL_SPORTS)
def test_udp_sport_matches_kernel(lqpn: int, rqpn: int, label: int, sport: int) -> None:
    assert udp_sport(lqpn, rqpn, label) == sport


@given(st.integers(1, 0xFFFFFF), st.integers(1, 0xFFFFFF))
def test_udp_sport_range_and_symmetry(lqpn: int, rqpn: int) -> None:
    sport = udp_sport(lqpn, rqpn)
    assert 0xC000 <= sport <= 0xFFFF
    assert sport == udp_sport(rqpn, lqpn)


def test_spec_puts_sport_dscp_ecn_and_qp_in_the_frame() -> None:
    pkt = Ether(bytes(spec(dscp=3, ecn=1).packet()))
    assert pkt[UDP].sport == udp_sport(0x123, 0x456)
    assert pkt[UDP].dport == 4791
    assert pkt[UDP].chksum == 0
    assert (pkt[IP].tos >> 2, pkt[IP].tos & 3) == (3, 1)
    assert pkt[BTH].dqpn == 0x456


@pytest.mark.parametrize("packets", [1, 2, 3, 16])
@pytest.mark.parametrize("seq", [0, 1, 255, 65535, 65536, 0xFFFFFF, 0x1000005, 2**63])
def test_patched_frame_equals_scapy_build(seq: int, packets: int) -> None:
    s = spec(psn0=0xFFFFF0, payload_len=256, message_packets=packets)
    frame = roce_flow(s).frame(seq, ts_ns=1_700_000_000_123_456_789)
    assert frame == bytes(s.packet(seq, 1_700_000_000_123_456_789))


def test_patched_frame_redissects_valid() -> None:
    frame = roce_flow(spec(psn0=5, message_packets=1)).frame(seq=70_000, ts_ns=123)
    assert scapy_icrc(frame) == int.from_bytes(frame[-4:], "little")
    pkt = Ether(frame)
    assert pkt[BTH].psn == 70_005
    assert pkt[BTH].opcode == RC_WRITE_ONLY
    assert pkt[IP].id == 70_000 & 0xFFFF
    chk = pkt[IP].chksum
    del pkt[IP].chksum
    assert Ether(bytes(pkt))[IP].chksum == chk
    header = PAYLOAD_HEADER.unpack_from(frame, PAYLOAD_OFF + RETH.size)
    assert header == (PAYLOAD_MAGIC, 42, 70_000, 123, 0x123)


def test_frames_are_consecutive_and_distinct() -> None:
    frames = roce_flow(spec(message_packets=1)).frames(100, start_seq=10)
    seqs = [PAYLOAD_HEADER.unpack_from(f, PAYLOAD_OFF + RETH.size)[2] for f in frames]
    assert seqs == list(range(10, 110))
    assert all(icrc_ok(f) and ipv4_checksum_ok(f) for f in frames)


def test_flow_survives_pickling() -> None:
    flow = roce_flow(spec())
    copy = pickle.loads(pickle.dumps(flow))
    assert copy.flow_id == 42
    assert copy.frame(7, 8) == flow.frame(7, 8)


def test_template_must_be_valid() -> None:
    s = spec(message_packets=3)
    first, middle, last = (bytes(s.packet(seq)) for seq in (0, 1, 2))
    with pytest.raises(ValueError, match="ICRC"):
        RoceFlow((first, middle, last[:-1] + bytes([last[-1] ^ 1])), 3)
    foreign = s.packet(1)
    foreign[Raw].load = b"NOPE" + foreign[Raw].load[4:]
    with pytest.raises(ValueError, match="TWIN"):
        RoceFlow((first, bytes(foreign), last), 3)
    with pytest.raises(ValueError, match="First"):
        RoceFlow((middle, middle, last), 3)
    cnp = cnp_frame(
        "02:00:00:00:00:02", "02:00:00:00:00:01", "10.2.0.1", "10.1.0.1", dst_qpn=1, src_qpn=2
    )
    with pytest.raises(ValueError, match="RDMA WRITE"):
        RoceFlow((first, middle, cnp), 3)


@pytest.mark.parametrize(
    "bad",
    [
        {"payload_len": 30},
        {"payload_len": 8},
        {"message_packets": 0},
        {"rkey": 2**32},
        {"va": 2**64 - 1},
        {"dscp": 64},
        {"src_qpn": 0},
    ],
)
def test_spec_rejects_bad_values(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        spec(**bad)


def test_cnp_frame() -> None:
    frame = cnp_frame(
        "02:00:00:00:00:02",
        "02:00:00:00:00:01",
        "10.2.0.1",
        "10.1.0.1",
        dst_qpn=0x123,
        src_qpn=0x456,
        dscp=46,
    )
    pkt = Ether(frame)
    assert len(frame) == len(CX4_CNP)
    assert pkt[BTH].opcode == CNP_OPCODE
    assert pkt[BTH].becn == 1
    assert pkt[BTH].dqpn == 0x123
    assert CNPPadding in pkt
    assert pkt[IP].tos >> 2 == 46
    assert pkt[UDP].sport == udp_sport(0x123, 0x456)
    assert icrc(frame) == scapy_icrc(frame)
    assert FixedFrame(frame).frame(5, 6) == frame
