"""The sampled occupancy series account for the same bytes on both sides of a switch: at every
sample, what its ports' ingress PGs hold is what its egress queues hold (each buffered frame is
charged to the PG it came in by and sits in the queue it leaves by, in the switch's cells). A
queue or PG whose change a sample missed (the core reads only those touched since the last
one: `on_sample`, csrc/checks.c) breaks the balance at that sample."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from labs.sim import load, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def _totals(series: dict[str, dict[int, list[int]]], node: str, n: int) -> list[int]:
    """Per sample, the sum of `node`'s series (its ports' queues or PGs)."""
    totals = [0] * n
    for port, by_number in series.items():
        if port.split(":")[0] == node:
            for values in by_number.values():
                totals = [t + v for t, v in zip(totals, values, strict=True)]
    return totals


@pytest.mark.parametrize(
    "example",
    ["pfc_incast_8.yaml", "dcqcn_incast_10.yaml", "backup_in_lossy.yaml", "ring_two_flows.yaml"],
)
def test_a_switch_pgs_hold_what_its_queues_hold_at_every_sample(example: str) -> None:
    exp, seed = load(EXAMPLES / example)
    every_port = dataclasses.replace(exp.monitor, ports=())  # every switch port sampled
    result = simulate(dataclasses.replace(exp, monitor=every_port), seed or 1)
    series = (*result.queues.values(), *result.pgs.values())
    (n,) = {len(values) for by_number in series for values in by_number.values()}
    assert n > 10
    for switch in exp.switches:
        queued = _totals(result.queues, switch.name, n)
        charged = _totals(result.pgs, switch.name, n)
        assert queued == charged, switch.name
    busiest = max(max(_totals(result.queues, s.name, n)) for s in exp.switches)
    assert busiest > 0  # something was buffered: the balance was exercised
