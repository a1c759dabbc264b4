"""sonic-mgmt's generator numbers (`labs.sim.qostest.params`) on hand-written profiles."""

from __future__ import annotations

from typing import Any

from labs.sim.qostest import params
from labs.sim.qostest.dut import Dut
from twin.intent.fabric import Fabric

POOL = 60_000_000


def _dut(pg: dict[str, str], lossy: dict[str, str]) -> Dut:
    db: dict[str, Any] = {
        "PORT": {
            "Ethernet0": {"speed": "400000", "admin_status": "up", "description": "server1:nic0"}
        },
        "CABLE_LENGTH": {"AZURE": {"Ethernet0": "5m"}},
        "BUFFER_POOL": {
            "ingress_lossless_pool": {"type": "ingress", "size": str(POOL)},
            "egress_lossy_pool": {"type": "egress", "size": "20000000"},
        },
        "BUFFER_PROFILE": {
            "pg_lossless_400000_5m_profile": {"pool": "ingress_lossless_pool", **pg},
            "egress_lossy_profile": {"pool": "egress_lossy_pool", **lossy},
            "ingress_lossy_profile": {
                "pool": "ingress_lossless_pool",
                "size": "0",
                "dynamic_th": "3",
            },
        },
    }
    return Dut("leaf1", db, Fabric.model_validate({"name": "t"}), ["Ethernet0"])


def test_mellanox_lossless_numbers_with_a_dynamic_threshold() -> None:
    dut = _dut(
        {"size": "97280", "xon": "18432", "xoff": "78848", "dynamic_th": "0"},
        {"size": "1518", "dynamic_th": "3"},
    )
    assert params.cell_size(dut) == 208  # no SKU: asics.yml's default, a Trident2
    p = params.Lossless.of(dut)
    # static_th = 97280 + 60e6 / 2 = 30097280 B = 144699 cells; headroom 468, xon 89,
    # xoff 380 cells (each rounded up): shared 144231, hysteresis 468 - 89 - 380 = -1,
    # trig = shared + xon + hysteresis = 144319, drp = shared + headroom = 144699
    assert (p.headroom, p.xon, p.xoff, p.shared) == (468, 89, 380, 144231)
    assert (p.trig, p.drp) == (144319, 144699)
    # lossy: 1518 + floor(8/9 x 20e6) = 17779295 B = 85478 cells, + 1
    assert params.egress_lossy_drop(dut) == 85479


def test_a_static_threshold_is_taken_as_written() -> None:
    dut = _dut(
        {"size": "12800", "xon": "2560", "xoff": "10240", "static_th": "1280000"},
        {"size": "0", "static_th": "640000"},
    )
    p = params.Lossless.of(dut)
    # 6154 cells of threshold (208 B), headroom 62, xoff 50: trig 6104, drp 6154
    assert (p.trig, p.drp) == (6104, 6154)
    assert params.egress_lossy_drop(dut) == 3078


def test_storm_rate_is_two_frames_per_pause_time() -> None:
    assert round(params.storm_rate(100e9)) == 5961  # 2 / (65535 x 512 / 1e11)


def test_dwrr_shares_fill_small_demands_first() -> None:
    shares = params.dwrr_shares({0: 0.2, 1: 0.4, 3: 0.6}, {0: 20, 1: 20, 3: 80})
    assert {q: round(v, 3) for q, v in shares.items()} == {0: 0.2, 1: 0.2, 3: 0.6}
