"""Schedulers (strict priority, DWRR), ECMP hashing and flow dependencies."""

from __future__ import annotations

import dataclasses

from labs.sim import Experiment, Flow, Host, Link, QosProfile, QueueParams, Switch, simulate
from labs.sim.fabrics import leaf_spine, ring_allreduce, with_flows


def two_class(queues: dict[int, QueueParams]) -> Experiment:
    """Two lossy open-loop senders at line rate into one 10G receiver, DSCP 0 -> TC 0 and
    DSCP 8 -> TC 1."""
    qos = QosProfile(dscp_to_tc={0: 0, 8: 1}, queues=queues)
    hosts = [Host("a", qos=qos), Host("b", qos=qos), Host("r", qos=qos)]
    links = [Link("a:eth0", "sw:Ethernet0", 10e9), Link("b:eth0", "sw:Ethernet4", 10e9)]
    links.append(Link("r:eth0", "sw:Ethernet8", 10e9))
    flows = [
        Flow("low", "a", "r", dscp=0, cc="none", stop=0.004),
        Flow("high", "b", "r", dscp=8, cc="none", stop=0.004),
    ]
    return Experiment([Switch("sw", 2_000_000, qos)], hosts, links, flows, duration=0.005)


def test_dwrr_shares_by_weight() -> None:
    result = simulate(two_class({0: QueueParams(weight=1), 1: QueueParams(weight=3)}))
    low, high = result.flow("low").bytes_delivered, result.flow("high").bytes_delivered
    assert 2.8 < high / low < 3.2
    assert result.total("drops_lossy") > 0  # lossy queues overflow instead of pausing
    assert result.total("pause_sent") == 0


def test_strict_priority_starves_the_other_queue() -> None:
    # ends while both still send (afterwards the low queue drains what it holds)
    exp = two_class({0: QueueParams(), 1: QueueParams(strict=True)})
    result = simulate(dataclasses.replace(exp, duration=0.004))
    low, high = result.flow("low").bytes_delivered, result.flow("high").bytes_delivered
    assert high > 30 * max(low, 1)


def test_ecmp_spreads_flows_and_follows_the_seed() -> None:
    fabric = leaf_spine(servers=8, leaves=2, spines=4, uplinks=1, speed=100e9)
    flows = [
        Flow(f"f{i}", f"srv{i}-nic0", f"srv{(i + 1) % 8}-nic1", size=400_000, cc="none")
        for i in range(8)
    ]
    exp = with_flows(fabric, flows, duration=0.01)

    def spine_bytes(seed: int) -> list[int]:
        result = simulate(exp, seed)
        return [
            sum(c.tx_bytes for c in p.priorities.values())
            for p in result.ports
            if p.node.startswith("spine") and p.port == "Ethernet4"  # spine -> leaf1
        ]

    first = spine_bytes(1)
    assert sum(b > 0 for b in first) >= 2
    assert spine_bytes(1) == first
    assert any(spine_bytes(s) != first for s in (2, 3, 4))


def test_dependencies_start_after_completion_and_delay() -> None:
    fabric = leaf_spine(servers=2, leaves=2, spines=1, uplinks=1, speed=100e9)
    flows = [
        Flow("a", "srv0-nic0", "srv1-nic0", size=1_000_000),
        Flow("b", "srv1-nic0", "srv0-nic0", size=1_000_000, after=("a",), after_delay=50e-6),
    ]
    result = simulate(with_flows(fabric, flows, duration=0.01))
    a, b = result.flow("a"), result.flow("b")
    assert a.completion is not None and b.start is not None
    assert abs(b.start - (a.completion + 50e-6)) < 1e-9


def test_ring_allreduce_moves_every_chunk() -> None:
    fabric = leaf_spine(servers=2, leaves=2, spines=2, uplinks=1, speed=100e9)
    ranks = [h.name for h in fabric.hosts]
    flows = ring_allreduce(ranks, 4_000_000)
    assert len(flows) == 2 * (len(ranks) - 1) * len(ranks)
    result = simulate(with_flows(fabric, flows, duration=0.05))
    assert all(f.completion is not None and f.bytes_delivered == 1_000_000 for f in result.flows)
    # step k of a rank never starts before step k-1 of its left neighbour completed
    done = {f.name: f.completion for f in result.flows}
    for f in result.flows:
        k, i = (int(x) for x in f.name[2:].split("-"))
        if k:
            left = done[f"ar{k - 1}-{(i - 1) % len(ranks)}"]
            assert left is not None and f.start is not None and f.start >= left
