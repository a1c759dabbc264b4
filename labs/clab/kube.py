"""The clab backend's cluster target: the lab's Clabernetes form applied with `kubectl`.

`DIR/clabernetes.yml` (`twin.render.clab.clabernetes`) holds a namespace `twin-<lab>`, one
ConfigMap per switch with its bound files and a Clabernetes `Topology` wrapping the same
`topology.clab.yml`. Deploy applies it and waits for the controller's `status.topologyReady`
(clabernetes apis/v1alpha1/topology.go; per node `status.nodeReadiness`); destroy deletes it.
`exec` runs in a node's launcher pod (`deploy/<lab>-<node>`, the controller's `prefixed`
naming). Switch configuration inside the launcher's Docker, faults and observation are not
done on this target (docs/containerlab.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import TYPE_CHECKING, Any, ClassVar

from labs import cmdlog, state
from labs.backend import Deployed, Fault, Phase, Played, Progress, Status, Timeline, quiet
from twin.errors import LabError
from twin.lab.directory import Lab, clab_refusal
from twin.render import clab

if TYPE_CHECKING:
    from labs.state import Record

KUBECTL = "kubectl"
FILE = "clabernetes.yml"
POLL = 2.0


def kubectl(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `kubectl ARGV...` (argv list); one line with its error when it fails."""
    path = shutil.which(KUBECTL)
    if path is None:
        raise LabError("kubectl is not installed (the clabernetes target needs a cluster)")
    done = cmdlog.run([path, *argv], timeout=timeout)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise LabError(f"kubectl {' '.join(argv[:2])} failed: {lines[-1] if lines else ''}")
    return done


def _namespace(lab: Lab) -> str:
    return clab.network(lab.name)


class ClabernetesBackend:
    """A lab as a Clabernetes Topology on the cluster `kubectl` is configured for."""

    name: ClassVar[str] = "clabernetes"
    claims_name: ClassVar[bool] = True
    computed: ClassVar[bool] = False
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def _topology(self, lab: Lab) -> dict[str, Any]:
        done = kubectl(["get", "topology", lab.name, "-n", _namespace(lab), "-o", "json"])
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    def check(self, lab: Lab) -> None:
        """Refuse without kubectl and a cluster context, or a lab containerlab cannot run;
        write the Clabernetes form."""
        kubectl(["config", "current-context"])
        refusal = clab_refusal(lab)
        if refusal:
            raise LabError(f"{lab.path}: cannot run on containerlab: {refusal}")
        clab.write(lab)

    def create(
        self, lab: Lab, record: Record, progress: Progress = quiet, timeout: float | None = None
    ) -> Deployed:
        """Apply the Clabernetes form and wait until the controller reports it ready."""
        timeout = 60.0 if timeout is None else timeout
        context = kubectl(["config", "current-context"]).stdout.strip()
        start = time.monotonic()
        progress(f"kubectl apply ({context})")
        kubectl(["apply", "-f", str(lab.path / FILE)])
        readiness: dict[str, str] = {}
        deadline = start + timeout
        while True:
            status = self._topology(lab).get("status", {})
            readiness = status.get("nodeReadiness") or {}
            if status.get("topologyReady"):
                break
            if time.monotonic() > deadline:
                waiting = sorted(n for n in lab.graph.nodes if readiness.get(n) != "ready")
                raise LabError(
                    f"lab {lab.name} not ready on {context} in {timeout:.0f} s: "
                    + ", ".join(f"{n} {readiness.get(n, 'unknown')}" for n in waiting[:5])
                )
            time.sleep(POLL)
        seconds = round(time.monotonic() - start, 2)
        nodes = lab.graph.number_of_nodes()
        return Deployed(lab.name, self.name, nodes, 0, seconds, {"context": context})

    def remove(self, lab: Lab) -> dict[str, int]:
        """Delete what was applied; how many objects."""
        done = kubectl(["delete", "-f", str(lab.path / FILE), "--ignore-not-found"])
        return {"objects": len([line for line in done.stdout.splitlines() if line.strip()])}

    def cleanup(self, lab: str) -> dict[str, int]:
        """Nothing: a Clabernetes twin leaves nothing on this machine (its objects are the
        cluster's: `twin destroy DIR` deletes them)."""
        return {}

    def running(self, lab: Lab) -> bool:
        """Whether the lab's state says clabernetes and the Topology exists."""
        recorded = state.load(lab.path)
        if recorded is None or recorded.backend != self.name:
            return False
        try:
            self._topology(lab)
        except LabError:
            return False
        return True

    def status(self, lab: Lab) -> Status:
        """Nodes as the controller reports them (no links or sessions on this target)."""
        readiness = self._topology(lab).get("status", {}).get("nodeReadiness") or {}
        nodes = {n: readiness.get(n, "unknown") for n in lab.graph.nodes}
        return Status(lab.name, self.name, self.running(lab), nodes, [], [])

    def exec(self, lab: Lab, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in a node's launcher pod."""
        if node not in lab.graph.nodes:
            raise LabError(f"lab {lab.name} has no node {node}")
        path = shutil.which(KUBECTL) or KUBECTL
        target = f"deploy/{lab.name}-{node}"
        return cmdlog.run([path, "exec", "-n", _namespace(lab), target, "--", *argv], timeout=120)

    def _unsupported(self, what: str) -> LabError:
        return LabError(f"the clabernetes target does not do {what} yet (use --backend clab)")

    def fault(self, lab: Lab, fault: Fault) -> dict[str, Any]:
        """Not on this target."""
        raise self._unsupported(f"{fault.kind} faults")

    def observer(self, lab: Lab) -> Any:
        """Not on this target."""
        raise self._unsupported("observation")

    def traffic(self, lab: Lab, phase: Phase) -> Any:
        """Not on this target."""
        raise self._unsupported("traffic")

    def play(self, lab: Lab, timeline: Timeline, progress: Progress = quiet) -> Played:
        """Not on this target."""
        raise self._unsupported("scenarios")
