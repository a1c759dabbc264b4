"""A fake `kubectl` for the clabernetes target, recording every call (a JSON line each).

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

import sys
from pathlib import Path

from twin.lab.directory import Lab

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


def install(tmp_path: Path, lab: Lab, context: str) -> Path:
    """Make `tmp_path/bin/kubectl` this fake for `lab` on cluster context `context` (none:
    context-less); the log of its calls."""
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
