"""Lossless headroom in the buffer cells the simulator counts (issue 32): a frame holds whole
cells of its switch's ASIC, so bytes in flight take more buffer than their size, the more so
the smaller the frames. The headroom sweep (labs/sim/headroom.py: the PG paused and released
at every phase of the frames, jumbo frames back so the pausing side is mid-frame) on a 400G
port, the generated design's headroom against the frames a lab's scenarios send."""

from __future__ import annotations

import dataclasses

import pytest

from labs.sim import headroom as sweep
from labs.sim.headroom import Frames
from twin.design.asic import BYTES, Cells, sku_asic
from twin.design.graph import platform
from twin.design.headroom import ROCE_FRAME, in_cells, required, xoff

PLATFORM = sku_asic(platform()["hwsku"]).cells
"""The cells of the SKU the generator writes (a Force10-S6000: Trident2, 208 bytes)."""
TOMAHAWK3 = sku_asic("DellEMC-Z9332f-O32").cells
JUMBO = 9000
SMALLEST = 256
"""The smallest payload a scenario may send on the simulator (`sim.packet_bytes`)."""


@pytest.mark.parametrize("cable_m", [5, 40, 300])
def test_the_generated_headroom_holds_in_cells_for_the_frames_the_scenarios_send(
    cable_m: int,
) -> None:
    generated = xoff(400000, cable_m, 9100, PLATFORM)
    payload = ROCE_FRAME - sweep.HEADERS
    for cells in (PLATFORM, TOMAHAWK3):
        frames = Frames(payload, JUMBO, cells, generated)
        assert sweep.drops(400e9, cable_m, cable_m, frames=frames) == 0, cells


@pytest.mark.parametrize("cable_m", [5, 40, 300])
def test_a_headroom_that_holds_in_bytes_drops_in_cells_with_small_frames(cable_m: int) -> None:
    in_bytes = xoff(400000, cable_m, 9100)  # the formula's bytes, rounded up to 1 KiB
    small = Frames(SMALLEST, JUMBO, PLATFORM, in_bytes)
    assert sweep.drops(400e9, cable_m, cable_m, frames=dataclasses.replace(small, cells=BYTES)) == 0
    assert sweep.drops(400e9, cable_m, cable_m, frames=small) > 0


@pytest.mark.parametrize("cable_m", [5, 40, 300])
@pytest.mark.parametrize("cells", [PLATFORM, TOMAHAWK3], ids=["208", "254"])
def test_what_the_validator_asks_for_small_frames_holds(cable_m: int, cells: Cells) -> None:
    frame = SMALLEST + sweep.HEADERS
    need = in_cells(required(400000, cable_m, 9100), cells, 9100, frame)
    assert sweep.drops(400e9, cable_m, cable_m, frames=Frames(SMALLEST, JUMBO, cells, need)) == 0
