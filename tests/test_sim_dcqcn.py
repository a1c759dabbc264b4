"""DCQCN N:1 incast against the fluid model of Zhu et al., CoNEXT 2016, section 3.

Over 50-100 ms each flow's mean delivered rate must be within 5 % of 40/N Gb/s and the mean
queue within 15 % of the fluid model's fixed point (20.2 KB for N = 2, 122.6 KB for N = 10).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.sim import load, simulate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sim"
FIXED_POINT_QUEUE = {2: 20.2e3, 10: 122.6e3}
"""Bytes; the fluid model's fixed point for the experiment files' parameters."""


@pytest.mark.parametrize("n", [2, 10])
def test_incast_matches_fluid_model(n: int) -> None:
    exp, seed = load(EXAMPLES / f"dcqcn_incast_{n}.yaml")
    result = simulate(exp, seed or 1)
    fair = 40e9 / n
    rates = {f.name: result.mean_rate(f.name, 0.05, 0.1) for f in result.flows}
    assert len(rates) == n
    for name, rate in rates.items():
        assert abs(rate - fair) <= 0.05 * fair, (
            f"{name}: {rate / 1e9:.2f} Gb/s, fair share {fair / 1e9:.1f}"
        )
    queue = result.mean_queue("sw:" + exp.monitor.ports[0].split(":")[1], 3, 0.05, 0.1)
    target = FIXED_POINT_QUEUE[n]
    assert abs(queue - target) <= 0.15 * target, (
        f"mean queue {queue / 1e3:.1f} KB, fluid {target / 1e3:.1f} KB"
    )
    assert all(f.cnps > 0 for f in result.flows)
    assert result.total("drops_lossless") == 0
