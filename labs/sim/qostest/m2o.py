"""Many-to-one oversubscription (sonic-mgmt's snappi m2o tests): two ports into one, lossless
flows pushed back by PFC, lossy ones dropped to their DWRR share."""

from __future__ import annotations

from dataclasses import dataclass

from labs.sim import simulate
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, equal, within
from labs.sim.qostest.dut import Dut, stream
from labs.sim.qostest.mapping import swap_weights
from labs.sim.result import Result
from twin.render.config_db import ConfigDb

FRAME = 1024
RUN = 10e-3
WINDOW = (0.6, 1.0)
"""The steady state, after the lossy queue and the lossless PGs have filled: a share of
the run."""
REFERENCE_SPEED = 400e9
"""At this speed a run lasts RUN; at others as long as it takes to carry as many bytes."""
SAMPLE = 100e-6


def _run(dut: Dut) -> float:
    return RUN * REFERENCE_SPEED / _speed(dut)


@dataclass(frozen=True)
class M2oFlow:
    """One generator flow: its name, sonic-mgmt's ingress port (1 or 2), share of the line
    and whether it is in the lossless class (else the lossy one of `lossy_tc`)."""

    name: str
    port: int
    percent: float
    lossless: bool
    lossy_tc: int = 0


def _dscp(dut: Dut, flow: M2oFlow) -> tuple[int, int]:
    if flow.lossless:
        return params.lossless_dscp(dut)
    listed = {c.tc: c.dscp for c in dut.fabric.qos.classes.values()}
    return listed.get(flow.lossy_tc, params.lossy_dscp(dut)[0]), flow.lossy_tc


def _speed(dut: Dut) -> float:
    """The generator ports' line rate: the intent's NIC speed, b/s."""
    return float(dut.fabric.servers.nic_speed) * 1e6


def play(dut: Dut, flows: list[M2oFlow]) -> Result:
    """Each flow from its sonic-mgmt ingress port (port 1 on test port 0, 2 on 1), all into
    the next test port."""
    speed, dst = _speed(dut), max(f.port for f in flows)
    made = []
    for f in flows:
        dscp, tc = _dscp(dut, f)
        made.append(
            stream(
                f.name,
                f.port - 1,
                dst,
                f.percent / 100 * speed,
                dscp,
                FRAME,
                _run(dut),
                priority=tc if f.lossless else 0,
            )
        )
    return simulate(dut.experiment(dst + 1, made, duration=_run(dut), frame=FRAME, monitor=SAMPLE))


def loss_percent(dut: Dut, res: Result, flow: M2oFlow) -> float:
    """A flow's loss over the steady window: 1 - delivered / offered, in percent."""
    offered = flow.percent / 100 * _speed(dut) * FRAME / (FRAME + 20)
    start, end = (_run(dut) * w for w in WINDOW)
    return 100 * (1 - res.mean_rate(flow.name, start, end) / offered)


def dwrr_loss(dut: Dut, flows: list[M2oFlow]) -> dict[str, float]:
    """Expected loss of each lossy flow (percent): its queue's DWRR share (the intent's
    weights; lossless demand is what its flows offer) shared by rate within the queue."""
    lossless_q = params.lossless_dscp(dut)[1]
    rdma = dut.fabric.qos.rdma_scheduler_weight
    demand: dict[int, float] = {}
    for f in flows:
        q = lossless_q if f.lossless else f.lossy_tc
        demand[q] = demand.get(q, 0.0) + f.percent / 100
    weights = {q: rdma if q == lossless_q else 100 - rdma for q in demand}
    share = params.dwrr_shares(demand, weights)
    return {
        f.name: 100 * (1 - share[f.lossy_tc] / demand[f.lossy_tc]) for f in flows if not f.lossless
    }


def _judge(dut: Dut, flows: list[M2oFlow], extra: dict[str, tuple[float, float]]) -> list[Check]:
    """Lossless flows lose nothing; lossy ones within 1 point of the DWRR expectation; and
    the test's own bounds (`extra`: flow -> (low, high) percent)."""
    res = play(dut, flows)
    expected = dwrr_loss(dut, flows)
    checks: list[Check] = []
    for f in flows:
        seen = round(loss_percent(dut, res, f), 2)
        if f.lossless:  # paused, it sends less: its loss is what it sent and lost
            got = res.flow(f.name)
            seen = round(100 * got.bytes_dropped / max(1, got.bytes_sent), 2)
            checks.append(equal(f"{f.name} bytes dropped", got.bytes_dropped, 0))
        else:
            e = expected[f.name]
            checks.append(within(f"{f.name} loss vs DWRR", seen, e - 1, e + 1, " %"))
        if f.name in extra:
            checks.append(within(f"{f.name} loss", seen, *extra[f.name], " %"))
    return checks


def oversubscribe_lossless(dut: Dut) -> list[Check]:
    """test_m2o_oversubscribe_lossless: test 35 % + background 22.5 % per port, all in the
    lossless class (115 % into one port): 0 % loss on every flow."""
    flows = [
        M2oFlow(f"{kind} {p + 1}", p + 1, pct, True)
        for p in (0, 1)
        for kind, pct in (("test", 35.0), ("background", 22.5))
    ]
    return _judge(dut, flows, {f.name: (-1.0, 1.0) for f in flows})


def lossless_lossy(dut: Dut) -> list[Check]:
    """test_m2o_oversubscribe_lossless_lossy: lossless 40/20 %, lossy 20/40 % (on two lossy
    queues): the lossless flows lose nothing, background 1 under 1 %, background 2 >= 10 %."""
    flows = [
        M2oFlow("test 1", 1, 40, True),
        M2oFlow("test 2", 2, 20, True),
        M2oFlow("background 1", 1, 20, False, 0),
        M2oFlow("background 2", 2, 40, False, 1),
    ]
    return _judge(dut, flows, {"background 1": (-1.0, 1.0), "background 2": (10.0, 100.0)})


def oversubscribe_lossy(dut: Dut) -> list[Check]:
    """test_m2o_oversubscribe_lossy: lossy 30 % x 2, lossless 25 % x 2: lossy 16 % loss
    (int), lossless 0."""
    flows = [
        M2oFlow("test 1", 1, 30, False),
        M2oFlow("test 2", 2, 30, False),
        M2oFlow("background 1", 1, 25, True),
        M2oFlow("background 2", 2, 25, True),
    ]
    return _judge(dut, flows, {"test 1": (16.0, 17.0), "test 2": (16.0, 17.0)})


def fluctuating(dut: Dut) -> list[Check]:
    """test_m2o_fluctuating_lossless: lossless 20/10 %, lossy 20/20 %: lossless 0 %, lossy
    within 1 point of the DWRR expectation."""
    flows = [
        M2oFlow("test 1", 1, 20, True),
        M2oFlow("test 2", 2, 10, True),
        M2oFlow("background 1", 1, 20, False),
        M2oFlow("background 2", 2, 20, False),
    ]
    return _judge(dut, flows, {})


def pfc_off(db: ConfigDb) -> None:
    """PFC disabled on every port (pfc_enable empty)."""
    for entry in db.get("PORT_QOS_MAP", {}).values():
        if "pfc_enable" in entry:
            entry["pfc_enable"] = ""


def half_speed(db: ConfigDb) -> None:
    """Every server port at half its speed (the intent's NICs keep theirs)."""
    for attrs in db.get("PORT", {}).values():
        attrs["speed"] = str(int(attrs.get("speed", 0)) // 2)


SNAPPI = "tests/snappi_tests/pfc/"
TESTS = [
    QosTest(
        "m2o_oversubscribe_lossless",
        SNAPPI + "test_m2o_oversubscribe_lossless.py::test_m2o_oversubscribe_lossless",
        oversubscribe_lossless,
        pfc_off,
        "PFC disabled on every port",
    ),
    QosTest(
        "m2o_oversubscribe_lossless_lossy",
        SNAPPI + "test_m2o_oversubscribe_lossless_lossy.py::test_m2o_oversubscribe_lossless_lossy",
        lossless_lossy,
        swap_weights,
        "RDMA and lossy DWRR weights swapped",
    ),
    QosTest(
        "m2o_oversubscribe_lossy",
        SNAPPI + "test_m2o_oversubscribe_lossy.py::test_m2o_oversubscribe_lossy",
        oversubscribe_lossy,
        swap_weights,
        "RDMA and lossy DWRR weights swapped",
    ),
    QosTest(
        "m2o_fluctuating_lossless",
        SNAPPI + "test_m2o_fluctuating_lossless.py::test_m2o_fluctuating_lossless",
        fluctuating,
        half_speed,
        "server ports at half the intended speed",
    ),
]
