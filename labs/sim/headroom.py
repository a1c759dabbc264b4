"""Headroom of a lossless PG: the formula of docs/physics.md 1.3.

    H = MTU_R + 84 + 2*D_intf*R/8 + 2*L*5ns*R/8 + Q_resp*64 + MTU_S

>>> headroom_bytes(100e9, 100.0, 9216, interface_delay_bits=122_880)  # 87.0 KB in the table
86992
"""

from __future__ import annotations

PFC_FRAME_BYTES = 84
FRAME_OVERHEAD = 20
"""Preamble, SFD and inter-frame gap that the formula adds to each MTU."""

RESPONSE_QUANTA: tuple[tuple[float, int], ...] = (
    (10e9, 67),
    (25e9, 80),
    (40e9, 118),
    (50e9, 147),
    (100e9, 394),
    (200e9, 453),
    (400e9, 905),
)
"""IEEE 802.3 Annex 31B.3.7 pause response time by speed; faster links reuse 905 (SONiC)."""


def response_quanta(speed: float) -> int:
    """The pause response time in quanta of the smallest listed speed at least `speed`."""
    for limit, quanta in RESPONSE_QUANTA:
        if speed <= limit:
            return quanta
    return RESPONSE_QUANTA[-1][1]


def headroom_bytes(
    speed: float, cable_m: float, mtu: int, interface_delay_bits: float = 0.0
) -> int:
    """Bytes a lossless PG must absorb after it decides to send XOFF (rounded up)."""
    frame = mtu + FRAME_OVERHEAD
    cable = 2 * cable_m * 5e-9 * speed / 8
    interface = 2 * interface_delay_bits / 8
    total = frame + PFC_FRAME_BYTES + interface + cable + response_quanta(speed) * 64 + frame
    return int(-(-total // 1))
