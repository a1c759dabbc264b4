"""A pytest plugin so network engineers write their own checks against a running twin.

Installed with the project (entry point `pytest11`), it adds three options and three fixtures:

- `--twin-fabric FILE` (an intent to generate) or `--twin-lab DIR` (an existing lab
  directory, e.g. with edited configs); without either, tests using the fixtures are skipped.
  `--twin-backend NAME` picks the backend (default netns).
- `twin_lab` (session): the `Lab` of that directory (generated into a temporary directory
  from `--twin-fabric`).
- `twin` (session): a `Twin` deployed on that backend for the whole session and destroyed at
  its end, even when tests fail.
- `twin_play` (function): plays a scenario (a path or a dict) on the twin and returns its
  `Observations`.

Example (see `examples/test_my_fabric.py`)::

    def test_every_leaf_has_full_ecmp(twin):
        fib = twin.fib()
        for leaf in twin.lab.nodes("leaf"):
            ...
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import events, registry
from labs.backend import Backend, Session, quiet
from twin import labdir
from twin.intent import fabric as intent
from twin.labdir import Lab
from twin.model.fib import Fib
from twin.scenario import model as scenarios
from twin.scenario import player as runs
from twin.scenario.observations import Observations


class Twin:
    """A running twin for tests: its lab and backend, and helpers to look into it through the
    backend interface (so the same test runs on any backend that observes what it reads)."""

    def __init__(self, lab: Lab, backend: Backend) -> None:
        self.lab, self.backend = lab, backend

    @property
    def path(self) -> Path:
        """The lab directory."""
        return self.lab.path

    @property
    def name(self) -> str:
        """The lab's name."""
        return self.lab.name

    def exec(self, node: str, *argv: str) -> subprocess.CompletedProcess[str]:
        """Run a command in a node (`vtysh -c ...` on a switch reaches its FRR)."""
        return self.backend.exec(self.lab, node, list(argv))

    def fib(self) -> Fib:
        """Every node's forwarding table now: prefix -> next hops (node, SONiC port)."""
        return self.backend.observer(self.lab).fib()

    def sessions(self) -> list[Session]:
        """Every switch's BGP sessions now."""
        return self.backend.observer(self.lab).bgp()

    def established(self) -> bool:
        """Every BGP session Established."""
        return {s.state for s in self.sessions()} == {"Established"}

    def widths(self, node: str) -> dict[str, int]:
        """Prefix -> next hops a node forwards over now."""
        return {str(prefix): len(hops) for prefix, hops in self.fib()[node].items()}

    def servers(self) -> dict[str, str]:
        """Server -> its address."""
        return {s: self.lab.host(s)["address"].split("/")[0] for s in self.lab.nodes("server")}

    def pair_of(self, server: str) -> set[str]:
        """The leaves a server hangs on."""
        return {nic["peer"] for nic in self.lab.host(server)["interfaces"]}

    def remote_subnets(self, leaf: str) -> list[str]:
        """Server subnets behind the other leaf pairs."""
        nodes = self.lab.graph.nodes
        return sorted(
            {nodes[n]["subnet"] for n in self.lab.nodes("leaf")} - {nodes[leaf]["subnet"]}
        )

    def spines(self) -> int:
        """Number of spines: a leaf's full ECMP width."""
        return len(self.lab.nodes("spine"))

    def remote_widths(self) -> dict[tuple[str, str], int]:
        """(leaf, remote server subnet) -> ECMP width, for every leaf."""
        fib = self.fib()
        return {
            (leaf, subnet): len(fib[leaf].get(IPv4Network(subnet), ()))
            for leaf in self.lab.nodes("leaf")
            for subnet in self.remote_subnets(leaf)
        }

    def converged(self) -> bool:
        """Every leaf at full ECMP width to every remote server subnet."""
        return set(self.remote_widths().values()) <= {self.spines()}

    def events(self, since: float = 0.0) -> list[dict[str, Any]]:
        """The lab's event log from `since` on."""
        return events.read(self.lab.path, since)

    def play(self, scenario: Path | dict[str, Any], tmp: Path | None = None) -> Observations:
        """Play a scenario file, or a scenario given as a dict; returns the observations."""
        if isinstance(scenario, dict):
            path = (tmp or self.lab.path) / "scenario.yaml"
            path.write_text(yaml.safe_dump(scenario))
            scenario = path
        played = runs.play(self.lab, scenarios.load(scenario, self.lab), self.backend)
        return Observations.open(played)


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's command-line options."""
    group = parser.getgroup("twin", "fabric twin")
    group.addoption("--twin-fabric", type=Path, help="fabric.yaml to generate and deploy")
    group.addoption("--twin-lab", type=Path, help="lab directory to deploy (configs as edited)")
    group.addoption(
        "--twin-backend",
        default=registry.DEFAULT,
        choices=sorted(registry.BACKENDS),
        help=f"backend to deploy on (default {registry.DEFAULT})",
    )


@pytest.fixture(scope="session")
def twin_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The lab under test, from `--twin-lab` or generated from `--twin-fabric`."""
    lab_dir: Path | None = request.config.getoption("--twin-lab")
    fabric: Path | None = request.config.getoption("--twin-fabric")
    if lab_dir is None and fabric is None:
        pytest.skip("give --twin-fabric FILE or --twin-lab DIR to test a fabric")
    if lab_dir is None:
        assert fabric is not None
        lab_dir = tmp_path_factory.mktemp("twin") / "lab"
        labdir.generate(intent.load(fabric), lab_dir, str(fabric))
    return Lab.open(lab_dir)


@pytest.fixture(scope="session")
def twin(twin_lab: Lab, request: pytest.FixtureRequest) -> Iterator[Twin]:
    """The lab deployed for the session (the netns backend needs root and FRR)."""
    backend = registry.get(request.config.getoption("--twin-backend"))
    backend.deploy(twin_lab, quiet)
    try:
        yield Twin(twin_lab, backend)
    finally:
        backend.destroy(twin_lab)


@pytest.fixture
def twin_play(twin: Twin, tmp_path: Path) -> Callable[[Path | dict[str, Any]], Observations]:
    """Play a scenario (path or dict) on the session's twin and return its observations."""
    return lambda scenario: twin.play(scenario, tmp_path)
