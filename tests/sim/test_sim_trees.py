"""The double binary tree on the simulator, and `algorithm: auto` (NCCL's choice)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.simlab import play, small_lab, validate
from twin.cli.verbs.run import DEFAULT_SCENARIO, REFERENCE
from twin.errors import InputError
from twin.intent import fabric as intent
from twin.intent.inputs import parse_model
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.scenario import model, plan
from twin.scenario.model import Scenario


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("lab") / "small")


def all_reduce(algorithm: str, message: int = 2_000_003) -> dict[str, Any]:
    phase = {
        "at": 0, "kind": "all_reduce", "algorithm": algorithm, "servers": "all", "qps": 2,
        "message": message, "iterations": 3,
    }  # fmt: skip
    return {
        "name": "tree",
        "traffic": [phase],
        "sim": {"time_scale": 1},
        "validate": {"collective_efficiency": {}},
    }


@pytest.mark.parametrize("algorithm", ["tree", "hierarchical_ring"])
def test_an_all_reduce_plays_every_iteration_within_its_bound(base: Path, algorithm: str) -> None:
    """Two leaf groups of two servers: the hierarchical ring's racks are equal."""
    played = play(base, all_reduce(algorithm))
    (iterations,) = played.extra["iterations"].values()
    assert iterations["algorithm"] == algorithm
    assert len(iterations["times_s"]) == 3 and all(t and t > 0 for t in iterations["times_s"])
    (result,) = validate(base, all_reduce(algorithm)).values()
    assert result.status.value == "pass" and f"({algorithm}, 4 ranks)" in result.scope


@pytest.mark.parametrize(("message", "expected"), [(2_000_003, "tree"), (1 << 26, "ring")])
def test_auto_plays_nccls_choice(base: Path, message: int, expected: str) -> None:
    """4 servers of 8 GPUs, 2 x 400G: NCCL's model runs 2 MB as a tree (its ring's 6 network
    steps cost more latency than the tree's bandwidth loses), 64 MB as a ring."""
    lab = Lab.open(base)
    scenario = parse_model(Scenario, all_reduce("auto", message), "test")
    (phase,) = plan.timeline(lab, scenario).phases
    assert phase.algorithm == expected


def test_the_reference_runs_a_tree(tmp_path: Path) -> None:
    """The default scenario's 8 MB All-Reduce over the reference's 49 ranks plays NCCL's
    choice (issue 34): `auto`, which NCCL's model makes the tree (docs/traffic.md); the ring,
    named, stays the ring."""
    data = yaml.safe_load(REFERENCE.read_text())
    labdir.generate(intent.parse(data, str(REFERENCE)), tmp_path / "ref", str(REFERENCE))
    lab = Lab.open(tmp_path / "ref")
    traffic = model.load(DEFAULT_SCENARIO, lab, frames=False).traffic
    assert traffic[1].kind == "all_reduce" and traffic[1].algorithm == "auto"
    assert plan.phase(lab, 1, traffic[1]).algorithm == "tree"
    ring = traffic[1].model_copy(update={"algorithm": "ring"})
    assert plan.phase(lab, 1, ring).algorithm == "ring"


def test_a_hierarchical_ring_needs_equal_racks(base: Path) -> None:
    lab = Lab.open(base)
    scenario = all_reduce("hierarchical_ring")
    scenario["traffic"][0]["servers"] = ["server1", "server2", "server3"]
    with pytest.raises(InputError, match="as many ranks behind each leaf group, not 1 to 2"):
        model.checked(scenario, lab, "s.yaml", frames=False)
