"""Byte layout of the frames this package builds and parses.

Frames are untagged Ethernet / IPv4 (no options) / UDP / BTH / [RETH] / payload / ICRC, so
every field sits at a fixed offset. Data frames are RC RDMA WRITEs: the First and Only
packet of a message carry a RETH (remote virtual address, R_Key, DMA length) between the
BTH and the payload; Middle and Last packets do not. ACKs are BTH / AETH / ICRC.

Data payloads start with a header that receivers parse: magic ``b"TWIN"``, flow id (u32),
sequence number (u64), send timestamp in ns (u64, CLOCK_REALTIME) and the requester's QP
number (u32, what a responder's QP context would hold, so the receiver can address its
ACKs), all big-endian.

>>> PAYLOAD_HEADER.size, FRAME_OVERHEAD, ACK_LEN
(28, 58, 62)
>>> [payload_at(op) - PAYLOAD_OFF for op in (RC_WRITE_FIRST, RC_WRITE_MIDDLE, RC_WRITE_ONLY)]
[16, 0, 16]
"""

import struct

ROCE_UDP_PORT = 4791
UDP_SPORT_MIN = 0xC000  # RoCEv2 source ports: 0xC000-0xFFFF (rdma_get_udp_sport)
ETH_P_IP = 0x0800

ETH_LEN = 14
IP_OFF = ETH_LEN
IP_LEN = 20
IP_TOS = IP_OFF + 1
IP_ID = IP_OFF + 4
IP_TTL = IP_OFF + 8
IP_PROTO = IP_OFF + 9
IP_CSUM = IP_OFF + 10
IP_SRC = IP_OFF + 12
IP_DST = IP_OFF + 16
UDP_OFF = IP_OFF + IP_LEN
UDP_LEN = 8
UDP_SPORT = UDP_OFF
UDP_DPORT = UDP_OFF + 2
UDP_CSUM = UDP_OFF + 6
BTH_OFF = UDP_OFF + UDP_LEN
BTH_LEN = 12
BTH_OPCODE = BTH_OFF
BTH_FECN_BECN = BTH_OFF + 4
BTH_DQPN = BTH_OFF + 5
BTH_ACKREQ = BTH_OFF + 8
BTH_PSN = BTH_OFF + 9
PAYLOAD_OFF = BTH_OFF + BTH_LEN
RETH_OFF = PAYLOAD_OFF
RETH = struct.Struct("!QII")  # virtual address, R_Key, DMA length
AETH_LEN = 4
ICRC_LEN = 4
FRAME_OVERHEAD = PAYLOAD_OFF + ICRC_LEN
ACK_LEN = FRAME_OVERHEAD + AETH_LEN

ACKREQ_BIT = 0x80
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3  # ECN codepoints (the low 2 bits of the IPv4 TOS)

# RC opcodes (InfiniBand transport RC = 0x00) of the frames this package sends.
RC_WRITE_FIRST = 0x06
RC_WRITE_MIDDLE = 0x07
RC_WRITE_LAST = 0x08
RC_WRITE_ONLY = 0x0A
RC_ACKNOWLEDGE = 0x11
CNP_OPCODE = 0x81

PAYLOAD_MAGIC = b"TWIN"
PAYLOAD_HEADER = struct.Struct("!4sIQQI")
PAYLOAD_SEQ = 8  # offset of sequence number and timestamp inside the payload header

# Where a data frame's payload starts, by BTH opcode (0: not a data opcode of ours).
_PAYLOAD_AT = [0] * 256
_PAYLOAD_AT[RC_WRITE_FIRST] = _PAYLOAD_AT[RC_WRITE_ONLY] = PAYLOAD_OFF + RETH.size
_PAYLOAD_AT[RC_WRITE_MIDDLE] = _PAYLOAD_AT[RC_WRITE_LAST] = PAYLOAD_OFF
PAYLOAD_AT = tuple(_PAYLOAD_AT)


def payload_at(opcode: int) -> int:
    """Offset of the payload of a data frame with BTH ``opcode`` (0 for other opcodes)."""
    return PAYLOAD_AT[opcode]
