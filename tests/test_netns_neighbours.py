"""The host's ARP table limits: raised for a lab's links, never lowered."""

from __future__ import annotations

from pathlib import Path

from labs.netns import neighbours
from labs.netns.plan import build
from validators.examples import generate

REPO = Path(__file__).resolve().parent.parent


def fake_proc(tmp_path: Path, values: tuple[int, int, int]) -> Path:
    for name, value in zip(("gc_thresh1", "gc_thresh2", "gc_thresh3"), values, strict=True):
        (tmp_path / name).write_text(f"{value}\n")
    return tmp_path


def test_a_three_tier_lab_of_200_servers_needs_more_than_the_default_limit(
    tmp_path: Path,
) -> None:
    fabric = (REPO / "examples" / "reference.yaml").read_text().replace("count: 50", "count: 200")
    (tmp_path / "big.yaml").write_text(fabric)
    plan = build(generate(tmp_path / "lab", tmp_path / "big.yaml"))
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
