"""Switch timing and buffers as hardware has them (docs/simulator.md, Cells and pause timing):
a pause takes effect after the response time IEEE 802.3 Annex 31B allows, so a headroom sized
for a cable drops from about that cable's length; buffers count whole cells."""

from __future__ import annotations

import dataclasses

import pytest

from labs.sim import (
    Experiment,
    Flow,
    Host,
    Link,
    PfcStorm,
    PgParams,
    QosProfile,
    Switch,
    TxOff,
    simulate,
)
from labs.sim import headroom as sweep

SIZED_M = 100.0


@pytest.mark.parametrize("speed", [100e9, 400e9])
def test_headroom_drops_from_the_length_it_was_sized_for(speed: float) -> None:
    assert sweep.drops(speed, SIZED_M, 0.9 * SIZED_M) == 0
    assert sweep.drops(speed, SIZED_M, 1.1 * SIZED_M) > 0


@pytest.mark.parametrize("speed", [100e9, 400e9])
@pytest.mark.parametrize("cable_m", [1.0, 2.0, 3.0, 4.0, 5.0])
def test_headroom_sized_for_a_short_cable_holds_it(speed: float, cable_m: float) -> None:
    """The formula's headroom for 5 m drops nothing on up to 5 m, where its cable term is
    below one frame at 100G (it dropped from 3 m while the frame that crossed the XOFF
    point was charged to the headroom)."""
    assert sweep.drops(speed, 5.0, cable_m) == 0


def _crossing(frames: int) -> tuple[int, int]:
    """Lossless drops and pause frames at the sender's port when `frames` 1024-byte payloads
    go into a PG with no headroom and an XOFF point of 2.5 frames, its egress held."""
    pg = PgParams(static_threshold=(1024 + 62) * 5 // 2, headroom=0)
    qos = QosProfile(pgs={0: PgParams(), 3: pg})
    exp = Experiment(
        [Switch("sw", 1_000_000, qos)],
        [Host("s", qos=qos), Host("r", qos=qos)],
        [Link("sw:p0", "s:p0", 100e9), Link("sw:p1", "r:p0", 100e9)],
        [Flow("f", "s", "r", size=frames * 1024, cc="none", packet_bytes=1024)],
        faults=[TxOff("sw:p1", 0.0, 1e-3)],
        duration=2e-3,
    )
    counters = simulate(exp).port("sw:p0").priorities.get(3)
    return (0, 0) if counters is None else (counters.drops_lossless, counters.pause_sent)


def test_the_frame_that_crosses_the_xoff_point_is_not_headroom() -> None:
    """XOFF is decided once the third frame is in: that frame goes to shared (past the
    threshold by less than a frame), and only what arrives after the decision needs the
    headroom the formula sizes (physics.md 1.3), here none."""
    assert _crossing(2) == (0, 0)
    drops, pauses = _crossing(3)
    assert drops == 0 and pauses > 0
    assert _crossing(4)[0] == 1  # the fourth arrives after XOFF, with no headroom


@pytest.mark.parametrize("cell", [208, 254])
def test_auto_headroom_in_cells_holds_frames_smaller_than_the_mtu(cell: int) -> None:
    """The sweep's 1086-byte frames at 400G on 100 m, into a PG whose headroom the simulator
    sizes while 4158-byte frames go the other way: 1086 B hold 6 cells of 208 B (+15 %), 4158
    B 20 (+0.05 %); scaled by the largest frame's cells the PG dropped 350-400 frames."""
    exp = sweep.experiment(400e9, 100.0, 100.0)
    qos = QosProfile(pgs={0: PgParams(), 3: PgParams(static_threshold=20_000)})
    switches = [dataclasses.replace(s, qos=qos, cell_bytes=cell) for s in exp.switches]
    flows = [dataclasses.replace(f, packet_bytes=4096) if f.dscp == 0 else f for f in exp.flows]
    result = simulate(dataclasses.replace(exp, switches=switches, flows=flows))
    assert result.port("sw:p0").priorities[3].pause_sent > 0
    assert result.total("drops_lossless") == 0


def test_an_instant_pause_hides_a_shortfall() -> None:
    """Without the response time (the engine before it) the same cable drops nothing."""
    assert sweep.drops(100e9, SIZED_M, 1.1 * SIZED_M) > 0
    assert sweep.drops(100e9, SIZED_M, 1.1 * SIZED_M, response=0) == 0


def _fill(packets: int, cell: int) -> int:
    """Pause frames the switch sends when `packets` 64-byte payloads (126-byte frames) fill a
    PG whose XOFF point is 100 cells of 208 bytes, its egress paused throughout."""
    pg = PgParams(static_threshold=100 * 208, headroom=50_000)
    qos = QosProfile(pgs={0: PgParams(), 3: pg})
    exp = Experiment(
        [Switch("sw", 1_000_000, qos, cell_bytes=cell)],
        [Host("s", qos=qos), Host("r", qos=qos)],
        [Link("sw:p0", "s:p0", 100e9), Link("sw:p1", "r:p0", 100e9)],
        [Flow("f", "s", "r", size=packets * 64, start=10e-6, cc="none", packet_bytes=64)],
        faults=[PfcStorm("r:p0", 0.0, 1e-3, interval=100e-6)],
        duration=1e-3,
        stop_when_done=False,
    )
    counters = simulate(exp).port("sw:p0").priorities.get(3)
    return 0 if counters is None else counters.pause_sent


def test_xoff_counts_cells_not_bytes() -> None:
    """Each 126-byte frame holds one 208-byte cell: XOFF at the 100th, as sonic-mgmt's
    pkts_num_trig_pfc = threshold // (cells per packet) expects; counted in bytes, 100 frames
    (12.6 KB) stay below 20.8 KB."""
    assert _fill(99, 208) == 0
    assert _fill(100, 208) > 0
    assert _fill(100, 1) == 0
