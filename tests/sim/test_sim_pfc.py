"""PFC keeps the lossless class lossless when headroom is sized by the physics formula, a too
small headroom shows up as counted lossless drops, and PFC alone shares an incast's bottleneck
at line rate less the frames' overhead."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from labs.sim import QueueParams, Result, load, simulate
from twin.design.headroom import headroom_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_incast_beyond_buffer_is_lossless_with_formula_headroom() -> None:
    exp, seed = load(EXAMPLES / "pfc_incast_8.yaml")
    result = simulate(exp, seed or 1)
    offered = sum(f.size or 0 for f in exp.flows)
    assert offered > exp.switches[0].buffer_bytes
    assert result.total("drops_lossless") == 0
    assert result.total("pause_sent") > 0
    for f in result.flows:
        assert f.bytes_delivered == f.size and f.completion is not None
    senders = [result.port(f"s{i}:eth0") for i in range(1, 9)]
    assert all(
        p.priorities[3].pause_received > 0 and p.priorities[3].paused_time > 0 for p in senders
    )
    # the ingress PG never held more than the shared threshold plus the headroom
    pg = result.pgs["sw:Ethernet0"][3]
    assert max(pg) <= exp.switches[0].buffer_bytes // 8 + headroom_bytes(100e9, 100, 4096)


def test_undersized_headroom_drops_are_counted_and_reported() -> None:
    exp, seed = load(EXAMPLES / "pfc_incast_8_undersized.yaml")
    result = simulate(exp, seed or 1)
    drops = result.total("drops_lossless")
    assert drops > 0
    dropped = sum(f.bytes_dropped for f in result.flows)
    assert (drops - len(exp.flows)) * 4096 < dropped <= drops * 4096  # last packets are short
    events = result.events_of("lossless_drop")
    assert events and all(e.node == "sw" and e.priority == 3 for e in events)
    assert result.total("drops_lossy") == 0


def test_headroom_formula_matches_reference_table() -> None:
    # physics.md 1.3: 400G without D_intf, 9216 B MTU: 79.0 KB at 5 m, 126.5 KB at 100 m
    assert round(headroom_bytes(400e9, 5, 9216) / 1e3, 1) == 79.0
    assert round(headroom_bytes(400e9, 100, 9216) / 1e3, 1) == 126.5


@functools.cache
def incast_40g(delay: float) -> Result:
    """pfc_incast_8_40g.yaml (8:1, PFC only, 1000-byte payloads) with links of `delay`."""
    exp, seed = load(EXAMPLES / "pfc_incast_8_40g.yaml")
    links = [dataclasses.replace(link, delay=delay) for link in exp.links]
    return simulate(dataclasses.replace(exp, links=links), seed or 1)


@pytest.mark.parametrize("delay", [1e-6, 10e-6])
def test_pfc_incast_goodput_is_line_rate_less_frame_overhead(delay: float) -> None:
    result = incast_40g(delay)
    formula = 40e9 * 1000 / (1000 + 62 + 20)  # payload / (payload + headers + preamble, gap)
    rates = [result.mean_rate(f.name, 2e-3, result.end_time) for f in result.flows]
    assert abs(sum(rates) - formula) <= 0.01 * formula, f"{sum(rates) / 1e9:.2f} Gb/s"
    for rate in rates:  # each sender C/N
        assert abs(rate - formula / 8) <= 0.05 * formula / 8
    assert result.total("drops_lossless") == 0


@pytest.mark.parametrize("delay", [1e-6, 10e-6])
def test_pfc_incast_senders_paused_and_queue_steady(delay: float) -> None:
    result = incast_40g(delay)
    for i in range(1, 9):  # each sender's link paused about 1 - 1/N of the time
        paused = result.port(f"s{i}:eth0").priorities[3].paused_time / result.end_time
        assert abs(paused - 7 / 8) <= 0.05, f"s{i}: paused {paused:.3f}"
    # the egress queue holds steady near the PGs' XOFF points, not filling and draining
    queue = result.queues["sw:Ethernet32"][3][round(2e-3 / result.sample_interval) :]
    assert min(queue) > 0.8 * max(queue), (min(queue), max(queue))


def test_ecn_at_enqueue_judges_the_queue_a_packet_joins() -> None:
    # marking from any queued byte: at dequeue a packet leaving an empty queue behind is
    # unmarked, at enqueue one joining an empty queue is
    exp, seed = load(EXAMPLES / "dcqcn_incast_2.yaml")
    red = QueueParams(ecn=True, kmin=0, kmax=1, pmax=1.0)
    marks = {}
    for at in ("dequeue", "enqueue"):
        switches = [
            dataclasses.replace(s, qos=dataclasses.replace(s.qos, ecn_at=at, queues={3: red}))
            for s in exp.switches
        ]
        run = dataclasses.replace(exp, switches=switches, duration=1e-3)
        marks[at] = simulate(run, seed or 1).port("sw:Ethernet8").priorities[3].ecn_marks
    assert marks["dequeue"] > 0 and marks["enqueue"] > 0
    assert marks["dequeue"] != marks["enqueue"]
