"""The ring of Hu et al., "Deadlocks in Datacenter Networks: Why Do They Form, and How to
Avoid Them" (HotNets 2016), section 3: two flows over a cyclic buffer dependency do not
deadlock, a third flow makes them, and the deadlock survives the sources stopping."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from labs.sim import Result, load, simulate
from labs.sim.figures import ring_deadlocks

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
WIRE_PER_PAYLOAD = (1000 + 62 + 20) / 1000
"""Bytes on the wire per payload byte: 1000-byte payloads, RoCEv2 headers, preamble and gap."""
RING_PORTS = {f"{sw}:Ethernet4" for sw in "ABCD"}
"""The ring's egress ports: A:Ethernet4 sends on L1 (A->B), B's on L2, C's on L3, D's on L4."""


@functools.cache
def run(name: str) -> Result:
    exp, seed = load(EXAMPLES / f"{name}.yaml")
    return simulate(exp, seed or 1)


def band(result: Result, port: str, start: float) -> tuple[int, int]:
    """The lowest and highest occupancy of the port's lossless ingress PG after `start`."""
    samples = result.pgs[port][3][round(start / result.sample_interval) :]
    return min(samples), max(samples)


def test_two_flows_do_not_deadlock() -> None:
    result = run("ring_two_flows")
    assert not result.deadlocked and result.events_of("deadlock") == []
    assert result.total("drops_lossless") == 0


def test_two_flows_pause_only_l2_and_l4() -> None:
    result = run("ring_two_flows")
    paused = {
        f"{p.node}:{p.port}"
        for p in result.ports
        if f"{p.node}:{p.port}" in RING_PORTS and p.priorities[3].pause_received > 0
    }
    assert paused == {"B:Ethernet4", "D:Ethernet4"}


def test_two_flows_get_half_the_ring_each() -> None:
    result = run("ring_two_flows")
    for flow in result.flows:
        wire = result.mean_rate(flow.name, 1e-3, result.end_time) * WIRE_PER_PAYLOAD
        assert abs(wire - 20e9) <= 0.05 * 20e9, f"{flow.name}: {wire / 1e9:.2f} Gb/s"


def test_two_flows_occupancy_bands_are_the_published_ones() -> None:
    result = run("ring_two_flows")
    low, high = band(result, "A:Ethernet8", 1e-3)  # A's ingress from D: about 10-55 KB
    assert abs(low - 10e3) <= 0.2 * 10e3 and abs(high - 55e3) <= 0.2 * 55e3, (low, high)
    low, high = band(result, "B:Ethernet8", 1e-3)  # B's ingress from A: within 0-18 KB
    assert low == 0 and 0 < high <= 1.2 * 18e3, (low, high)


def test_third_flow_deadlocks_the_ring_for_good() -> None:
    exp, _ = load(EXAMPLES / "ring_three_flows.yaml")
    result = run("ring_three_flows")
    assert result.deadlocked
    (event,) = result.events_of("deadlock")
    assert sorted(event.cycle) == sorted((p.split(":")[0], p.split(":")[1], 3) for p in RING_PORTS)
    # reported when the cycle froze (its last departure), not when the stall check found it
    assert event.time < exp.checks.stall
    stop = max(f.stop or 0.0 for f in exp.flows)
    assert result.end_time > stop + exp.checks.stall  # ran on after the sources stopped
    # the cycle's queues still hold their packets at the end: nothing left the ring
    for port in RING_PORTS:
        assert result.port(port).priorities[3].paused_time > 0.9 * result.end_time
    assert all(f.bytes_delivered < f.bytes_sent for f in result.flows)


@pytest.mark.parametrize(
    ("gbps", "deadlocks"), [(2, False), (4, False), (5.5, False), (6, True), (8, True)]
)
def test_a_slower_third_flow_deadlocks_only_from_a_boundary(gbps: float, deadlocks: bool) -> None:
    """HotNets'16: below some rate of the third flow the ring survives; at the model's XON
    offset (18 KB) the boundary is 6 Gb/s (docs/simulator.md, the ring sweep)."""
    assert ring_deadlocks(gbps * 1e9, 18_432) is deadlocks


def test_more_hysteresis_deadlocks_at_lower_rates() -> None:
    """A PG that must drain further before XON stays paused longer: at 26 KB 5 Gb/s
    deadlocks, at 10 KB 6.5 Gb/s does not."""
    assert ring_deadlocks(5e9, 26_000) and not ring_deadlocks(5e9, 18_432)
    assert not ring_deadlocks(6.5e9, 10_000) and ring_deadlocks(6.5e9, 18_432)
