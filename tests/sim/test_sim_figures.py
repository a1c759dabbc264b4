"""The figures docs/simulator.md and the example files quote are the engine's: each marked
block equals what labs/sim/figures.py computes (`bench/bench_figures.py --write` rewrites
them), and the N = 64 DCQCN incast follows the delayed fluid model."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import blocks
from labs.sim import figures

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "docs" / "simulator.md", *sorted((REPO / "examples" / "sim").glob("*.yaml"))]
MARKED = [
    (path, name)
    for path in FILES
    for name in blocks.blocks_in(path)
    if path.suffix != ".md" or blocks.bench_of(path, name) == "bench/bench_figures.py"
]
"""The blocks bench/bench_figures.py makes (docs/simulator.md quotes other benches too)."""


def test_every_block_is_marked_somewhere() -> None:
    assert {name for _, name in MARKED} == set(figures.BLOCKS)


@pytest.mark.parametrize(("path", "name"), MARKED, ids=[f"{p.name}:{n}" for p, n in MARKED])
def test_quoted_figures_are_the_engines(path: Path, name: str) -> None:
    assert blocks.current(path, name) == figures.BLOCKS[name](), (
        f"{path.name}: {name} is stale; run bench/bench_figures.py --write"
    )


@pytest.mark.parametrize("link", [1e-6, 21e-6])
def test_incast_64_follows_the_delayed_fluid_model(link: float) -> None:
    """With a 4 us loop both hold near the fixed point; with an 84 us loop both swing down to an
    empty queue, about the same mean and peak (the fluid model's own oscillation)."""
    engine, fluid = figures.incast_64_queues(link)
    assert abs(engine[2] - fluid[2]) <= 0.1 * fluid[2]
    assert abs(engine[1] - fluid[1]) <= 0.15 * fluid[1]
    assert (engine[0] == 0) == (fluid[0] == 0)
