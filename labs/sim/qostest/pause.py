"""PFC pause frames received by the DUT: lossless priorities stop, lossy ones must not."""

from __future__ import annotations

from labs.sim import simulate
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, hidden, within
from labs.sim.qostest.dut import Dut, burst, stream
from labs.sim.qostest.mapping import remap_roce_dscp

ROUNDS = 20
SNAPPI_FRAME = 1024
SNAPPI_DURATION = 2e-3
"""Seconds of traffic (sonic-mgmt's snappi tests run seconds; the rates are steady here
after tens of microseconds)."""


def pfc_pause(dut: Dut) -> list[Check]:
    """test_pfc_pause_lossless: a storm on the lossless priority and one test packet plus
    one background packet per round: paused, only the background one arrives; without the
    storm, both; as expected in >= 60 % of 20 rounds each."""
    dscp, prio = params.lossless_dscp(dut)
    lossy = params.lossy_dscp(dut)[0]
    frame = params.cell_size(dut)
    ok = {True: 0, False: 0}
    for r in range(ROUNDS):
        for storm in (True, False):
            held_storm, held = dut.tx_off(1, (prio,), 1.0)
            flows = [
                burst("test", 0, 1, 1, dscp, frame, held + 1e-6),
                burst("background", 0, 1, 1, lossy, frame, held + 2e-6),
            ]
            faults = [held_storm] if storm else []
            res = simulate(dut.experiment(2, flows, faults, duration=50e-6), seed=r + 1)
            got = (res.flow("test").bytes_delivered > 0, res.flow("background").bytes_delivered > 0)
            ok[storm] += got == (not storm, True)
    return [
        within("rounds as expected with the storm", ok[True] / ROUNDS, 0.6, 1.0),
        within("rounds as expected without it", ok[False] / ROUNDS, 0.6, 1.0),
    ]


def expected_bytes(rate: float, speed: float, duration: float, frame: int) -> float:
    """Snappi's expected received bytes: packets = rate x speed x duration / 8 / frame (the
    wire's 20 B per frame of preamble and gap included), times the frame."""
    return rate * speed * duration / 8 / (frame + 20) * frame


def pfc_pause_lossless(dut: Dut) -> list[Check]:
    """test_pfc_pause_single_lossless_prio: test 45 % (lossless) and background 45 %
    (lossy), 1024 B, a storm on the test priority: the test flow receives nothing, the
    background loses nothing and arrives within 5 %, no PG drop."""
    dscp, prio = params.lossless_dscp(dut)
    lossy = params.lossy_dscp(dut)[0]
    speed = dut.speed(0)
    storm, held = dut.tx_off(1, (prio,), 1.0)
    t = held + SNAPPI_DURATION
    flows = [
        stream("test", 0, 1, 0.45 * speed, dscp, SNAPPI_FRAME, t, priority=prio, start=held),
        stream("background", 0, 1, 0.45 * speed, lossy, SNAPPI_FRAME, t, start=held),
    ]
    res = simulate(dut.experiment(2, flows, [storm], duration=t + 50e-6, frame=SNAPPI_FRAME))
    bg = res.flow("background")
    want = expected_bytes(0.45, speed, SNAPPI_DURATION, SNAPPI_FRAME)
    drops = sum(c.drops_lossless + c.drops_lossy for p in res.ports for c in p.priorities.values())
    return [
        equal("test flow bytes received", res.flow("test").bytes_delivered, 0),
        within("background bytes received / expected", bg.bytes_delivered / want, 0.95, 1.05),
        equal("background bytes lost", bg.bytes_dropped, 0),
        equal("PG drops", drops, 0),
    ]


TESTS = [
    QosTest(
        "pfc_pause",
        "tests/qos/test_pfc_pause.py::test_pfc_pause_lossless",
        pfc_pause,
        remap_roce_dscp,
        "DSCP 26 mapped to TC 0",
    ),
    QosTest(
        "pfc_pause_lossless",
        "tests/snappi_tests/pfc/test_pfc_pause_lossless_with_snappi.py"
        "::test_pfc_pause_single_lossless_prio",
        pfc_pause_lossless,
        remap_roce_dscp,
        "DSCP 26 mapped to TC 0",
    ),
    hidden(
        "pfc_pause_lossy",
        "tests/snappi_tests/pfc/test_pfc_pause_lossy_with_snappi.py"
        "::test_pfc_pause_single_lossy_prio",
        "the simulator pauses every priority a PFC frame names; a switch "
        "honours only those its pfc_enable lists (labs/sim/csrc/switch.c on_pfc)",
    ),
    hidden(
        "global_pause",
        "tests/snappi_tests/pfc/test_global_pause_with_snappi.py::test_global_pause",
        "the simulator has no IEEE 802.3x (global) pause frame",
    ),
]
