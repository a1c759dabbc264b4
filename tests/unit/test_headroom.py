"""The design and the simulator size PFC headroom alike (docs/physics.md 1.3): the XOFF the
generator writes into a lab's BUFFER_PROFILE, as the simulator reads the lab, covers what the
simulator's own sizing of a lossless PG asks for on the same cable, speed and MTU, and
exceeds it by less than the 1 KiB the generator rounds to."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from labs.sim.build import _profile, profile_arrays
from labs.sim.lab import network
from labs.sim.model import QosProfile
from twin.design import headroom
from twin.design.asic import BYTES, Cells, sku_asic
from twin.design.graph import platform
from twin.lab.directory import Lab
from twin.model.wiring import links
from validators.examples import edit_json, tiny_lab
from validators.registry import get
from validators.result import Result, Status
from validators.static.headroom import headroom as static_headroom

PG_FIELDS = 6
"""Numbers per PG in the simulator's profile arrays: reserved, headroom, xon, ..."""


def simulator_headroom(
    speed: float,
    propagation: float,
    frame: int,
    qos: QosProfile | None = None,
    cells: Cells = BYTES,
    frames: tuple[int, ...] = (),
) -> dict[int, int]:
    """The headroom the simulator gives each lossless PG of a port with this QoS (its own
    default unless given) when the PGs' headroom is left to its sizing, in `cells` for the
    data `frames` (and `frame`, the largest)."""
    qos = qos or QosProfile()
    unsized = {pg: dataclasses.replace(p, headroom=None) for pg, p in qos.pgs.items()}
    sized = dataclasses.replace(qos, pgs=unsized)
    pgs = profile_arrays(sized, speed, propagation, frame, cells, frames)[1]
    return {pg: int(pgs[pg * PG_FIELDS + 1]) for pg in {qos.tc_to_pg[tc] for tc in qos.lossless}}


@pytest.mark.parametrize("speed_mbps", [25000, 100000, 400000, 800000])
@pytest.mark.parametrize("cable_m", [1, 5, 40, 300, 2000])
@pytest.mark.parametrize("mtu", [1500, 4200, 9100, 9216])
def test_simulator_sizes_what_the_design_requires(speed_mbps: int, cable_m: int, mtu: int) -> None:
    need = headroom.required(speed_mbps, cable_m, mtu)
    sim = simulator_headroom(speed_mbps * 1e6, cable_m * 5e-9, mtu + headroom.ETHERNET)
    assert set(sim.values()) == {need}
    assert 0 <= headroom.xoff(speed_mbps, cable_m, mtu) - need < 1024


def disagreements(lab: Lab, mtu: int) -> tuple[list[str], set[float]]:
    """Each switch port whose configured lossless headroom, as the simulator reads the lab, is
    not what the simulator sizes on its cable in the switch's cells for the RoCE frames the
    design sizes for (up to the generator's 1 KiB), and the cable lengths looked at."""
    net = network(lab)
    ports = {f"{s.name}:{p}": (q, s) for s in net.switches for p, q in s.port_qos.items()}
    wrong, lengths = [], set()
    for link in net.links:
        for end in (link.a, link.b):
            if end in ports:
                lengths.add(link.length_m)
                qos, switch = ports[end]
                frame = mtu + headroom.ETHERNET
                cells = Cells(switch.cell_bytes, switch.cell_descriptor)
                roce = (min(headroom.ROCE_FRAME, frame),)
                sized = simulator_headroom(link.speed, link.propagation, frame, qos, cells, roce)
                got = {pg: qos.pg(pg).headroom or 0 for pg in sized}
                if not sized or any(not 0 <= got[pg] - need < 1024 for pg, need in sized.items()):
                    wrong.append(f"{end}: {got} for {sized}")
    return wrong, lengths


def lab_of(speed: str, server_m: int, uplink_m: int, mtu: int) -> Lab:
    """The tiny fabric at one speed, with these cables and switch MTU."""
    return tiny_lab(
        leaves={
            "count": 2,
            "ports": 8,
            "peer_link_ports": 1,
            "uplinks_per_spine": 1,
            "speed": speed,
        },
        spines={"count": 2, "ports": 8, "speed": speed},
        servers={"count": 2, "nic_speed": speed},
        cables={"server": server_m, "leaf_spine": uplink_m, "peer_link": server_m},
        mtu={"switch": mtu, "host": min(mtu, 9000)},
    )


@pytest.mark.parametrize(
    ("speed", "server_m", "uplink_m", "mtu"),
    [("100G", 3, 40, 9100), ("400G", 5, 300, 4200), ("25G", 1, 100, 1500)],
)
def test_a_generated_labs_headroom_is_what_the_simulator_would_size(
    speed: str, server_m: int, uplink_m: int, mtu: int
) -> None:
    wrong, lengths = disagreements(lab_of(speed, server_m, uplink_m, mtu), mtu)
    assert wrong == []
    assert lengths == {server_m, uplink_m}


def lengthen(port: str, length: str, db: dict[str, Any]) -> None:
    """Give a port's cable another length in a config_db."""
    db["CABLE_LENGTH"]["AZURE"][port] = length


def test_a_lengthened_cable_is_a_disagreement() -> None:
    lab = lab_of("400G", 5, 40, 9100)
    a, a_port, b, b_port = next(c for c in links(lab) if "spine1" in (c[0], c[2]))
    for node, port in ((a, a_port), (b, b_port)):
        edit_json(lab, node, functools.partial(lengthen, port, "300m"))
    wrong, lengths = disagreements(lab, 9100)
    assert sorted(w.split(": ")[0] for w in wrong) == sorted([f"{a}:{a_port}", f"{b}:{b_port}"])
    assert 300 in lengths


def test_a_port_profile_is_kept_per_qos_object() -> None:
    """The core's builder keeps each port's profile (a drill builds the same ports for every
    case); a QoS object of other values is never served another's."""
    qos = QosProfile()
    first = _profile(qos, 400e9, 1e-8, 9000, Cells())
    assert _profile(qos, 400e9, 1e-8, 9000, Cells()) is first
    assert list(first[1]) == profile_arrays(qos, 400e9, 1e-8, 9000)[1]
    other = dataclasses.replace(qos, pause_quanta=qos.pause_quanta // 2)
    assert _profile(other, 400e9, 1e-8, 9000, Cells())[3][0] == qos.pause_quanta // 2
    assert _profile(qos, 100e9, 1e-8, 9000, Cells()) != first


PLATFORM = sku_asic(platform()["hwsku"]).cells
"""The cells of the SKU the generator writes (a Force10-S6000: Trident2, 208 bytes)."""


def _judged(lab: Lab, **given: Any) -> Result:
    return static_headroom(lab, get("headroom").params(given))[0]


def _tomahawk3(db: dict[str, Any]) -> None:
    db["DEVICE_METADATA"]["localhost"]["hwsku"] = "DellEMC-Z9332f-O32"


def test_a_headroom_holding_in_bytes_not_in_the_skus_cells_fails_naming_switch_and_pg() -> None:
    lab = tiny_lab()
    edit_json(lab, "leaf1", _tomahawk3)  # 254-byte cells: 4158-byte frames hold 4318 bytes
    db = lab.config_db("leaf1")
    for port, length in db["CABLE_LENGTH"]["AZURE"].items():
        profile = db["BUFFER_PROFILE"][db["BUFFER_PG"][f"{port}|3"]["profile"]]
        assert int(profile["xoff"]) >= headroom.required(400000, int(length.rstrip("m")), 9100)
    result = _judged(lab)
    assert result.status is Status.FAIL
    assert {f.device for f in result.findings} == {"leaf1"}
    assert all(
        f.message.startswith("PG 3 headroom xoff ") and "Tomahawk3's 254-byte cells" in f.message
        for f in result.findings
    ), [f.message for f in result.findings]
    assert {f.port for f in result.findings} == set(db["CABLE_LENGTH"]["AZURE"])


def test_smaller_frames_than_the_design_sized_for_fail_every_switch() -> None:
    lab = tiny_lab()
    assert _judged(lab).status is Status.PASS
    result = _judged(lab, frame_bytes=256 + 62)  # a scenario's smallest sim.packet_bytes
    assert result.status is Status.FAIL
    assert {f.device for f in result.findings} == set(lab.switches())
    assert all("318-byte frames in Trident2's 208-byte cells" in f.message for f in result.findings)


@pytest.mark.parametrize("speed_mbps", [25000, 100000, 200000, 400000, 800000])
@pytest.mark.parametrize("cable_m", [1, 5, 40, 300, 2000])
@pytest.mark.parametrize("mtu", [1500, 9100, 9216])
def test_the_generated_headroom_holds_in_the_platforms_cells_by_its_rounding(
    speed_mbps: int, cable_m: int, mtu: int
) -> None:
    need = headroom.in_cells(headroom.required(speed_mbps, cable_m, mtu), PLATFORM, mtu)
    assert need >= headroom.required(speed_mbps, cable_m, mtu)
    assert 0 <= headroom.xoff(speed_mbps, cable_m, mtu, PLATFORM) - need < 1024
