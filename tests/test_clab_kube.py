"""The clabernetes target against a fake `kubectl` that records its calls.

The fake answers as kubectl does: `config current-context` prints the context name,
`apply -f`/`delete -f` print one line per object, `get topology NAME -n NS -o json` prints the
Topology with the controller's `status.topologyReady` and `status.nodeReadiness`
(srl-labs/clabernetes @1cc0cbe, apis/v1alpha1/topology.go); a context-less kubectl fails as
`error: current-context is not set`. Its cluster enforces the baseline Pod Security Standard
(the default of many managed clusters): the launcher pods run privileged, so a Topology whose
namespace lacks the `pod-security.kubernetes.io/enforce: privileged` label that clabverter
writes never gets ready (its pods are forbidden at admission).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from conftest import lab_name, write_lab

from labs import registry, state
from twin.errors import LabError
from twin.labdir import Lab

FAKE = """#!{python}
import json, sys
from pathlib import Path
import yaml
log = Path({log!r})
admitted = Path({log!r} + ".admitted")
argv = sys.argv[1:]
with log.open("a") as f:
    f.write(json.dumps(argv) + "\\n")
if argv[:2] == ["config", "current-context"]:
    if {context!r}:
        print({context!r})
        sys.exit(0)
    print("error: current-context is not set", file=sys.stderr)
    sys.exit(1)
if argv[:1] == ["apply"]:
    docs = list(yaml.safe_load_all(Path(argv[2]).read_text()))
    labels = docs[0].get("metadata", {{}}).get("labels", {{}})
    if labels.get("pod-security.kubernetes.io/enforce") == "privileged":
        admitted.touch()
if argv[:1] in (["apply"], ["delete"]):
    verb = "created" if argv[0] == "apply" else "deleted"
    for kind, name in (("namespace", "ns"), ("configmap", "files"), ("topology", "lab")):
        print(kind + "/" + name + " " + verb)
    sys.exit(0)
if argv[:2] == ["get", "topology"]:
    nodes = {nodes!r}
    ready = len(log.read_text().splitlines()) > 4 and admitted.exists()
    print(json.dumps({{"kind": "Topology", "metadata": {{"name": argv[2]}}, "status": {{
        "topologyReady": ready,
        "nodeReadiness": {{n: "ready" if ready else "notready" for n in nodes}}}}}}))
    sys.exit(0)
print("error: unknown command", file=sys.stderr)
sys.exit(1)
"""


def _kubectl(tmp_path: Path, lab: Lab, context: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "kubectl"
    log = tmp_path / "kubectl.jsonl"
    nodes = sorted(lab.graph.nodes)
    script.write_text(
        FAKE.format(python=sys.executable, log=str(log), context=context, nodes=nodes)
    )
    script.chmod(0o755)
    return log


def _lab(tmp_path: Path) -> Lab:
    name = lab_name("kb")
    return Lab.open(write_lab(tmp_path / name, name))


def test_apply_wait_ready_and_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = _lab(tmp_path)
    log = _kubectl(tmp_path, lab, "kind-twin")
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
    log = _kubectl(tmp_path, lab, "")
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
