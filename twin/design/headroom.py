"""PFC headroom: the bytes a lossless priority group must absorb after it sends XOFF.

The formula is the generic one of docs/physics.md section 1.3::

    H = MTU_R + PFC + 2*D_intf*R/8 + 2*L*5ns*R/8 + Q_resp*64 + MTU_S

with `MTU_R` and `MTU_S` one maximum frame on the wire each (the Ethernet frame, header to
FCS, + 20 bytes of preamble and inter-frame gap), `PFC` the 84 byte times of the PFC frame,
`D_intf` the MAC/PHY latency (0 unless given), `L` the cable in metres at 5 ns/m and `Q_resp`
the pause-response quanta of IEEE 802.3 Annex 31B.3.7 for the speed. The generator, the
`headroom` validator and the simulator (a lossless PG without a configured headroom) all use
`headroom_bytes`, so a generated profile always passes, an edited cable length or speed is
caught, and the simulator sizes what the design would. All three count it in the buffer
cells of the switch's ASIC (`in_cells`): a frame holds whole cells, so the bytes in flight
take more buffer than their size, the more so the smaller the frames (docs/simulator.md,
Cells and pause timing).
"""

from __future__ import annotations

import math

from twin.design.asic import BYTES, Cells

PFC_FRAME = 84
ROCE_PAYLOAD = 4096
"""The payload of the simulator's RoCE frames unless a scenario sets `sim.packet_bytes`."""
ROCE_HEADERS = 62
"""Headers a RoCE data frame adds to its payload, as the simulator sends it (Ethernet and FCS
18, IPv4 20, UDP 8, BTH 12, ICRC 4: labs/sim/model.py `Experiment.header_bytes`)."""
ROCE_FRAME = ROCE_PAYLOAD + ROCE_HEADERS
"""The RoCE data frame (header to FCS) the lossless class sends unless told otherwise: the
simulator's 4096-byte payload (a scenario's `sim.packet_bytes`) and 62 bytes of headers
(labs/sim/model.py `Experiment.header_bytes`), what every example scenario sends."""
ETHERNET = 18
"""Ethernet header and FCS around an L3 MTU."""
GAP = 20
"""Preamble, SFD and inter-frame gap in front of each frame."""
WIRE_OVERHEAD = ETHERNET + GAP

RESPONSE_QUANTA: tuple[tuple[float, int], ...] = (
    (10e9, 67),
    (25e9, 80),
    (40e9, 118),
    (50e9, 147),
    (100e9, 394),
    (200e9, 453),
    (400e9, 905),
)
"""IEEE 802.3 Annex 31B.3.7 pause response time by speed (b/s); faster links reuse 905, as
SONiC's buffer tables do for 800 Gb/s."""


def frame_bytes(mtu: int) -> int:
    """One maximum frame on the wire for an L3 MTU."""
    return mtu + WIRE_OVERHEAD


def response_quanta(speed: float) -> int:
    """The pause response time in quanta of the smallest listed speed at least `speed` (b/s).

    >>> response_quanta(100e9), response_quanta(800e9)
    (394, 905)
    """
    for limit, quanta in RESPONSE_QUANTA:
        if speed <= limit:
            return quanta
    return RESPONSE_QUANTA[-1][1]


def headroom_bytes(
    speed: float, cable_m: float, frame: int, interface_delay_bits: float = 0.0
) -> int:
    """Bytes a lossless PG must absorb after it decides XOFF (rounded up), for a port of
    `speed` b/s, a cable of `cable_m` metres and Ethernet frames (header to FCS) of at most
    `frame` bytes.

    >>> headroom_bytes(100e9, 100.0, 9216, interface_delay_bits=122_880)  # 87.0 KB in the table
    86992
    """
    wire = frame + GAP
    cable = 2 * cable_m * 5e-9 * speed / 8
    interface = 2 * interface_delay_bits / 8
    quanta = response_quanta(speed) * 64
    return math.ceil(wire + PFC_FRAME + interface + cable + quanta + wire)


def required(speed_mbps: int, cable_m: int, mtu: int, intf_delay_bits: int = 0) -> int:
    """Headroom in bytes needed by a lossless PG on a port of `speed_mbps` with an L3 `mtu`.

    >>> required(400000, 40, 9100), required(400000, 300, 9100)
    (96280, 226280)
    """
    return headroom_bytes(speed_mbps * 1e6, cable_m, mtu + ETHERNET, intf_delay_bits)


def in_cells(need: int, cells: Cells, mtu: int, frame: int = ROCE_FRAME) -> int:
    """The buffer bytes that `need` bytes in flight (`required` for an L3 `mtu`) take in
    `cells` when the lossless class sends `frame`-byte frames (at most the MTU's): scaled by
    the frame, of those and the MTU's, that holds the most cells per byte (as the simulator
    sizes a PG, labs/sim/build.py `profile_arrays`).

    >>> in_cells(96280, Cells(208), 9100), in_cells(96280, Cells(208), 9100, 318)
    (96640, 125952)
    """
    largest = mtu + ETHERNET
    return cells.scaled(need, (min(frame, largest), largest))


def xoff(speed_mbps: int, cable_m: int, mtu: int, cells: Cells = BYTES) -> int:
    """The XOFF headroom the generator configures: the need in the platform's `cells`
    (`in_cells`, for `ROCE_FRAME`), rounded up to 1 KiB.

    >>> xoff(400000, 5, 9100), xoff(400000, 5, 9100, Cells(208))
    (78848, 79872)
    """
    return -(-in_cells(required(speed_mbps, cable_m, mtu), cells, mtu) // 1024) * 1024


def profile_name(speed_mbps: int, cable_m: int) -> str:
    """SONiC's name for the lossless PG profile of a speed and cable length."""
    return f"pg_lossless_{speed_mbps}_{cable_m}m_profile"
