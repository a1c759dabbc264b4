"""The headroom sweep: does a lossless PG whose headroom was sized for one cable length
drop, in the simulator, from the length the formula says (docs/simulator.md, Pause timing)?

A sender sends at line rate to a receiver that pauses the switch for half of every
`PERIOD` (a PFC storm), so the switch's queue cannot drain and the sender's port is paused
again every period, each time at another phase of the frames; the receiver sends back to the
sender at line rate (lossy), so the switch is mid-frame whenever it decides a pause (the
formula's MTU_R). That port's PG has the headroom `headroom_bytes` gives for `sized_m`; its
cable is `cable_m`. `Frames` sets the frames' payloads and the switch's buffer cells (bytes,
1024-byte frames both ways unless given): a headroom that holds in bytes may not hold in
cells, the less so the smaller the data frames.
"""

from __future__ import annotations

from dataclasses import dataclass

from labs.sim.model import Experiment, Flow, Host, Link, PfcStorm, PgParams, QosProfile, Switch
from twin.design.asic import BYTES, Cells
from twin.design.headroom import headroom_bytes

PAYLOAD = 1024
"""Payload bytes per frame: small frames make the formula's whole-frame terms small."""
HEADERS = 62
PERIOD = 20e-6


@dataclass(frozen=True)
class Frames:
    """The frames of a run and the buffer that holds them: the data's and the reverse
    traffic's payloads, the switch's cells, and the PG's headroom (None: the formula's bytes
    for the data frames at `sized_m`)."""

    data: int = PAYLOAD
    back: int = PAYLOAD
    cells: Cells = BYTES
    headroom: int | None = None


def experiment(
    speed: float,
    sized_m: float,
    cable_m: float,
    response: int | None = None,
    frames: Frames = Frames(),
) -> Experiment:
    """The sweep's run at one cable length; `response`: the ports' pause response in quanta
    (None: the standard's allowance, 0: at once)."""
    duration = 1e-3
    sized = headroom_bytes(speed, sized_m, frames.data + HEADERS)
    headroom = sized if frames.headroom is None else frames.headroom
    pg = PgParams(headroom=headroom, static_threshold=20_000)
    qos = QosProfile(pgs={0: PgParams(), 3: pg}, pfc_response_quanta=response)
    links = [Link("sw:p0", "s:p0", speed, length_m=cable_m), Link("sw:p1", "r:p0", speed)]
    flows = [
        Flow("data", "s", "r", cc="none", dscp=26, packet_bytes=frames.data),
        Flow("back", "r", "s", cc="none", dscp=0, packet_bytes=frames.back),
    ]
    half = round(PERIOD / 2 * speed / 512)
    storm = PfcStorm("r:p0", 0.0, duration, quanta=half, interval=PERIOD)
    cells = frames.cells
    return Experiment(
        [Switch("sw", 16_000_000, qos, cell_bytes=cells.size, cell_descriptor=cells.descriptor)],
        [Host("s", qos=qos), Host("r", qos=qos)],
        links,
        flows,
        faults=[storm],
        duration=duration,
        packet_bytes=PAYLOAD,
        header_bytes=HEADERS,
        name=f"headroom_{speed / 1e9:g}g_{cable_m:g}m",
    )


def drops(
    speed: float,
    sized_m: float,
    cable_m: float,
    response: int | None = None,
    frames: Frames = Frames(),
) -> int:
    """Lossless frames dropped at the cable of `cable_m` metres."""
    from labs.sim.engine import simulate

    result = simulate(experiment(speed, sized_m, cable_m, response, frames))
    return sum(p.priorities[3].drops_lossless for p in result.ports if 3 in p.priorities)


def first_drop(
    speed: float, sized_m: float, response: int | None = None, limit: float = 5.0
) -> float:
    """The shortest cable (metres, to within 1 % of sized_m) at which the PG drops, searched
    up to `limit` x sized_m (which is returned if it holds there)."""
    lo, hi = 0.0, limit * sized_m
    if drops(speed, sized_m, hi, response) == 0:
        return hi
    while hi - lo > 0.01 * sized_m:
        mid = (lo + hi) / 2
        if drops(speed, sized_m, mid, response):
            hi = mid
        else:
            lo = mid
    return hi
