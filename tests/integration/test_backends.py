"""What every backend does through the interface, checked on each (netns as an integration
test, fake everywhere; sim and clab join by adding their names to `conftest.BACKENDS`).

One twin of the small lab (two MLAG pairs) per backend for the module, deployed and destroyed
from new processes (`twin deploy --backend NAME`, then plain `twin destroy`: the lab's state
names the backend).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labs.backend import COUNTER_FIELDS, Fault
from tests.conftest import cli, wait_for
from twin.pytest_plugin import Twin

SCENARIO = {
    "name": "neutral",
    "settle": 1,
    "traffic": [{"kind": "all_reduce", "duration": 3, "qps": 2, "pps": 50}],
    "faults": [{"at": 1, "fault": "link-down", "link": "leaf1:spine1"}],
    "validate": {"failover": {}},
}


@pytest.fixture
def twin(any_twin: Twin) -> Twin:
    """The small lab on the backend under test."""
    return any_twin


def test_the_state_names_the_backend_and_inspect_finds_it(twin: Twin) -> None:
    assert json.loads((twin.path / "state.json").read_text())["backend"] == twin.backend.name
    done = cli(twin, "inspect", "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert (status["backend"], status["running"]) == (twin.backend.name, True)
    assert status["nodes"] == {node: "up" for node in twin.lab.graph.nodes}
    assert {link["up"] for link in status["links"]} == {True}


def test_a_link_fault_narrows_the_fib_and_its_undoing_restores_it(twin: Twin) -> None:
    wait_for(twin.converged, "full ECMP width", timeout=60)
    done = cli(twin, "fault", "link-down", "leaf1:spine1", "--watch", "0.5")
    assert done.returncode == 0, done.stderr
    assert "ends=['leaf1:Ethernet24', 'spine1:Ethernet0']" in done.stdout  # SONiC names
    try:
        wait_for(
            lambda: (
                {w for (leaf, _), w in twin.remote_widths().items() if leaf == "leaf1"}
                == {twin.spines() - 1}
            ),
            "leaf1 one uplink narrower",
        )
    finally:
        twin.backend.fault(twin.lab, Fault("link-up", link="leaf1:spine1"))
    wait_for(twin.converged, "full ECMP width again", timeout=60)


def test_a_scenario_leaves_the_observations_its_capabilities_promise(
    twin: Twin, tmp_path: Path
) -> None:
    obs = twin.play(SCENARIO, tmp_path)
    try:
        caps = twin.backend.capabilities
        assert obs.run["backend"] == twin.backend.name
        assert set(obs.run["capabilities"]) == caps
        assert {"fib", "counters", "flows"} <= caps  # what every backend observes so far
        assert obs.fib_labels() == ["start", "fault1-link-down", "end"]
        assert set(obs.fib("start")) == set(twin.lab.graph.nodes)
        assert obs.counters["fields"] == COUNTER_FIELDS
        keys = {k for s in obs.counters["samples"] for k in s["c"]}
        ports = {f"{n}:{p}" for n, ports in twin.lab.ifmap.items() for p in ports}
        assert keys and all(k in ports or ":PortChannel" in k for k in keys), keys - ports
        assert obs.flows and all(f["sent"] > 0 and f["received"] > 0 for f in obs.flows)
        fault = obs.run["faults"][0]
        assert (fault["fault"], fault["ends"]) == (
            "link-down",
            ["leaf1:Ethernet24", "spine1:Ethernet0"],
        )
    finally:
        twin.backend.fault(twin.lab, Fault("link-up", link="leaf1:spine1"))
        wait_for(twin.converged, "full ECMP width again", timeout=60)
