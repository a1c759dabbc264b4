"""What the 3-tier fabric of 200 servers needs from the host and the deploy: ARP table limits
raised for its links (never lowered), and time to converge."""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.netns import neighbours
from labs.netns.lifecycle import convergence_timeout
from labs.netns.plan import build
from twin.lab.directory import Lab
from validators.examples import generate

REPO = Path(__file__).resolve().parents[2]


def fake_proc(tmp_path: Path, values: tuple[int, int, int]) -> Path:
    for name, value in zip(("gc_thresh1", "gc_thresh2", "gc_thresh3"), values, strict=True):
        (tmp_path / name).write_text(f"{value}\n")
    return tmp_path


@pytest.fixture(scope="module")
def three_tier(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """examples/reference.yaml with 200 servers: 30 leaves, 32 spines, 16 super-spines."""
    tmp = tmp_path_factory.mktemp("3tier")
    fabric = (REPO / "examples" / "reference.yaml").read_text().replace("count: 50", "count: 200")
    (tmp / "big.yaml").write_text(fabric)
    return generate(tmp / "lab", tmp / "big.yaml")


def test_the_deploy_waits_long_enough_for_78_switches(three_tier: Lab) -> None:
    assert len(three_tier.switches()) == 78
    # bench/bench_deploy.py --servers 200: converged in 108 s on two shared cores
    assert convergence_timeout(three_tier) >= 120


def test_a_three_tier_lab_of_200_servers_needs_more_than_the_default_limit(
    three_tier: Lab, tmp_path: Path
) -> None:
    plan = build(three_tier)
    # every routed link's two ends resolve each other: more than the 1024 entries the
    # kernel allows by default, for all namespaces together
    assert 2 * len(plan.veths) > 1024
    root = fake_proc(tmp_path, (128, 512, 1024))
    raised = neighbours.make_room(len(plan.veths), root)
    assert raised == neighbours.limits(len(plan.veths))
    assert int((root / "gc_thresh3").read_text()) >= 2 * (1024 + 2 * len(plan.veths))


def test_limits_are_only_raised(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, (128, 512, 100000))
    assert neighbours.make_room(10, root) == {"gc_thresh1": 532, "gc_thresh2": 1064}
    assert (root / "gc_thresh3").read_text() == "100000\n"
    assert neighbours.make_room(10, root) == {}
