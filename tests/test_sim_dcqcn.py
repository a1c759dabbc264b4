"""DCQCN N:1 incast against the fluid model of Zhu et al., CoNEXT 2016, section 3.

Over 50-100 ms each flow's mean delivered rate must be within 5 % of 40/N Gb/s and the mean
queue within 15 % of the fluid model's fixed point (20.2 KB for N = 2, 122.6 KB for N = 10).
At N = 10 the 50 ms bound is not met (DCQCN's own rate noise, docs/simulator.md); over half a
second each flow is within it, which a per-flow bias would not allow.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import pytest

from labs.sim import Result, load, simulate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sim"
FIXED_POINT_QUEUE = {2: 20.2e3, 10: 122.6e3}
"""Bytes; the fluid model's fixed point for the experiment files' parameters."""


def fluid_fixed_point(n: int) -> float:
    """The fluid model's fixed-point queue in bytes (CoNEXT'16 eqs. for alpha, Rt and Rc set
    to zero, with N x Rc = C), for the experiment files' parameters; rates in packets/s."""
    rc, b, t, f, r_ai = 40e9 / n / 8000, 10e6 / 1000, 55e-6, 5, 40e6 / 8000
    tau, tau_alpha = 50e-6, 55e-6

    def excess_decrease(p: float) -> float:
        cnp = (1 - (1 - p) ** (tau * rc)) / tau
        alpha = 1 - (1 - p) ** (tau_alpha * rc)
        log = -math.log1p(-p)
        events = [rc * p / math.expm1(log * k) for k in (b, t * rc)]
        increases = [e * math.exp(-log * f * k) for e, k in zip(events, (b, t * rc), strict=True)]
        gap = r_ai * sum(increases) / cnp  # Rt - Rc where dRt/dt = 0
        return float(rc * alpha / 2 * cnp - gap / 2 * sum(events))

    low, high = 1e-7, 0.5
    for _ in range(100):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if excess_decrease(mid) < 0 else (low, mid)
    return 5e3 + low / 0.01 * 195e3


@pytest.mark.parametrize("n", [2, 10])
def test_fixed_points_are_the_fluid_models(n: int) -> None:
    assert abs(fluid_fixed_point(n) - FIXED_POINT_QUEUE[n]) < 100


@functools.cache
def run(n: int, duration: float = 0.1) -> tuple[Result, str]:
    """The incast of N senders for `duration` seconds (run once for all tests)."""
    exp, seed = load(EXAMPLES / f"dcqcn_incast_{n}.yaml")
    exp = dataclasses.replace(exp, duration=duration)
    return simulate(exp, seed or 1), exp.monitor.ports[0]


@pytest.mark.parametrize("n", [2, 10])
def test_mean_queue_matches_fluid_model(n: int) -> None:
    result, port = run(n)
    queue = result.mean_queue(port, 3, 0.05, 0.1)
    target = FIXED_POINT_QUEUE[n]
    assert abs(queue - target) <= 0.15 * target, (
        f"mean queue {queue / 1e3:.1f} KB, fluid {target / 1e3:.1f} KB"
    )
    assert all(f.cnps > 0 for f in result.flows)
    assert result.total("drops_lossless") == 0


UNFAIR_AT_10 = pytest.mark.xfail(
    strict=True,
    reason="N=10: each flow's 50-100 ms mean is 8-15 % off 40/N, DCQCN's own rate noise at these "
    "parameters (an engine-free model of the algorithm and HPCC's ns-3 DCQCN spread as much; "
    "docs/simulator.md)",
)


@pytest.mark.parametrize(
    ("n", "end"), [(2, 0.1), pytest.param(10, 0.1, marks=UNFAIR_AT_10), (10, 0.55)]
)
def test_each_flow_gets_its_fair_share(n: int, end: float) -> None:
    result, _ = run(n, end)
    fair = 40e9 / n
    rates = {f.name: result.mean_rate(f.name, 0.05, end) for f in result.flows}
    assert len(rates) == n
    assert abs(sum(rates.values()) - 40e9) < 0.01 * 40e9
    for name, rate in rates.items():
        assert abs(rate - fair) <= 0.05 * fair, (
            f"{name}: {rate / 1e9:.2f} Gb/s, fair share {fair / 1e9:.1f}"
        )
