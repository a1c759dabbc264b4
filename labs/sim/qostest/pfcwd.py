"""The PFC watchdog: detection, its action, restoration and its timers (tests/pfcwd and
sonic-mgmt's snappi pfcwd tests). Expected timers are the intent's (`qos.pfc_watchdog`):
sonic-mgmt configures its own (400/400/400 ms) and checks the switch keeps them; the twin
checks that the lab's configs keep the intended ones. The simulator's watchdog polls at the
config's POLL_INTERVAL, as SONiC's does."""

from __future__ import annotations

import math

from labs.sim import simulate
from labs.sim.model import PfcStorm
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, within
from labs.sim.qostest.dut import Dut, burst, stream
from labs.sim.result import Result
from twin.render.config_db import ConfigDb

FRAME = 1024
PACKETS = 100
RATE = 1e-3
"""Background data rate, a share of the line (the watchdog's timers are hundreds of ms)."""


def _timers(dut: Dut) -> tuple[float, float, float, str]:
    wd = dut.fabric.qos.pfc_watchdog
    return wd.detection_ms / 1e3, wd.restoration_ms / 1e3, wd.poll_ms / 1e3, wd.action


def _storm(prio: int, start: float, end: float) -> PfcStorm:
    return PfcStorm("h1:p0", start, end, (prio,))


def function(dut: Dut) -> list[Check]:
    """test_pfcwd_actions: a storm on the lossless priority of the receiving port; once
    detected, 100 packets each way: the stormed queue's are dropped (action drop) or
    delivered (forward), the lossy queue's delivered; after the storm and restoration, 100
    more on the lossless queue all arrive; the watchdog counters rise by 100."""
    dscp, prio = params.lossless_dscp(dut)
    lossy = params.lossy_dscp(dut)[0]
    detect, restore, poll, action = _timers(dut)
    t1 = detect + poll + 0.05
    end = t1 + 0.05
    t2 = end + restore + poll + 0.05
    flows = [
        burst("stormed", 0, 1, PACKETS, dscp, FRAME, t1),
        burst("other", 0, 1, PACKETS, lossy, FRAME, t1),
        burst("restored", 0, 1, PACKETS, dscp, FRAME, t2),
    ]
    res = simulate(
        dut.experiment(2, flows, [_storm(prio, 0.0, end)], duration=t2 + 0.01, frame=FRAME)
    )
    got = {f.name: f.bytes_delivered // FRAME for f in res.flows}
    detected = [e for e in res.events_of("watchdog_detect") if e.priority == prio]
    restored = [e for e in res.events_of("watchdog_restore") if e.priority == prio]
    dropped = dut.counters(res, 0, prio).drops_watchdog
    return [
        equal("storm detected", len(detected), 1),
        equal(
            f"stormed queue's packets delivered (action {action})",
            got["stormed"],
            0 if action == "drop" else PACKETS,
        ),
        equal("watchdog drop counter", dropped, PACKETS if action == "drop" else 0),
        equal("other queue's packets delivered", got["other"], PACKETS),
        equal("restored", len(restored), 1),
        equal("packets delivered after restoration", got["restored"], PACKETS),
    ]


STORMS = 20


def _times(res: Result, kind: str, prio: int) -> list[float]:
    return [e.time for e in res.events_of(kind) if e.priority == prio]


def timer_accuracy(dut: Dut) -> list[Check]:
    """test_pfcwd_timer_accuracy: 20 storms; the 10th of the sorted detection times (storm
    start to detection) in (detect, detect + poll], and likewise the restoration times
    (storm end to restoration)."""
    prio = params.lossless_dscp(dut)[1]
    detect, restore, poll, _ = _timers(dut)
    length, period = detect + poll + 0.1, detect + restore + 2 * poll + 0.2
    starts = [k * period for k in range(STORMS)]
    storms = [_storm(prio, s, s + length) for s in starts]
    res = simulate(dut.experiment(2, [], storms, duration=STORMS * period))
    found = _times(res, "watchdog_detect", prio)
    back = _times(res, "watchdog_restore", prio)
    detections = sorted(t - max(s for s in starts if s <= t) for t in found)
    restorations = sorted(t - max(s + length for s in starts if s + length <= t) for t in back)
    tenth = STORMS // 2 - 1
    checks = [
        equal("storms detected", len(found), STORMS),
        equal("storms restored", len(back), STORMS),
    ]
    if len(detections) > tenth and len(restorations) > tenth:
        checks += [
            within(
                "10th detection time, ms",
                round(detections[tenth] * 1e3, 3),
                detect * 1e3 + 1e-6,
                (detect + poll) * 1e3,
            ),
            within(
                "10th restoration time, ms",
                round(restorations[tenth] * 1e3, 3),
                restore * 1e3 + 1e-6,
                (restore + poll) * 1e3,
            ),
        ]
    return checks


def basic(dut: Dut) -> list[Check]:
    """test_pfcwd_basic_single_lossless_prio: a storm of ceil(detect + poll + 0.1) s on the
    lossless priority: the data sent during it loses between 70 and 100 %, the data sent
    after restoration nothing; a storm of half the detection time loses nothing."""
    dscp, prio = params.lossless_dscp(dut)
    detect, restore, poll, _ = _timers(dut)
    rate = RATE * dut.speed(0)
    storm = math.ceil(detect + poll + 0.1)
    after = storm + restore + poll + 0.05
    flows = [
        stream("during", 0, 1, rate, dscp, FRAME, storm),
        stream("after", 0, 1, rate, dscp, FRAME, after + 0.2, start=after),
    ]
    res = simulate(
        dut.experiment(2, flows, [_storm(prio, 0.0, storm)], duration=after + 0.21, frame=FRAME)
    )
    short = simulate(
        dut.experiment(
            2,
            [stream("short", 0, 1, rate, dscp, FRAME, detect)],
            [_storm(prio, 0.0, detect / 2)],
            duration=detect + 0.01,
            frame=FRAME,
        )
    )
    during = res.flow("during")
    lost = 1 - during.bytes_delivered / max(1, during.bytes_sent)
    return [
        within("share of the storm's data lost", round(lost, 4), 0.7, 1.0),
        equal("bytes lost after restoration", res.flow("after").bytes_dropped, 0),
        equal(
            "bytes lost to a storm of half the detection time", short.flow("short").bytes_dropped, 0
        ),
    ]


BURSTS = 15


def burst_storm(dut: Dut) -> list[Check]:
    """test_pfcwd_burst_storm_single_lossless_prio: 15 storms of half the poll interval,
    each followed by as long a pause-free gap: no data lost."""
    dscp, prio = params.lossless_dscp(dut)
    _, _, poll, _ = _timers(dut)
    length = poll / 2
    storms = [_storm(prio, k * 2 * length, k * 2 * length + length) for k in range(BURSTS)]
    end = BURSTS * 2 * length
    flows = [stream("data", 0, 1, RATE * dut.speed(0), dscp, FRAME, end)]
    res = simulate(dut.experiment(2, flows, storms, duration=end + 0.01, frame=FRAME))
    return [
        equal("storms detected", len(_times(res, "watchdog_detect", prio)), 0),
        equal("data bytes lost", res.flow("data").bytes_dropped, 0),
    ]


def watchdog_off(db: ConfigDb) -> None:
    """No PFC_WD entry on any port."""
    db["PFC_WD"] = {k: v for k, v in db.get("PFC_WD", {}).items() if k == "GLOBAL"}


def slow_watchdog(db: ConfigDb) -> None:
    """Every port's watchdog detects and restores after 800 ms."""
    for key, entry in db.get("PFC_WD", {}).items():
        if key != "GLOBAL":
            entry.update(detection_time="800", restoration_time="800")


def quick_watchdog(db: ConfigDb) -> None:
    """Every port's watchdog detects after 50 ms, polled every 50 ms."""
    for key, entry in db.get("PFC_WD", {}).items():
        if key == "GLOBAL":
            entry["POLL_INTERVAL"] = "50"
        else:
            entry["detection_time"] = "50"


TESTS = [
    QosTest(
        "pfcwd_function",
        "tests/pfcwd/test_pfcwd_function.py::TestPfcwdFunc::test_pfcwd_actions",
        function,
        watchdog_off,
        "no PFC_WD on the ports",
    ),
    QosTest(
        "pfcwd_timer_accuracy",
        "tests/pfcwd/test_pfcwd_timer_accuracy.py::TestPfcwdAllTimer::test_pfcwd_timer_accuracy",
        timer_accuracy,
        slow_watchdog,
        "watchdog timers 800 ms",
    ),
    QosTest(
        "pfcwd_basic",
        "tests/snappi_tests/pfcwd/test_pfcwd_basic_with_snappi.py"
        "::test_pfcwd_basic_single_lossless_prio",
        basic,
        watchdog_off,
        "no PFC_WD on the ports",
    ),
    QosTest(
        "pfcwd_burst_storm",
        "tests/snappi_tests/pfcwd/test_pfcwd_burst_storm_with_snappi.py"
        "::test_pfcwd_burst_storm_single_lossless_prio",
        burst_storm,
        quick_watchdog,
        "watchdog detection and poll 50 ms",
    ),
]
