"""NIC pacing: flows sharing a NIC each keep their own rate (docs/simulator.md, frames as on
the wire)."""

from __future__ import annotations

import pytest

from labs.sim import Experiment, Flow, Host, Link, Switch, simulate

SPEED = 400e9
RUN = 1e-3
FRAME = 1024
WIRE = FRAME + 62 + 20
"""Payload, headers and the wire's preamble and gap: what a paced rate counts."""


@pytest.mark.parametrize("rates", [(0.30, 0.25), (0.10, 0.30), (0.50, 0.45)])
def test_open_loop_flows_on_one_nic_keep_their_rates(rates: tuple[float, float]) -> None:
    """Two open-loop flows from one host at close rates (below the line together): each
    sends at its own rate (the faster one was paced at the slower one's before its frames
    were paced from when they were due)."""
    flows = [
        Flow(
            f"f{i}",
            "a",
            "b",
            size=None,
            rate=r * SPEED,
            stop=RUN,
            cc="none",
            dscp=0,
            priority=0,
            packet_bytes=FRAME,
        )
        for i, r in enumerate(rates)
    ]
    exp = Experiment(
        switches=[Switch("sw", buffer_bytes=40_000_000)],
        hosts=[Host("a"), Host("b")],
        links=[Link("a:p0", "sw:E0", SPEED), Link("b:p0", "sw:E4", SPEED)],
        flows=flows,
        duration=1.1 * RUN,
        stop_when_done=False,
    )
    result = simulate(exp)
    for i, r in enumerate(rates):
        sent = result.flow(f"f{i}").bytes_sent * 8 / RUN
        assert sent == pytest.approx(r * SPEED * FRAME / WIRE, rel=0.005)
