"""The clabernetes target against a fake `kubectl` that records its calls
(tests/fake_kubectl.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from labs import registry, state
from tests import fake_kubectl
from tests.conftest import lab_name, write_lab
from twin.errors import LabError
from twin.lab.directory import Lab


def _lab(tmp_path: Path) -> Lab:
    name = lab_name("kb")
    return Lab.open(write_lab(tmp_path / name, name))


def test_apply_wait_ready_and_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = _lab(tmp_path)
    log = fake_kubectl.install(tmp_path, lab, "kind-twin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr("labs.clab.kube.POLL", 0.01)
    backend = registry.get("clabernetes")
    up = backend.deploy(lab, lambda _: None, timeout=5)
    assert (up.backend, up.nodes, up.details) == ("clabernetes", 10, {"context": "kind-twin"})
    assert backend.running(lab)
    assert set(backend.status(lab).nodes.values()) == {"ready"}
    backend.destroy(lab)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    file = str(lab.path / "clabernetes.yml")
    get = ["get", "topology", lab.name, "-n", f"twin-{lab.name}", "-o", "json"]
    context = ["config", "current-context"]
    assert calls[:3] == [context, context, ["apply", "-f", file]]  # checked, then applied
    assert calls[3:-1] == [get] * (len(calls) - 4) and len(calls) >= 9  # polled until ready
    assert calls[-1] == ["delete", "-f", file, "--ignore-not-found"]
    docs = list(yaml.safe_load_all(Path(file).read_text()))
    assert docs[-1]["metadata"] == {"name": lab.name, "namespace": f"twin-{lab.name}"}
    labels = docs[0]["metadata"]["labels"]
    assert labels == {"pod-security.kubernetes.io/enforce": "privileged"}
    assert state.load(lab.path) is None


def test_no_cluster_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = _lab(tmp_path)
    log = fake_kubectl.install(tmp_path, lab, "")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(LabError) as info:
        registry.get("clabernetes").deploy(lab, lambda _: None)
    assert str(info.value) == (
        "kubectl config current-context failed: error: current-context is not set"
    )
    assert [json.loads(x) for x in log.read_text().splitlines()] == [["config", "current-context"]]
    assert state.load(lab.path) is None


def test_no_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = _lab(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LabError, match=r"^kubectl is not installed"):
        registry.get("clabernetes").deploy(lab, lambda _: None)
    assert state.load(lab.path) is None
