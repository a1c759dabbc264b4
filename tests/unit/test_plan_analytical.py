"""The analytical bound of a collective counts the cables' propagation delay per step (a
3-tier fabric's 300 m super-spine cables dominate a small message's ring)."""

from __future__ import annotations

import pytest

from tests.simlab import small_lab
from twin.intent.inputs import parse_model
from twin.lab.directory import Lab
from twin.scenario import plan
from twin.scenario.model import Traffic


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.open(small_lab(tmp_path_factory.mktemp("lab") / "small"))


def test_propagation_follows_the_cables(lab: Lab) -> None:
    delay = plan.propagation(lab)
    assert delay("server1", "server1") == 0
    # behind one MLAG pair: two 5 m server cables; across the spines: two 40 m uplinks more
    assert delay("server1", "server2") == delay("server2", "server1") == pytest.approx(50e-9)
    assert delay("server1", "server3") == pytest.approx(450e-9)


def test_the_bound_adds_each_steps_farthest_pair(lab: Lab) -> None:
    phase = parse_model(
        Traffic, {"kind": "all_reduce", "servers": "all", "message": 8_000_000}, "test"
    )
    bound = plan.analytical(lab, phase)
    assert bound is not None
    # interleaved ranks: every ring step has a pair across the spines (6 steps x 450 ns)
    assert bound["latency_s"] == pytest.approx(6 * 450e-9, abs=1e-6)
    assert bound["bound_s"] == pytest.approx(6 / 4 * 8e6 * 8 / 800e9 + 2.7e-6, abs=1e-6)


def test_a_schedule_is_built_once_for_its_plan_flows_and_bound() -> None:
    """The same collective asked again (the simulator's plan, the phase's flows, its bound)
    is the schedule built the first time; another message size is another schedule."""
    names = [f"server{i}" for i in range(1, 9)]
    tree = plan.schedule("all_reduce", "tree", names, [], 8_000_000, 2)
    assert plan.schedule("all_reduce", "tree", tuple(names), (), 8_000_000, 2) is tree
    other = plan.schedule("all_reduce", "tree", names, [], 4_000_000, 2)
    assert other is not tree and other.message_bytes == 4_000_000
    assert tree.algorithm == "tree" and tree.ranks == tuple(names)
