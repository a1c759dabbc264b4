"""Expected numbers the way sonic-mgmt's generators derive them from a switch's config
(docs/qos-tests.md, "How the numbers are derived"; ../shared/reference/sonic-mgmt.md).

The profiles are the ones SONiC's buffer manager binds by name: a lossless PG takes
`pg_lossless_<speed>_<cable>_profile`, lossy PGs `ingress_lossy_profile`, lossy queues
`egress_lossy_profile`; a port bound to another profile is one of the faults the tests catch.
Thresholds are in cells of the DUT's ASIC (its SKU's cell and descriptor in
twin/platforms/asics.yml, what the simulator counts its buffers in), each byte figure of a
profile rounded up to cells as the generator rounds it; the Mellanox headroom overhead is 0
(it is a Spectrum constant; the twin's ASICs declare none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from labs.sim.qostest.dut import Dut
from twin.design.asic import asic

MARGIN = 2
"""pkts_num_margin: sonic-mgmt's default window around a threshold (Mellanox uses 4)."""
OVERHEAD = 0
"""Mellanox's headroom overhead in cells (95/64/47 on Spectrum); none on the twin's ASIC."""


def cell_size(dut: Dut) -> int:
    """The buffer cell of the DUT's ASIC, bytes (its SKU's, twin/platforms/asics.yml: what
    the simulator counts in)."""
    return asic(dut.db).cell_bytes


def cells(dut: Dut, nbytes: float) -> int:
    """ceil(bytes / cell)."""
    return math.ceil(nbytes / cell_size(dut))


def occupancy(dut: Dut, frame: int) -> int:
    """Cells one packet takes: ceil((frame + descriptor) / cell)."""
    return cells(dut, frame + asic(dut.db).descriptor)


def _int(value: Any) -> int:
    return int(str(value).rstrip("m") or 0)


def static_th(dut: Dut, profile: dict[str, Any]) -> int:
    """A profile's threshold in bytes: static_th, or size + floor(alpha/(1+alpha) x pool)
    for a dynamic one (tests/qos/qos_sai_base.py)."""
    if "static_th" in profile:
        return _int(profile["static_th"])
    pool = _int(dut.entry("BUFFER_POOL", str(profile.get("pool", ""))).get("size", 0))
    n = _int(profile.get("dynamic_th", 0))
    share = pool if n >= 7 else math.floor(2.0**n / (1 + 2.0**n) * pool)
    return _int(profile.get("size", 0)) + share


def lossless_profile_name(dut: Dut, i: int = 0) -> str:
    """The lossless PG profile buffermgrd binds to test port i (by speed and cable)."""
    port = dut.port(i)
    speed = dut.db["PORT"][port].get("speed", "")
    cable = next((str(t[port]) for t in dut.db.get("CABLE_LENGTH", {}).values() if port in t), "5m")
    return f"pg_lossless_{speed}_{cable}_profile"


@dataclass(frozen=True)
class Lossless:
    """The Mellanox generator's lossless numbers (qos_param_generator.py 96-148), cells."""

    xon: int
    xoff: int
    headroom: int
    shared: int
    trig: int
    """pkts_num_trig_pfc."""
    drp: int
    """pkts_num_trig_ingr_drp."""
    profile: str

    @classmethod
    def of(cls, dut: Dut, i: int = 0) -> Lossless:
        name = lossless_profile_name(dut, i)
        prof = dut.entry("BUFFER_PROFILE", name)
        xon, xoff = cells(dut, _int(prof.get("xon", 0))), cells(dut, _int(prof.get("xoff", 0)))
        headroom = cells(dut, _int(prof.get("size", 0)))
        shared = cells(dut, static_th(dut, prof)) - headroom
        hysteresis = headroom - xon - xoff
        return cls(
            xon,
            xoff,
            headroom,
            shared,
            shared + xon + hysteresis,
            shared + headroom - OVERHEAD,
            name,
        )


def egress_lossy_drop(dut: Dut) -> int:
    """pkts_num_trig_egr_drp: ceil(lossy static_th / cell) + 1, or the ingress lossy limit
    when that is lower."""
    egress = cells(dut, static_th(dut, dut.entry("BUFFER_PROFILE", "egress_lossy_profile")))
    ingress = cells(dut, static_th(dut, dut.entry("BUFFER_PROFILE", "ingress_lossy_profile")))
    return min(egress, ingress) + 1


def pause_time(speed: float) -> float:
    """Seconds one pause frame of 65535 quanta holds a port of `speed` b/s."""
    return 65535 * 512 / speed


def storm_rate(speed: float) -> float:
    """PFC frames per second of a storm: 2 / (65535 x 512 bit / speed)."""
    return 2 / pause_time(speed)


def dwrr_shares(demands: dict[int, float], weights: dict[int, int]) -> dict[int, float]:
    """Each queue's share of a link (fractions of line rate): by weight, small demands
    satisfied first, the rest shared again (sonic-mgmt's snappi helpers).

    >>> dwrr_shares({0: 0.4, 3: 0.4}, {0: 20, 3: 80})
    {0: 0.4, 3: 0.4}
    >>> {q: round(v, 2) for q, v in dwrr_shares({0: 0.9, 3: 0.9}, {0: 20, 3: 80}).items()}
    {0: 0.2, 3: 0.8}
    """
    left, share, open_ = 1.0, dict.fromkeys(demands, 0.0), dict(demands)
    while open_ and left > 1e-12:
        total = sum(weights[q] for q in open_)
        offer = {q: left * weights[q] / total for q in open_}
        done = {q for q in open_ if open_[q] <= offer[q]}
        if not done:
            for q in open_:
                share[q] += offer[q]
            break
        for q in done:
            share[q] += open_.pop(q)
            left -= share[q]
    return share


def lossless_dscp(dut: Dut) -> tuple[int, int]:
    """The intent's first lossless class: (DSCP, priority)."""
    prio = dut.fabric.qos.lossless_priorities[0]
    dscp = next(c.dscp for c in dut.fabric.qos.classes.values() if c.tc == prio)
    return dscp, prio


def lossy_dscp(dut: Dut) -> tuple[int, int]:
    """A lossy DSCP the intent maps to TC 0 (unlisted DSCPs go there): (DSCP, 0)."""
    listed = {c.dscp: c.tc for c in dut.fabric.qos.classes.values()}
    return next(d for d in range(64) if listed.get(d, 0) == 0), 0


def expected_tc(dut: Dut, dscp: int) -> int:
    """The TC (= queue, = PG for lossless TCs, else PG 0) the intent gives a DSCP."""
    return next((c.tc for c in dut.fabric.qos.classes.values() if c.dscp == dscp), 0)
