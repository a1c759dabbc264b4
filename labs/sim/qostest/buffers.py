"""Buffer thresholds with the egress port held off (sonic-mgmt's TX-off): PFC XOFF, the
lossy queue's drop point, the shared reservation and the PG drop point."""

from __future__ import annotations

import math

from labs.sim import simulate
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, hidden, within
from labs.sim.qostest.dut import Dut, burst
from labs.sim.result import PriorityCounters
from twin.render.config_db import ConfigDb

HOLD = 1.0
"""The receiver's pause storm (TX-off) lasts past every fill; runs end long before."""


def fill(
    dut: Dut, sends: list[tuple[int, int]], dscp: int, prio: int, seed: int = 1
) -> list[PriorityCounters]:
    """Send (source port, packets) one after the other into port n (paused on `prio`);
    each source port's counters on the DSCP's priority."""
    frame = params.cell_size(dut)
    dst = len(sends)
    t, flows = 0.0, []
    for k, (src, n) in enumerate(sends):
        flows.append(burst(f"f{k}", src, dst, n, dscp, frame, start=t))
        t += n * (frame + 20) * 8 / dut.speed(src) + 2e-6
    exp = dut.experiment(dst + 1, flows, [dut.tx_off(dst, HOLD)], duration=t + 10e-6)
    result = simulate(exp, seed=seed)
    return [dut.counters(result, src, prio) for src in range(dst)]


def _one(dut: Dut, n: int, dscp: int, prio: int) -> PriorityCounters:
    return fill(dut, [(0, n)], dscp, prio)[0]


def xoff_limit(dut: Dut) -> list[Check]:
    """PFCtest: no PFC up to trig-1-m, PFC by trig+m, no drop to drp-1-m, ingress drop by
    drp+m."""
    dscp, prio = params.lossless_dscp(dut)
    p = params.Lossless.of(dut)
    occ, m = params.occupancy(dut, params.cell_size(dut)), params.MARGIN
    trig, drp = p.trig // occ, p.drp // occ
    before, after = _one(dut, trig - 1 - m, dscp, prio), _one(dut, trig + m, dscp, prio)
    full, over = _one(dut, drp - 1 - m, dscp, prio), _one(dut, drp + m, dscp, prio)
    return [
        equal(f"PFC after {trig - 1 - m} packets (trig-1-m)", before.pause_sent, 0),
        within(f"PFC after {trig + m} packets (trig+m)", after.pause_sent, 1, math.inf),
        equal(
            f"drops after {drp - 1 - m} packets (drp-1-m)",
            full.drops_lossless + full.drops_lossy,
            0,
        ),
        within(
            f"ingress drops after {drp + m} packets (drp+m)",
            over.drops_lossless,
            m + 1 - 2,
            m + 1 + 2,
        ),
        equal(f"egress (lossy) drops after {drp + m} packets", over.drops_lossy, 0),
    ]


def lossy_queue(dut: Dut) -> list[Check]:
    """LossyQueueTest: no PFC and no drop up to edrp-1-m, egress drop after, still no PFC."""
    dscp, prio = params.lossy_dscp(dut)
    edrp, m = params.egress_lossy_drop(dut), params.MARGIN
    below, above = _one(dut, edrp - 1 - m, dscp, prio), _one(dut, edrp + m, dscp, prio)
    return [
        equal(f"drops after {edrp - 1 - m} packets (edrp-1-m)", below.drops_lossy, 0),
        within(f"egress drops after {edrp + m} packets (edrp+m)", above.drops_lossy, 1, m + 2),
        equal("PFC frames", below.pause_sent + above.pause_sent, 0),
    ]


def shared_res_size(dut: Dut) -> list[Check]:
    """SharedResSizeTest: two ports fill the shared pool on the lossless PG one after the
    other; XOFF only after the last packet, and no drop."""
    dscp, prio = params.lossless_dscp(dut)
    first = params.Lossless.of(dut, 0)
    # the first port sends trig - 1 packets: its PG's own cells (trig - shared), the rest
    # shared; the second PG's share of what it left is alpha x (pool - used) / (1 + alpha)
    prof = dut.entry("BUFFER_PROFILE", first.profile)
    alpha = 2.0 ** int(prof.get("dynamic_th", 0))
    pool = params.cells(dut, dut.pool)
    own = first.trig - first.shared
    used = first.trig - 1 - own
    second = math.floor(alpha * (pool - used) / (1 + alpha)) + own
    m = params.MARGIN
    short = fill(dut, [(0, first.trig - 1), (1, second - 1 - m)], dscp, prio)
    full = fill(dut, [(0, first.trig - 1), (1, second + m)], dscp, prio)
    return [
        equal(
            f"PFC before the last send ({first.trig - 1} + {second - 1 - m} packets)",
            short[0].pause_sent + short[1].pause_sent,
            0,
        ),
        within(f"PFC on the 2nd port after {second + m} packets", full[1].pause_sent, 1, math.inf),
        equal("drops", sum(c.drops_lossless + c.drops_lossy for c in full), 0),
    ]


def pg_drop(dut: Dut) -> list[Check]:
    """PGDropTest: the measured drop point within round(3 sqrt(drp)) of drp in >= 75 % of
    iterations (5 here, each its own seed)."""
    dscp, prio = params.lossless_dscp(dut)
    drp = params.Lossless.of(dut).drp // params.occupancy(dut, params.cell_size(dut))
    margin = round(3 * math.sqrt(drp))
    sent = drp + margin + 10
    points = [sent - fill(dut, [(0, sent)], dscp, prio, seed=s)[0].drops_lossless for s in range(5)]
    close = sum(abs(p - drp) <= margin for p in points)
    return [
        within(
            f"iterations with the drop point within {margin} of {drp}",
            close / len(points),
            0.75,
            1.0,
        )
    ]


def unbind_lossless_pg(db: ConfigDb) -> None:
    """Every lossless PG bound to the lossy ingress profile (no headroom, lossy alpha)."""
    for entry in db.get("BUFFER_PG", {}).values():
        if "lossless" in str(entry.get("profile", "")):
            entry["profile"] = "ingress_lossy_profile"


def rebind_lossy_queue(db: ConfigDb) -> None:
    """Lossy queues bound to the lossless egress profile (no egress drop point)."""
    for entry in db.get("BUFFER_QUEUE", {}).values():
        if entry.get("profile") == "egress_lossy_profile":
            entry["profile"] = "egress_lossless_profile"


TESTS = [
    QosTest(
        "pfc_xoff_limit",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiPfcXoffLimit"
        " -> saitests/py3/sai_qos_tests.py::PFCtest",
        xoff_limit,
        unbind_lossless_pg,
        "lossless PGs bound to ingress_lossy_profile",
    ),
    hidden(
        "pfc_xon_limit",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiPfcXonLimit"
        " -> sai_qos_tests.py::PFCXonTest",
        "its XON point (pkts_num_dismiss_pfc) is the vendor's: Mellanox's generator takes "
        "the PG's whole shared part (shared + 1 cells), Broadcom's are entered by hand per SKU; "
        "the lab's profiles omit xon_offset, so the simulator resumes at SAI's XON_OFFSET_TH "
        "rule with its default offset (18432 B below the threshold), a point no generator "
        "derives from these configs",
    ),
    QosTest(
        "lossy_queue",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiLossyQueue"
        " -> sai_qos_tests.py::LossyQueueTest",
        lossy_queue,
        rebind_lossy_queue,
        "lossy queues bound to egress_lossless_profile",
    ),
    QosTest(
        "shared_res_size",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiSharedReservationSize"
        " -> sai_qos_tests.py::SharedResSizeTest",
        shared_res_size,
        unbind_lossless_pg,
        "lossless PGs bound to ingress_lossy_profile",
    ),
    QosTest(
        "pg_drop",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiPGDrop -> sai_qos_tests.py::PGDropTest",
        pg_drop,
        unbind_lossless_pg,
        "lossless PGs bound to ingress_lossy_profile",
    ),
    hidden(
        "headroom_pool_size",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiHeadroomPoolSize"
        " -> sai_qos_tests.py::HdrmPoolSizeTest",
        "the lab's configs declare no shared headroom pool (each lossless PG has its own "
        "xoff, ingress_lossless_pool no xoff), the case in which sonic-mgmt skips it too "
        "(its generators drop hdrm_pool_size), and the simulator models no shared headroom "
        "pool",
    ),
]
