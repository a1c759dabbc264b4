"""The same experiment and seed give byte-identical JSON; another seed gives another run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from labs.sim import load, simulate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sim"


def test_same_seed_same_bytes() -> None:
    exp, _ = load(EXAMPLES / "dcqcn_incast_2.yaml")
    short = dataclasses.replace(exp, duration=0.01)
    first = simulate(short, 7).to_json()
    second = simulate(short, 7).to_json()
    assert first == second
    other = simulate(short, 8).to_json()
    assert other != first
