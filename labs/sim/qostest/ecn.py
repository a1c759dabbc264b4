"""ECN marking and RoCEv2 congestion: sonic-mgmt's snappi ECN and RoCEv2 tests."""

from __future__ import annotations

from dataclasses import replace

from labs.sim import simulate
from labs.sim.model import Flow
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, hidden, within
from labs.sim.qostest.dut import Dut, burst, stream
from labs.sim.qostest.m2o import pfc_off
from labs.sim.result import Result
from twin.render.config_db import ConfigDb

DEQUEUE_FRAME = 1024
DEQUEUE_PACKETS = 101
WRED_TEST = {
    "green_min_threshold": "50000",
    "green_max_threshold": "51000",
    "green_drop_probability": "100",
}
"""What test_dequeue_ecn configures on the lossless queue's WRED profile."""


def _lossless_wred(db: ConfigDb, prio: int) -> None:
    """The WRED profiles of the lossless queues set to the test's thresholds."""
    names = {
        str(e.get("wred_profile", ""))
        for k, e in db.get("QUEUE", {}).items()
        if k.endswith(f"|{prio}")
    }
    for name in names & set(db.get("WRED_PROFILE", {})):
        db["WRED_PROFILE"][name].update(WRED_TEST)


def dequeue_ecn(dut: Dut) -> list[Check]:
    """test_dequeue_ecn: 101 x 1024 B into the lossless queue held by a pause storm, WRED
    50000/51000 B at 100 %; released, the first packet out is marked CE (marking at dequeue
    sees the queue it leaves behind) and the last is not."""
    dscp, prio = params.lossless_dscp(dut)
    test = dut.variant(lambda db: _lossless_wred(db, prio))
    gap = (DEQUEUE_FRAME + 20) * 8 / test.speed(0)
    storm, held = test.storm(1, (prio,), (DEQUEUE_PACKETS + 10) * gap)
    flows = [
        burst("first", 0, 1, 1, dscp, DEQUEUE_FRAME, held, ect=True),
        burst("middle", 0, 1, DEQUEUE_PACKETS - 2, dscp, DEQUEUE_FRAME, held + 2 * gap, ect=True),
        burst("last", 0, 1, 1, dscp, DEQUEUE_FRAME, held + (DEQUEUE_PACKETS + 2) * gap, ect=True),
    ]
    end = storm.end + params.pause_time(test.speed(1)) + 2 * DEQUEUE_PACKETS * gap
    res = simulate(test.experiment(2, flows, [storm], duration=end, frame=DEQUEUE_FRAME))
    return [
        equal("first packet marked CE", res.flow("first").ecn_marks, 1),
        equal("last packet marked CE", res.flow("last").ecn_marks, 0),
        equal(
            "packets received",
            sum(f.bytes_delivered for f in res.flows) // DEQUEUE_FRAME,
            DEQUEUE_PACKETS,
        ),
    ]


ROCE_FRAME = 4096


def _roce_run(dut: Dut) -> float:
    """Long enough for two line-rate senders to fill the lossless PGs past XOFF (the pool
    at the port's speed, 1.5 times over), at least 3 ms."""
    return max(3e-3, 1.5 * dut.pool * 8 / dut.speed(0))


def _rc(name: str, src: int, dst: int, dscp: int, prio: int, speed: float, stop: float) -> Flow:
    """A RoCEv2 RC queue pair at line rate, ECN-capable, DCQCN off (the test turns WRED off)."""
    flow = stream(name, src, dst, speed, dscp, ROCE_FRAME, stop, priority=prio)
    return replace(flow, ecn_capable=True, transport="rc")


def no_wred(db: ConfigDb) -> None:
    """Every queue without its WRED/ECN profile."""
    for entry in db.get("QUEUE", {}).values():
        entry.pop("wred_profile", None)


def rocev2_congestion(dut: Dut) -> list[Check]:
    """test_rocev2_pfc_congestion_ai: 2:1 RoCEv2 RC at 100 %, WRED off. Lossless: no loss,
    NAK, CE or CNP, PFC on the lossless priority; lossy: loss and no PFC; lossless and
    lossy together: each queue within 5 % of its DWRR share (the intent's weights)."""
    dscp, prio = params.lossless_dscp(dut)
    lossy = params.lossy_dscp(dut)[0]
    test = dut.variant(no_wred)
    speed, t = test.speed(0), _roce_run(test)

    def run(flows: list[Flow]) -> Result:  # ends with the flows: queues still backlogged
        return simulate(test.experiment(3, flows, duration=t, frame=ROCE_FRAME))

    lossless = run([_rc("qp1", 0, 2, dscp, prio, speed, t), _rc("qp2", 1, 2, dscp, prio, speed, t)])
    drops = sum(f.bytes_dropped for f in lossless.flows)
    signals = sum(f.naks + f.ecn_marks + f.cnps for f in lossless.flows)
    pfc = sum(test.counters(lossless, i, prio).pause_sent for i in (0, 1))
    lossy_run = run([_rc("qp1", 0, 2, lossy, 0, speed, t), _rc("qp2", 1, 2, lossy, 0, speed, t)])
    lossy_drops = sum(f.bytes_dropped for f in lossy_run.flows)
    lossy_pfc = sum(test.counters(lossy_run, i, 0).pause_sent for i in (0, 1))
    mixed = run([_rc("qp1", 0, 2, dscp, prio, speed, t), _rc("qp2", 1, 2, lossy, 0, speed, t)])
    tx = {q: test.counters(mixed, 2, q).tx_bytes for q in (prio, 0)}
    rdma = dut.fabric.qos.rdma_scheduler_weight
    share = tx[prio] / max(1, sum(tx.values()))
    return [
        equal("lossless: bytes lost", drops, 0),
        equal("lossless: NAKs + CE marks + CNPs", signals, 0),
        within("lossless: PFC frames sent", pfc, 1, float("inf")),
        within("lossy: bytes lost", lossy_drops, 1, float("inf")),
        equal("lossy: PFC frames sent", lossy_pfc, 0),
        within(
            "mixed: lossless queue's share of the port", share, rdma / 100 - 0.05, rdma / 100 + 0.05
        ),
    ]


TESTS = [
    QosTest(
        "dequeue_ecn",
        "tests/snappi_tests/ecn/test_dequeue_ecn_with_snappi.py::test_dequeue_ecn",
        dequeue_ecn,
        no_wred,
        "no WRED_PROFILE on the queues (no ECN)",
    ),
    hidden(
        "ecn_marking_lossless_prio",
        "tests/snappi_tests/ecn/test_ecn_marking_with_snappi.py::test_ecn_marking_lossless_prio",
        "needs two lossless priorities of equal DWRR weight (3 and 4); the "
        "lab's intent has one lossless priority",
    ),
    QosTest(
        "rocev2_pfc_congestion",
        "tests/snappi_tests/rocev2/test_rocev2_pfc_congestion_ai.py::test_rocev2_pfc_congestion_ai",
        rocev2_congestion,
        pfc_off,
        "PFC disabled on every port",
    ),
]
