"""ECMP hash balance (ptftests hash_test.py, tests/fib/test_fib.py::test_hash)."""

from __future__ import annotations

from labs.sim import simulate
from labs.sim.qostest import params
from labs.sim.qostest.case import Check, QosTest, within
from labs.sim.qostest.dut import DUT, Dut, burst, test_ports
from twin.render.config_db import ConfigDb

MEMBERS = 4
PER_MEMBER = 250
TOLERANCE = 0.25


def ecmp_hash(dut: Dut) -> list[Check]:
    """250 packets x members, one flow (5-tuple) each, to a destination routed over up to 4
    ECMP members (the test ports left): each member within +-25 % of its fair share."""
    dscp = params.lossy_dscp(dut)[0]
    frame = params.cell_size(dut)
    width = max(2, min(MEMBERS, len(dut.ports) - 2))
    dst = width + 1
    members = [f"{DUT}:{dut.port(i)}" for i in range(1, width + 1)]
    n = PER_MEMBER * width
    flows = [burst(f"k{k}", 0, dst, 1, dscp, frame, k * 1e-8) for k in range(n)]
    exp = dut.experiment(dst + 1, flows, duration=50e-6, routes={f"h{dst}": members})
    res = simulate(exp)
    fair = n / width
    return [
        within(
            f"packets out of member {m.split(':')[1]}",
            sum(c.tx_packets for c in res.port(m).priorities.values()),
            fair * (1 - TOLERANCE),
            fair * (1 + TOLERANCE),
        )
        for m in members
    ]


def member_down(db: ConfigDb) -> None:
    """The second test port (an ECMP member) administratively down."""
    db["PORT"][test_ports(db)[1]]["admin_status"] = "down"


TESTS = [
    QosTest(
        "ecmp_hash",
        "ansible/roles/test/files/ptftests/py3/hash_test.py::HashTest"
        " (tests/fib/test_fib.py::test_hash)",
        ecmp_hash,
        member_down,
        "one ECMP member administratively down",
    ),
]
