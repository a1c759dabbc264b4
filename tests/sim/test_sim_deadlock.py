"""Routing-loop deadlock threshold (Hu et al., HotNets 2016, section 3.1): with TTL 16 and two
switches at 40 Gb/s, a deadlock forms above n*B/TTL = 5 Gb/s injected, not below."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from labs.sim import load, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_loop_deadlocks_above_threshold() -> None:
    exp, seed = load(EXAMPLES / "routing_loop_6g.yaml")
    result = simulate(exp, seed or 1)
    assert result.deadlocked
    (event,) = result.events_of("deadlock")
    assert sorted(event.cycle) == [("A", "Ethernet4", 3), ("B", "Ethernet4", 3)]
    assert result.end_time < exp.duration  # stop_on_deadlock ended the run
    assert result.total("drops_lossless") == 0


def test_loop_below_threshold_keeps_flowing() -> None:
    exp, seed = load(EXAMPLES / "routing_loop_4g.yaml")
    result = simulate(exp, seed or 1)
    assert not result.deadlocked
    assert result.events_of("deadlock") == []
    assert result.end_time == exp.duration
    # every injected packet dies of TTL expiry: the loop kept moving
    inject = result.flow("inject")
    assert inject.bytes_dropped >= inject.bytes_sent - 100 * 1000


@pytest.mark.parametrize(("rate", "deadlock"), [(4.9e9, False), (5.1e9, True)])
def test_threshold_is_sharp(rate: float, deadlock: bool) -> None:
    exp, _ = load(EXAMPLES / "routing_loop_6g.yaml")
    (inject,) = exp.flows
    result = simulate(dataclasses.replace(exp, flows=[dataclasses.replace(inject, rate=rate)]))
    assert result.deadlocked is deadlock


def test_deadlock_detection_can_be_switched_off() -> None:
    exp, _ = load(EXAMPLES / "routing_loop_6g.yaml")
    quiet = dataclasses.replace(
        exp, checks=dataclasses.replace(exp.checks, deadlock=False), duration=0.005
    )
    result = simulate(quiet)
    assert not result.deadlocked and result.end_time == 0.005
