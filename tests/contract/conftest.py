"""Every registered backend, each where its deploy can run here: netns live (root and FRR: an
integration test), fake and sim as they are, clab against the fake containerlab and Docker
Engine (tests/fake_clab.py, tests/fake_docker.py: root, for their namespaces), Clabernetes
against the fake kubectl (tests/fake_kubectl.py).

A backend's `Env` gives a fresh small lab (one MLAG pair: the smallest that deploys), the
calls the backend made to its tools, and what of the lab it left on the machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import conftest, fake_clab, fake_docker, fake_kubectl
from tests.conftest import lab_name, leftovers, twin_cli, write_lab
from twin.lab.directory import Lab

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the fake's namespaces)")
BACKENDS = [*conftest.BACKENDS, pytest.param("clab", marks=ROOT), "clabernetes"]
"""The backend-neutral tests' backends (netns live, fake, sim), and the two through fakes."""


@dataclass
class Env:
    """A backend, a lab directory for it, the calls it made to its tools (a fake's log), and
    what of the lab it keeps outside this machine's namespaces and processes (containers,
    cluster objects); `conftest.leftovers` finds the rest."""

    backend: str
    path: Path
    calls: Callable[[], list[list[str]]]
    kept: Callable[[], list[str]]

    @property
    def name(self) -> str:
        """The lab's name."""
        return str(Lab.open(self.path).name)


def _logged(log: Path) -> list[list[str]]:
    """The calls a fake tool logged (one JSON list a line)."""
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _applied(log: Path) -> list[str]:
    """The Clabernetes objects applied and not deleted since, as the fake kubectl logged."""
    verbs = [argv[0] for argv in _logged(log)]
    applied = [i for i, verb in enumerate(verbs) if verb == "apply"]
    deleted = [i for i, verb in enumerate(verbs) if verb == "delete"]
    return ["applied objects"] if applied and (not deleted or deleted[-1] < applied[-1]) else []


@pytest.fixture(params=BACKENDS)
def env(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Env]:
    """The backend under test, ready to deploy a fresh small lab."""
    backend: str = request.param
    name = lab_name("ct")
    path = write_lab(tmp_path / name, name, leaves=2)
    if backend == "clab":
        topology = path / "topology.clab.yml"
        with fake_docker.with_containerlab(tmp_path, monkeypatch, topology):
            yield Env(backend, path, fake_clab.calls, lambda: [*fake_clab.load_state()])
    elif backend == "clabernetes":
        log = fake_kubectl.install(tmp_path, Lab.open(path), "kind-twin")
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
        yield Env(backend, path, lambda: _logged(log), lambda: _applied(log))
    else:
        yield Env(backend, path, list, list)
    if leftovers(name):
        twin_cli("cleanup", name, "--force-owner")
