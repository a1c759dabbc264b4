"""A pytest plugin so network engineers write their own checks against a running twin.

Installed with the project (entry point `pytest11`), it adds three options, a marker and
four fixtures:

- `--twin-fabric FILE` (an intent to generate) or `--twin-lab DIR` (an existing lab
  directory, e.g. with edited configs); without either, tests using the fixtures are skipped.
  `--twin-backend NAME` picks the backend (default netns).
- `twin_lab` (session): the `Lab` of that directory (generated into a temporary directory
  from `--twin-fabric`).
- `twin` (session): a `Twin` deployed on that backend for the whole session and destroyed at
  its end, even when tests fail.
- `twin_play` (function): plays a scenario (a path or a dict) on the twin and returns its
  `Observations`.
- `twin_fault` (function): injects a fault (`twin_fault("link-down", link="leaf1:spine1")`)
  and undoes it when the test ends (link-up, node-up, daemon-restart, clear).
- `@pytest.mark.twin_needs("bgp", ...)`: the test is skipped on a backend that cannot
  observe one of these capabilities, the reason naming it and where it can be observed.

What a backend cannot observe skips, never fails: `twin.sessions()` and `twin.established()`
need `bgp`, `twin.fib()` needs `fib`, and `twin.verdict(NAME)` needs what the validator
needs. `twin.verdict("failover", max_loss_ms=500)` judges the last run `twin_play` played
(static validators judge the lab's configs) and is true only when every scope it covers
passed; when one failed it is false (its repr lists each scope's status and reason, so a
failed `assert` shows why); when none failed but some could not be judged (not-observable:
a fault no traffic crossed, what the backend cannot see), the test skips, naming those
scopes and why: a verdict that judged only part of what it covers is no pass.

Example (see `examples/test_my_fabric.py`)::

    @pytest.mark.twin_needs("bgp")
    def test_every_session_is_up(twin):
        assert twin.established()

    def test_failover_within_budget(twin, twin_play):
        twin_play("uplink-failure.yaml")
        assert twin.verdict("failover", max_loss_ms=1000)
"""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Callable, Iterator
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import events, registry
from labs.backend import RESTORES, Fault, Session, quiet
from labs.lifecycle import Managed
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.scenario import model as scenarios
from twin.scenario import player as runs
from twin.scenario.observations import Observations
from validators import registry as validators
from validators.result import Result, Status

UNDO = {**{taken: given for given, taken in RESTORES.items()}, "daemon-kill": "daemon-restart"}
"""The fault that undoes one `twin_fault` injected (loss and rate are undone by clear)."""


def unobservable(backend: str, missing: set[str]) -> str:
    """The skip reason of a test that needs what `backend` cannot observe."""
    how = registry.how_to_observe(missing, backend, "--twin-backend")
    return f"the {backend} backend cannot observe {', '.join(sorted(missing))}: {how}"


class Verdict:
    """A validator's results on a run (or on the lab's configs): true when every scope
    passed (its repr gives each scope's status and reason)."""

    def __init__(self, name: str, results: list[Result]) -> None:
        self.name, self.results = name, results

    def __bool__(self) -> bool:
        return bool(self.results) and all(r.status is Status.PASS for r in self.results)

    def __repr__(self) -> str:
        rows = "; ".join(f"{r.scope}: {r.status.value} ({r.reason})" for r in self.results)
        return f"<{self.name}: {rows or 'no result'}>"

    def of(self, status: Status) -> list[Result]:
        """The results with this status."""
        return [r for r in self.results if r.status is status]

    def scope(self, scope: str) -> Result:
        """The result of one scope."""
        return next(r for r in self.results if r.scope == scope)


class Twin:
    """A running twin for tests: its lab and backend, and helpers to look into it through the
    backend interface (so the same test runs on any backend that observes what it reads)."""

    def __init__(self, lab: Lab, backend: Managed) -> None:
        self.lab, self.backend = lab, backend
        self.last: Observations | None = None

    def needs(self, *capabilities: str) -> None:
        """Skip the test when the backend cannot observe one of these capabilities."""
        missing = set(capabilities) - set(self.backend.capabilities)
        if missing:
            pytest.skip(unobservable(self.backend.name, missing))

    def verdict(self, name: str, run: Observations | None = None, **params: Any) -> Verdict:
        """A validator's verdict with these thresholds: a dynamic one on `run` (default: the
        last run played), a static one on the lab's configs. Skips when the backend cannot
        observe what the validator needs, or when no scope failed and some could not be
        judged (naming them and why)."""
        v = validators.get(name)
        if v.kind == "static":
            verdict = Verdict(name, validators.run_static(self.lab, [v], {name: params}))
        else:
            self.needs(*v.needs)
            run = run or self.last
            if run is None:
                raise LookupError(f"twin.verdict({name!r}): no run played yet (twin_play)")
            verdict = Verdict(name, validators.run_dynamic(self.lab, run, [v], {name: params}))
        unjudged = verdict.of(Status.NOT_OBSERVABLE)
        if unjudged and not verdict.of(Status.FAIL):
            why = "; ".join(f"{r.scope}: {r.reason}" for r in unjudged)
            pytest.skip(
                f"{name}: {len(unjudged)} of {len(verdict.results)} scopes not observable "
                f"on the {self.backend.name} backend: {why}"
            )
        return verdict

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
        self.needs("fib")
        return self.backend.observer(self.lab).fib()

    def sessions(self) -> list[Session]:
        """Every switch's BGP sessions now."""
        self.needs("bgp")
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
        loaded = scenarios.load(scenario, self.lab, frames=not self.backend.computed)
        played = runs.play(self.lab, loaded, self.backend)
        self.last = Observations.open(played)
        return self.last

    def fault(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Inject a fault now (`Fault`'s fields: link, node, daemon, percent, mbit...)."""
        fault = Fault(kind, **fields)  # type: ignore[arg-type]
        return self.backend.fault(self.lab, fault)


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin's marker."""
    config.addinivalue_line(
        "markers", "twin_needs(*capabilities): skip on a backend that cannot observe them"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a `twin_needs` test on a backend that cannot observe what it needs."""
    marker = item.get_closest_marker("twin_needs")
    if marker is None:
        return
    backend = str(item.config.getoption("--twin-backend"))
    missing = set(marker.args) - registry.OBSERVES.get(backend, frozenset())
    if missing:
        pytest.skip(unobservable(backend, missing))


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
    """The lab deployed for the session (the netns backend needs root and FRR); one that had
    not converged when its deploy stopped waiting is tested as it is, with a warning saying
    what it lacked (`bgp_health` fails on it)."""
    backend = registry.get(request.config.getoption("--twin-backend"))
    up = backend.deploy(twin_lab, quiet)
    if up.unconverged:
        warnings.warn(f"{up.lacking()}: testing it as it is", stacklevel=1)
    try:
        yield Twin(twin_lab, backend)
    finally:
        backend.destroy(twin_lab)


@pytest.fixture
def twin_play(twin: Twin, tmp_path: Path) -> Callable[[Path | dict[str, Any]], Observations]:
    """Play a scenario (path or dict) on the session's twin and return its observations."""
    return lambda scenario: twin.play(scenario, tmp_path)


@pytest.fixture
def twin_fault(twin: Twin) -> Iterator[Callable[..., dict[str, Any]]]:
    """Inject faults (`twin_fault("link-down", link="leaf1:spine1")`); each is undone when
    the test ends, the last first."""
    undo: list[Fault] = []

    def inject(kind: str, **fields: Any) -> dict[str, Any]:
        record = twin.fault(kind, **fields)
        back = UNDO.get(kind) or ("clear" if kind in ("loss", "rate") else None)
        if back:
            keep = {k: v for k, v in fields.items() if k in ("link", "node", "daemon")}
            undo.append(Fault(back, **keep))  # type: ignore[arg-type]
        return record

    yield inject
    for fault in reversed(undo):
        twin.backend.fault(twin.lab, fault)
