"""Byte layout of the frames this package builds and parses.

Frames are untagged Ethernet / IPv4 (no options) / UDP / BTH / payload / ICRC, so every
field sits at a fixed offset. Data payloads start with a header that receivers parse:
magic ``b"TWIN"``, flow id (u32), sequence number (u64), send timestamp in ns (u64,
CLOCK_REALTIME), all big-endian.

>>> PAYLOAD_HEADER.size, FRAME_OVERHEAD
(24, 58)
"""

import struct

ROCE_UDP_PORT = 4791
ETH_P_IP = 0x0800

ETH_LEN = 14
IP_OFF = ETH_LEN
IP_LEN = 20
IP_TOS = IP_OFF + 1
IP_ID = IP_OFF + 4
IP_TTL = IP_OFF + 8
IP_PROTO = IP_OFF + 9
IP_CSUM = IP_OFF + 10
UDP_OFF = IP_OFF + IP_LEN
UDP_LEN = 8
UDP_DPORT = UDP_OFF + 2
UDP_CSUM = UDP_OFF + 6
BTH_OFF = UDP_OFF + UDP_LEN
BTH_LEN = 12
BTH_OPCODE = BTH_OFF
BTH_FECN_BECN = BTH_OFF + 4
BTH_PSN = BTH_OFF + 9
PAYLOAD_OFF = BTH_OFF + BTH_LEN
ICRC_LEN = 4
FRAME_OVERHEAD = PAYLOAD_OFF + ICRC_LEN

PAYLOAD_MAGIC = b"TWIN"
PAYLOAD_HEADER = struct.Struct("!4sIQQ")
PAYLOAD_SEQ = PAYLOAD_OFF + 8
