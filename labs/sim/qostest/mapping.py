"""Classification and scheduling: DSCP to queue, DSCP to PG, DWRR shares and PFC counters."""

from __future__ import annotations

from dataclasses import replace

from labs.sim import simulate
from labs.sim.model import NPRIO, PfcStorm
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, within
from labs.sim.qostest.dut import DUT, Dut, burst
from labs.sim.result import Result
from twin.render.config_db import ConfigDb

ALL = tuple(range(NPRIO))
STEP = 1e-6
"""Occupancy sample interval of these runs, s."""


def _last(series: dict[int, list[int]], index: int) -> int:
    values = series.get(index, [])
    return values[-1] if values else 0


def one_per_dscp(dut: Dut) -> tuple[Result, int]:
    """One packet per DSCP 0-63 from port 0 into port 1, whose egress is held off on every
    priority; the run and the frame size."""
    frame = params.cell_size(dut)
    flows = [burst(f"d{d}", 0, 1, 1, d, frame, start=d * 1e-7) for d in range(64)]
    exp = dut.experiment(2, flows, [dut.tx_off(1, 1.0)], duration=20e-6, monitor=STEP)
    return simulate(exp), frame


def _expected(dut: Dut, lossless_only: bool) -> dict[int, int]:
    """Packets per queue (or PG) the intent's classes give one packet per DSCP."""
    lossless = set(dut.fabric.qos.lossless_priorities)
    out = dict.fromkeys(range(NPRIO), 0)
    for d in range(64):
        tc = params.expected_tc(dut, d)
        out[tc if not lossless_only or tc in lossless else 0] += 1
    return out


def dscp_to_queue(dut: Dut) -> list[Check]:
    """DscpMappingPB: each queue's counter rises by the DSCPs the maps send to it."""
    result, frame = one_per_dscp(dut)
    seen = result.queues.get(f"{DUT}:{dut.port(1)}", {})
    return [
        equal(f"queue {q} packets", _last(seen, q) // frame, n)
        for q, n in _expected(dut, False).items()
    ]


def dscp_to_pg(dut: Dut) -> list[Check]:
    """DscpToPgMapping: the mapped PG rises by exactly the DSCPs mapped to it (lossless
    classes to their priority's PG, the rest to PG 0)."""
    result, frame = one_per_dscp(dut)
    seen = result.pgs.get(f"{DUT}:{dut.port(0)}", {})
    return [
        equal(f"PG {pg} packets", _last(seen, pg) // frame, n)
        for pg, n in _expected(dut, True).items()
    ]


WRR_TOTAL = 470
WRR_PENDING = 80
WRR_FRAME = 1500


def _weights(dut: Dut) -> dict[int, int]:
    """The intent's DWRR weights: the RoCE queue's, and 100 minus it for the lossy ones."""
    rdma = dut.fabric.qos.rdma_scheduler_weight
    prio = params.lossless_dscp(dut)[1]
    return {0: 100 - rdma, prio: rdma}


def dwrr(dut: Dut) -> list[Check]:
    """WRRtest: 1500 B packets, per queue weight x 470 / sum of weights, held off then
    released; when a queue's last packet leaves, fewer than 80 packets are still pending;
    all received. The DUT's DWRR quantum is one frame per weight unit (what the test's
    counts assume: a scheduler that interleaves packets by weight)."""
    weights = _weights(dut)
    dscps = {0: params.lossy_dscp(dut)[0], max(weights): params.lossless_dscp(dut)[0]}
    total = sum(weights.values())
    counts = {q: w * WRR_TOTAL // total for q, w in weights.items()}
    flows = [
        burst(f"q{q}", 0, 1, counts[q], dscps[q], WRR_FRAME, start=1e-6 * k)
        for k, q in enumerate(counts)
    ]
    release = 20e-6
    wire = WRR_TOTAL * WRR_FRAME * 8 / dut.speed(1)
    drained = release + 2 * wire
    exp = dut.experiment(
        2,
        flows,
        [dut.tx_off(1, release)],
        duration=drained,
        frame=WRR_FRAME,
        monitor=50e-9,
    )
    port = f"{DUT}:{dut.port(1)}"
    exp = replace(
        exp,
        switches=[
            replace(
                exp.switches[0],
                port_qos={
                    p: replace(q, dwrr_quantum=WRR_FRAME)
                    for p, q in exp.switches[0].port_qos.items()
                },
            )
        ],
    )
    result = simulate(exp)
    checks = [
        within(f"packets pending when queue {q} empties", n, 0, WRR_PENDING - 1)
        for q, n in _pending(result.queues.get(port, {}), list(counts)).items()
    ]
    got = sum(f.bytes_delivered for f in result.flows) // WRR_FRAME
    checks.append(equal("packets received", got, sum(counts.values())))
    return checks


def _pending(series: dict[int, list[int]], queues: list[int]) -> dict[int, int]:
    """Per queue, the packets all queues hold when it empties after the first departure."""
    held = [sum(v) for v in zip(*series.values(), strict=True)] or [0]
    full = held.index(max(held))
    start = next((i for i in range(full, len(held)) if held[i] < held[full]), full)
    out = {}
    for q in queues:
        mine = series.get(q, [])
        empty = next((i for i in range(start, len(mine)) if mine[i] == 0), len(mine) - 1)
        out[q] = sum(s[empty] for s in series.values() if empty < len(s)) // WRR_FRAME
    return out


def pfc_counters(dut: Dut) -> list[Check]:
    """test_pfc_counters: 10 PFC frames per priority; the RX PFC counter is 10 on that
    priority and 0 elsewhere."""
    checks = []
    speed = dut.speed(1)
    gap = 1 / params.storm_rate(speed)
    for prio in ALL:
        storm = PfcStorm("h1:p0", 0.0, 9.5 * gap, (prio,), interval=gap)
        result = simulate(dut.experiment(2, [], [storm], duration=12 * gap))
        got = {p: dut.counters(result, 1, p).pause_received for p in ALL}
        checks.append(
            equal(
                f"RX PFC on priority {prio} (others)",
                (got[prio], sum(got.values()) - got[prio]),
                (10, 0),
            )
        )
    return checks


def remap_roce_dscp(db: ConfigDb) -> None:
    """The lossless class's DSCP (26) mapped to TC 0 in every DSCP_TO_TC_MAP."""
    for table in db.get("DSCP_TO_TC_MAP", {}).values():
        table["26"] = "0"


def remap_tc_to_pg(db: ConfigDb) -> None:
    """TC 3 sent to PG 0 in every TC_TO_PRIORITY_GROUP_MAP."""
    for table in db.get("TC_TO_PRIORITY_GROUP_MAP", {}).values():
        table["3"] = "0"


def swap_weights(db: ConfigDb) -> None:
    """The RDMA and lossy DWRR weights swapped."""
    sched = db.get("SCHEDULER", {})
    lossy, rdma = sched["scheduler.lossy"]["weight"], sched["scheduler.rdma"]["weight"]
    sched["scheduler.lossy"]["weight"], sched["scheduler.rdma"]["weight"] = rdma, lossy


def port_down(db: ConfigDb) -> None:
    """Every server port after the first administratively down."""
    for attrs in list(db.get("PORT", {}).values())[1:]:
        attrs["admin_status"] = "down"


TESTS = [
    QosTest(
        "dscp_to_queue",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiDscpQueueMapping"
        " -> sai_qos_tests.py::DscpMappingPB",
        dscp_to_queue,
        remap_roce_dscp,
        "DSCP 26 mapped to TC 0",
    ),
    QosTest(
        "dscp_to_pg",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiDscpToPgMapping"
        " -> sai_qos_tests.py::DscpToPgMapping",
        dscp_to_pg,
        remap_tc_to_pg,
        "TC 3 mapped to PG 0",
    ),
    QosTest(
        "dwrr",
        "tests/qos/test_qos_sai.py::TestQosSai::testQosSaiDwrr -> sai_qos_tests.py::WRRtest",
        dwrr,
        swap_weights,
        "RDMA and lossy DWRR weights swapped",
    ),
    QosTest(
        "pfc_counters",
        "tests/qos/test_pfc_counters.py::test_pfc_pause",
        pfc_counters,
        port_down,
        "the receiving port administratively down",
    ),
]
