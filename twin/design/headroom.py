"""PFC headroom: the bytes a lossless priority group must absorb after it sends XOFF.

The formula is the generic one of physics.md section 1.3::

    H = MTU_R + PFC + 2*D_intf*R/8 + 2*L*5ns*R/8 + Q_resp*64 + MTU_S

with `MTU_R` and `MTU_S` one maximum frame on the wire each (port MTU + 18 bytes of Ethernet
header and FCS + 20 bytes of preamble and inter-frame gap), `PFC` the 84 byte times of the PFC
frame, `D_intf` the MAC/PHY latency (0 unless given), `L` the cable in metres at 5 ns/m and
`Q_resp` the pause-response quanta of IEEE 802.3 Annex 31B.3.7 for the speed. The generator
and the `headroom` validator both use it, so a generated profile always passes and an edited
cable length or speed is caught.
"""

from __future__ import annotations

import math

from twin.design.graph import platform

PFC_FRAME = 84
WIRE_OVERHEAD = 18 + 20


def frame_bytes(mtu: int) -> int:
    """One maximum frame on the wire for an L3 MTU."""
    return mtu + WIRE_OVERHEAD


def required(speed_mbps: int, cable_m: int, mtu: int, intf_delay_bits: int = 0) -> int:
    """Headroom in bytes needed by a lossless PG on a port.

    >>> required(400000, 40, 9100), required(400000, 300, 9100)
    (96280, 226280)
    """
    rate = speed_mbps * 1_000_000
    quanta: int = platform()["pause_quanta"][speed_mbps]
    cable = 2 * cable_m * 5e-9 * rate / 8
    return math.ceil(
        2 * frame_bytes(mtu) + PFC_FRAME + 2 * intf_delay_bits / 8 + cable + quanta * 64
    )


def xoff(speed_mbps: int, cable_m: int, mtu: int) -> int:
    """The XOFF headroom the generator configures: the need rounded up to 1 KiB."""
    return -(-required(speed_mbps, cable_m, mtu) // 1024) * 1024


def xon() -> int:
    """XON threshold: the ASIC's pipeline latency."""
    value: int = platform()["asic"]["pipeline_latency"]
    return value


def profile_name(speed_mbps: int, cable_m: int) -> str:
    """SONiC's name for the lossless PG profile of a speed and cable length."""
    return f"pg_lossless_{speed_mbps}_{cable_m}m_profile"
