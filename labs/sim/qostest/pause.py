"""PFC pause frames received by the DUT: lossless priorities stop, lossy ones must not."""

from __future__ import annotations

from labs.sim import simulate
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, hidden, within
from labs.sim.qostest.dut import Dut, burst, stream
from labs.sim.qostest.mapping import remap_roce_dscp
from twin.render.config_db import ConfigDb

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
            held_storm, held = dut.storm(1, (prio,), 1.0)
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


def _storm_run(
    dut: Dut, test: tuple[int, int], background: tuple[int, int]
) -> tuple[list[Check], float]:
    """Snappi's pause tests: a test and a background flow, (DSCP, priority) each, 45 % of
    the line each, 1024 B, a storm on the test flow's priority. The checks that the
    background loses nothing and arrives within 5 % and that nothing is dropped, and the
    test flow's received bytes over snappi's expectation."""
    speed = dut.speed(0)
    storm, held = dut.storm(1, (test[1],), 1.0)
    t = held + SNAPPI_DURATION
    rate = 0.45 * speed
    flows = [
        stream("test", 0, 1, rate, test[0], SNAPPI_FRAME, t, test[1], held),
        stream("background", 0, 1, rate, background[0], SNAPPI_FRAME, t, background[1], held),
    ]
    res = simulate(dut.experiment(2, flows, [storm], duration=t + 50e-6, frame=SNAPPI_FRAME))
    want = expected_bytes(0.45, speed, SNAPPI_DURATION, SNAPPI_FRAME)
    drops = sum(c.drops_lossless + c.drops_lossy for p in res.ports for c in p.priorities.values())
    bg = res.flow("background")
    checks = [
        within("background bytes received / expected", bg.bytes_delivered / want, 0.95, 1.05),
        equal("background bytes lost", bg.bytes_dropped, 0),
        equal("drops at the DUT", drops, 0),
    ]
    return checks, res.flow("test").bytes_delivered / want


def pfc_pause_lossless(dut: Dut) -> list[Check]:
    """test_pfc_pause_single_lossless_prio: test 45 % (lossless) and background 45 %
    (lossy), a storm on the test priority: the test flow receives nothing, the background
    loses nothing and arrives within 5 %, no PG drop."""
    checks, test = _storm_run(dut, params.lossless_dscp(dut), params.lossy_dscp(dut))
    return [equal("test flow bytes received / expected", round(test, 5), 0), *checks]


def pfc_pause_lossy(dut: Dut) -> list[Check]:
    """test_pfc_pause_single_lossy_prio: test 45 % (lossy) and background 45 % (lossless),
    a storm on the test (lossy) priority, which the DUT does not act on (its pfc_enable
    does not list it): no flow paused, no loss, each within 5 %."""
    checks, test = _storm_run(dut, params.lossy_dscp(dut), params.lossless_dscp(dut))
    return [within("test flow bytes received / expected", test, 0.95, 1.05), *checks]


def pfc_on_lossy(db: ConfigDb) -> None:
    """PFC enabled on priority 0 too (pfc_enable and the PFC-to-queue and -PG maps)."""
    for entry in db.get("PORT_QOS_MAP", {}).values():
        if "pfc_enable" in entry:
            entry["pfc_enable"] = ",".join(["0", *str(entry["pfc_enable"]).split(",")])
    for table in ("MAP_PFC_PRIORITY_TO_QUEUE", "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP"):
        for mapping in db.get(table, {}).values():
            mapping["0"] = "0"


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
    QosTest(
        "pfc_pause_lossy",
        "tests/snappi_tests/pfc/test_pfc_pause_lossy_with_snappi.py"
        "::test_pfc_pause_single_lossy_prio",
        pfc_pause_lossy,
        pfc_on_lossy,
        "PFC enabled on priority 0 (pfc_enable and its maps)",
    ),
    hidden(
        "global_pause",
        "tests/snappi_tests/pfc/test_global_pause_with_snappi.py::test_global_pause",
        "the simulator has no IEEE 802.3x (global) pause frame",
    ),
]
