"""Lossless headroom in the buffer cells the simulator counts (issue 32): a frame holds whole
cells of its switch's ASIC, so bytes in flight take more buffer than their size, the more so
the smaller the frames. The headroom sweep (labs/sim/headroom.py: the PG paused and released
at every phase of the frames, jumbo frames back so the pausing side is mid-frame) on a 400G
port, the generated design's headroom against the frames a lab's scenarios send."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from labs.sim import headroom as sweep
from labs.sim.headroom import Frames
from tests.simlab import small_lab
from twin.cli import main as cli
from twin.design.asic import BYTES, Cells, sku_asic
from twin.design.graph import platform
from twin.design.headroom import ROCE_FRAME, in_cells, required, xoff
from twin.lab.directory import Lab

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


SMALL_FRAMES = """
name: small-frames
traffic:
  - {name: incast, at: 0, duration: 1, kind: incast, src: ["servers[0]", "servers[1]"],
     dst: "servers[-1]", qps: 1}
sim: {time_scale: 0.0002, packet_bytes: 256}
"""


def _headroom(lab: Path, scenario: Path, out: Path) -> dict[str, Any]:
    """`twin run LAB SCENARIO --backend sim`'s `headroom` row (exit 0 or 1)."""
    assert cli.main(["run", str(lab), str(scenario), "--backend", "sim", "--out", str(out)]) < 2
    report = json.loads((out / "report.json").read_text())
    row: dict[str, Any] = next(r for r in report["results"] if r["validator"] == "headroom")
    return row


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("small") / "lab")


def test_a_scenario_sending_smaller_frames_has_the_headroom_judged_for_them(
    small: Path, tmp_path: Path
) -> None:
    scenario = tmp_path / "small-frames.yaml"
    scenario.write_text(SMALL_FRAMES)
    row = _headroom(small, scenario, tmp_path / "out")
    assert row["status"] == "fail"
    assert {f["device"] for f in row["findings"]} == set(Lab.open(small).switches())
    assert all(
        "318-byte frames in Trident2's 208-byte cells" in f["message"] for f in row["findings"]
    )
    scenario.write_text(SMALL_FRAMES + "validate: {headroom: {frame_bytes: 4158}}\n")
    assert _headroom(small, scenario, tmp_path / "again")["status"] == "pass"
